//! `bench hot-tenant`: one tenant at 5,000 deliveries a second over 50 channels, and one
//! channel at 2,000 a second, on the in-process backend with its latency model and DynamoDB's
//! per-partition limits (`converger_memory::capacity`: 1,000 write and 3,000 read units a
//! second per key of every table and index, throttles refused whole and retried as the SDK
//! does). Cases:
//! - `tenant_default_shards`: the tenant as created (the default tier's 2 listing shards);
//! - `tenant_64_shards`: the same tenant after an operator raised its listing shards to 64,
//!   on a deployment of 64 due shards;
//! - `tenant_shards_grow`: the tenant as created, for four times as long, its listing shards
//!   granted by the changes function as its rate calls for them (`converger_core::shards`,
//!   the shard rate divided by the scale as the limits are), the producer's view of the
//!   tenant read again every [`TENANT_REFRESH`] (the API's tenant cache);
//! - `one_channel`: one channel of that tenant at the channel rate, with `max_in_flight`
//!   2,000;
//! - `one_channel_rate_limited`: one channel at 5,000 a second with `rate_limit` 5,000/s
//!   (every request takes a token of the shared schedule).
//!
//! Two cores cannot run 5,000 deliveries a second, so the scenario runs at a `scale`-th of the
//! rates with every partition's limits divided by the same `scale` (default 10: 500/s against
//! 100 write units a second per key): each key sees the share of its limit that the full rate
//! would give it. It prints, per case, the rates (the full ones and those run), deliveries and
//! refusals, the throttled requests by key family, what the SDK's retries saved and what they
//! could not, units per delivery by family with the busiest key's share of its limit, and
//! ingest-to-receiver p50/p95/p99.

use super::{IsolatedReceiver, activity, summary, tenant, webhook_limited};
use converger_core::{ChannelId, Tier};
use converger_memory::{CapacityModel, CapacityTally, LatencyModel};
use converger_pipeline::PipelineConfig;
use converger_ports::capacity::Partition;
use converger_stack::inprocess::InProcess;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The deployed sweeper's schedule (`rate(1 minute)` in the template).
const SWEEP_PERIOD: Duration = Duration::from_secs(60);

/// How often the growing case's producer reads its tenant again (the API's tenant cache holds
/// it up to `TENANT_CACHE_TTL_MS`, 30 s by default; shorter here so that a 40 s run shows the
/// layout after the grant).
const TENANT_REFRESH: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Options {
    /// Seconds each case offers its load.
    pub seconds: u64,
    /// The rates and the partitions' limits are divided by this.
    pub scale: f64,
    /// The tenant's rate and its channels.
    pub tenant_rate: u32,
    pub channels: usize,
    /// The one channel's rate.
    pub channel_rate: u32,
    /// The rate-limited channel's rate and limit (0: the case is not run).
    pub rate_limited: u32,
    /// Runs only the case of this name.
    pub case: Option<String>,
    /// Whether the changes function runs in every case (as deployed), or only where the
    /// shards grow (a smoke run at a hundredth of the limits, where its counters' one key per
    /// tenant would throttle the other cases' figures).
    pub changes_everywhere: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seconds: 10,
            scale: 10.0,
            tenant_rate: 5000,
            channels: 50,
            channel_rate: 2000,
            rate_limited: 5000,
            case: None,
            changes_everywhere: true,
        }
    }
}

struct Case {
    name: &'static str,
    rate: u32,
    channels: usize,
    /// The tenant's listing shards (`None`: as created).
    shards: Option<u32>,
    /// The deployment's due shards (`None`: the default 16).
    due_shards: Option<u32>,
    /// The channels' flow settings.
    breaker: Value,
    /// The channels' outbound rate limit per second at the full rate (run at a `scale`-th).
    rate_limit: Option<u32>,
    /// Run this many times `seconds`, the tenant read again as it runs (its shards granted).
    grows: Option<u64>,
}

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let cases = [
        Case {
            name: "tenant_default_shards",
            rate: o.tenant_rate,
            channels: o.channels,
            shards: None,
            due_shards: None,
            breaker: json!({}),
            rate_limit: None,
            grows: None,
        },
        Case {
            name: "tenant_64_shards",
            rate: o.tenant_rate,
            channels: o.channels,
            shards: Some(64),
            due_shards: Some(64),
            breaker: json!({}),
            rate_limit: None,
            grows: None,
        },
        Case {
            name: "one_channel",
            rate: o.channel_rate,
            channels: 1,
            shards: Some(64),
            due_shards: Some(64),
            // The in-flight cap such a channel needs: 2,000 a second at 50 ms to a second
            // each (the default, half the tier's concurrency, caps a channel near 200/s).
            breaker: json!({"max_in_flight": 2000}),
            rate_limit: None,
            grows: None,
        },
        Case {
            name: "one_channel_rate_limited",
            rate: o.rate_limited,
            channels: 1,
            shards: Some(64),
            due_shards: Some(64),
            breaker: json!({"max_in_flight": 2000}),
            // The limit it is offered: every request takes a token of the shared schedule.
            rate_limit: Some(o.rate_limited),
            grows: None,
        },
        Case {
            name: "tenant_shards_grow",
            rate: o.tenant_rate,
            channels: o.channels,
            shards: None,
            due_shards: Some(64),
            breaker: json!({}),
            rate_limit: None,
            grows: Some(4),
        },
    ];
    let model = CapacityModel::dynamodb().scaled_down(o.scale);
    let mut out = Map::new();
    for case in cases
        .iter()
        .filter(|c| o.case.as_deref().is_none_or(|n| n == c.name))
        .filter(|c| c.rate > 0)
    {
        let config = PipelineConfig {
            allowlist: converger_core::net::Allowlist::loopback(),
            // Scaled as the partitions' limits are.
            listing_shard_rate: converger_core::shards::SHARD_RATE / o.scale,
            ..PipelineConfig::default()
        };
        let limits = converger_stack::inprocess::Limits {
            capacity: Some(model),
            due_shards: case.due_shards,
            // The changes function runs as deployed: its counters are charged, and it grants
            // listing shards.
            changes: o.changes_everywhere || case.grows.is_some(),
            ..converger_stack::inprocess::Limits::default()
        };
        // The sweeper runs as deployed (every minute): what throttled writes leave behind
        // is found as it would be in production, not waited for forever.
        let rt = InProcess::start_with(
            Some(LatencyModel::from_env()?),
            limits,
            config,
            Some(SWEEP_PERIOD),
        )?;
        let r = drive(&rt, case, &o, &model).await;
        rt.stop().await;
        out.insert(case.name.into(), r?);
    }
    Ok(super::emit(json!({
        "scenario": "hot-tenant",
        "backend": "in-process (latency model, per-partition limits)",
        "scale": o.scale,
        "partition_limits_per_s_run": {"write_units": model.write_units_per_s, "read_units": model.read_units_per_s},
        "seconds": o.seconds,
        "cases": out,
    })))
}

async fn drive(
    rt: &InProcess,
    case: &Case,
    o: &Options,
    model: &CapacityModel,
) -> Result<Value, String> {
    let p = &rt.pipeline;
    let receiver = IsolatedReceiver::start().await?;
    let (mut t, _) = tenant(p, Tier::Default).await?;
    if let Some(n) = case.shards {
        t = p
            .tenants()
            .set_delivery_shards(&t.id, n)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the tenant is gone")?;
    }
    let mut channels: Vec<ChannelId> = Vec::with_capacity(case.channels);
    for _ in 0..case.channels {
        channels.push(
            webhook_limited(
                p,
                &t,
                &receiver.url,
                json!({}),
                case.breaker.clone(),
                case.rate_limit
                    .map(|r| format!("{}/s", (f64::from(r) / o.scale).round().max(1.0))),
            )
            .await?
            .id,
        );
    }
    let capacity = rt.store.capacity().ok_or("no capacity model")?;
    let run_rate = (f64::from(case.rate) / o.scale).max(1.0);
    let seconds = o.seconds * case.grows.unwrap_or(1);
    // When each activity is sent: at the rate throughout, or, for a growing tenant, a ramp
    // from a tenth of it over the first half of the run (load that grows, as a tenant's does;
    // a step from nothing to the full rate is met by the shards an operator sets ahead).
    let offsets = send_offsets(run_rate, seconds as f64, case.grows.is_some());
    let n = offsets.len();
    // The producer's view of its tenant, read again as it runs when its shards may grow; when
    // it first sees a grant, the throttles so far.
    let current = Arc::new(std::sync::RwLock::new(t.clone()));
    let grant_seen: Arc<Mutex<Option<(f64, u64)>>> = Arc::default();
    let refresher = case.grows.map(|_| {
        let (store, id, current, grant_seen) = (
            rt.store.clone(),
            t.id.clone(),
            current.clone(),
            grant_seen.clone(),
        );
        let started = Instant::now();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TENANT_REFRESH).await;
                let Ok(Some(now)) = converger_ports::TenantStore::get_tenant(&*store, &id).await
                else {
                    continue;
                };
                if now.shard_grants.latest.is_some()
                    && let Ok(mut g) = grant_seen.lock()
                    && g.is_none()
                {
                    let so_far = store.capacity().map_or(0, |c| c.throttled_so_far());
                    *g = Some((started.elapsed().as_secs_f64(), so_far));
                }
                if let Ok(mut c) = current.write() {
                    *c = now;
                }
            }
        })
    });
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let _ = capacity.take();
    let started = Instant::now();
    // Open loop: activity i is due at i / rate, whatever the earlier ones are doing.
    let mut tasks = Vec::with_capacity(n);
    for (i, offset) in offsets.iter().enumerate() {
        let due = started + Duration::from_secs_f64(*offset);
        tokio::time::sleep_until(due.into()).await;
        let t = current.read().map_or_else(|_| t.clone(), |c| c.clone());
        let (p, ch) = (p.clone(), channels[i % channels.len()].clone());
        let (sent, refused) = (sent.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            if let Ok(mut m) = sent.lock() {
                m.insert(i as u64, Instant::now());
            }
            if p.intake().ingest(&t, activity(&ch, i)).await.is_err() {
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
    receiver
        .wait_for_unique(n - refused, Duration::from_secs(o.seconds + 300))
        .await;
    let took = started.elapsed();
    if let Some(r) = refresher {
        r.abort();
    }
    let throttled_at_end = capacity.throttled_so_far();
    let tally = capacity.take();
    let grown = converger_ports::TenantStore::get_tenant(&*rt.store, &t.id)
        .await
        .ok()
        .flatten();
    let mut growth = case.grows.map(|_| {
        let seen = grant_seen.lock().ok().and_then(|g| *g);
        json!({
            "tenant_refresh_s": TENANT_REFRESH.as_secs(),
            "grant_seen_after_s": seen.map(|(s, _)| (s * 10.0).round() / 10.0),
            "throttled_before_grant_seen": seen.map(|(_, n)| n),
            "throttled_after_grant_seen": seen.map(|(_, n)| throttled_at_end.saturating_sub(n)),
            "granted": grown.as_ref().and_then(|g| g.shard_grants.latest).map(|g| g.shards),
        })
    });
    let sent = sent.lock().map(|m| m.clone()).unwrap_or_default();
    let mut latencies = Vec::new();
    // Those of activities sent once the producer saw the grant (placed over its shards).
    let mut after_grant = Vec::new();
    let grant_at = grant_seen
        .lock()
        .ok()
        .and_then(|g| *g)
        .map(|(s, _)| started + Duration::from_secs_f64(s));
    let (got, arrivals) = receiver.first_arrivals(&sent);
    for (at, ms) in arrivals {
        latencies.push(ms);
        if grant_at.is_some_and(|g| at >= g) {
            after_grant.push(ms);
        }
    }
    if let Some(Value::Object(g)) = growth.as_mut() {
        g.insert(
            "ingest_to_receiver_after_grant_seen".into(),
            summary(after_grant),
        );
    }
    Ok(json!({
        "rate_per_s": case.rate,
        "rate_per_s_run": run_rate,
        "channels": case.channels,
        "listing_shards": t.delivery_shards(),
        "growth": growth,
        "due_shards": converger_ports::DeliveryQueries::due_shards(&*rt.store),
        "activities": n,
        "refused": refused,
        "delivered": got,
        "duplicates": receiver.requests().len().saturating_sub(got),
        "seconds_offered": seconds,
        "seconds": (took.as_secs_f64() * 100.0).round() / 100.0,
        "ingest_to_receiver": summary(latencies),
        "capacity": report(&tally, n, seconds as f64, model),
    }))
}

/// The seconds after the start at which each activity is sent: `rate` a second for `seconds`,
/// or, with `ramp`, from a tenth of `rate` rising evenly to `rate` over the first half.
fn send_offsets(rate: f64, seconds: f64, ramp: bool) -> Vec<f64> {
    let half = seconds / 2.0;
    let at = |t: f64| {
        if ramp && t < half {
            rate * (0.1 + 0.9 * t / half)
        } else {
            rate
        }
    };
    let mut v = Vec::new();
    let mut t = 0.0;
    while t < seconds {
        v.push(t);
        t += 1.0 / at(t).max(0.1);
    }
    v
}

/// The `n` of a benchmark activity's payload, wherever the body carries it.
pub(crate) fn find_n(v: &Value) -> Option<u64> {
    match v {
        Value::Object(m) => m
            .get("payload")
            .and_then(|p| p.get("n"))
            .and_then(Value::as_u64)
            .or_else(|| m.values().find_map(find_n)),
        Value::Array(a) => a.iter().find_map(find_n),
        _ => None,
    }
}

/// The tallies by key family: units per delivery, the busiest key's rate against its limit,
/// and the requests throttled.
pub(crate) fn report(
    t: &CapacityTally,
    deliveries: usize,
    seconds: f64,
    m: &CapacityModel,
) -> Value {
    let n = deliveries.max(1) as f64;
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let family =
        |p: &Partition| format!("{} {}: {}", p.table, p.index.unwrap_or("(table)"), p.family);
    let group = |units: &BTreeMap<Partition, f64>, limit: f64| -> Value {
        let mut by: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
        for (p, u) in units {
            let e = by.entry(family(p)).or_default();
            e.0 += u;
            e.1 = e.1.max(*u);
            e.2 += 1;
        }
        let mut rows: Vec<(String, f64, f64, usize)> = by
            .into_iter()
            .map(|(f, (all, top, keys))| (f, all, top, keys))
            .collect();
        rows.sort_by(|a, b| b.2.total_cmp(&a.2));
        Value::Array(
            rows.into_iter()
                .map(|(f, all, top, keys)| {
                    json!({
                        "family": f,
                        "keys": keys,
                        "units_per_delivery": round(all / n),
                        // The busiest key's average rate, as a share of a partition's limit.
                        "busiest_key_share_of_limit": round(top / seconds.max(1.0) / limit),
                    })
                })
                .collect(),
        )
    };
    let mut throttled: BTreeMap<String, u64> = BTreeMap::new();
    for (p, c) in &t.throttled {
        *throttled.entry(family(p)).or_default() += c;
    }
    json!({
        "write_units_per_delivery": round(t.writes.values().sum::<f64>() / n),
        "read_units_per_delivery": round(t.reads.values().sum::<f64>() / n),
        "throttled_requests": t.throttled.values().sum::<u64>(),
        "throttled_by_family": throttled,
        "succeeded_on_a_retry": t.retried_ok,
        "failed_after_retries": t.failed,
        "writes": group(&t.writes, m.write_units_per_s),
        "reads": group(&t.reads, m.read_units_per_s),
    })
}
