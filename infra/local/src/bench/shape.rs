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

use super::hot_tenant::find_n;
use super::{IsolatedReceiver, summary, webhook_limited};
use crate::cfn::function as fun;
use crate::inprocess::{InProcess, Limits, Pool};
use crate::receiver::Reply;
use crate::stack::invocations::{Invocations, Tally};
use converger_core::{ChannelId, Tier};
use converger_memory::{CapacityModel, CapacityTally, LatencyModel};
use converger_pipeline::PipelineConfig;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// List prices, US East (N. Virginia), dollars.
const PRICE_WRITE_UNIT_HOUR: f64 = 0.000_65;
const PRICE_READ_UNIT_HOUR: f64 = 0.000_13;
/// Provisioned capacity is bought for the peak: this share of it is used.
const PROVISIONED_UTILISATION: f64 = 0.7;
const PRICE_GB_SECOND_ARM: f64 = 0.000_013_333_4;
const PRICE_XRAY_TRACE: f64 = 5.0 / 1e6;
const PRICE_DATA_OUT_GB: f64 = 0.09;
const PRICE_STORAGE_GB_MONTH: f64 = 0.25;
const PRICE_PITR_GB_MONTH: f64 = 0.20;
/// An HTTP API access log line in the template's format, filled in (an estimate: API
/// Gateway writes it, not the functions).
const ACCESS_LOG_BYTES: u64 = 330;
/// The headers of a delivery's request beside its body (signature, ids, trace context).
const REQUEST_HEADER_BYTES: u64 = 600;
/// The share of requests X-Ray records when turned on (its default rule: the first each
/// second, then 5%).
const XRAY_SAMPLED: f64 = 0.05;

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
    /// How the scale is taken: `true` (the cost), by running a `scale`-th of the tenants at
    /// the same rate each, so that every tenant's and channel's rate, and so what its
    /// counters, caches and batches amortise, is the full shape's; `false` (the throughput),
    /// by dividing every rate and partition limit, as `bench hot-tenant` does.
    pub fewer_tenants: bool,
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
            fewer_tenants: true,
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
        fewer_tenants: true,
    }
}

/// What one run counted.
struct Counted {
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
    let template = Template::read()?;
    let mut per_million = Map::new();
    let mut modes = Map::new();
    for c in &runs {
        let (demand, provisioned, lines) = priced(c, &template);
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
                "throttled_by_family": throttles(&c.units),
                "failed_after_retries": c.units.failed,
            }),
        );
    }
    let template = Template::read()?;
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
    })
}

fn round(x: f64, places: i32) -> f64 {
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
    let unique = |rs: &[crate::receiver::Received]| {
        rs.iter()
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter_map(|b| find_n(&b))
            .collect::<std::collections::HashSet<u64>>()
            .len()
    };
    let deadline = Instant::now() + Duration::from_secs(o.seconds + 120);
    while unique(&receiver.requests()) < accepted && Instant::now() < deadline {
        receiver
            .wait_for(receiver.requests().len() + 1, Duration::from_millis(500))
            .await;
    }
    let took = started.elapsed().as_secs_f64();
    // The stream's last batches and the watch copies' turns (a first try's copy comes back
    // after the watch delay and is dropped) are part of what a delivery costs.
    let watch = u64::from(converger_pipeline::PipelineConfig::default().watch_delay_s);
    tokio::time::sleep(Duration::from_secs(watch + 3)).await;
    let requests = receiver.requests();
    let sent = sent.lock().map(|m| m.clone()).unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    let mut latencies = Vec::new();
    let mut bytes_out = 0u64;
    for r in &requests {
        bytes_out += r.body.len() as u64 + REQUEST_HEADER_BYTES;
        let Some(i) = serde_json::from_slice::<Value>(&r.body)
            .ok()
            .and_then(|b| find_n(&b))
        else {
            continue;
        };
        if seen.insert(i)
            && let Some(at) = sent.get(&i)
        {
            latencies.push(r.at.saturating_duration_since(*at).as_secs_f64() * 1000.0);
        }
    }
    let events = rt
        .events
        .published
        .lock()
        .map_or(0, |e| e.len().saturating_sub(events_before)) as u64;
    let calls = invocations.take();
    let mut instances = BTreeMap::new();
    instances.insert(fun::API, api.started());
    instances.insert(fun::DELIVER, rt.deliver.started() - deliver_before);
    let delivered = seen.len();
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

/// What the template deploys that prices depend on.
struct Template {
    memory_mb: BTreeMap<String, u32>,
    architecture: String,
    stage_rate: Option<f64>,
    pitr: bool,
    xray: bool,
}

impl Template {
    fn read() -> Result<Self, String> {
        let t = crate::cfn::template()?;
        let global = t["Globals"]["Function"]["MemorySize"]
            .as_u64()
            .unwrap_or(128) as u32;
        let mut memory_mb = BTreeMap::new();
        if let Some(resources) = t["Resources"].as_mapping() {
            for (k, r) in resources {
                if r["Type"].as_str() == Some("AWS::Serverless::Function")
                    && let Some(k) = k.as_str()
                {
                    let mb = r["Properties"]["MemorySize"]
                        .as_u64()
                        .map_or(global, |m| m as u32);
                    memory_mb.insert(k.to_owned(), mb);
                }
            }
        }
        let param = |name: &str| t["Parameters"][name]["Default"].clone();
        let text = serde_yaml::to_string(&t["Resources"]).unwrap_or_default();
        Ok(Self {
            memory_mb,
            architecture: param("Architecture")
                .as_str()
                .unwrap_or("x86_64")
                .to_owned(),
            stage_rate: param("ApiThrottleRate").as_f64().or_else(|| {
                param("ApiThrottleRate")
                    .as_str()
                    .and_then(|s| s.parse().ok())
            }),
            pitr: text.contains("PointInTimeRecoveryEnabled: true"),
            xray: param("XRayTracing").as_str() == Some("enabled"),
        })
    }

    fn gb_second(&self) -> f64 {
        if self.architecture == "arm64" {
            PRICE_GB_SECOND_ARM
        } else {
            cost::PRICE_LAMBDA_GB_SECOND
        }
    }
}

fn throttles(t: &CapacityTally) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (p, c) in &t.throttled {
        *out.entry(format!(
            "{} {}: {}",
            p.table,
            p.index.unwrap_or("(table)"),
            p.family
        ))
        .or_default() += c;
    }
    out
}

/// One run priced per million deliveries: (on demand, provisioned, every line).
fn priced(c: &Counted, t: &Template) -> (f64, f64, Value) {
    use super::requests::{
        PRICE_DYNAMODB_READ_UNIT, PRICE_DYNAMODB_WRITE_UNIT, PRICE_EVENTBRIDGE_EVENT,
        PRICE_SQS_REQUEST,
    };
    let n = c.delivered.max(1) as f64;
    let per = |x: f64| x / n;
    // Units by table (its indexes included).
    let mut writes_by: BTreeMap<String, f64> = BTreeMap::new();
    let mut reads_by: BTreeMap<String, f64> = BTreeMap::new();
    for (p, u) in &c.units.writes {
        *writes_by.entry(p.table.to_string()).or_default() += u;
    }
    for (p, u) in &c.units.reads {
        *reads_by.entry(p.table.to_string()).or_default() += u;
    }
    let wcu = per(writes_by.values().sum());
    let rcu = per(reads_by.values().sum());
    let mut lambda = Map::new();
    let (mut requests, mut gb_s) = (0.0, 0.0);
    for (f, tally) in &c.calls {
        let mb = f64::from(t.memory_mb.get(*f).copied().unwrap_or(256));
        let calls = per(tally.invocations as f64);
        let gbs = per(tally.billed_ms as f64) / 1000.0 * mb / 1024.0;
        requests += calls;
        gb_s += gbs;
        lambda.insert(
            (*f).to_owned(),
            json!({
                "invocations_per_delivery": round(calls, 4),
                "ms_per_invocation": round(tally.billed_ms as f64 / tally.invocations.max(1) as f64, 1),
                "gb_seconds_per_delivery": round(gbs, 6),
                "instances": c.instances.get(*f),
            }),
        );
    }
    let api = per(c.api_requests as f64);
    let log_bytes = per(
        (c.logs.0 + c.metric_lines.1 + c.api_requests * ACCESS_LOG_BYTES) as f64
            + (c.logs.1 + c.metric_lines.0 + c.api_requests) as f64 * 26.0,
    );
    // Each invocation (an API request's included) starts a trace.
    let xray_when_on = requests * XRAY_SAMPLED * PRICE_XRAY_TRACE * 1e6;
    let m = 1e6;
    let mut usd = BTreeMap::from([
        ("dynamodb_writes", wcu * PRICE_DYNAMODB_WRITE_UNIT),
        ("dynamodb_reads", rcu * PRICE_DYNAMODB_READ_UNIT),
        ("sqs", per(c.sqs.total() as f64) * PRICE_SQS_REQUEST),
        (
            "eventbridge",
            per(c.events as f64) * PRICE_EVENTBRIDGE_EVENT,
        ),
        ("api_gateway", api * cost::PRICE_API_REQUEST),
        ("lambda_requests", requests * cost::PRICE_LAMBDA_REQUEST),
        ("lambda_duration", gb_s * t.gb_second() * m),
        ("logs", log_bytes / 1e9 * cost::PRICE_LOGS_GB * m),
        ("xray", if t.xray { xray_when_on } else { 0.0 }),
        (
            "data_out",
            per(c.bytes_out as f64) / 1e9 * PRICE_DATA_OUT_GB * m,
        ),
    ]);
    let on_demand: f64 = usd.values().sum();
    let hour = 3600.0 * PROVISIONED_UTILISATION;
    let provisioned_writes = wcu * PRICE_WRITE_UNIT_HOUR / hour * m;
    let provisioned_reads = rcu * PRICE_READ_UNIT_HOUR / hour * m;
    let provisioned = on_demand - usd["dynamodb_writes"] - usd["dynamodb_reads"]
        + provisioned_writes
        + provisioned_reads;
    let mut largest: Vec<(&str, f64)> = usd.iter().map(|(k, v)| (*k, *v)).collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let stored_gb = c.stored_bytes * m / 1e9;
    let storage =
        stored_gb * (PRICE_STORAGE_GB_MONTH + if t.pitr { PRICE_PITR_GB_MONTH } else { 0.0 });
    usd.insert("dynamodb_writes_provisioned", provisioned_writes);
    usd.insert("dynamodb_reads_provisioned", provisioned_reads);
    let usd: Map<String, Value> = usd
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(round(v, 3))))
        .collect();
    let lines = json!({
        "offered": c.offered,
        "accepted": c.accepted,
        "delivered": c.delivered,
        "api_requests": c.api_requests,
        "refused_requests": c.refused_requests,
        "seconds": round(c.seconds, 1),
        "ingest_to_receiver": c.latency,
        "per_delivery": {
            "dynamodb_write_units": round(wcu, 3),
            "dynamodb_write_units_by_table": writes_by.iter().map(|(k, v)| (k.clone(), json!(round(per(*v), 3)))).collect::<Map<_, _>>(),
            "dynamodb_read_units": round(rcu, 3),
            "dynamodb_read_units_by_table": reads_by.iter().map(|(k, v)| (k.clone(), json!(round(per(*v), 3)))).collect::<Map<_, _>>(),
            "sqs_requests": {"sends": round(per(c.sqs.sends as f64), 3), "receives": round(per(c.sqs.receives as f64), 3), "deletes": round(per(c.sqs.deletes as f64), 3)},
            "eventbridge_events": round(per(c.events as f64), 3),
            "api_requests": round(api, 3),
            "lambda_requests": round(requests, 4),
            "lambda_gb_seconds": round(gb_s, 6),
            "log_bytes": round(log_bytes, 0),
            "metric_lines": round(per(c.metric_lines.0 as f64), 3),
            "bytes_out": round(per(c.bytes_out as f64), 0),
            "throttled_requests": c.units.throttled.values().sum::<u64>(),
        },
        "lambda": lambda,
        "capacity": super::hot_tenant::report(&c.units, c.delivered, c.seconds, &c.model),
        "usd_per_million": usd,
        "usd_per_million_on_demand": round(on_demand, 2),
        "usd_per_million_provisioned": round(provisioned, 2),
        "largest_lines": largest.iter().take(4).map(|(k, v)| json!({k.to_string(): round(*v, 2)})).collect::<Vec<_>>(),
        "xray_usd_per_million_when_on": round(xray_when_on, 3),
        "storage": {
            "bytes_per_delivery": round(c.stored_bytes, 0),
            "usd_per_million_per_month_kept": round(storage, 3),
            "point_in_time_recovery": t.pitr,
        },
    });
    (on_demand, provisioned, lines)
}
