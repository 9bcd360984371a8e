//! What flow control costs a healthy channel, as two scenarios that each print one JSON line:
//! - `head-of-line`: one channel at a steady rate to a healthy receiver while one of its
//!   deliveries fails and retries every 10 s; its other deliveries' latency next to the same
//!   run without the failing one.
//! - `burst`: a parked backlog released at once (pause, ingest, resume) to one healthy channel
//!   whose receiver takes 100 ms, with `max_in_flight` 10 and without a cap of its own (`null`:
//!   the platform's bound, 100 on the default tier, a window growing from 2): the time until
//!   the last delivery is answered, next to the cap's ideal, and the receiver's concurrency.

use super::{Runtime, activity, percentile, tenant, webhook_with};
use converger_core::Tier;
use converger_core::query::{Actor, ActorKind};
use converger_stack::receiver::{Receiver, Reply};
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The retrying delivery's marker in its payload (the receiver answers it 503).
const RETRY_ME: &str = "retry-me";

#[derive(Debug, Clone)]
pub struct HeadOfLine {
    /// How long the channel's healthy traffic runs, and at what rate (activities per second).
    pub seconds: u64,
    pub rate: u32,
    pub in_process: bool,
}

/// Runs `head-of-line` with the retrying delivery, then without (the baseline).
pub async fn head_of_line(o: HeadOfLine) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let (backend, with) = hol_phase(&o, true).await?;
    let (_, baseline) = hol_phase(&o, false).await?;
    let ratio = |k: &str| {
        let (w, b) = (
            with[k].as_f64().unwrap_or(0.0),
            baseline[k].as_f64().unwrap_or(0.0),
        );
        if b > 0.0 {
            (w / b * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    Ok(super::emit(json!({
        "scenario": "head-of-line",
        "backend": backend,
        "rate_per_s": o.rate,
        "seconds": o.seconds,
        "retry_every_s": 10,
        "with_retrying": with,
        "baseline": baseline,
        "p95_ratio": ratio("p95_ms"),
        "target_p95_ratio": 1.2,
    })))
}

async fn hol_phase(o: &HeadOfLine, retrying: bool) -> Result<(&'static str, Value), String> {
    let rt = Runtime::start(o.in_process, if retrying { "hola" } else { "holb" }).await?;
    let backend = rt.backend();
    let result = hol_measure(&rt, o, retrying).await;
    rt.stop().await;
    Ok((backend, result?))
}

async fn hol_measure(rt: &Runtime, o: &HeadOfLine, retrying: bool) -> Result<Value, String> {
    let p = rt.pipeline();
    let rx = Receiver::always(200).await?;
    rx.answer_when(RETRY_ME, Reply::status(503));
    let (t, _) = tenant(&p, Tier::Default).await?;
    let policy = json!({"backoff": "fixed", "base_ms": 10_000, "max_attempts": 100});
    let ch = webhook_with(&p, &t, &rx.url, policy, json!({})).await?;
    if retrying {
        let mut a = activity(&ch.id, 0);
        a.payload = Some(json!({"text": RETRY_ME}));
        p.intake().ingest(&t, a).await.map_err(|e| e.to_string())?;
        rx.wait_for(1, Duration::from_secs(30)).await;
    }
    let started = super::steady_ingest(&p, &t, &ch.id, o.rate, o.seconds, 1).await;
    // Every healthy delivery, however many retries of the failing one came meanwhile.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lat = super::arrival_ms(&rx.requests(), &started);
    while lat.len() < started.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        lat = super::arrival_ms(&rx.requests(), &started);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let retried = rx
        .requests()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains(RETRY_ME))
        .count();
    Ok(json!({
        "sent": started.len(),
        "delivered": lat.len(),
        "p50_ms": percentile(&lat, 0.50),
        "p95_ms": percentile(&lat, 0.95),
        "p99_ms": percentile(&lat, 0.99),
        "failing_attempts": retried,
    }))
}

#[derive(Debug, Clone)]
pub struct Burst {
    pub deliveries: usize,
    pub in_process: bool,
    /// The receiver's time per request.
    pub receiver_ms: u64,
}

/// The capped run's `max_in_flight`.
const CAP: u32 = 10;

/// Runs `burst` with the cap, then with the platform's bound.
pub async fn burst(o: Burst) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let (backend, capped) = burst_phase(&o, Some(CAP)).await?;
    let (_, bound) = burst_phase(&o, None).await?;
    let ideal_s = o.deliveries as f64 * o.receiver_ms as f64 / 1000.0 / f64::from(CAP);
    let (capped_s, bound_s) = (capped.0, bound.0);
    let target_s = 1.3 * ideal_s + bound_s;
    let round = |x: f64| (x * 100.0).round() / 100.0;
    Ok(super::emit(json!({
        "scenario": "burst",
        "backend": backend,
        "deliveries": o.deliveries,
        "receiver_ms": o.receiver_ms,
        "max_in_flight": CAP,
        "capped_s": round(capped_s),
        "capped_max_concurrent": capped.1,
        "capped_first_s": round(capped.2),
        "capped_pace_per_s": round(capped.3),
        "bound_s": round(bound_s),
        "bound_max_concurrent": bound.1,
        "ideal_s": round(ideal_s),
        "target_s": round(target_s),
        "within_target": capped_s <= target_s && capped.1 <= CAP as usize,
    })))
}

/// Seconds from the resume to the last delivery's answer, the receiver's most requests at
/// once, seconds to the first delivery, and the pace once the window is open (per second).
async fn burst_phase(
    o: &Burst,
    cap: Option<u32>,
) -> Result<(&'static str, (f64, usize, f64, f64)), String> {
    let rt = Runtime::start(
        o.in_process,
        if cap.is_some() { "bursta" } else { "burstb" },
    )
    .await?;
    let backend = rt.backend();
    let result = burst_measure(&rt, o, cap).await;
    rt.stop().await;
    Ok((backend, result?))
}

async fn burst_measure(
    rt: &Runtime,
    o: &Burst,
    cap: Option<u32>,
) -> Result<(f64, usize, f64, f64), String> {
    let p = rt.pipeline();
    let rx = Receiver::start(
        Vec::new(),
        Reply::status(200).delay(Duration::from_millis(o.receiver_ms)),
    )
    .await?;
    let (t, _) = tenant(&p, Tier::Default).await?;
    let breaker = json!({"max_in_flight": cap});
    let ch = webhook_with(&p, &t, &rx.url, json!({}), breaker).await?;
    let operator = Actor {
        kind: ActorKind::System,
        id: "bench".into(),
    };
    p.flow()
        .operator()
        .pause(&ch, &operator)
        .await
        .map_err(|e| e.to_string())?;
    let refused = futures::stream::iter(0..o.deliveries)
        .map(|n| {
            let (p, t, ch) = (p.clone(), t.clone(), ch.id.clone());
            async move { p.intake().ingest(&t, activity(&ch, n)).await.is_err() }
        })
        .buffer_unordered(32)
        .filter(|refused| futures::future::ready(*refused))
        .count()
        .await;
    if refused > 0 {
        return Err(format!("{refused} activities were refused"));
    }
    if !rx.requests().is_empty() {
        return Err("a delivery went out while the channel was paused".into());
    }
    let released = Instant::now();
    p.flow()
        .operator()
        .resume(&ch, &operator)
        .await
        .map_err(|e| e.to_string())?;
    let seen = rx.wait_for(o.deliveries, Duration::from_secs(600)).await;
    if seen.len() < o.deliveries {
        return Err(format!(
            "{} of {} deliveries arrived within 600 s",
            seen.len(),
            o.deliveries
        ));
    }
    let mut at: Vec<f64> = seen
        .iter()
        .map(|r| r.at.saturating_duration_since(released).as_secs_f64())
        .collect();
    at.sort_by(|a, b| a.total_cmp(b));
    let last = at.last().copied().unwrap_or(0.0) + o.receiver_ms as f64 / 1000.0;
    // The pace once the window is open: arrivals per second between the 10th and 90th
    // percentile.
    let (lo, hi) = (at[at.len() / 10], at[at.len() * 9 / 10]);
    let pace = if hi > lo {
        (at.len() * 8 / 10) as f64 / (hi - lo)
    } else {
        0.0
    };
    tracing::info!(
        first_s = at[0],
        pace_per_s = pace,
        last_s = last,
        "burst phase"
    );
    Ok((last, rx.max_concurrent(), at[0], pace))
}
