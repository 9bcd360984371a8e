//! `bench cost --shape` and `bench throughput --shape`: a deployment's shape rather than one
//! channel's, on the in-process backend with its latency model and DynamoDB's per-partition
//! limits (`converger_memory::capacity`, index entries charged). Many tenants with several
//! mostly quiet channels each (1,000 × 10 by default), an open-loop producer at a steady rate
//! spread evenly over them, receivers answering in 150 ms, a third of the tenants sending no
//! `seq` and a tenth an `Idempotency-Key`. Every call goes through the tenant API's own router
//! on an API instance, and every received batch runs on a deliver instance, as Lambda scales
//! them: an idle one, else a new one with empty caches and its own counters' flushes. The
//! changes function reads the table's stream in its batches.
//!
//! Two ways to ingest, each run on its own fresh deployment: `single` (one activity a
//! request) and `batch` (each tenant sends what it gathered every `batch_every_s`, up to 100
//! items a request: a producer with a backlog).
//!
//! `cost --shape` counts what every part bills and prices it per million deliveries:
//! DynamoDB units (tables and indexes, on demand and provisioned at 70% utilisation; the
//! stream's reads by Lambda are free), SQS requests, EventBridge events, Lambda requests and
//! GB-seconds at the template's memory and architecture, API Gateway requests, CloudWatch Logs
//! (the functions' lines, the EMF metric lines, the HTTP API's access log), X-Ray (off by
//! default; its price when on is printed apart), data out to the receivers; storage per
//! GB-month at the retention, apart. `throughput --shape` runs the same shape at ten times the
//! rate, every rate and partition limit divided by `scale` as `bench hot-tenant` does, and
//! prints what was delivered, how fast, and every throttle.

mod price;

use super::hot_tenant::find_n;
use super::{IsolatedReceiver, summary, webhook_limited};
use converger_core::{ChannelId, Tier};
use converger_memory::{CapacityModel, CapacityTally, LatencyModel};
use converger_pipeline::PipelineConfig;
use converger_stack::cfn::function as fun;
use converger_stack::inprocess::{InProcess, Limits, Pool};
use converger_stack::receiver::Reply;
use converger_stack::stack::invocations::{Invocations, Tally};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The headers of a delivery's request beside its body (signature, ids, trace context).
const REQUEST_HEADER_BYTES: u64 = 600;
#[derive(Debug, Clone)]
pub struct Options {
    pub tenants: usize,
    /// Channels per tenant.
    pub channels: usize,
    /// Deliveries a second offered (the full rate; run at `rate / scale`).
    pub rate: f64,
    pub seconds: u64,
    /// Rates and partition limits are divided by this.
    pub scale: f64,
    pub receiver_ms: u64,
    /// How often a batch producer sends what it gathered.
    pub batch_every_s: u64,
    /// Which ways to ingest (`single`, `batch`).
    pub modes: Vec<Mode>,
    /// Whether the channels start with their windows grown to their cap, as a deployment's
    /// that has been running (`false`: new channels, whose windows grow as they succeed).
    pub grown_windows: bool,
    /// How the scale is taken: `true` (the cost), by running a `scale`-th of the tenants at
    /// the same rate each, so that every tenant's and channel's rate, and so what its
    /// counters, caches and batches amortise, is the full shape's; `false` (the throughput),
    /// by dividing every rate and partition limit, as `bench hot-tenant` does.
    pub fewer_tenants: bool,
    /// Whether usage goes through the usage log and its fold (the template's `UsageFold`,
    /// on by default) or every counter is written per stream batch (`--direct-usage`).
    pub usage_fold: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Single,
    Batch,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Batch => "batch",
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tenants: 1000,
            channels: 10,
            rate: 1000.0,
            seconds: 60,
            scale: 1.0,
            receiver_ms: 150,
            batch_every_s: 10,
            modes: vec![Mode::Single, Mode::Batch],
            grown_windows: true,
            fewer_tenants: true,
            usage_fold: true,
        }
    }
}

/// A smoke run's sizes: 20 tenants of 3 channels at 20 a second for 3 s, both ways in,
/// the batches sent every second.
pub fn smoke() -> Options {
    Options {
        tenants: 20,
        channels: 3,
        rate: 20.0,
        seconds: 3,
        scale: 1.0,
        receiver_ms: 150,
        batch_every_s: 1,
        modes: vec![Mode::Single, Mode::Batch],
        grown_windows: true,
        fewer_tenants: true,
        usage_fold: true,
    }
}

/// What one run counted.
pub(super) struct Counted {
    mode: Mode,
    offered: usize,
    accepted: usize,
    delivered: usize,
    api_requests: u64,
    refused_requests: u64,
    seconds: f64,
    units: CapacityTally,
    sqs: converger_memory::QueueRequests,
    events: u64,
    /// Of `events`, `delivery.status_changed` (the bus gets none with `BusStatusEvents`
    /// disabled).
    status_events: u64,
    calls: BTreeMap<&'static str, Tally>,
    instances: BTreeMap<&'static str, usize>,
    logs: (u64, u64),
    metric_lines: (u64, u64),
    bytes_out: u64,
    stored_bytes: f64,
    latency: Value,
    model: CapacityModel,
}

pub async fn cost(o: Options) -> Result<Value, String> {
    cost::COUNTING_LOGS.store(true, Ordering::Relaxed);
    let r = cost_runs(o).await;
    cost::COUNTING_LOGS.store(false, Ordering::Relaxed);
    converger_pipeline::metrics::set_enabled(false);
    r
}

use super::cost;

async fn cost_runs(o: Options) -> Result<Value, String> {
    let mut runs = Vec::new();
    for mode in &o.modes {
        runs.push(run_once(&o, *mode).await?);
    }
    let template = price::Template::read()?;
    let mut per_million = Map::new();
    let mut modes = Map::new();
    for c in &runs {
        let (demand, provisioned, lines) = price::priced(c, &template);
        per_million.insert(
            format!("{}_on_demand", c.mode.name()),
            json!(round(demand, 2)),
        );
        per_million.insert(
            format!("{}_provisioned", c.mode.name()),
            json!(round(provisioned, 2)),
        );
        modes.insert(c.mode.name().into(), lines);
    }
    Ok(super::emit(json!({
        "scenario": "cost-shape",
        "backend": "in-process (latency model, per-partition limits, index entries charged), every call through the API's router and each batch on a deliver instance as Lambda scales them",
        "shape": shape(&o),
        "per_million": per_million,
        "targets": {"single_on_demand": 5.0, "batch_on_demand": 3.3, "batch_provisioned": 2.0},
        "modes": modes,
        "template": {"memory_mb": template.memory_mb, "architecture": template.architecture},
    })))
}

pub async fn throughput(o: Options) -> Result<Value, String> {
    let mut cases = Map::new();
    for mode in &o.modes {
        let c = run_once(&o, *mode).await?;
        let n = c.delivered.max(1) as f64;
        cases.insert(
            mode.name().into(),
            json!({
                "offered": c.offered,
                "accepted": c.accepted,
                "delivered": c.delivered,
                "refused_requests": c.refused_requests,
                "api_requests_per_s_run": round(c.api_requests as f64 / o.seconds as f64, 1),
                // At the full rate a batch producer gathers `scale` times more a period.
                "api_requests_per_s_at_full_rate": round(requests_at_full_rate(&o, *mode), 1),
                "delivered_per_s_full": round(c.delivered as f64 / c.seconds.max(0.001) * o.scale, 1),
                "seconds": round(c.seconds, 2),
                "ingest_to_receiver": c.latency,
                "instances": c.instances,
                "write_units_per_delivery": round(c.units.writes.values().sum::<f64>() / n, 3),
                "throttled_requests": c.units.throttled.values().sum::<u64>(),
                "throttled_by_family": price::throttles(&c.units),
                "failed_after_retries": c.units.failed,
            }),
        );
    }
    let template = price::Template::read()?;
    Ok(super::emit(json!({
        "scenario": "throughput-shape",
        "backend": "in-process (latency model, per-partition limits divided by the scale)",
        "shape": shape(&o),
        "stage_throttle_per_s": template.stage_rate,
        "cases": cases,
    })))
}

/// The tenant API's requests a second at the full rate: one an activity, or one a tenant's
/// period's gathering (of up to 100).
fn requests_at_full_rate(o: &Options, mode: Mode) -> f64 {
    match mode {
        Mode::Single => o.rate,
        Mode::Batch => {
            let per_tenant = o.rate / o.tenants.max(1) as f64 * o.batch_every_s as f64;
            let max = converger_pipeline::ingest::MAX_BATCH as f64;
            o.tenants as f64 / o.batch_every_s as f64 * (per_tenant / max).ceil().max(1.0)
        }
    }
}

fn shape(o: &Options) -> Value {
    let tenants_run = if o.fewer_tenants {
        ((o.tenants as f64 / o.scale).round() as usize).max(1)
    } else {
        o.tenants
    };
    json!({
        "tenants": o.tenants,
        "tenants_run": tenants_run,
        "partition_limits_divided_by": if o.fewer_tenants { 1.0 } else { o.scale },
        "channels_per_tenant": o.channels,
        "rate_per_s": o.rate,
        "rate_per_s_run": o.rate / o.scale,
        "scale": o.scale,
        "seconds": o.seconds,
        "receiver_ms": o.receiver_ms,
        "without_seq": "a third of tenants",
        "with_idempotency_key": "a tenth of tenants",
        "batch_every_s": o.batch_every_s,
        "windows": if o.grown_windows { "grown to their cap" } else { "new" },
        "usage": if o.usage_fold { "logged and folded once a minute" } else { "every counter per stream batch" },
    })
}

pub(super) fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// A tenant as its producer sees it.
struct Producer {
    key: String,
    channels: Vec<ChannelId>,
    seq: bool,
    idempotent: bool,
}

/// A stable spread of `i` over `0..n`.
fn pick(i: u64, salt: &str, n: usize) -> usize {
    (converger_core::ids::stable_hash(&format!("{salt}{i}")) as usize) % n.max(1)
}

async fn run_once(o: &Options, mode: Mode) -> Result<Counted, String> {
    let limit_scale = if o.fewer_tenants { 1.0 } else { o.scale };
    let model = CapacityModel::dynamodb().scaled_down(limit_scale);
    let invocations = Invocations::new();
    let config = PipelineConfig {
        allowlist: converger_core::net::Allowlist::loopback(),
        listing_shard_rate: converger_core::shards::SHARD_RATE / limit_scale,
        usage_fold: o.usage_fold,
        ..PipelineConfig::default()
    };
    let limits = Limits {
        capacity: Some(model),
        changes: true,
        instances: true,
        invocations: Some(invocations.clone()),
        ..Limits::default()
    };
    let rt = InProcess::start_with(
        Some(LatencyModel::from_env()?),
        limits,
        config,
        Some(Duration::from_secs(60)),
    )?;
    let r = drive(&rt, o, mode, &invocations).await;
    rt.stop().await;
    r
}

async fn drive(
    rt: &InProcess,
    o: &Options,
    mode: Mode,
    invocations: &Invocations,
) -> Result<Counted, String> {
    use futures::StreamExt;
    let p = &rt.pipeline;
    let receiver = IsolatedReceiver::start_with(
        Reply::status(200).delay(Duration::from_millis(o.receiver_ms)),
    )
    .await?;
    // The tenants and their channels, made before anything is counted.
    let tenants = if o.fewer_tenants {
        ((o.tenants as f64 / o.scale).round() as usize).max(1)
    } else {
        o.tenants
    };
    let producers: Vec<Producer> = futures::stream::iter(0..tenants)
        .map(|i| {
            let url = receiver.url.clone();
            async move {
                let (t, key) = p
                    .tenants()
                    .create_tenant(&format!("shape-{i}"), Tier::Default)
                    .await
                    .map_err(|e| e.to_string())?;
                let mut channels = Vec::with_capacity(o.channels);
                for _ in 0..o.channels {
                    channels.push(
                        webhook_limited(p, &t, &url, json!({}), json!({}), None)
                            .await?
                            .id,
                    );
                }
                Ok::<_, String>(Producer {
                    key,
                    channels,
                    seq: i % 3 != 0,
                    idempotent: i % 10 == 0,
                })
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    // A running deployment's channels have grown their windows to their cap; a new channel's
    // grows one success at a time, each written by the instance that saw it. Set as grown,
    // the run prices a deployment that has been running, not its first minutes.
    if o.grown_windows {
        let cap = converger_core::flow::tier_share(Tier::Default, p.config().tier_concurrency);
        let grown = converger_ports::Settle {
            free: None,
            pass_to: None,
            outcome: converger_ports::Outcome::Success,
            failed: false,
            window: Some(cap),
            now: converger_core::Timestamp::now(),
        };
        for ch in producers.iter().flat_map(|pr| &pr.channels) {
            converger_ports::FlowStore::settle(&*rt.store, ch, &grown)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let producers = Arc::new(producers);
    // The API's instances, each its own router over its own pipeline.
    let api = {
        let made = rt.instances.clone();
        Arc::new(Pool::new(move || {
            let state = converger_http::AppState::new(Arc::new(made.start()?), None);
            Ok(converger_http::app::tenant_api(state))
        }))
    };
    // Nothing of the set-up is counted.
    let capacity = rt.store.capacity().ok_or("no capacity model")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = capacity.take();
    let _ = rt.queue.take_requests();
    let _ = invocations.take();
    let events_before = rt.events.published.lock().map_or(0, |e| e.len());
    let _ = cost::take_logs();
    converger_pipeline::metrics::count_only();
    let _ = converger_pipeline::metrics::take_counted();
    let deliver_before = rt.deliver.started();

    let run_rate = (o.rate / o.scale).max(0.1);
    let n = (run_rate * o.seconds as f64).round() as usize;
    let seqs: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let gathered: Arc<Mutex<HashMap<usize, Vec<Value>>>> = Arc::default();
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let counts = Arc::new(Calls::default());
    let stored = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    // A batch producer sends what it gathered every `batch_every_s`, each tenant at its own
    // phase (tenant k at k / tenants of the period).
    let flush_every = Duration::from_secs(o.batch_every_s).as_secs_f64();
    let mut flushed = 0usize;
    for i in 0..n {
        let due = started + Duration::from_secs_f64(i as f64 / run_rate);
        tokio::time::sleep_until(due.into()).await;
        let ti = pick(i as u64, "tenant", producers.len());
        let pr = &producers[ti];
        let ch = &pr.channels[pick(i as u64, "channel", pr.channels.len())];
        let conversation = format!("conv-{ti}-{}", pick(i as u64, "conv", 20));
        let mut item = json!({
            "conversation_id": conversation,
            "channel_ids": [ch],
            "payload": {
                "kind": "message",
                "n": i,
                "from": {"id": format!("user-{}", pick(i as u64, "user", 500)), "name": "A. Customer"},
                "text": "Thanks, the order arrived this morning and everything looks right. One question about the invoice address, though.",
            },
        });
        if pr.seq
            && let Ok(mut s) = seqs.lock()
        {
            let next = s.entry(conversation).or_default();
            *next += 1;
            item["seq"] = json!(*next);
        }
        if let Ok(mut m) = sent.lock() {
            m.insert(i as u64, Instant::now());
        }
        match mode {
            Mode::Single => tasks.push(tokio::spawn(call(
                api.clone(),
                producers.clone(),
                ti,
                "/api/v1/activities",
                item,
                counts.clone(),
                invocations.clone(),
                stored.clone(),
            ))),
            Mode::Batch => {
                if let Ok(mut g) = gathered.lock() {
                    g.entry(ti).or_default().push(item);
                }
            }
        }
        if mode == Mode::Batch {
            let due = if i + 1 == n {
                usize::MAX
            } else {
                (started.elapsed().as_secs_f64() / flush_every * producers.len() as f64) as usize
            };
            let mut turn = Vec::new();
            while flushed < due && turn.len() < producers.len() {
                turn.push(flushed % producers.len());
                flushed += 1;
            }
            let all: Vec<(usize, Vec<Value>)> = gathered
                .lock()
                .map(|mut g| turn.iter().filter_map(|t| g.remove_entry(t)).collect())
                .unwrap_or_default();
            for (ti, items) in all {
                // A gathered item's wait for its batch is the producer's, not the platform's.
                if let Ok(mut m) = sent.lock() {
                    let now = Instant::now();
                    for n in items.iter().filter_map(find_n) {
                        m.insert(n, now);
                    }
                }
                for chunk in items.chunks(converger_pipeline::ingest::MAX_BATCH) {
                    tasks.push(tokio::spawn(call(
                        api.clone(),
                        producers.clone(),
                        ti,
                        "/api/v1/activities/batch",
                        json!({"activities": chunk}),
                        counts.clone(),
                        invocations.clone(),
                        stored.clone(),
                    )));
                }
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let accepted = counts.accepted.load(Ordering::Relaxed);
    receiver
        .wait_for_unique(accepted, Duration::from_secs(o.seconds + 120))
        .await;
    let took = started.elapsed().as_secs_f64();
    // The stream's last batches and the watch copies' turns (a first try's copy comes back
    // after the watch delay and is dropped) are part of what a delivery costs.
    let watch = u64::from(converger_pipeline::PipelineConfig::default().watch_delay_s);
    tokio::time::sleep(Duration::from_secs(watch + 3)).await;
    // The usage log's fold of the run's periods, as the scheduler would run it once each
    // has closed (a run's periods are folded at once: nothing is logged after it).
    if o.usage_fold {
        let now = converger_core::time::now_ms();
        p.usage_fold()
            .run_to(converger_core::usage::fold::period_of(now))
            .await
            .map_err(|e| format!("usage fold: {e}"))?;
    }
    let sent = sent.lock().map(|m| m.clone()).unwrap_or_default();
    let (delivered, arrivals) = receiver.first_arrivals(&sent);
    let latencies: Vec<f64> = arrivals.into_iter().map(|(_, ms)| ms).collect();
    let bytes_out: u64 = receiver
        .requests()
        .iter()
        .map(|r| r.body.len() as u64 + REQUEST_HEADER_BYTES)
        .sum();
    let (events, status_events) = rt.events.published.lock().map_or((0, 0), |e| {
        let new = e.get(events_before..).unwrap_or_default();
        let status = new
            .iter()
            .filter(|e| e.detail_type == converger_ports::EventType::DeliveryStatusChanged)
            .count();
        (new.len() as u64, status as u64)
    });
    let calls = invocations.take();
    let mut instances = BTreeMap::new();
    instances.insert(fun::API, api.started());
    instances.insert(fun::DELIVER, rt.deliver.started() - deliver_before);
    Ok(Counted {
        mode,
        offered: n,
        accepted,
        delivered,
        api_requests: counts.requests.load(Ordering::Relaxed),
        refused_requests: counts.refused.load(Ordering::Relaxed),
        seconds: took,
        units: capacity.take(),
        sqs: rt.queue.take_requests(),
        events,
        status_events,
        calls,
        instances,
        logs: cost::take_logs(),
        metric_lines: converger_pipeline::metrics::take_counted(),
        bytes_out,
        stored_bytes: stored.load(Ordering::Relaxed) as f64 / accepted.max(1) as f64,
        latency: summary(latencies),
        model: capacity.model,
    })
}

#[derive(Default)]
struct Calls {
    requests: AtomicU64,
    refused: AtomicU64,
    accepted: AtomicUsize,
}

/// One request to the tenant API, on an instance of the API function.
#[allow(clippy::too_many_arguments)]
async fn call(
    api: Arc<Pool<axum::Router>>,
    producers: Arc<Vec<Producer>>,
    ti: usize,
    path: &'static str,
    body: Value,
    counts: Arc<Calls>,
    invocations: Invocations,
    stored: Arc<AtomicU64>,
) {
    use tower::ServiceExt;
    let pr = &producers[ti];
    let mut req = axum::http::Request::post(path)
        .header("authorization", format!("Bearer {}", pr.key))
        .header("content-type", "application/json");
    if pr.idempotent {
        req = req.header(
            "idempotency-key",
            format!("k-{}", converger_core::ActivityId::generate().as_str()),
        );
    }
    let Ok(mut req) = req.body(axum::body::Body::from(body.to_string())) else {
        return;
    };
    req.extensions_mut()
        .insert(converger_http::web::SourceIp(std::net::IpAddr::from([
            203,
            0,
            113,
            (ti % 250) as u8,
        ])));
    counts.requests.fetch_add(1, Ordering::Relaxed);
    let Ok(instance) = api.take() else { return };
    let started = Instant::now();
    let res = (*instance).clone().oneshot(req).await;
    let bytes = match res {
        Ok(r) if r.status().is_success() => axum::body::to_bytes(r.into_body(), 1 << 24).await.ok(),
        _ => None,
    };
    invocations.record(fun::API, started.elapsed());
    api.give(instance);
    let Some(bytes) = bytes else {
        counts.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // An activity's answer is its row and its deliveries' rows: what is stored for it.
    let taken = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) if m.contains_key("results") || m.contains_key("items") => m
            .values()
            .filter_map(Value::as_array)
            .flatten()
            .filter(|r| r.get("error").is_none())
            .count(),
        Ok(_) => 1,
        Err(_) => 0,
    };
    counts.accepted.fetch_add(taken, Ordering::Relaxed);
    stored.fetch_add(bytes.len() as u64, Ordering::Relaxed);
}
