//! `bench keys`: DynamoDB capacity units per partition key family, on every table and index,
//! counted by DynamoDB's billing rules from the template's key schemas and projections and the
//! item before and after each write (the proxy of `converger_stack::capacity`), on the local stack. Each
//! case runs on its own channel of one tenant:
//! - `first_try`: one activity at a time, each delivered on the first try;
//! - `first_try_without_seq`: the same from a producer that leaves `seq` out (the
//!   conversation's sequence item is written for each);
//! - `first_try_batch`: that producer sending ten at a time (`POST /api/v1/activities/batch`,
//!   two conversations of five a batch);
//! - `three_attempts`: the receiver answers 503 twice, then 200;
//! - `dead_letter`: the receiver always answers 503, the policy allows 3 attempts;
//! - `bulk_replay`: one bulk replay of `replay` dead letters, until every one is sent again;
//! - `handoff`: a websocket channel with no client (each delivery handed off, then
//!   acknowledged through the API);
//! - `health_run` and `sweep`: one run of the health function and of the sweeper with the
//!   cases above in their windows (units per run, not per delivery).
//!
//! For each case it prints the units per delivery by family (tables and indexes apart), the
//! units on one key of each family, the ceiling that implies for the family's scope (tenant,
//! channel or deployment) at 1,000 write units/s and 3,000 read units/s per partition, and the
//! hottest family per scope.

use super::{tenant, webhook_with};
use crate::seed::{self, SeedAs};
use converger_core::{DeliveryId, DeliveryStatus, Tier, time};
use converger_stack::capacity::{FamilyUnits, Meter, Scope, families};
use converger_stack::receiver::{Receiver, Reply};
use converger_stack::stack::{Stack, StackOptions};
use converger_store::dynamo::DynamoStore;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// DynamoDB's per-partition throughput: write and read units per second.
pub const PARTITION_WRITE_UNITS: f64 = 1000.0;
pub const PARTITION_READ_UNITS: f64 = 3000.0;

#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries per delivery case.
    pub deliveries: usize,
    /// Dead letters in the bulk replay.
    pub replay: usize,
    /// First tries before the first-try case is counted (warm caches, the window grown).
    pub warm: usize,
}

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let meter = Meter::new();
    let opts = StackOptions {
        capacity: Some(meter.clone()),
        ..StackOptions::bench("keys")
    };
    let stack = Stack::start(opts).await?;
    let result = cases(&stack, &meter, &o).await;
    stack.stop().await;
    let cases = result?;
    Ok(super::emit(json!({
        "scenario": "keys",
        "backend": "local stack on the emulator (capacity units counted by a proxy from the deployed key schemas)",
        "deliveries_per_case": o.deliveries,
        "partition_limits_per_s": {"write_units": PARTITION_WRITE_UNITS, "read_units": PARTITION_READ_UNITS},
        "cases": cases,
        "target_write_units_per_first_try": 8,
    })))
}

struct Harness<'a> {
    stack: &'a Stack,
    meter: &'a Meter,
    http: reqwest::Client,
    url: String,
    key: String,
    store: DynamoStore,
}

async fn cases(stack: &Stack, meter: &Meter, o: &Options) -> Result<Value, String> {
    let p = &stack.pipeline;
    let (t, key) = tenant(p, Tier::Default).await?;
    let h = Harness {
        stack,
        meter,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?,
        url: format!("{}/api/v1/activities", stack.api_url),
        key,
        // The harness reads through its own, uncounted client.
        store: DynamoStore::new(
            stack.aws()?.clients.dynamodb.clone(),
            stack.aws()?.resources.clone(),
        ),
    };
    let retry = json!({"schedule": [1000], "max_attempts": 3});
    let no_breaker = json!({"failure_threshold": 1000});
    let mut out = Map::new();

    // First tries, after a warm-up (caches, the window grown from its slow start).
    let ok = Receiver::always(200).await?;
    let c = webhook_with(p, &t, &ok.url, json!({}), json!({})).await?;
    for n in 0..o.warm {
        let id = super::post_activity(&h.http, &h.url, &h.key, &c.id, n).await?;
        h.settle(&[id], (DeliveryStatus::Sent, 1)).await?;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let counted = h
        .count(o.deliveries, |n| {
            let h = &h;
            let id = c.id.clone();
            async move {
                let d = super::post_activity(&h.http, &h.url, &h.key, &id, o.warm + n).await?;
                h.settle(&[d], (DeliveryStatus::Sent, 1)).await
            }
        })
        .await?;
    out.insert("first_try".into(), counted);

    // A producer without `seq`, one at a time, then ten to a batch.
    let bare = |n: usize| {
        json!({"conversation_id": format!("keys-{}", n / 5), "channel_ids": [c.id],
               "payload": {"text": "x".repeat(200), "n": n}})
    };
    let counted = h
        .count(o.deliveries, |n| {
            let h = &h;
            let body = bare(n).to_string();
            async move {
                let d = super::post_body(&h.http, &h.url, &h.key, body).await?;
                h.settle(&[d], (DeliveryStatus::Sent, 1)).await
            }
        })
        .await?;
    out.insert("first_try_without_seq".into(), counted);
    let batch_url = format!("{}/batch", h.url);
    let counted = h
        .count_once(o.deliveries, async {
            let all: Vec<usize> = (1_000_000..1_000_000 + o.deliveries).collect();
            for chunk in all.chunks(10) {
                let body =
                    json!({"activities": chunk.iter().map(|n| bare(*n)).collect::<Vec<_>>()});
                let ids = post_batch(&h, &batch_url, body.to_string()).await?;
                h.settle(&ids, (DeliveryStatus::Sent, 1)).await?;
            }
            Ok(())
        })
        .await?;
    out.insert("first_try_batch".into(), counted);

    // Three attempts, and a dead letter after three.
    let mut script = Vec::new();
    for _ in 0..o.deliveries {
        script.extend([Reply::status(503), Reply::status(503), Reply::status(200)]);
    }
    let flaky = Receiver::start(script, Reply::status(200)).await?;
    let c3 = webhook_with(p, &t, &flaky.url, retry.clone(), no_breaker.clone()).await?;
    let dead = Receiver::always(503).await?;
    let cd = webhook_with(p, &t, &dead.url, retry, no_breaker).await?;
    for (name, ch, done) in [
        ("three_attempts", &c3, (DeliveryStatus::Sent, 3)),
        ("dead_letter", &cd, (DeliveryStatus::Failed, 3)),
    ] {
        let counted = h
            .count(o.deliveries, |n| {
                let h = &h;
                let id = ch.id.clone();
                async move {
                    let d = super::post_activity(&h.http, &h.url, &h.key, &id, n).await?;
                    h.settle(&[d], done).await
                }
            })
            .await?;
        out.insert(name.into(), counted);
    }

    // Websocket hand-offs: no client is connected, so each delivery is handed off and waits;
    // the client's acknowledgement comes through the API.
    let cw = super::channel_of(
        p,
        &t,
        converger_core::ChannelType::Websocket,
        json!({"token": "bench-websocket-token"}),
    )
    .await?;
    let counted = h
        .count(o.deliveries, |n| {
            let h = &h;
            let id = cw.id.clone();
            async move {
                let d = super::post_activity(&h.http, &h.url, &h.key, &id, n).await?;
                h.wait_handed_off(&d).await?;
                let r = h
                    .http
                    .post(format!("{}/api/v1/deliveries/{d}/ack", h.stack.api_url))
                    .bearer_auth(&h.key)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if !r.status().is_success() {
                    return Err(format!("ack: {}", r.status()));
                }
                h.settle(&[d], (DeliveryStatus::Sent, 1)).await
            }
        })
        .await?;
    out.insert("handoff".into(), counted);

    // One health run and one sweep over what the cases left.
    let health = stack.functions.health.clone();
    let counted = h
        .count_once(1, async {
            health
                .health()
                .health_check()
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await?;
    out.insert("health_run".into(), counted);
    let sweeper = stack.functions.retry_scheduler.clone();
    let counted = h
        .count_once(1, async {
            sweeper
                .sweeper()
                .sweep()
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await?;
    out.insert("sweep".into(), counted);

    // A bulk replay of seeded dead letters (the seeding is not counted), last: at a thousand
    // it loads the emulator long enough to slow what would follow.
    let back = Receiver::always(200).await?;
    let cr = webhook_with(p, &t, &back.url, json!({}), json!({})).await?;
    let (activities, mut rows) = seed::rows(&t, &cr, o.replay, SeedAs::Sent);
    let old = time::now_ms() - 3_600_000;
    for d in &mut rows {
        d.status = DeliveryStatus::Failed;
        d.attempts = 1;
        d.last_error = Some("seeded".into());
        d.updated_at = converger_core::Timestamp::from_ms(old);
    }
    stack.seed_rows(&activities, &rows).await?;
    let ids: Vec<DeliveryId> = rows.iter().map(|d| d.id.clone()).collect();
    let replay_url = format!(
        "{}/api/v1/channels/{}/deliveries/retry",
        stack.api_url, cr.id
    );
    // Replayed in calls of at most `REPLAY_CALL` (`limit`), each call's deliveries sent again
    // before the next: the units per delivery are those of one call of a thousand (the rows,
    // their audit entries, the listings, the due index; only the call's own listing query is
    // shared by fewer), but the emulator behind the proxy, which holds each written item
    // through three of its requests, never has a thousand attempts writing one channel's flow
    // item at once: a single call of 1,000, and calls of 100, stalled there (requests timing
    // out after 10 s) while the same code on the in-process backend does not.
    let counted = h
        .count_once(o.replay, async {
            let mut waiting = ids.clone();
            let mut replayed = 0;
            // A call may replay fewer than its limit (a dead letter another call's listing
            // page read first): calls go on until every one is replayed, or one replays none.
            for _ in 0..2 * ids.len().div_ceil(REPLAY_CALL) {
                if replayed >= ids.len() {
                    break;
                }
                let r = h
                    .http
                    .post(&replay_url)
                    .timeout(Duration::from_secs(900))
                    .bearer_auth(&h.key)
                    .header("content-type", "application/json")
                    .body(json!({"limit": REPLAY_CALL}).to_string())
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if !r.status().is_success() {
                    return Err(format!("bulk replay: {}", r.status()));
                }
                let body: Value =
                    serde_json::from_slice(&r.bytes().await.map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string())?;
                let n = body["retried"].as_u64().unwrap_or(0) as usize;
                if n == 0 {
                    break;
                }
                replayed += n;
                // Until as many as were replayed so far are sent again.
                let started = Instant::now();
                while ids.len() - waiting.len() < replayed {
                    if started.elapsed() > WAIT {
                        return Err(format!(
                            "{} of {replayed} replayed deliveries sent after {} s",
                            ids.len() - waiting.len(),
                            WAIT.as_secs()
                        ));
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let sent: std::collections::HashSet<DeliveryId> =
                        converger_ports::DeliveryStore::get_deliveries(&h.store, &waiting)
                            .await
                            .map_err(|e| e.to_string())?
                            .into_iter()
                            .filter(|d| d.status == DeliveryStatus::Sent)
                            .map(|d| d.id)
                            .collect();
                    waiting.retain(|id| !sent.contains(id));
                }
            }
            if replayed < ids.len() {
                return Err(format!("{replayed} of {} dead letters replayed", ids.len()));
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| json!({"error": e}));
    out.insert("bulk_replay".into(), counted);
    Ok(Value::Object(out))
}

/// Posts a batch of activities; the first delivery of each (every item must be taken).
async fn post_batch(h: &Harness<'_>, url: &str, body: String) -> Result<Vec<DeliveryId>, String> {
    let r = h
        .http
        .post(url)
        .bearer_auth(&h.key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let v: Value = r.json().await.map_err(|e| e.to_string())?;
    v["results"]
        .as_array()
        .ok_or_else(|| format!("batch answered {v}"))?
        .iter()
        .map(|r| {
            r["activity"]["deliveries"][0]["id"]
                .as_str()
                .and_then(|s| DeliveryId::parse(s).ok())
                .ok_or_else(|| format!("batch item answered {r}"))
        })
        .collect()
}

impl Harness<'_> {
    /// Runs `one(n)` for `n` in `0..deliveries`, one after another, and returns what they cost.
    async fn count<F, Fut>(&self, deliveries: usize, one: F) -> Result<Value, String>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        self.count_once(deliveries, async {
            for n in 0..deliveries {
                one(n).await?;
            }
            Ok(())
        })
        .await
    }

    /// Runs `work` and returns its units divided by `deliveries`.
    async fn count_once(
        &self,
        deliveries: usize,
        work: impl std::future::Future<Output = Result<(), String>>,
    ) -> Result<Value, String> {
        // The previous case's trailing work (settle, events, the queue delete, its row changes)
        // is not counted.
        super::quiet(self.stack).await;
        let _ = self.meter.take();
        let started = Instant::now();
        work.await?;
        // This case's own trailing work finishes (its row changes read from the table's
        // stream, their counts written).
        super::quiet(self.stack).await;
        let t = self.meter.take();
        Ok(report(
            &families(&t.writes, deliveries),
            &families(&t.reads, deliveries),
            started.elapsed(),
        ))
    }

    /// Waits until every delivery has `done`'s status and attempts.
    async fn settle(&self, ids: &[DeliveryId], done: (DeliveryStatus, u32)) -> Result<(), String> {
        super::settle(&self.store, ids, done, WAIT).await
    }

    async fn wait_handed_off(&self, id: &DeliveryId) -> Result<(), String> {
        super::wait_rows(
            &self.store,
            std::slice::from_ref(id),
            "handed off",
            WAIT,
            |d| d.handed_off,
        )
        .await
    }
}

/// Dead letters one bulk replay call of the bulk-replay case replays.
const REPLAY_CALL: usize = 10;

/// Longest wait for deliveries to reach the state a case waits for.
const WAIT: Duration = Duration::from_secs(120);

/// One case's figures: per family, and the totals.
fn report(writes: &[FamilyUnits], reads: &[FamilyUnits], took: Duration) -> Value {
    let round = |x: f64| (x * 100.0).round() / 100.0;
    let rows = |list: &[FamilyUnits], limit: f64| -> Vec<Value> {
        list.iter()
            .filter(|f| f.per_delivery > 0.0)
            .map(|f| {
                json!({
                    "table": f.table,
                    "index": f.index,
                    "family": f.family,
                    "scope": f.scope,
                    "keys": f.keys,
                    "units_per_delivery": f.per_delivery,
                    "units_per_delivery_one_key": f.per_delivery_one_key,
                    "ceiling_per_s": f.ceiling(limit).map(|c| c.round()),
                })
            })
            .collect()
    };
    let hottest = |list: &[FamilyUnits], limit: f64| -> Map<String, Value> {
        let mut m = Map::new();
        for scope in [Scope::Tenant, Scope::Channel, Scope::Deployment] {
            if let Some(f) = list
                .iter()
                .filter(|f| f.scope == scope)
                .max_by(|a, b| a.per_delivery_one_key.total_cmp(&b.per_delivery_one_key))
            {
                m.insert(
                    serde_json::to_value(scope)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    json!({
                        "family": format!("{} {}: {}", f.table,
                                          f.index.as_deref().unwrap_or("(table)"), f.family),
                        "ceiling_per_s": f.ceiling(limit).map(|c| c.round()),
                    }),
                );
            }
        }
        m
    };
    let total = |list: &[FamilyUnits]| round(list.iter().map(|f| f.per_delivery).sum());
    let indexes = |list: &[FamilyUnits]| {
        round(
            list.iter()
                .filter(|f| f.index.is_some())
                .map(|f| f.per_delivery)
                .sum(),
        )
    };
    json!({
        "write_units_per_delivery": total(writes),
        "of_which_indexes": indexes(writes),
        "read_units_per_delivery": total(reads),
        "hottest_write": hottest(writes, PARTITION_WRITE_UNITS),
        "hottest_read": hottest(reads, PARTITION_READ_UNITS),
        "writes": rows(writes, PARTITION_WRITE_UNITS),
        "reads": rows(reads, PARTITION_READ_UNITS),
        "seconds": round(took.as_secs_f64()),
    })
}
