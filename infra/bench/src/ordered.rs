//! `bench ordered`: ordered lanes under failures. `conversations` x `per` activities to one
//! webhook channel whose receiver fails 5 % of the activities once (503, retried after 1 s),
//! on the in-process backend with its latency model. Three runs: unordered, ordered, and
//! ordered with no failures (the baseline of the delay). Prints one JSON line: order
//! violations of each run (an activity's request before the previous activity of its
//! conversation was received), throughput of each, and the latency of the conversations that
//! had no failure, ordered with failures against ordered without: what a failing head costs
//! the other conversations (target x1.0).

use super::{Runtime, percentile};
use converger_core::Tier;
use converger_pipeline::ingest::NewActivity;
use converger_stack::receiver::{Receiver, Reply};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub conversations: usize,
    pub per: usize,
    /// Share of activities whose first request fails, in percent.
    pub fail_percent: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            conversations: 1000,
            per: 10,
            fail_percent: 5,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub deliveries: usize,
    pub failed_once: usize,
    pub requests: usize,
    pub seconds: f64,
    pub deliveries_per_s: f64,
    pub order_violations: usize,
    /// Ingest to the successful request, of the conversations none of whose activities
    /// failed.
    pub clean_conversations: usize,
    pub clean_p50_ms: f64,
    pub clean_p95_ms: f64,
}

/// Whether activity `i` of conversation `c` fails once (a fixed 5 %-ish spread).
fn fails(c: usize, i: usize, percent: u64) -> bool {
    let h = converger_core::ids::stable_hash(&format!("{c}/{i}"));
    u64::from(h) % 100 < percent
}

fn marker(c: usize, i: usize) -> String {
    format!("|{c}-{i}|")
}

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let unordered = phase(&o, false, o.fail_percent).await?;
    let ordered = phase(&o, true, o.fail_percent).await?;
    let baseline = phase(&o, true, 0).await?;
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            (a / b * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let line = json!({
        "scenario": "ordered",
        "backend": "in-process (latency model)",
        "conversations": o.conversations,
        "activities_per_conversation": o.per,
        "fail_once_percent": o.fail_percent,
        "retry_after_ms": 1000,
        "unordered": unordered,
        "ordered": ordered,
        "ordered_without_failures": baseline,
        "throughput_ordered_vs_unordered": ratio(ordered.deliveries_per_s, unordered.deliveries_per_s),
        "clean_conversations_p50_ratio": ratio(ordered.clean_p50_ms, baseline.clean_p50_ms),
        "clean_conversations_p95_ratio": ratio(ordered.clean_p95_ms, baseline.clean_p95_ms),
    });
    Ok(super::emit(line))
}

async fn phase(o: &Options, ordered: bool, fail_percent: u64) -> Result<Run, String> {
    let rt = Runtime::start(true, "ordered").await?;
    let p = rt.pipeline();
    let rx = Receiver::always(200).await?;
    let mut failing = HashSet::new();
    for c in 0..o.conversations {
        for i in 0..o.per {
            if fails(c, i, fail_percent) {
                rx.answer_once_when(&marker(c, i), Reply::status(503));
                failing.insert((c, i));
            }
        }
    }
    let tenant = super::tenant(&p, Tier::Default).await?.0;
    let mut ch = converger_ports::Channel::new(
        tenant.id.clone(),
        converger_core::ChannelType::Webhook,
        "ordered",
        json!({"url": rx.url})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        converger_core::Timestamp::now(),
    );
    ch.retry_policy = serde_json::from_value(json!({"backoff": "fixed", "base_ms": 1000}))
        .map_err(|e| e.to_string())?;
    // Failures of 5 % of requests must not open the breaker: this measures the lanes.
    ch.circuit_breaker =
        serde_json::from_value(json!({"failure_threshold": 1000})).map_err(|e| e.to_string())?;
    if ordered {
        ch.ordering = Some(
            converger_core::lanes::Ordering::parse(&json!({"by": "conversation"}))
                .map_err(|e| e.to_string())?,
        );
    }
    p.channels()
        .create_channel(&ch)
        .await
        .map_err(|e| e.to_string())?;

    let total = o.conversations * o.per;
    let mut started: HashMap<(usize, usize), Instant> = HashMap::with_capacity(total);
    let t0 = Instant::now();
    // Conversation by conversation in its order: activity `i` of every conversation, then
    // `i + 1`; each carries its own `seq`.
    for i in 0..o.per {
        let batch: Vec<((usize, usize), Instant)> = futures::stream::iter(0..o.conversations)
            .map(|c| {
                let (p, tenant, id) = (p.clone(), tenant.clone(), ch.id.clone());
                async move {
                    let at = Instant::now();
                    let a = NewActivity {
                        id: None,
                        event_type: None,
                        conversation_id: format!("c{c}"),
                        seq: Some(i as u64 + 1),
                        channel_ids: vec![id],
                        payload_upload: None,
                        payload: Some(json!({"text": marker(c, i)})),
                        traceparent: None,
                        tracestate: None,
                    };
                    p.intake()
                        .ingest(&tenant, a)
                        .await
                        .map(|_| ((c, i), at))
                        .map_err(|e| e.to_string())
                }
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        started.extend(batch);
    }
    let failed_once = failing.len();
    let seen = rx
        .wait_for(total + failed_once, Duration::from_secs(600))
        .await;
    let seconds = t0.elapsed().as_secs_f64();
    rt.stop().await;
    if seen.len() < total + failed_once {
        return Err(format!(
            "{} of {} requests arrived",
            seen.len(),
            total + failed_once
        ));
    }

    // Each request's activity, in arrival order; the first of a failing one is its failure.
    let mut failed_yet: HashSet<(usize, usize)> = HashSet::new();
    let mut received: HashMap<usize, Vec<bool>> = HashMap::new();
    let mut violations = 0;
    let mut done_at: HashMap<(usize, usize), Instant> = HashMap::new();
    for r in &seen {
        let text = String::from_utf8_lossy(&r.body);
        let Some((c, i)) = parse_marker(&text) else {
            continue;
        };
        let got = received.entry(c).or_insert_with(|| vec![false; o.per]);
        if got[..i].iter().any(|done| !done) {
            violations += 1;
        }
        if failing.contains(&(c, i)) && failed_yet.insert((c, i)) {
            continue;
        }
        got[i] = true;
        done_at.insert((c, i), r.at);
    }
    let dirty: HashSet<usize> = failing.iter().map(|(c, _)| *c).collect();
    let mut clean: Vec<f64> = done_at
        .iter()
        .filter(|((c, _), _)| !dirty.contains(c))
        .filter_map(|(k, at)| {
            started
                .get(k)
                .map(|t| at.saturating_duration_since(*t).as_secs_f64() * 1000.0)
        })
        .collect();
    clean.sort_by(|a, b| a.total_cmp(b));
    Ok(Run {
        deliveries: total,
        failed_once,
        requests: seen.len(),
        seconds: (seconds * 10.0).round() / 10.0,
        deliveries_per_s: (total as f64 / seconds).round(),
        order_violations: violations,
        clean_conversations: o.conversations - dirty.len(),
        clean_p50_ms: percentile(&clean, 0.50),
        clean_p95_ms: percentile(&clean, 0.95),
    })
}

fn parse_marker(text: &str) -> Option<(usize, usize)> {
    let start = text.find('|')? + 1;
    let rest = &text[start..];
    let end = rest.find('|')?;
    let (c, i) = rest[..end].split_once('-')?;
    Some((c.parse().ok()?, i.parse().ok()?))
}
