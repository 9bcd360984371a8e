//! `bench sweep [N]`: the cost of one sweep over N settled deliveries (and a few overdue ones),
//! as a JSON line: index queries made, rows found, time taken.

use converger_core::{ActivityId, ChannelId, ChannelType, DeliveryStatus, TenantId, Tier, time};
use converger_ports::{Activity, Channel, Delivery};
use converger_stack::stack::{Stack, StackOptions};
use converger_store::dynamo::DynamoStore;
use serde_json::{Map, json};
use std::time::{Duration, Instant};

/// A delivery row of `channel`, due at `due` (ms).
pub(crate) fn row(
    tenant: &TenantId,
    channel: &Channel,
    status: DeliveryStatus,
    due: i64,
) -> Delivery {
    let now = converger_core::Timestamp::now();
    let a = Activity {
        event_type: None,
        id: ActivityId::generate(),
        tenant_id: tenant.clone(),
        conversation_id: "bench".into(),
        seq: 0,
        payload_ref: None,
        payload: json!({}),
        channel_ids: vec![channel.id.clone()],
        created_at: now,
        expires_at: None,
        trace: None,
    };
    let mut d = Delivery::new(&a, channel, Tier::Bulk, now);
    d.next_attempt_at = due;
    d.status = status;
    d
}

pub async fn sweep(settled: usize) -> Result<(), String> {
    let opts = StackOptions {
        run_functions: false,
        ..StackOptions::bench("sweep")
    };
    let stack = Stack::start(opts).await?;
    let store = DynamoStore::new(
        stack.aws()?.clients.dynamodb.clone(),
        stack.aws()?.resources.clone(),
    );
    let tenant = TenantId::generate();
    let channel = bench_channel(&tenant, ChannelType::Echo);
    let old = time::now_ms() - 3_600_000;
    let started = Instant::now();
    seed(&store, settled, |i| {
        let st = if i % 2 == 0 {
            DeliveryStatus::Sent
        } else {
            DeliveryStatus::Failed
        };
        row(&tenant, &channel, st, old)
    })
    .await?;
    let overdue: Vec<Delivery> = (0..5)
        .map(|_| row(&tenant, &channel, DeliveryStatus::Pending, old))
        .collect();
    store
        .seed_deliveries(&overdue)
        .await
        .map_err(|e| e.to_string())?;
    let seeded = started.elapsed();

    let t0 = Instant::now();
    let report = stack
        .functions
        .retry_scheduler
        .sweeper()
        .sweep()
        .await
        .map_err(|e| e.to_string())?;
    let took = t0.elapsed();
    super::emit(json!({
        "scenario": "sweep",
        "settled_deliveries": settled,
        "overdue_deliveries": overdue.len(),
        "index_queries": report.queries,
        "found": report.found,
        "enqueued": report.enqueued,
        "sweep_ms": took.as_secs_f64() * 1000.0,
        "seed_s": seeded.as_secs_f64(),
        "note": "index_queries is the cost: one query per due-index shard, settled rows are not in the index; sweep_ms measures the emulator, whose Query is linear in table size",
    }));
    tokio::time::sleep(Duration::from_millis(10)).await;
    stack.stop().await;
    Ok(())
}

/// `bench bulk-replay [N]`: seeds N dead letters on one channel and times one bulk replay call
/// through the tenant API, as a JSON line.
pub async fn replay(dead_letters: usize) -> Result<(), String> {
    let opts = StackOptions {
        run_functions: false,
        ..StackOptions::bench("replay")
    };
    let stack = Stack::start(opts).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(900))
        .build()
        .map_err(|e| e.to_string())?;
    let post = |url: String, token: String, body: serde_json::Value| {
        let http = http.clone();
        async move {
            let r = http
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = r.status();
            let text = r.text().await.map_err(|e| e.to_string())?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if status.is_success() {
                Ok(v)
            } else {
                Err(format!("{status}: {v}"))
            }
        }
    };
    let tenant = post(
        format!("{}/admin/api/tenants", stack.admin_url),
        stack.admin_token.clone(),
        json!({"name": "bench"}),
    )
    .await?;
    let key = tenant["api_key"].as_str().unwrap_or_default().to_owned();
    let ch = post(
        format!("{}/api/v1/channels", stack.api_url),
        key.clone(),
        json!({"type": "webhook", "name": "bench", "config": {"url": "http://127.0.0.1:9/"}}),
    )
    .await?;
    let store = DynamoStore::new(
        stack.aws()?.clients.dynamodb.clone(),
        stack.aws()?.resources.clone(),
    );
    let channel = stack
        .store
        .get_channel(
            &ChannelId::parse(ch["id"].as_str().unwrap_or_default()).map_err(|e| e.to_string())?,
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("channel missing")?;
    let tenant_id = channel.tenant_id.clone();
    let old = time::now_ms() - 3_600_000;
    let seeded = Instant::now();
    seed(&store, dead_letters, |_| {
        let mut d = row(&tenant_id, &channel, DeliveryStatus::Failed, old);
        d.tier = Tier::Default;
        d.updated_at = converger_core::Timestamp::from_ms(old);
        d
    })
    .await?;
    let seed_s = seeded.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let r = post(
        format!(
            "{}/api/v1/channels/{}/deliveries/retry",
            stack.api_url, channel.id
        ),
        key,
        json!({}),
    )
    .await?;
    let took = t0.elapsed();
    super::emit(json!({
        "scenario": "bulk-replay",
        "dead_letters": dead_letters,
        "retried": r["retried"],
        "has_more": r["has_more"],
        "call_s": took.as_secs_f64(),
        "requests": r["cost"],
        "seed_s": seed_s,
        "note": "one API call end to end on the local stack; the emulator copies whole tables on every transaction and slows with queue depth, so call_s measures it more than Converger",
    }));
    stack.stop().await;
    Ok(())
}

/// `bench bulk-replay N --in-process`: the same bulk replay on the in-process backend, which
/// measures Converger's own cost (no network, no latency model yet).
pub async fn replay_in_process(dead_letters: usize) -> Result<serde_json::Value, String> {
    let own = replay_in_process_with(dead_letters, None).await?;
    let model = converger_memory::LatencyModel::from_env()?;
    let modeled = replay_in_process_with(dead_letters, Some(model)).await?;
    Ok(super::emit(json!({
        "scenario": "bulk-replay", "backend": "in-process (latency model)",
        "dead_letters": dead_letters,
        "retried": own.0,
        "requests": own.1,
        "own_s": own.2,
        "with_latency_model_s": modeled.2,
        "latency_model_ms": model.to_json(),
        "note": "own_s: Converger's own time (no network); with_latency_model_s: the same call waiting an assumed typical latency per request",
    })))
}

async fn replay_in_process_with(
    dead_letters: usize,
    latency: Option<converger_memory::LatencyModel>,
) -> Result<(usize, converger_pipeline::replay::BulkStats, f64), String> {
    use converger_core::query::{Actor, ActorKind};
    use converger_pipeline::PipelineConfig;
    use converger_pipeline::replay::BulkFilter;
    use converger_ports::prelude::*;
    let (pipeline, converger_stack::inprocess::Memory { store, queue, .. }) =
        converger_stack::inprocess::memory_pipeline(latency, PipelineConfig::default())?;
    let tenant = TenantId::generate();
    let channel = bench_channel(&tenant, ChannelType::Webhook);
    store
        .create_channel(&channel)
        .await
        .map_err(|e| e.to_string())?;
    let old = time::now_ms() - 3_600_000;
    let rows: Vec<Delivery> = (0..dead_letters)
        .map(|_| {
            let mut d = row(&tenant, &channel, DeliveryStatus::Failed, old);
            d.updated_at = converger_core::Timestamp::from_ms(old);
            d
        })
        .collect();
    store.seed_deliveries(&rows).map_err(|e| e.to_string())?;
    let actor = Actor {
        kind: ActorKind::TenantApi,
        id: "bench".into(),
    };
    let t0 = Instant::now();
    let r = pipeline
        .replays()
        .replay_channel(&tenant, &channel.id, BulkFilter::default(), &actor)
        .await
        .map_err(|e| e.to_string())?;
    let took = t0.elapsed();
    if queue.depth() != r.retried {
        return Err(format!(
            "{} enqueued for {} replayed",
            queue.depth(),
            r.retried
        ));
    }
    Ok((r.retried, r.stats, took.as_secs_f64()))
}

/// `bench health [CHANNELS] [DELIVERIES]`: the requests one health run makes, as a JSON line:
/// over CHANNELS channels on the local stack (each with this minute's counters written as
/// ingest writes them), and over one channel with DELIVERIES deliveries ingested in the window
/// on the in-process backend (the emulator's transactions are too slow for that many ingests).
pub async fn health(channels: usize, deliveries: usize) -> Result<(), String> {
    use converger_core::health::minute;
    use converger_pipeline::PipelineConfig;
    use futures::{StreamExt, TryStreamExt};
    const HOOK: &str = "https://example.invalid/hook";

    converger_pipeline::metrics::set_enabled(false);
    // Many channels, on the emulator.
    let opts = StackOptions {
        run_functions: false,
        ..StackOptions::bench("health")
    };
    let stack = Stack::start(opts).await?;
    let p = stack.pipeline.clone();
    let (tenant, _) = super::tenant(&p, Tier::Default).await?;
    let now = time::now_ms();
    futures::stream::iter(0..channels)
        .map(|i| {
            let (p, store, tenant) = (p.clone(), stack.store.clone(), tenant.clone());
            async move {
                let c = super::webhook(&p, &tenant, HOOK, json!({})).await?;
                store
                    .count_deliveries(&c.id, minute(now), 100, (i % 3) as i64)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await?;
    let t0 = Instant::now();
    let many = p.health().health_check().await.map_err(|e| e.to_string())?;
    let many_s = t0.elapsed().as_secs_f64();
    stack.stop().await;

    // One busy channel, in process: every delivery goes through ingest (nothing consumes the
    // queue: only the counters matter here).
    let (p, _) = converger_stack::inprocess::memory_pipeline(None, PipelineConfig::default())?;
    let p = std::sync::Arc::new(p);
    let (t, _) = super::tenant(&p, Tier::Default).await?;
    let c = super::webhook_with(&p, &t, HOOK, json!({}), json!({"max_in_flight": null})).await?;
    futures::stream::iter(0..deliveries)
        .map(|n| {
            let (p, t, id) = (p.clone(), t.clone(), c.id.clone());
            async move {
                p.intake()
                    .ingest(&t, super::activity(&id, n))
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        })
        .buffer_unordered(64)
        .try_collect::<()>()
        .await?;
    let one = p.health().health_check().await.map_err(|e| e.to_string())?;
    super::emit(json!({
        "scenario": "health",
        "channels": channels,
        "requests_for_channels": many.requests(),
        "report_for_channels": many,
        "seconds_for_channels_on_emulator": (many_s * 10.0).round() / 10.0,
        "deliveries_in_one_channel": deliveries,
        "requests_for_one_busy_channel": one.requests(),
        "report_for_one_busy_channel": one,
    }));
    Ok(())
}

/// Seeds `total` rows made by `make(i)`, a thousand at a time (memory stays bounded).
pub(crate) async fn seed(
    store: &DynamoStore,
    total: usize,
    make: impl Fn(usize) -> Delivery,
) -> Result<(), String> {
    let mut written = 0;
    while written < total {
        let n = (total - written).min(1000);
        let rows: Vec<Delivery> = (written..written + n).map(&make).collect();
        store
            .seed_deliveries(&rows)
            .await
            .map_err(|e| e.to_string())?;
        written += n;
    }
    Ok(())
}

fn bench_channel(tenant: &TenantId, kind: ChannelType) -> Channel {
    Channel::new(
        tenant.clone(),
        kind,
        "bench",
        Map::new(),
        converger_core::Timestamp::now(),
    )
}
