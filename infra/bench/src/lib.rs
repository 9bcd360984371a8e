//! The benchmark command: `converger-local bench <scenario> [options]`. Each scenario starts
//! what it needs (the local stack on the emulator, or the in-process backend with its latency
//! model, and real HTTP receivers), runs, and prints one JSON line of figures on stdout.
//! `docs/benchmarks.md` explains each figure and keeps the measured results. The scenarios
//! run over the local stack of `converger-stack`; `seed` writes the rows some of them (and the
//! tests) start from.

pub mod binaries;
pub mod cost;
pub mod dead_channel;
pub mod fairness;
pub mod flow_cost;
pub mod hot_tenant;
mod isolated;
pub mod keys;
pub mod latency;
pub mod maintenance;
pub mod ordered;
pub mod pages;
pub mod requests;
pub mod seed;
pub mod shape;
pub mod throughput;

use converger_core::{ChannelId, ChannelType, Tier, time};
use converger_pipeline::Pipeline;
use converger_pipeline::ingest::NewActivity;
use converger_ports::{Channel, Tenant};
pub use isolated::IsolatedReceiver;
use serde_json::{Value, json};

pub const USAGE: &str = "\
usage: converger-local bench <scenario> [options]   (one JSON line of figures per scenario)
  latency      [--activities N] [--rate R]         ingest-to-receiver latency on the local stack
  throughput   [--deliveries N] [--emulator N]     deliveries/s and CPU per 1,000 deliveries
  requests     [--deliveries N]                    AWS requests per delivered message, and cost
  keys         [--deliveries N] [--replay N]       capacity units per partition key family, ceilings
  cost         [--deliveries N]                    dollars per million deliveries, all in, at list prices
  cost --shape [--tenants T] [--channels C] [--rate R] [--seconds S] [--ingest single|batch|both] [--new-windows] [--direct-usage]
                                                   the same at a deployment's shape (1,000 x 10, 1,000/s)
  throughput --shape [--scale F] ...               that shape at 10,000/s, scaled; throttles and latency
  hot-tenant   [--seconds S] [--scale F] [--case NAME] one tenant at 5,000/s, one channel at 2,000/s, partition limits
  fairness     [--backlog N] [--tenants T] [--seconds S]  quiet tenants beside one tenant's slow backlog
  binaries     [--function NAME] [--dev]           bootstrap sizes and init time to first event
  dead-channel [--emulator] [--backlog N] [--seconds S] [--rate R]
  head-of-line [--emulator] [--seconds S] [--rate R]  a retrying delivery beside healthy ones
  burst        [--emulator] [--deliveries N]       a released backlog through max_in_flight 10
  bulk-replay  [N] [--in-process]                  one bulk replay of N dead letters
  sweep        [N]                                 one sweep over N settled deliveries
  health       [CHANNELS] [DELIVERIES]             one health run
  pages        [N]                                 the web pages on a tenant with N failed deliveries
  ordered      [--conversations N] [--per K] [--fail P]  ordered lanes: order, throughput, others' delay
  smoke                                            every scenario above but sweep and health, tiny sizes";

/// `--shape`'s options: the deployment's shape, at `rate` a second run at `rate / scale`.
fn shape_options(
    rest: &Args<'_>,
    rate: f64,
    scale: f64,
    modes: Vec<shape::Mode>,
) -> Result<shape::Options, String> {
    let modes = match rest.value("--ingest") {
        None => modes,
        Some("single") => vec![shape::Mode::Single],
        Some("batch") => vec![shape::Mode::Batch],
        Some("both") => vec![shape::Mode::Single, shape::Mode::Batch],
        Some(other) => return Err(format!("--ingest {other}: single, batch or both")),
    };
    let d = shape::Options::default();
    Ok(shape::Options {
        tenants: rest.num("--tenants", d.tenants)?.max(1),
        channels: rest.num("--channels", d.channels)?.max(1),
        rate: rest.num("--rate", rate as usize)?.max(1) as f64,
        seconds: rest.num("--seconds", d.seconds as usize)?.max(1) as u64,
        scale: rest.num("--scale", scale as usize)?.max(1) as f64,
        receiver_ms: rest.num("--receiver-ms", d.receiver_ms as usize)? as u64,
        batch_every_s: rest.num("--batch-every", d.batch_every_s as usize)?.max(1) as u64,
        modes,
        grown_windows: !rest.flag("--new-windows"),
        fewer_tenants: true,
        usage_fold: !rest.flag("--direct-usage"),
    })
}

/// Runs `bench <args>`.
pub async fn run(args: &[String]) -> Result<(), String> {
    let Some(scenario) = args.first() else {
        return Err(USAGE.into());
    };
    let rest = Args(&args[1..]);
    match scenario.as_str() {
        "latency" => latency::run(latency::Options {
            activities: rest.num("--activities", 1000)?,
            rate: rest.num("--rate", 20)?.max(1) as u32,
        })
        .await
        .map(drop),
        "throughput" if rest.flag("--shape") => shape::throughput(shape::Options {
            fewer_tenants: false,
            ..shape_options(&rest, 10_000.0, 40.0, vec![shape::Mode::Batch])?
        })
        .await
        .map(drop),
        "cost" if rest.flag("--shape") => shape::cost(shape_options(
            &rest,
            1_000.0,
            10.0,
            vec![shape::Mode::Single, shape::Mode::Batch],
        )?)
        .await
        .map(drop),
        "throughput" => throughput::run(throughput::Options {
            in_process: rest.num("--deliveries", 10_000)?,
            emulator: rest.num("--emulator", 1000)?,
        })
        .await
        .map(drop),
        "requests" => {
            let deliveries = rest.num("--deliveries", 20)?.max(1);
            requests::run(requests::Options {
                deliveries,
                retried: rest.num("--retried", deliveries)?.max(1),
                warm: rest.num("--warm", 10)?,
            })
            .await
            .map(drop)
        }
        "keys" => keys::run(keys::Options {
            deliveries: rest.num("--deliveries", 120)?.max(1),
            replay: rest.num("--replay", 1000)?.max(1),
            warm: rest.num("--warm", 10)?,
        })
        .await
        .map(drop),
        "cost" => cost::run(cost::Options {
            deliveries: rest.num("--deliveries", 30)?.max(1),
            warm: rest.num("--warm", 10)?,
        })
        .await
        .map(drop),
        "hot-tenant" => hot_tenant::run(hot_tenant::Options {
            seconds: rest.num("--seconds", 10)?.max(1) as u64,
            scale: rest.num("--scale", 10)?.max(1) as f64,
            case: rest.value("--case").map(str::to_owned),
            ..hot_tenant::Options::default()
        })
        .await
        .map(drop),
        "fairness" => fairness::run(fairness::Options {
            backlog: rest.num("--backlog", 10_000)?,
            tenants: rest.num("--tenants", 50)?.max(1),
            seconds: rest.num("--seconds", 20)?.max(1) as u64,
            ..fairness::Options::default()
        })
        .await
        .map(drop),
        "binaries" => binaries::run(binaries::Options {
            function: rest.value("--function").map(str::to_owned),
            release: !rest.flag("--dev"),
        })
        .await
        .map(drop),
        "dead-channel" => dead_channel::run(dead_channel::Options {
            in_process: !rest.flag("--emulator"),
            backlog: rest.num("--backlog", 10_000)?,
            seconds: rest.num("--seconds", 60)?.max(1) as u64,
            rate: rest.num("--rate", 20)?.max(1) as u32,
        })
        .await
        .map(drop),
        "head-of-line" => flow_cost::head_of_line(flow_cost::HeadOfLine {
            in_process: !rest.flag("--emulator"),
            seconds: rest.num("--seconds", 30)?.max(1) as u64,
            rate: rest.num("--rate", 10)?.max(1) as u32,
        })
        .await
        .map(drop),
        "burst" => {
            let in_process = !rest.flag("--emulator");
            flow_cost::burst(flow_cost::Burst {
                in_process,
                deliveries: rest
                    .num("--deliveries", if in_process { 1000 } else { 200 })?
                    .max(1),
                receiver_ms: rest.num("--receiver-ms", 100)? as u64,
            })
            .await
            .map(drop)
        }
        "bulk-replay" => {
            let n = rest.positional(0, 10_000)?;
            if rest.flag("--in-process") {
                maintenance::replay_in_process(n).await.map(drop)
            } else {
                maintenance::replay(n).await
            }
        }
        "sweep" => maintenance::sweep(rest.positional(0, 100_000)?).await,
        "health" => {
            maintenance::health(rest.positional(0, 1000)?, rest.positional(1, 100_000)?).await
        }
        "pages" => pages::run(rest.positional(0, 10_000)?).await.map(drop),
        "ordered" => ordered::run(ordered::Options {
            conversations: rest.num("--conversations", 1000)?.max(1),
            per: rest.num("--per", 10)?.max(1),
            fail_percent: rest.num("--fail", 5)?.min(100) as u64,
        })
        .await
        .map(drop),
        "smoke" => smoke().await,
        "--help" | "-h" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown scenario `{other}`\n{USAGE}")),
    }
}

/// Every scenario with tiny sizes: checks the harness, not the speed (the test command runs it).
pub async fn smoke() -> Result<(), String> {
    latency::run(latency::Options {
        activities: 10,
        rate: 20,
    })
    .await?;
    throughput::run(throughput::Options {
        in_process: 200,
        emulator: 20,
    })
    .await?;
    requests::run(requests::Options {
        deliveries: 2,
        retried: 2,
        warm: 10,
    })
    .await?;
    keys::run(keys::Options {
        deliveries: 3,
        replay: 20,
        warm: 2,
    })
    .await?;
    cost::run(cost::Options {
        deliveries: 2,
        warm: 2,
    })
    .await?;
    shape::cost(shape::smoke()).await?;
    shape::throughput(shape::Options {
        fewer_tenants: false,
        rate: 400.0,
        scale: 20.0,
        modes: vec![shape::Mode::Batch],
        ..shape::smoke()
    })
    .await?;
    fairness::run(fairness::Options {
        backlog: 200,
        tenants: 5,
        seconds: 2,
        slow: std::time::Duration::from_millis(500),
    })
    .await?;
    // The rate-limited case is left out of the smoke run: at the limit it is still open and
    // waits out its deadline (docs/scaling.md).
    hot_tenant::run(hot_tenant::Options {
        seconds: 2,
        scale: 100.0,
        rate_limited: 0,
        changes_everywhere: false,
        ..hot_tenant::Options::default()
    })
    .await?;
    binaries::run(binaries::Options {
        function: Some("health".into()),
        release: false,
    })
    .await?;
    dead_channel::run(dead_channel::Options {
        in_process: true,
        backlog: 50,
        seconds: 2,
        rate: 10,
    })
    .await?;
    flow_cost::head_of_line(flow_cost::HeadOfLine {
        in_process: true,
        seconds: 2,
        rate: 10,
    })
    .await?;
    flow_cost::burst(flow_cost::Burst {
        in_process: true,
        deliveries: 40,
        receiver_ms: 100,
    })
    .await?;
    maintenance::replay_in_process(100).await?;
    pages::run(120).await?;
    ordered::run(ordered::Options {
        conversations: 20,
        per: 3,
        fail_percent: 20,
    })
    .await?;
    Ok(())
}

/// The arguments after the scenario's name.
struct Args<'a>(&'a [String]);

impl Args<'_> {
    fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }

    fn value(&self, name: &str) -> Option<&str> {
        let i = self.0.iter().position(|a| a == name)?;
        self.0.get(i + 1).map(String::as_str)
    }

    fn num(&self, name: &str, default: usize) -> Result<usize, String> {
        match self.value(name) {
            None if self.flag(name) => Err(format!("{name} takes a number")),
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("{name}: `{v}` is not a number")),
        }
    }

    /// The `i`-th argument that is neither an option nor an option's value.
    fn positional(&self, i: usize, default: usize) -> Result<usize, String> {
        let mut plain = Vec::new();
        let mut skip = false;
        for a in self.0 {
            if skip {
                skip = false;
            } else if a.starts_with("--") {
                skip = !matches!(a.as_str(), "--in-process" | "--emulator" | "--dev");
            } else {
                plain.push(a);
            }
        }
        match plain.get(i) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("`{v}` is not a number")),
        }
    }
}

/// The machine a figure was measured on: cores, memory, date.
pub fn machine() -> Value {
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory_gib": (mem_kib as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "date": time::now_rfc3339().get(..10).unwrap_or_default(),
    })
}

/// Prints one scenario's line (with the machine added) and hands it back.
pub fn emit(mut line: Value) -> Value {
    if let Some(o) = line.as_object_mut() {
        o.insert("machine".into(), machine());
    }
    println!("{line}");
    line
}

/// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`
/// (`self` for this process). `None` where there is no such file.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    stat_seconds(pid, 2)
}

/// As [`cpu_seconds`], with the CPU of the children the process waited for added.
pub fn cpu_seconds_with_children(pid: &str) -> Option<f64> {
    stat_seconds(pid, 4)
}

/// The sum of `n` CPU times of `/proc/<pid>/stat`, from `utime` on (user, system, then the
/// waited-for children's user and system), in seconds.
fn stat_seconds(pid: &str, n: usize) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its `)` are fixed.
    let after = stat.rsplit_once(')')?.1;
    let ticks: Vec<f64> = after
        .split_whitespace()
        .skip(11)
        .take(n)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // USER_HZ is 100 on every Linux the project runs on.
    (ticks.len() == n).then(|| ticks.iter().sum::<f64>() / 100.0)
}

/// The `p`-th percentile (0..1) of sorted values, to 0.1.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    (sorted[i] * 10.0).round() / 10.0
}

/// p50 / p95 / p99 (and the count) of unsorted milliseconds.
pub fn summary(mut ms: Vec<f64>) -> Value {
    ms.sort_by(|a, b| a.total_cmp(b));
    json!({
        "n": ms.len(),
        "p50_ms": percentile(&ms, 0.50),
        "p95_ms": percentile(&ms, 0.95),
        "p99_ms": percentile(&ms, 0.99),
    })
}

/// Waits (at most `within`) until every delivery of `ids` has `done`'s status and attempts.
pub async fn settle<S: converger_ports::DeliveryStore + ?Sized>(
    store: &S,
    ids: &[converger_core::DeliveryId],
    done: (converger_core::DeliveryStatus, u32),
    within: std::time::Duration,
) -> Result<(), String> {
    wait_rows(store, ids, &format!("{done:?}"), within, |d| {
        d.status == done.0 && d.attempts == done.1
    })
    .await
}

/// Waits (at most `within`) until every delivery of `ids` is read back and satisfies `done`
/// (`what` names it in the error, with the first rows' status and attempts).
pub async fn wait_rows<S: converger_ports::DeliveryStore + ?Sized>(
    store: &S,
    ids: &[converger_core::DeliveryId],
    what: &str,
    within: std::time::Duration,
    done: impl Fn(&converger_ports::Delivery) -> bool,
) -> Result<(), String> {
    let start = std::time::Instant::now();
    // Read often at first (a first try settles in tens of milliseconds), then less often: a
    // case that waits out backoffs would otherwise read its rows fifty times a second from
    // an emulator that every test on the machine shares, one DynamoDB request at a time.
    let mut pause = std::time::Duration::from_millis(20);
    loop {
        let rows = store.get_deliveries(ids).await.map_err(|e| e.to_string())?;
        if rows.len() == ids.len() && rows.iter().all(&done) {
            return Ok(());
        }
        if start.elapsed() > within {
            let seen: Vec<_> = rows
                .iter()
                .map(|d| (d.status, d.attempts))
                .take(5)
                .collect();
            return Err(format!(
                "deliveries not {what} after {} s: {} of {} found, {seen:?}",
                within.as_secs(),
                rows.len(),
                ids.len()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(std::time::Duration::from_millis(250));
    }
}

/// A tenant in `tier`; returns it with its API key.
pub async fn tenant(p: &Pipeline, tier: Tier) -> Result<(Tenant, String), String> {
    p.tenants()
        .create_tenant("bench", tier)
        .await
        .map_err(|e| e.to_string())
}

/// A webhook channel to `url` with `policy` (a retry policy object, `{}` for the defaults).
pub async fn webhook(
    p: &Pipeline,
    t: &Tenant,
    url: &str,
    policy: Value,
) -> Result<Channel, String> {
    webhook_with(p, t, url, policy, json!({})).await
}

/// [`webhook`] with circuit breaker settings.
pub async fn webhook_with(
    p: &Pipeline,
    t: &Tenant,
    url: &str,
    policy: Value,
    breaker: Value,
) -> Result<Channel, String> {
    webhook_limited(p, t, url, policy, breaker, None).await
}

/// [`webhook_with`] with an outbound `rate_limit` (`"5000/s"`).
pub async fn webhook_limited(
    p: &Pipeline,
    t: &Tenant,
    url: &str,
    policy: Value,
    breaker: Value,
    rate_limit: Option<String>,
) -> Result<Channel, String> {
    let mut c = Channel::new(
        t.id.clone(),
        ChannelType::Webhook,
        "bench",
        json!({"url": url}).as_object().cloned().unwrap_or_default(),
        converger_core::Timestamp::now(),
    );
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("the bench's {what}: {e}");
    c.retry_policy = serde_json::from_value(policy).map_err(|e| bad("retry policy", &e))?;
    c.circuit_breaker = serde_json::from_value(breaker).map_err(|e| bad("breaker", &e))?;
    c.rate_limit = rate_limit
        .map(|r| r.parse())
        .transpose()
        .map_err(|e| bad("rate limit", &e))?;
    // Benchmarks fail on purpose, many times: auto-disable would stop them part way.
    c.auto_disable.failed_attempts = Some(0);
    p.channels()
        .create_channel(&c)
        .await
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// A channel of `kind` with `config` and the defaults otherwise.
pub async fn channel_of(
    p: &Pipeline,
    t: &Tenant,
    kind: ChannelType,
    config: Value,
) -> Result<Channel, String> {
    let c = Channel::new(
        t.id.clone(),
        kind,
        "bench",
        config.as_object().cloned().unwrap_or_default(),
        converger_core::Timestamp::now(),
    );
    p.channels()
        .create_channel(&c)
        .await
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// The `n`-th benchmark activity for one channel.
pub fn activity(ch: &ChannelId, n: usize) -> NewActivity {
    NewActivity {
        id: None,
        event_type: None,
        conversation_id: format!("conv-{}", n % 100),
        seq: Some(n as u64 + 1),
        channel_ids: vec![ch.clone()],
        payload_upload: None,
        payload: Some(json!({"text": "hello", "n": n})),
        traceparent: None,
        tracestate: None,
    }
}

/// The same activity as the tenant API's request body.
pub fn activity_body(ch: &ChannelId, n: usize) -> String {
    let a = activity(ch, n);
    json!({
        "conversation_id": a.conversation_id,
        "seq": a.seq,
        "channel_ids": a.channel_ids,
        "payload": a.payload,
    })
    .to_string()
}

/// A benchmark stack's watch delay (`PipelineConfig::watch_delay_s`).
pub use converger_stack::BENCH_WATCH_DELAY_S as WATCH_DELAY_S;

/// Waits until a case's trailing work is done, so that it is counted with the case and not
/// the next: the table stream's changes read and their counts written, and the watch copies
/// (`PipelineConfig::watch_delay_s`, a second on a benchmark stack) come and gone. On the
/// emulator that is when the tiers' queues hold nothing, delayed and in flight included,
/// read through the harness's own (uncounted) client, and at most the watch delay and 1.5 s;
/// on the in-process backend, that time.
pub async fn quiet(stack: &converger_stack::stack::Stack) {
    use std::time::{Duration, Instant};
    stack.changes_settled().await;
    let watch = u64::from(stack.pipeline.config().watch_delay_s);
    let until = Instant::now() + Duration::from_millis(watch * 1000 + 1500);
    match stack.aws() {
        Ok(aws) => {
            let urls: Vec<&String> = converger_core::Tier::ALL
                .iter()
                .filter_map(|t| {
                    let name = converger_store::resources::tier_queue(*t).name;
                    aws.resources.queue_urls.get(name)
                })
                .collect();
            while Instant::now() < until && !tiers_empty(&aws.clients.sqs, &urls).await {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Err(_) => tokio::time::sleep(until.saturating_duration_since(Instant::now())).await,
    }
    stack.changes_settled().await;
}

/// Whether every queue of `urls` holds no message, visible, in flight or delayed (`false`
/// when one cannot be read).
async fn tiers_empty(sqs: &aws_sdk_sqs::Client, urls: &[&String]) -> bool {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    for url in urls {
        let Ok(out) = sqs
            .get_queue_attributes()
            .queue_url(url.as_str())
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
        else {
            return false;
        };
        let held = out
            .attributes
            .unwrap_or_default()
            .values()
            .any(|v| v.parse::<u64>().map_or(true, |n| n > 0));
        if held {
            return false;
        }
    }
    true
}

/// Posts the `n`-th benchmark activity for `ch` through the tenant API at `url`; the id of
/// its first delivery.
pub async fn post_activity(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    ch: &ChannelId,
    n: usize,
) -> Result<converger_core::DeliveryId, String> {
    post_body(http, url, key, activity_body(ch, n)).await
}

/// Posts an activity body through the tenant API at `url`; the id of its first delivery.
pub async fn post_body(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    body: String,
) -> Result<converger_core::DeliveryId, String> {
    let r = http
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let bytes = r.bytes().await.map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    v["deliveries"][0]["id"]
        .as_str()
        .and_then(|s| converger_core::DeliveryId::parse(s).ok())
        .ok_or_else(|| format!("ingest answered {v}"))
}

/// Ingests `rate` activities a second for `seconds` to one channel (numbered from `first`),
/// each on its own task; returns when each delivery's ingest started, by delivery id (the
/// `webhook-id` header the receiver sees). Refused activities are left out.
pub async fn steady_ingest(
    p: &std::sync::Arc<Pipeline>,
    tenant: &Tenant,
    channel: &ChannelId,
    rate: u32,
    seconds: u64,
    first: usize,
) -> std::collections::HashMap<String, std::time::Instant> {
    use std::time::{Duration, Instant};
    let total = rate as usize * seconds as usize;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    let mut sends = Vec::with_capacity(total);
    for n in first..first + total {
        tick.tick().await;
        let (p, t, ch) = (p.clone(), tenant.clone(), channel.clone());
        sends.push(tokio::spawn(async move {
            let t0 = Instant::now();
            p.intake()
                .ingest(&t, activity(&ch, n))
                .await
                .ok()
                .and_then(|i| i.deliveries.first().map(|d| (d.id.to_string(), t0)))
        }));
    }
    let mut started = std::collections::HashMap::with_capacity(total);
    for s in sends {
        if let Ok(Some((id, t0))) = s.await {
            started.insert(id, t0);
        }
    }
    started
}

/// Milliseconds from each delivery's start (by its id) to its arrival at a receiver (the
/// `webhook-id` header names the delivery).
pub fn arrival_ms(
    seen: &[converger_stack::receiver::Received],
    started: &std::collections::HashMap<String, std::time::Instant>,
) -> Vec<f64> {
    seen.iter()
        .filter_map(|r| {
            let id = r.headers.get("webhook-id")?.to_str().ok()?;
            let t0 = started.get(id)?;
            Some(r.at.saturating_duration_since(*t0).as_secs_f64() * 1000.0)
        })
        .collect()
}

/// Where a flow-control scenario runs: the in-process backend with its latency model, or the
/// local stack on the emulator. The sweeper runs every minute in both, as in production (it
/// feeds marked backlogs and restarts probes).
pub enum Runtime {
    Mem(converger_stack::inprocess::InProcess),
    Aws(Box<converger_stack::stack::Stack>),
}

impl Runtime {
    pub async fn start(in_process: bool, tag: &str) -> Result<Self, String> {
        let minute = std::time::Duration::from_secs(60);
        if in_process {
            let config = converger_pipeline::PipelineConfig {
                allowlist: converger_core::net::Allowlist::loopback(),
                ..converger_pipeline::PipelineConfig::default()
            };
            return Ok(Self::Mem(converger_stack::inprocess::InProcess::start(
                Some(converger_memory::LatencyModel::from_env()?),
                config,
                Some(minute),
            )?));
        }
        let opts = converger_stack::stack::StackOptions {
            sweep_period: converger_stack::Every::Period(minute),
            ..converger_stack::stack::StackOptions::bench(tag)
        };
        Ok(Self::Aws(Box::new(
            converger_stack::stack::Stack::start(opts).await?,
        )))
    }

    pub fn pipeline(&self) -> std::sync::Arc<Pipeline> {
        match self {
            Self::Mem(r) => r.pipeline.clone(),
            Self::Aws(s) => s.pipeline.clone(),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Self::Mem(_) => "in-process (latency model)",
            Self::Aws(_) => "emulator",
        }
    }

    pub async fn stop(self) {
        match self {
            Self::Mem(r) => r.stop().await,
            Self::Aws(s) => s.stop().await,
        }
    }
}
