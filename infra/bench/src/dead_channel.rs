//! `bench dead-channel`: the reference's measured noisy-neighbour case. Tenant A's webhook
//! accepts connections and never answers (10 s timeout) with a backlog of deliveries; tenant
//! B, same tier, sends activities at a steady rate to a healthy receiver. Prints one JSON line:
//! the requests that reached A, and B's ingest-to-receiver latency percentiles next to the same
//! run without A (the baseline).

use super::{Runtime, activity, percentile};
use crate::seed::SeedAs;
use converger_stack::receiver::{Receiver, Reply};

use converger_core::Tier;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    /// A's backlog.
    pub backlog: usize,
    /// How long B sends, and at what rate (activities per second).
    pub seconds: u64,
    pub rate: u32,
    /// The in-process backend with its latency model; else the local stack on the emulator.
    pub in_process: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            backlog: 10_000,
            seconds: 60,
            rate: 20,
            in_process: true,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Phase {
    pub a_requests: usize,
    pub b_sent: usize,
    pub b_delivered: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

/// Runs the scenario with A, then without (the baseline), and prints the JSON line.
pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let with_a = phase(&o, true).await?;
    let baseline = phase(&o, false).await?;
    let line = json!({
        "scenario": "dead-channel",
        "backend": if o.in_process { "in-process (latency model)" } else { "emulator" },
        "backlog": o.backlog,
        "backlog_written_by": if o.in_process { "ingest" } else { "batch writes behind 2 ingested; the baseline gets as many sent rows (the emulator slows with table size)" },
        "b_rate_per_s": o.rate,
        "b_seconds": o.seconds,
        "a_requests": with_a.a_requests,
        "b": with_a,
        "b_baseline": baseline,
        "p95_ratio": if baseline.p95_ms > 0.0 { (with_a.p95_ms / baseline.p95_ms * 100.0).round() / 100.0 } else { 0.0 },
    });
    Ok(super::emit(line))
}

async fn phase(o: &Options, with_dead: bool) -> Result<Phase, String> {
    let rt = Runtime::start(o.in_process, if with_dead { "deada" } else { "deadb" }).await?;
    let p = rt.pipeline();
    let dead = Receiver::start(
        Vec::new(),
        Reply::status(200).delay(Duration::from_secs(3600)),
    )
    .await?;
    let healthy = Receiver::always(200).await?;
    let ta = super::tenant(&p, Tier::Default).await?.0;
    let tb = super::tenant(&p, Tier::Default).await?.0;
    let ca = super::webhook(&p, &ta, &dead.url, json!({"timeout_ms": 10_000})).await?;
    let cb = super::webhook(&p, &tb, &healthy.url, json!({})).await?;

    if let Runtime::Aws(stack) = &rt {
        // On the emulator the backlog is written with batch writes (see `seed`), behind the
        // first window's worth ingested for real. The emulator's transactions and queries
        // slow down with table size, so the baseline gets as many rows, already sent, of a
        // channel nobody uses: the two runs then differ only by the dead channel.
        if with_dead {
            let live = o.backlog.min(converger_core::flow::INITIAL_WINDOW as usize);
            for n in 0..live {
                p.intake()
                    .ingest(&ta, activity(&ca.id, n))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            crate::seed::write(stack, &ta, &ca, o.backlog - live, SeedAs::Backlog).await?;
        } else {
            crate::seed::write(stack, &ta, &ca, o.backlog, SeedAs::Sent).await?;
        }
    } else if with_dead {
        let started = Instant::now();
        let failed = futures::stream::iter(0..o.backlog)
            .map(|n| {
                let (p, ta, ca) = (p.clone(), ta.clone(), ca.id.clone());
                async move { p.intake().ingest(&ta, activity(&ca, n)).await.is_err() }
            })
            .buffer_unordered(32)
            .filter(|failed| futures::future::ready(*failed))
            .count()
            .await;
        if failed > 0 {
            return Err(format!("{failed} of A's activities were refused"));
        }
        tracing::info!(
            backlog = o.backlog,
            took_ms = started.elapsed().as_millis() as u64,
            "A's backlog ingested"
        );
    }

    // B at a steady rate.
    let started = super::steady_ingest(&p, &tb, &cb.id, o.rate, o.seconds, 0).await;
    healthy
        .wait_for(started.len(), Duration::from_secs(60))
        .await;
    let mut lat = super::arrival_ms(&healthy.requests(), &started);
    lat.sort_by(|a, b| a.total_cmp(b));
    let result = Phase {
        a_requests: dead.requests().len(),
        b_sent: started.len(),
        b_delivered: lat.len(),
        p50_ms: percentile(&lat, 0.50),
        p95_ms: percentile(&lat, 0.95),
        p99_ms: percentile(&lat, 0.99),
    };
    rt.stop().await;
    Ok(result)
}
