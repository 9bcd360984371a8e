//! `bench fairness`: one tenant's backlog beside quiet tenants of the same tier. A noisy
//! tenant posts `backlog` activities at once to a channel whose endpoint answers after
//! `slow`, without an in-flight cap of its own (`max_in_flight: null`: the platform's bound,
//! half of what the tier's consumers hold) and then with the default window; meanwhile `tenants` other
//! tenants of the tier send one activity a second each to a fast endpoint for `seconds`.
//! The quiet tenants' ingest-to-receiver p95 is compared with a run without the noisy tenant
//! (their baseline), with the tier queues ordered as SQS fair queues order them (every
//! message's `MessageGroupId` is its tenant: the groups with the fewest messages in flight
//! are served first) and, for contrast, oldest first. On the in-process backend with its
//! latency model; each tier's consumers are its deployed concurrency. Two more noisy
//! channels under fair ordering: one that asks for a fixed `max_in_flight` of 10,000 (held
//! to the tier's share), and one whose middleware is hostile (ten steps that each spin just
//! inside the operation bound, so every delivery burns about a million operations first).
//! And one noisy tenant with its backlog spread over two such channels: together they are
//! held to the tenant's share (`core::flow::tenant_window_bound`), not a share each.

/// The hostile middleware: ten steps, each a loop just inside the operation bound.
fn hostile_middleware() -> Vec<converger_core::middleware::Step> {
    (0..10)
        .map(|_| converger_core::middleware::Step::Transform {
            script: "let n = 0; while n < 8000 { n += 1; }".into(),
        })
        .collect()
}

use super::hot_tenant::find_n;
use super::{IsolatedReceiver, activity, summary, tenant, webhook, webhook_with};
use converger_core::Tier;
use converger_memory::{LatencyModel, QueueOrder};
use converger_pipeline::PipelineConfig;
use converger_stack::inprocess::{InProcess, Limits};
use converger_stack::receiver::{Receiver, Reply};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub backlog: usize,
    pub tenants: usize,
    pub seconds: u64,
    pub slow: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            backlog: 10_000,
            tenants: 50,
            seconds: 20,
            slow: Duration::from_secs(2),
        }
    }
}

/// The target: the quiet tenants' p95 beside the backlog within 1.2 times their baseline.
pub const TARGET_RATIO: f64 = 1.2;

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let mut out = serde_json::Map::new();
    // The noisy channel without an in-flight cap, then with the default window (`auto`), a
    // fixed window past the tier's share, and hostile middleware.
    let uncapped = json!({"max_in_flight": null});
    let fixed = json!({"max_in_flight": 10_000});
    let hostile = hostile_middleware();
    for (name, order, cap, middleware, channels) in [
        ("fair", QueueOrder::Fair, &uncapped, None, 1),
        ("fair_default_window", QueueOrder::Fair, &json!({}), None, 1),
        ("fair_fixed_window", QueueOrder::Fair, &fixed, None, 1),
        (
            "fair_hostile_middleware",
            QueueOrder::Fair,
            &uncapped,
            Some(&hostile),
            1,
        ),
        ("fair_two_channels", QueueOrder::Fair, &uncapped, None, 2),
        ("oldest_first", QueueOrder::Fifo, &uncapped, None, 1),
    ] {
        let baseline = measure(&o, order, None).await?;
        let noisy = measure(&o, order, Some((cap, middleware, channels))).await?;
        let p95 = |v: &Value| v["quiet"]["p95_ms"].as_f64().unwrap_or(0.0);
        // None when the quiet tenants' deliveries did not all arrive beside the backlog
        // within the wait (their p95 is beyond it).
        let all = |v: &Value| v["quiet_delivered"] == v["quiet_sent"];
        let ratio = (p95(&baseline) > 0.0 && all(&noisy))
            .then(|| (p95(&noisy) / p95(&baseline) * 100.0).round() / 100.0);
        out.insert(
            name.into(),
            json!({
                "baseline": baseline,
                "beside_the_backlog": noisy,
                "p95_ratio": ratio,
            }),
        );
    }
    Ok(super::emit(json!({
        "scenario": "fairness",
        "backend": "in-process (latency model)",
        "backlog": o.backlog,
        "slow_endpoint_ms": o.slow.as_millis() as u64,
        "quiet_tenants": o.tenants,
        "seconds": o.seconds,
        "target_p95_ratio": TARGET_RATIO,
        "orders": out,
    })))
}

/// The noisy channels' breaker settings, their middleware if any, and how many channels the
/// backlog is spread over.
type Noise<'a> = (
    &'a Value,
    Option<&'a Vec<converger_core::middleware::Step>>,
    usize,
);

/// One run: the quiet tenants, beside the backlog when `noise` gives its channel's settings.
async fn measure(
    o: &Options,
    order: QueueOrder,
    noise: Option<Noise<'_>>,
) -> Result<Value, String> {
    let config = PipelineConfig {
        allowlist: converger_core::net::Allowlist::loopback(),
        ..PipelineConfig::default()
    };
    let limits = Limits {
        queue_order: order,
        ..Limits::default()
    };
    let rt = InProcess::start_with(Some(LatencyModel::from_env()?), limits, config, None)?;
    let r = run_once(&rt, o, noise).await;
    rt.stop().await;
    r
}

async fn run_once(rt: &InProcess, o: &Options, noise: Option<Noise<'_>>) -> Result<Value, String> {
    let p = &rt.pipeline;
    let fast = IsolatedReceiver::start().await?;
    let mut quiet = Vec::with_capacity(o.tenants);
    for _ in 0..o.tenants {
        let (t, _) = tenant(p, Tier::Default).await?;
        let c = webhook(p, &t, &fast.url, json!({})).await?;
        quiet.push((t, c.id));
    }
    let slow = Receiver::start(Vec::new(), Reply::status(200).delay(o.slow)).await?;
    let mut backlog_s = None;
    if let Some((breaker, middleware, channels)) = noise {
        let (t, _) = tenant(p, Tier::Default).await?;
        let mut noisy = Vec::with_capacity(channels);
        for _ in 0..channels.max(1) {
            let c = webhook_with(p, &t, &slow.url, json!({}), breaker.clone()).await?;
            if let Some(steps) = middleware {
                let patch = converger_ports::ChannelPatch {
                    middleware: Some(steps.clone()),
                    ..converger_ports::ChannelPatch::default()
                };
                p.channels()
                    .update_channel(&c, &patch)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            noisy.push(c.id);
        }
        let started = Instant::now();
        let refused = futures::stream::iter(0..o.backlog)
            .map(|i| {
                let (t, c) = (&t, &noisy[i % noisy.len()]);
                async move { p.intake().ingest(t, activity(c, i)).await.is_err() }
            })
            .buffer_unordered(200)
            .filter(|r| futures::future::ready(*r))
            .count()
            .await;
        if refused > 0 {
            return Err(format!(
                "{refused} of the backlog's activities were refused"
            ));
        }
        backlog_s = Some(started.elapsed().as_secs_f64());
    }
    // The quiet tenants, one activity a second each, spread over the second.
    let n = o.tenants * o.seconds as usize;
    let gap = Duration::from_secs(1) / o.tenants.max(1) as u32;
    let mut sent: HashMap<u64, Instant> = HashMap::with_capacity(n);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep_until((started + gap * i as u32).into()).await;
        let (t, c) = quiet[i % quiet.len()].clone();
        // Numbered apart from the backlog's activities.
        let k = 1_000_000 + i;
        sent.insert(k as u64, Instant::now());
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            p.intake().ingest(&t, activity(&c, k)).await.is_err()
        }));
    }
    let mut refused = 0;
    for t in tasks {
        if t.await.unwrap_or(true) {
            refused += 1;
        }
    }
    let got = fast
        .wait_for(n - refused, Duration::from_secs(o.seconds + 60))
        .await;
    let mut latencies = Vec::new();
    for r in fast.requests() {
        if let Some(at) = serde_json::from_slice::<Value>(&r.body)
            .ok()
            .and_then(|b| find_n(&b))
            .and_then(|k| sent.get(&k))
        {
            latencies.push(r.at.saturating_duration_since(*at).as_secs_f64() * 1000.0);
        }
    }
    Ok(json!({
        "quiet": summary(latencies),
        "quiet_sent": n,
        "quiet_refused": refused,
        "quiet_delivered": got,
        "backlog_ingest_s": backlog_s.map(|s| (s * 100.0).round() / 100.0),
        "backlog_delivered_meanwhile": slow.count(),
        "backlog_most_at_once": slow.max_concurrent(),
    }))
}
