//! `bench cost`: what a million deliveries cost on AWS, all in, at list prices, from what one
//! run on the local stack counts: DynamoDB capacity units (tables and indexes, by the proxy of
//! `converger_stack::capacity`), SQS requests and EventBridge events (the SDK interceptor of
//! `converger_store::counter`, and the event source mappings' receives and deletes), API
//! Gateway requests and Lambda invocations with their billed durations at the template's
//! memory sizes (the local stack's invocation meter), and the bytes the functions log (every
//! line they write at the deployed log level, formatted as Lambda's JSON log format writes it,
//! plus Lambda's own lines per invocation). Cases, each on its own channel of one tenant, one
//! activity at a time through the tenant API:
//! - `first_try`: delivered on the first try (after `--warm` of them (10) to warm the caches and the window);
//! - `aws_sqs_first_try`: the same on an `aws_sqs` channel into a queue of a second account
//!   (the emulator's, or the in-process model of it), sent as a role there;
//! - `three_attempts`: the receiver answers 503 twice, then 200;
//! - `dead_letter`: the receiver always answers 503; the policy allows 3 attempts;
//! - `first_try_1mib`: `first_try` with a 1 MiB payload, kept in the payload bucket (S3
//!   requests, its storage for the default retention, and the bytes sent to the receiver
//!   priced too: data out to the internet is this case's largest line).
//!
//! Everything is counted on the emulator; the functions' durations are timed again in a second
//! run of the same cases on the in-process backend with its latency model (each request waits
//! as long as it would in a region), since the emulator's requests, and the capacity proxy's
//! reads around each write, take several times longer than AWS's. Both are printed. What does
//! not grow with deliveries (the scheduled functions, the pollers' empty receives) is priced
//! per month apart.

use super::requests::{
    PRICE_DYNAMODB_READ_UNIT, PRICE_DYNAMODB_WRITE_UNIT, PRICE_EVENTBRIDGE_EVENT, PRICE_SQS_REQUEST,
};
use super::{tenant, webhook_with};
use converger_core::{DeliveryStatus, Tier};
use converger_stack::capacity::{Meter, Tallies};
use converger_stack::cfn::function as fun;
use converger_stack::receiver::{Receiver, Reply};
use converger_stack::stack::invocations::{Invocations, Tally};
use converger_stack::stack::{Stack, StackOptions};
use converger_store::counter::{Counts, RequestCounter};
use converger_store::dynamo::DynamoStore;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// List prices, US East (N. Virginia), in dollars per million (see `docs/benchmarks.md`);
/// DynamoDB, SQS and EventBridge are `bench requests`' own.
pub const PRICE_LAMBDA_REQUEST: f64 = 0.20;
/// Per GB-second, x86 (the template's default architecture), first price tier.
pub const PRICE_LAMBDA_GB_SECOND: f64 = 0.000_016_666_7;
/// HTTP API, first 300 million a month.
pub const PRICE_API_REQUEST: f64 = 1.00;
/// CloudWatch Logs standard ingestion, per GB.
pub const PRICE_LOGS_GB: f64 = 0.50;
/// S3 Standard: PUT (and COPY, POST, LIST) requests, GET requests, and a GB-month stored.
pub const PRICE_S3_PUT: f64 = 5.00;
pub const PRICE_S3_GET: f64 = 0.40;
pub const PRICE_S3_GB_MONTH: f64 = 0.023;
/// Data transfer out to the internet (a receiver's request), per GB, first 10 TB a month.
pub const PRICE_EGRESS_GB: f64 = 0.09;
/// The size of `first_try_1mib`'s payload, serialized.
const LARGE_PAYLOAD_BYTES: usize = 1024 * 1024;
/// How long the template's default retention (`RetentionDays`, 30) keeps a payload, in months.
const RETENTION_MONTHS: f64 = 1.0;
/// CloudWatch Logs' metadata per log event, counted in the ingested bytes.
const LOG_EVENT_OVERHEAD: u64 = 26;
/// Lambda's own lines per invocation in the JSON log format (`platform.start` and
/// `platform.report`, about 150 and 350 bytes) at its `INFO` or `DEBUG` system log level:
/// written by Lambda, not by the functions, so estimated rather than measured. At `WARN` (the
/// template's) an invocation that goes well writes none.
const PLATFORM_LOG_BYTES: u64 = 500;
const PLATFORM_LOG_EVENTS: u64 = 2;
/// The memory size of a function the template gives none (its `Globals`).
const DEFAULT_MEMORY_MB: u32 = 256;

#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries per case.
    pub deliveries: usize,
    /// First tries before the first-try cases are counted (warm caches, warm functions).
    pub warm: usize,
}

static LOG_BYTES: AtomicU64 = AtomicU64::new(0);
static LOG_EVENTS: AtomicU64 = AtomicU64::new(0);

/// Where the functions' log lines go in this benchmark: counted, not kept.
#[derive(Clone, Copy, Default)]
pub struct LogCounter;

impl std::io::Write for LogCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG_BYTES.fetch_add(buf.len() as u64, Ordering::Relaxed);
        let lines = buf.iter().filter(|b| **b == b'\n').count() as u64;
        LOG_EVENTS.fetch_add(lines, Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCounter {
    type Writer = LogCounter;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

/// Whether [`log_layer`] formats and counts lines: only while [`run`] runs. A process that
/// installs the layer and runs something else (every test process does) formats nothing.
pub(crate) static COUNTING_LOGS: AtomicBool = AtomicBool::new(false);

/// The layer that counts what the functions would log while this benchmark runs: Lambda's
/// JSON format at the deployed level (`info`), the benchmark's own harness left out.
pub fn log_layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{FilterExt, LevelFilter, Targets, filter_fn};
    converger_lambda::bootstrap::json_logs_to(LogCounter).with_filter(
        Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("converger_local", LevelFilter::OFF)
            .with_target("converger_bench", LevelFilter::OFF)
            .and(filter_fn(|_| COUNTING_LOGS.load(Ordering::Relaxed))),
    )
}

pub(crate) fn take_logs() -> (u64, u64) {
    (
        LOG_BYTES.swap(0, Ordering::Relaxed),
        LOG_EVENTS.swap(0, Ordering::Relaxed),
    )
}

pub async fn run(o: Options) -> Result<Value, String> {
    COUNTING_LOGS.store(true, Ordering::Relaxed);
    let r = measure_and_price(o).await;
    COUNTING_LOGS.store(false, Ordering::Relaxed);
    r
}

async fn measure_and_price(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    // Counted on the emulator: units, requests, invocations, log lines.
    let meters = Meters {
        capacity: Some(Meter::new()),
        requests: Some(RequestCounter::new()),
        invocations: Invocations::new(),
    };
    let opts = StackOptions {
        capacity: meters.capacity.clone(),
        counter: meters.requests.clone(),
        invocations: Some(meters.invocations.clone()),
        ..StackOptions::bench("cost")
    };
    let stack = Stack::start(opts).await?;
    let sizes = memory_sizes(&stack);
    let fixed = fixed_monthly(&stack);
    let counted = match stack.aws() {
        Ok(aws) => {
            // The harness reads through its own, uncounted client.
            let store = DynamoStore::new(aws.clients.dynamodb.clone(), aws.resources.clone());
            measure(&stack, &store, &meters, &o).await
        }
        Err(e) => Err(e),
    };
    stack.stop().await;
    let (counted, sizes, fixed) = (counted?, sizes?, fixed?);

    // Timed in process: the same cases with each request waiting as long as it would in a
    // region (the latency model), so that the functions' durations are AWS's, not the
    // emulator's.
    let timer = Meters {
        capacity: None,
        requests: None,
        invocations: Invocations::new(),
    };
    let opts = StackOptions {
        invocations: Some(timer.invocations.clone()),
        latency: Some(converger_memory::LatencyModel::from_env()?),
        backend: converger_stack::stack::Backend::Memory,
        ..StackOptions::bench("cost")
    };
    let stack = Stack::start(opts).await?;
    let timed = match stack.memory() {
        Some(m) => {
            let store = m.store.clone();
            measure(&stack, &*store, &timer, &o).await
        }
        None => Err("the in-process stack has no memory backend".into()),
    };
    stack.stop().await;
    let timed = timed?;

    let declared = converger_stack::cfn::declared_functions()?;
    let mut cases = Map::new();
    for (name, c) in &counted {
        let t = timed
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| format!("{name}: not timed in process"))?;
        let mut case = priced(c, t, &sizes, &declared, o.deliveries);
        // What the usage page's model (`core::usage`) estimates for the same case, beside
        // what was measured: the model's profiles are this benchmark's earlier figures.
        if let Some(u) = model_usage(name) {
            let e = converger_core::usage::CostModel::default().estimate(&u);
            case["usage_model_usd_per_million"] = json!(round(e.total_usd * 1e6, 2));
        }
        cases.insert((*name).to_owned(), case);
    }
    Ok(super::emit(json!({
        "scenario": "cost",
        "backend": "counted on the local stack on the emulator (units by the capacity proxy, requests by the SDK interceptor, invocations and log lines by the stack); Lambda durations timed in process with the latency model",
        "deliveries_per_case": o.deliveries,
        "cases": cases,
        "fixed_monthly_usd": fixed,
        "targets": {"write_units_per_first_try": 8, "usd_per_million_first_tries": 5.0},
        "prices_per_million_usd": {
            "dynamodb_write_unit": PRICE_DYNAMODB_WRITE_UNIT,
            "dynamodb_read_unit": PRICE_DYNAMODB_READ_UNIT,
            "sqs_request": PRICE_SQS_REQUEST,
            "eventbridge_event": PRICE_EVENTBRIDGE_EVENT,
            "lambda_request": PRICE_LAMBDA_REQUEST,
            "lambda_gb_second": PRICE_LAMBDA_GB_SECOND * 1e6,
            "api_request": PRICE_API_REQUEST,
            "logs_gb": PRICE_LOGS_GB * 1e6,
            "s3_put": PRICE_S3_PUT,
            "s3_get": PRICE_S3_GET,
            "s3_gb_month": PRICE_S3_GB_MONTH * 1e6,
            "data_out_gb": PRICE_EGRESS_GB * 1e6,
        },
    })))
}

struct Meters {
    capacity: Option<Meter>,
    requests: Option<RequestCounter>,
    invocations: Invocations,
}

/// What one case counted.
struct Measured {
    /// The request bytes its receiver took (data out to the internet).
    egress_bytes: u64,
    units: Tallies,
    requests: Counts,
    calls: BTreeMap<&'static str, Tally>,
    /// The functions' log bytes and lines.
    logs: (u64, u64),
}

impl Meters {
    /// Waits until `n` events of `detail_type` have been counted since the last reset (at
    /// most 30 s: the deadline only bounds the wait).
    async fn events_of(&self, detail_type: &str, n: usize) {
        let Some(r) = &self.requests else { return };
        let key = (
            converger_store::counter::EVENT_TYPES.to_owned(),
            detail_type.to_owned(),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let counted = r.snapshot().get(&key).map_or(0.0, |t| t.units);
            if counted >= n as f64 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn reset(&self) {
        let _ = self.take();
    }

    fn take(&self) -> Measured {
        Measured {
            egress_bytes: 0,
            units: self.capacity.as_ref().map(Meter::take).unwrap_or_default(),
            requests: self
                .requests
                .as_ref()
                .map(RequestCounter::take)
                .unwrap_or_default(),
            calls: self.invocations.take(),
            logs: take_logs(),
        }
    }
}

async fn measure<S: converger_ports::DeliveryStore + ?Sized>(
    stack: &Stack,
    store: &S,
    m: &Meters,
    o: &Options,
) -> Result<Vec<(&'static str, Measured)>, String> {
    let p = &stack.pipeline;
    let (t, key) = tenant(p, Tier::Default).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("{}/api/v1/activities", stack.api_url);
    let retry = json!({"schedule": [1000], "max_attempts": 3});
    let no_breaker = json!({"failure_threshold": 1000});
    let mut script = Vec::new();
    for _ in 0..o.deliveries {
        script.extend([Reply::status(503), Reply::status(503), Reply::status(200)]);
    }
    let ok = Receiver::always(200).await?;
    let flaky = Receiver::start(script, Reply::status(200)).await?;
    let dead = Receiver::always(503).await?;
    let large = Receiver::always(200).await?;
    let list = [
        (
            "first_try",
            webhook_with(p, &t, &ok.url, json!({}), json!({})).await?,
            (DeliveryStatus::Sent, 1),
            o.warm,
            Some(&ok),
            0,
        ),
        (
            "aws_sqs_first_try",
            super::requests::aws_channel(stack, &t, converger_core::aws::Service::Sqs).await?,
            (DeliveryStatus::Sent, 1),
            o.warm,
            None,
            0,
        ),
        (
            "three_attempts",
            webhook_with(p, &t, &flaky.url, retry.clone(), no_breaker.clone()).await?,
            (DeliveryStatus::Sent, 3),
            0,
            Some(&flaky),
            0,
        ),
        (
            "dead_letter",
            webhook_with(p, &t, &dead.url, retry, no_breaker).await?,
            (DeliveryStatus::Failed, 3),
            0,
            Some(&dead),
            0,
        ),
        (
            "first_try_1mib",
            webhook_with(p, &t, &large.url, json!({}), json!({})).await?,
            (DeliveryStatus::Sent, 1),
            2,
            Some(&large),
            LARGE_PAYLOAD_BYTES,
        ),
    ];
    let sent_bytes = |rx: Option<&Receiver>| {
        rx.map_or(0, |r| {
            r.requests().iter().map(|q| q.body.len() as u64).sum()
        })
    };
    let mut out = Vec::new();
    for (name, channel, done, warm, rx, size) in &list {
        let one = |n: usize, done: (DeliveryStatus, u32)| {
            let (http, url, key) = (&http, &url, &key);
            let id = channel.id.clone();
            async move {
                let d = if *size > 0 {
                    super::post_body(http, url, key, large_body(&id, n, *size)).await?
                } else {
                    super::post_activity(http, url, key, &id, n).await?
                };
                super::settle(store, &[d], done, Duration::from_secs(120)).await
            }
        };
        for n in 0..*warm {
            one(n, (DeliveryStatus::Sent, 1)).await?;
        }
        if *warm > 0 {
            // The warm-ups' status events have all been counted (on a slow emulator one can
            // come seconds after its delivery settled, and would be counted as this case's),
            // and every function's cached view of the flow item has expired.
            m.events_of("delivery.status_changed", *warm).await;
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        // The previous case's trailing work (settle, events, the queue delete, its row changes)
        // is not counted.
        super::quiet(stack).await;
        m.reset();
        let before = sent_bytes(*rx);
        for n in *warm..warm + o.deliveries {
            one(n, *done).await?;
        }
        // This case's own trailing work finishes: every row change it made has been read from
        // the table's stream (its events and counts written), then what goes with it.
        m.events_of("delivery.status_changed", o.deliveries).await;
        super::quiet(stack).await;
        let mut counted = m.take();
        counted.egress_bytes = sent_bytes(*rx).saturating_sub(before);
        out.push((*name, counted));
    }
    Ok(out)
}

/// An activity body for channel `ch` whose payload is `size` bytes serialized.
fn large_body(ch: &converger_core::ChannelId, n: usize, size: usize) -> String {
    let pad = size.saturating_sub(30 + n.to_string().len());
    json!({
        "conversation_id": format!("conv-{}", n % 100),
        "channel_ids": [ch],
        "payload": {"n": n, "blob": "z".repeat(pad)},
    })
    .to_string()
}

/// Whether Lambda writes its start and report lines for `function` (a system log level
/// below `WARN`, Lambda's default `INFO` when the template sets none).
fn platform_lines(
    declared: &BTreeMap<String, converger_stack::cfn::DeclaredFunction>,
    function: &str,
) -> bool {
    !declared
        .get(function)
        .and_then(|d| d.system_log_level.as_deref())
        .is_some_and(|l| l.eq_ignore_ascii_case("WARN"))
}

/// Each function's memory size in MB, as deployed.
fn memory_sizes(stack: &Stack) -> Result<BTreeMap<&'static str, u32>, String> {
    let deployed = &stack.aws()?.deployed;
    let mut m = BTreeMap::new();
    for f in [
        fun::INGEST,
        fun::DELIVER,
        fun::RETRY_SCHEDULER,
        fun::REPLAY,
        fun::PROBE,
        fun::HEALTH,
        fun::API,
        fun::ADMIN,
        fun::WEBSOCKET,
    ] {
        let mb = deployed.function(f)?.memory_mb.unwrap_or(DEFAULT_MEMORY_MB);
        m.insert(f, mb);
    }
    Ok(m)
}

/// A case's usage as the usage counters count it (one delivery; its attempts; a dead letter).
fn model_usage(case: &str) -> Option<converger_core::usage::Usage> {
    let (attempts, dead) = match case {
        "first_try" | "aws_sqs_first_try" | "first_try_1mib" => (1, 0),
        "three_attempts" => (3, 0),
        "dead_letter" => (3, 1),
        _ => return None,
    };
    Some(converger_core::usage::Usage {
        deliveries: 1,
        attempts,
        dead_letters: dead,
        filtered: 0,
    })
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// One case's counts (`c`, on the emulator) with its functions' durations (`t`, timed in
/// process), per delivery and priced per million.
fn priced(
    c: &Measured,
    t: &Measured,
    memory: &BTreeMap<&'static str, u32>,
    declared: &BTreeMap<String, converger_stack::cfn::DeclaredFunction>,
    deliveries: usize,
) -> Value {
    let n = deliveries.max(1) as f64;
    let wcu: f64 = c.units.writes.values().sum::<f64>() / n;
    let rcu: f64 = c.units.reads.values().sum::<f64>() / n;
    // The changes function's requests are counted apart (`changes:<service>`) and priced
    // alike.
    let of = |s: &str, service: &str| s.strip_prefix("changes:").unwrap_or(s) == service;
    let count = |service: &str| -> f64 {
        c.requests
            .iter()
            .filter(|((s, _), _)| of(s, service))
            .map(|(_, t)| t.requests as f64)
            .sum::<f64>()
            / n
    };
    let sqs = count("sqs");
    // The payload bucket: its objects written, read, and kept for the default retention.
    let s3_of = |op: &str| -> f64 {
        c.requests
            .iter()
            .filter(|((s, o), _)| of(s, "s3") && o == op)
            .map(|(_, t)| t.requests as f64)
            .sum::<f64>()
            / n
            + 0.0
    };
    let (s3_puts, s3_gets) = (s3_of("PutObject"), s3_of("GetObject"));
    let s3_gb_kept = s3_puts * LARGE_PAYLOAD_BYTES as f64 / 1e9;
    let egress_gb = c.egress_bytes as f64 / n / 1e9;
    // Billed events (a batched `PutEvents` carries up to ten), not requests.
    let events = c
        .requests
        .iter()
        .filter(|((s, _), _)| of(s, "events"))
        .map(|(_, t)| t.units)
        .sum::<f64>()
        / n;
    // The same events by detail type: what each case announces (status changes), apart from
    // what happened beside it (a health change).
    let by_type: Map<String, Value> = c
        .requests
        .iter()
        .filter(|((s, _), _)| s == converger_store::counter::EVENT_TYPES)
        .map(|((_, kind), t)| (kind.clone(), json!(round(t.units / n, 2))))
        .collect();
    let api = c
        .calls
        .iter()
        .filter(|(f, _)| [fun::API, fun::ADMIN].contains(f))
        .map(|(_, t)| t.invocations as f64)
        .sum::<f64>()
        / n;
    let mut lambda = Map::new();
    let (mut invocations, mut gb_s, mut platform_bytes, mut platform_events) = (0.0, 0.0, 0, 0);
    for (f, counted) in &c.calls {
        let mb = f64::from(memory.get(f).copied().unwrap_or(DEFAULT_MEMORY_MB));
        let per_call = |x: &Tally| x.billed_ms as f64 / x.invocations.max(1) as f64;
        // The duration timed in process; the emulator's when the in-process run had none.
        let ms = t.calls.get(f).map_or_else(|| per_call(counted), per_call);
        let calls = counted.invocations as f64 / n;
        let gbs = calls * ms / 1000.0 * mb / 1024.0;
        invocations += calls;
        gb_s += gbs;
        if platform_lines(declared, f) {
            platform_bytes += counted.invocations * PLATFORM_LOG_BYTES;
            platform_events += counted.invocations * PLATFORM_LOG_EVENTS;
        }
        lambda.insert(
            (*f).to_owned(),
            json!({
                "invocations_per_delivery": round(calls, 3),
                "ms_per_invocation": round(ms, 1),
                "ms_per_invocation_on_the_emulator": round(per_call(counted), 1),
                "memory_mb": mb,
                "gb_seconds_per_delivery": round(gbs, 6),
            }),
        );
    }
    let (app_bytes, app_events) = c.logs;
    let log_bytes =
        (app_bytes + platform_bytes + (app_events + platform_events) * LOG_EVENT_OVERHEAD) as f64
            / n;
    let usd = BTreeMap::from([
        ("dynamodb_writes", wcu * PRICE_DYNAMODB_WRITE_UNIT),
        ("dynamodb_reads", rcu * PRICE_DYNAMODB_READ_UNIT),
        ("sqs", sqs * PRICE_SQS_REQUEST),
        ("eventbridge", events * PRICE_EVENTBRIDGE_EVENT),
        ("api_gateway", api * PRICE_API_REQUEST),
        ("lambda_requests", invocations * PRICE_LAMBDA_REQUEST),
        ("lambda_duration", gb_s * PRICE_LAMBDA_GB_SECOND * 1e6),
        ("logs", log_bytes / 1e9 * PRICE_LOGS_GB * 1e6),
        (
            "s3_requests",
            s3_puts * PRICE_S3_PUT + s3_gets * PRICE_S3_GET,
        ),
        (
            "s3_storage_for_the_retention",
            s3_gb_kept * RETENTION_MONTHS * PRICE_S3_GB_MONTH * 1e6,
        ),
        ("data_out_to_receivers", egress_gb * PRICE_EGRESS_GB * 1e6),
    ]);
    let total: f64 = usd.values().sum();
    let usd: Map<String, Value> = usd
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(round(v, 3))))
        .collect();
    json!({
        "per_delivery": {
            "dynamodb_write_units": round(wcu, 2),
            "dynamodb_read_units": round(rcu, 2),
            "sqs_requests": round(sqs, 2),
            "eventbridge_events": round(events, 2),
            "eventbridge_events_by_type": by_type,
            "api_requests": round(api, 2),
            "lambda_invocations": round(invocations, 2),
            "lambda_gb_seconds": round(gb_s, 6),
            "log_bytes": round(log_bytes, 0),
            "log_lines_by_functions": round(app_events as f64 / n, 2),
            "s3_puts": round(s3_puts, 2),
            "s3_gets": round(s3_gets, 2),
            "bytes_to_receivers": round(egress_gb * 1e9, 0),
        },
        "lambda": lambda,
        "usd_per_million": usd,
        "usd_per_million_total": round(total, 2),
    })
}

/// What runs whatever the traffic, per month (30 days): the scheduled functions (the retry
/// scheduler sweeps, then watches for crashed attempts until shortly before its next run) and
/// the event source mappings' empty long polls (five pollers per mapping while a queue is
/// idle, each a 20-second poll).
fn fixed_monthly(stack: &Stack) -> Result<Value, String> {
    let declared = converger_stack::cfn::declared_functions()?;
    let memory = memory_sizes(stack)?;
    let month_s = 30.0 * 86_400.0;
    let mut out = Map::new();
    let mut total = 0.0;
    for (f, busy_share) in [(fun::RETRY_SCHEDULER, 5.0 / 6.0), (fun::HEALTH, 0.0)] {
        let Some(period) = declared.get(f).and_then(|d| d.schedule_period()) else {
            continue;
        };
        let runs = month_s / period.as_secs_f64();
        // A health run takes about a second; the sweeper's watch most of its period.
        let seconds = (period.as_secs_f64() * busy_share).max(1.0);
        let gb = f64::from(memory.get(f).copied().unwrap_or(DEFAULT_MEMORY_MB)) / 1024.0;
        let usd = runs * (PRICE_LAMBDA_REQUEST / 1e6 + seconds * gb * PRICE_LAMBDA_GB_SECOND);
        total += usd;
        out.insert(
            f.to_owned(),
            json!({"runs": runs.round(), "seconds_each": round(seconds, 1), "usd": round(usd, 2)}),
        );
    }
    let mappings = stack
        .aws()?
        .deployed
        .functions
        .values()
        .map(|f| f.event_source_mappings.len())
        .sum::<usize>() as f64;
    let polls = mappings * 5.0 * month_s / 20.0;
    let usd = polls * PRICE_SQS_REQUEST / 1e6;
    total += usd;
    out.insert(
        "empty_receives".into(),
        json!({"mappings": mappings, "requests": polls.round(), "usd": round(usd, 2)}),
    );
    out.insert("total".into(), json!(round(total, 2)));
    Ok(Value::Object(out))
}
