//! `bench latency`: activities at a steady rate through the tenant API of the local stack (on
//! the emulator) to a healthy receiver. Prints the ingest-to-receiver latency percentiles (from
//! just before the producer's POST to the receiver's first byte of the webhook), the API's own
//! answer time, and the floor: the same receiver's round trip for a bare POST from here.

use super::{summary, tenant, webhook};
use converger_core::Tier;
use converger_stack::receiver::Receiver;
use converger_stack::stack::{Stack, StackOptions};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub activities: usize,
    /// Activities per second.
    pub rate: u32,
}

/// Deliveries sent before the measured ones (connection pools, caches), not measured.
const WARM_UP: usize = 5;

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let stack = Stack::start(StackOptions::bench("lat")).await?;
    let result = measure(&stack, &o).await;
    stack.stop().await;
    let (delivered, api, floor) = result?;
    Ok(super::emit(json!({
        "scenario": "latency",
        "backend": "local stack on the emulator",
        "activities": o.activities,
        "rate_per_s": o.rate,
        "ingest_to_receiver": delivered,
        "api_answer": api,
        "floor_bare_post": floor,
        "target_p95_ms": 15,
    })))
}

async fn measure(stack: &Stack, o: &Options) -> Result<(Value, Value, Value), String> {
    let p = &stack.pipeline;
    let receiver = Receiver::always(200).await?;
    let (t, key) = tenant(p, Tier::Default).await?;
    let ch = webhook(p, &t, &receiver.url, json!({})).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("{}/api/v1/activities", stack.api_url);
    let post = |n: usize| {
        let (http, url, key, ch) = (http.clone(), url.clone(), key.clone(), ch.id.clone());
        async move {
            let t0 = Instant::now();
            let id = super::post_activity(&http, &url, &key, &ch, n).await.ok()?;
            Some((id.to_string(), t0, t0.elapsed()))
        }
    };
    for n in 0..WARM_UP {
        post(n).await;
    }
    receiver.wait_for(WARM_UP, Duration::from_secs(30)).await;

    // The floor: a bare POST to an identical receiver, at the same rate.
    let bare = Receiver::always(200).await?;
    let mut floor = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(o.rate)));
    for _ in 0..o.activities.min(200) {
        tick.tick().await;
        let t0 = Instant::now();
        if http.post(&bare.url).body("{}").send().await.is_ok() {
            floor.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }

    let mut sends = Vec::with_capacity(o.activities);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(o.rate)));
    for n in 0..o.activities {
        tick.tick().await;
        sends.push(tokio::spawn(post(WARM_UP + n)));
    }
    let mut started: HashMap<String, Instant> = HashMap::with_capacity(o.activities);
    let mut api = Vec::with_capacity(o.activities);
    for s in sends {
        if let Ok(Some((id, t0, answered))) = s.await {
            started.insert(id, t0);
            api.push(answered.as_secs_f64() * 1000.0);
        }
    }
    if started.len() < o.activities {
        return Err(format!(
            "{} of {} activities were refused",
            o.activities - started.len(),
            o.activities
        ));
    }
    let seen = receiver
        .wait_for(WARM_UP + o.activities, Duration::from_secs(60))
        .await;
    let delivered = super::arrival_ms(&seen, &started);
    if delivered.len() < o.activities {
        return Err(format!(
            "{} of {} deliveries did not arrive within 60 s",
            o.activities - delivered.len(),
            o.activities
        ));
    }
    Ok((summary(delivered), summary(api), summary(floor)))
}
