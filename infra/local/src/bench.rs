//! `bench-sweep [N]`: the cost of one sweep over N settled deliveries (and a few overdue ones),
//! as a JSON line: index queries made, rows found, time taken.

use crate::stack::{Stack, StackOptions};
use converger_core::{ActivityId, ChannelId, ChannelType, DeliveryStatus, TenantId, Tier, time};
use converger_store::dynamo::DynamoStore;
use converger_store::{Activity, Channel, Delivery};
use serde_json::{Map, json};
use std::time::{Duration, Instant};

fn row(tenant: &TenantId, channel: &Channel, status: DeliveryStatus, due: i64) -> Delivery {
    let now = time::now_rfc3339();
    let a = Activity {
        id: ActivityId::generate(),
        tenant_id: tenant.clone(),
        conversation_id: "bench".into(),
        seq: 0,
        payload: json!({}),
        channel_ids: vec![channel.id.clone()],
        created_at: now.clone(),
    };
    let mut d = Delivery::new(&a, channel, Tier::Bulk, due, &now);
    d.status = status;
    d
}

pub async fn sweep(settled: usize) -> Result<(), String> {
    let opts = StackOptions {
        prefix: format!("bench{}-", std::process::id()),
        sweep_period: None,
        run_functions: false,
        ..StackOptions::default()
    };
    let stack = Stack::start(opts).await?;
    let store = DynamoStore::new(stack.clients.dynamodb.clone(), stack.resources.clone());
    let tenant = TenantId::generate();
    let channel = Channel {
        id: ChannelId::generate(),
        tenant_id: tenant.clone(),
        kind: ChannelType::Echo,
        name: "bench".into(),
        config: Map::new(),
        active: true,
        retry_policy: Map::new(),
        signing_secret: converger_core::secret::new_signing_secret(),
        created_at: time::now_rfc3339(),
        updated_at: time::now_rfc3339(),
    };
    let old = time::now_ms() - 3_600_000;
    let started = Instant::now();
    let mut written = 0;
    while written < settled {
        let n = (settled - written).min(1000);
        let rows: Vec<Delivery> = (0..n)
            .map(|i| {
                let st = if i % 2 == 0 {
                    DeliveryStatus::Sent
                } else {
                    DeliveryStatus::Failed
                };
                row(&tenant, &channel, st, old)
            })
            .collect();
        store
            .seed_deliveries(&rows)
            .await
            .map_err(|e| e.to_string())?;
        written += n;
    }
    let overdue: Vec<Delivery> = (0..5)
        .map(|_| row(&tenant, &channel, DeliveryStatus::Pending, old))
        .collect();
    store
        .seed_deliveries(&overdue)
        .await
        .map_err(|e| e.to_string())?;
    let seeded = started.elapsed();

    let t0 = Instant::now();
    let report = stack.pipeline.sweep().await.map_err(|e| e.to_string())?;
    let took = t0.elapsed();
    println!(
        "{}",
        json!({
            "scenario": "sweep",
            "settled_deliveries": settled,
            "overdue_deliveries": overdue.len(),
            "index_queries": report.queries,
            "found": report.found,
            "enqueued": report.enqueued,
            "sweep_ms": took.as_secs_f64() * 1000.0,
            "seed_s": seeded.as_secs_f64(),
            "note": "index_queries is the cost: one query per due-index shard, settled rows are not in the index; sweep_ms measures the emulator, whose Query is linear in table size",
        })
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    stack.stop().await;
    Ok(())
}
