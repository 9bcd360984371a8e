//! `bench requests`: the AWS requests each delivered message costs, counted client-side by an
//! SDK interceptor on every client the functions and APIs use (see
//! `converger_store::counter`), on the local stack. Cases, each run on its own channel:
//! - `first_try`: one activity at a time, each delivered on the first try: the worst case,
//!   with no batching at all;
//! - `first_try_no_window`: the same on a channel without an in-flight cap of its own
//!   (`max_in_flight: null`): its window is the platform's bound (`core::flow::tier_share`),
//!   always counted, so a delivery takes a slot and gives it back;
//! - `first_try_burst`: activities posted 10 at a time, so the queue pollers' receives and
//!   deletes carry several messages (what a busy channel sees);
//! - `first_try_by_event_type`: as `first_try`, sent by `event_type` (no `channel_ids`) to the
//!   one channel subscribed to it: what the fan-out adds (the subscriber list, one read of the
//!   tenant's channels per `CHANNEL_CACHE_TTL_MS` per API instance);
//! - `three_attempts`: the receiver answers 503 twice, then 200;
//! - `dead_letter`: the receiver always answers 503; the policy allows 3 attempts;
//! - `aws_sqs_first_try`, `aws_eventbridge_first_try`, `aws_kinesis_first_try`,
//!   `aws_sns_first_try`: an AWS channel sending into a target of a second account of the
//!   emulator as a role there: what `sts:AssumeRole` costs per delivery (the role's session is
//!   reused), and the tenant's own send (`tenant:...`, paid by the tenant's account, not
//!   priced here).
//!
//! Every activity is posted through the tenant API, so its rate limit's writes (a batch of
//! the key's schedule taken now and then) are counted too, and reported apart as
//! `api_rate_limit_takes_per_call`.
//!
//! Prints requests per delivery by service and operation, the billed requests (DynamoDB and
//! SQS), and the implied cost per million deliveries at the list prices in
//! `docs/benchmarks.md`.

use super::{tenant, webhook, webhook_with};
use converger_core::aws::Service;
use converger_core::{DeliveryId, DeliveryStatus, Tier};
use converger_ports::Channel;
use converger_ports::prelude::*;
use converger_stack::receiver::{Receiver, Reply};
use converger_stack::stack::{Stack, StackOptions};
use converger_store::counter::{Counts, RequestCounter};
use converger_store::dynamo::DynamoStore;
use serde_json::{Map, Value, json};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries per first-try case.
    pub deliveries: usize,
    /// Deliveries per retrying case (three attempts, dead letter): each waits out its
    /// backoffs, one delivery at a time.
    pub retried: usize,
    /// First tries before each first-try case is counted (warm caches, the window grown).
    pub warm: usize,
}

/// List prices, US East (N. Virginia), in dollars per million (see `docs/benchmarks.md`).
pub const PRICE_DYNAMODB_WRITE_UNIT: f64 = 0.625;
pub const PRICE_DYNAMODB_READ_UNIT: f64 = 0.125;
pub const PRICE_SQS_REQUEST: f64 = 0.40;
pub const PRICE_EVENTBRIDGE_EVENT: f64 = 1.00;

/// The operations DynamoDB bills as writes (the rest of its operations are reads).
const WRITES: [&str; 5] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
];

struct Case {
    name: &'static str,
    /// The webhook's receiver (none for a channel that sends into AWS).
    receiver: Option<Receiver>,
    channel: Channel,
    /// Activities posted at once.
    burst: usize,
    /// Sent by this event type instead of to the channel by id.
    event_type: Option<&'static str>,
    /// The status and attempts each delivery ends with.
    done: (DeliveryStatus, u32),
    /// Deliveries counted.
    deliveries: usize,
    /// First-try deliveries sent before counting: warm caches, and a window grown from its
    /// slow start, as on a channel in steady use.
    warm: usize,
}

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let counter = RequestCounter::new();
    let opts = StackOptions {
        counter: Some(counter.clone()),
        ..StackOptions::bench("req")
    };
    let stack = Stack::start(opts).await?;
    let result = cases(&stack, &counter, &o).await;
    stack.stop().await;
    let cases = result?;
    Ok(super::emit(json!({
        "scenario": "requests",
        "backend": "local stack on the emulator (requests counted by an SDK interceptor)",
        "deliveries_per_case": o.deliveries,
        "deliveries_per_retrying_case": o.retried,
        "cases": cases,
        "target_billed_per_first_try": 5,
        "prices_per_million_usd": {
            "dynamodb_write_unit": PRICE_DYNAMODB_WRITE_UNIT,
            "dynamodb_read_unit": PRICE_DYNAMODB_READ_UNIT,
            "sqs_request": PRICE_SQS_REQUEST,
            "eventbridge_event": PRICE_EVENTBRIDGE_EVENT,
        },
    })))
}

async fn cases(stack: &Stack, counter: &RequestCounter, o: &Options) -> Result<Value, String> {
    let p = &stack.pipeline;
    let (t, key) = tenant(p, Tier::Default).await?;
    let retry = json!({"schedule": [1000], "max_attempts": 3});
    // The failing cases measure retries, not the breaker: it would open after 5 failures.
    let no_breaker = json!({"failure_threshold": 1000});
    let mut flaky_script = Vec::new();
    for _ in 0..o.retried {
        flaky_script.extend([Reply::status(503), Reply::status(503), Reply::status(200)]);
    }
    let ok = Receiver::always(200).await?;
    let unwindowed = Receiver::always(200).await?;
    let burst = Receiver::always(200).await?;
    let subscribed = Receiver::always(200).await?;
    let flaky = Receiver::start(flaky_script, Reply::status(200)).await?;
    let dead = Receiver::always(503).await?;
    // An endpoint behind OAuth 2.0 client credentials, and its token endpoint.
    let behind_oauth = Receiver::always(200).await?;
    let idp = Receiver::start(
        vec![],
        Reply::status(200)
            .header("content-type", "application/json")
            .body(r#"{"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600}"#),
    )
    .await?;
    // A broker of the tenant's, on this machine: the messages are confirmed by it, and
    // counted below.
    let broker = converger_stack::rabbitmq::Broker::start(false).await?;
    broker.bind("bench", "bench", "#").await?;
    let list = vec![
        Case {
            name: "first_try",
            channel: webhook(p, &t, &ok.url, json!({})).await?,
            receiver: Some(ok),
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "first_try_no_window",
            channel: webhook_with(
                p,
                &t,
                &unwindowed.url,
                json!({}),
                json!({"max_in_flight": null}),
            )
            .await?,
            receiver: Some(unwindowed),
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "first_try_burst",
            channel: webhook(p, &t, &burst.url, json!({})).await?,
            receiver: Some(burst),
            burst: 10,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "first_try_by_event_type",
            channel: {
                let mut c = webhook(p, &t, &subscribed.url, json!({})).await?;
                c.event_types = vec![BENCH_EVENT.into()];
                let patch = converger_ports::ChannelPatch {
                    event_types: Some(c.event_types.clone()),
                    ..Default::default()
                };
                p.channels()
                    .update_channel(&c, &patch)
                    .await
                    .map_err(|e| e.to_string())?;
                c
            },
            receiver: Some(subscribed),
            burst: 1,
            event_type: Some(BENCH_EVENT),
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "three_attempts",
            channel: webhook_with(p, &t, &flaky.url, retry.clone(), no_breaker.clone()).await?,
            receiver: Some(flaky),
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 3),
            deliveries: o.retried,
            warm: 0,
        },
        Case {
            name: "dead_letter",
            channel: webhook_with(p, &t, &dead.url, retry, no_breaker).await?,
            receiver: Some(dead),
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Failed, 3),
            deliveries: o.retried,
            warm: 0,
        },
        Case {
            name: "oauth2_first_try",
            channel: super::channel_of(
                p,
                &t,
                converger_core::ChannelType::Webhook,
                json!({"url": behind_oauth.url, "auth": {
                    "type": "oauth2_client_credentials", "token_url": idp.url,
                    "client_id": "bench", "client_secret": "bench-secret"}}),
            )
            .await?,
            receiver: Some(behind_oauth),
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_sqs_first_try",
            channel: aws_channel(stack, &t, Service::Sqs).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_eventbridge_first_try",
            channel: aws_channel(stack, &t, Service::EventBridge).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_kinesis_first_try",
            channel: aws_channel(stack, &t, Service::Kinesis).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_sns_first_try",
            channel: aws_channel(stack, &t, Service::Sns).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_firehose_first_try",
            channel: aws_channel(stack, &t, Service::Firehose).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_stepfunctions_first_try",
            channel: aws_channel(stack, &t, Service::StepFunctions).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "aws_s3_first_try",
            channel: aws_channel(stack, &t, Service::S3).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
        Case {
            name: "rabbitmq_first_try",
            channel: rabbitmq_channel(p, &t, &broker).await?,
            receiver: None,
            burst: 1,
            event_type: None,
            done: (DeliveryStatus::Sent, 1),
            deliveries: o.deliveries,
            warm: o.warm,
        },
    ];
    // A deadline only: under the test command the emulator is shared by every test at once,
    // and a post once took longer than 10 s there.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| e.to_string())?;
    // The harness reads through its own, uncounted client.
    let store = DynamoStore::new(
        stack.aws()?.clients.dynamodb.clone(),
        stack.aws()?.resources.clone(),
    );
    let url = format!("{}/api/v1/activities", stack.api_url);

    // The warm-ups, every case's beside the others' (each on its own channel, one delivery
    // at a time): nothing is counted yet, and each case waits below for its own window to
    // settle and the caches to expire before it counts.
    let warm = list.iter().map(|case| {
        let (http, url, key, store) = (&http, &url, &key, &store);
        async move {
            for n in 0..case.warm {
                let ids = post(http, url, key, case, n, 1).await?;
                super::settle(store, &ids, (DeliveryStatus::Sent, 1), WAIT).await?;
            }
            Ok::<(), String>(())
        }
    });
    futures::future::try_join_all(warm).await?;
    let mut out = Map::new();
    for (i, case) in list.iter().enumerate() {
        // A healthy channel's window has grown to its cap: wait until the flow item shows it no
        // longer moving, and every function's cached view of it (`FLOW_CACHE_TTL_MS`, 1 s) has
        // expired, so the count does not depend on how fast the warm-up went.
        if case.warm > 0 {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut last = None;
            while Instant::now() < deadline {
                let f = store
                    .get_flow(&case.channel.id)
                    .await
                    .map_err(|e| e.to_string())?;
                if f.slots.is_empty() && last == Some(f.window) {
                    break;
                }
                last = Some(f.window);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
        // The warm-ups' own trailing work (settle, events, deletes, their row changes) is not
        // counted: they all ran before the first case, and each case ends with its own done.
        if i == 0 {
            super::quiet(stack).await;
        }
        let _ = counter.take();
        let takes_before = converger_http::limits::SHARED_TAKES.load(Ordering::Relaxed);
        let started = Instant::now();
        let mut n = case.warm;
        while n < case.warm + case.deliveries {
            let k = case.burst.min(case.warm + case.deliveries - n);
            let ids = post(&http, &url, &key, case, n, k).await?;
            super::settle(&store, &ids, case.done, WAIT).await?;
            n += k;
        }
        // The work after the row is written (settle, events, the queue delete, the changes
        // function's batches) finishes.
        super::quiet(stack).await;
        let counts = counter.take();
        if case
            .receiver
            .as_ref()
            .is_some_and(|r| r.count() < case.warm + case.deliveries)
        {
            return Err(format!("{}: the receiver saw too few requests", case.name));
        }
        if case.name == "rabbitmq_first_try" {
            let got = broker.take("bench").await?.len();
            if got < case.warm + case.deliveries {
                return Err(format!("{}: the broker took {got} messages", case.name));
            }
        }
        let mut line = per_delivery(&counts, case.deliveries, started.elapsed());
        // The API rate limit's own writes (already among the `UpdateItem`s): a share of a
        // batch of the key's schedule per call.
        let takes = converger_http::limits::SHARED_TAKES.load(Ordering::Relaxed) - takes_before;
        line["api_rate_limit_takes_per_call"] =
            json!((takes as f64 / case.deliveries.max(1) as f64 * 100.0).round() / 100.0);
        if case.name == "oauth2_first_try" {
            // Token requests, the warm-up's included: one per instance and hour, whatever the
            // deliveries.
            let sent = (case.warm + case.deliveries).max(1) as f64;
            line["token_requests"] = json!(idp.count());
            line["token_requests_per_delivery"] =
                json!((idp.count() as f64 / sent * 1000.0).round() / 1000.0);
        }
        out.insert(case.name.into(), line);
    }
    Ok(Value::Object(out))
}

/// A `rabbitmq` channel of `t` publishing to `broker`'s `bench` exchange.
async fn rabbitmq_channel(
    p: &converger_pipeline::Pipeline,
    t: &converger_ports::Tenant,
    broker: &converger_stack::rabbitmq::Broker,
) -> Result<Channel, String> {
    let config = json!({"url": broker.url(), "username": converger_stack::rabbitmq::USER,
                        "password": broker.password, "exchange": "bench", "routing_key": "first"});
    let mut c = Channel::new(
        t.id.clone(),
        converger_core::ChannelType::Rabbitmq,
        "bench-rabbitmq",
        config.as_object().cloned().unwrap_or_default(),
        converger_core::Timestamp::now(),
    );
    c.auto_disable.failed_attempts = Some(0);
    p.channels()
        .create_channel(&c)
        .await
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// The second account of the emulator that stands in for a tenant's.
const TENANT_ACCOUNT: &str = "222233334444";

/// An AWS channel of `t` sending into a new target of `service` in [`TENANT_ACCOUNT`] as a
/// role there: the target is made with that account's credentials (the emulator files an
/// assumed role's requests under its account).
pub(super) async fn aws_channel(
    stack: &Stack,
    t: &converger_ports::Tenant,
    service: Service,
) -> Result<Channel, String> {
    let role = format!("arn:aws:iam::{TENANT_ACCOUNT}:role/converger-delivery");
    // The tenant's own: a target outlives the stack on a shared emulator.
    let name = &format!("bench-{}", t.id.as_str().replace('_', "-"));
    let target = match stack.memory() {
        // In process: the model of tenants' accounts gets the role and the target.
        Some(memory) => {
            let target = match service {
                Service::Sqs => {
                    format!("https://sqs.eu-west-1.amazonaws.com/{TENANT_ACCOUNT}/{name}")
                }
                Service::EventBridge => {
                    format!("arn:aws:events:eu-west-1:{TENANT_ACCOUNT}:event-bus/{name}")
                }
                Service::Kinesis => {
                    format!("arn:aws:kinesis:eu-west-1:{TENANT_ACCOUNT}:stream/{name}")
                }
                Service::Sns => format!("arn:aws:sns:eu-west-1:{TENANT_ACCOUNT}:{name}"),
                Service::Firehose => {
                    format!("arn:aws:firehose:eu-west-1:{TENANT_ACCOUNT}:deliverystream/{name}")
                }
                Service::StepFunctions => {
                    format!("arn:aws:states:eu-west-1:{TENANT_ACCOUNT}:stateMachine:{name}")
                }
                Service::S3 => name.clone(),
            };
            memory
                .tenant_aws
                .add_role(&role, t.aws_external_id.as_deref().unwrap_or_default());
            memory.tenant_aws.add_target(&target);
            target
        }
        None => emulator_target(stack, service, name).await?,
    };
    let mut config = Map::new();
    config.insert(service.target_key().into(), json!(target));
    if service == Service::S3 {
        config.insert("region".into(), json!("eu-west-1"));
    }
    config.insert("role_arn".into(), json!(role));
    super::channel_of(
        &stack.pipeline,
        t,
        service.channel_type(),
        Value::Object(config),
    )
    .await
}

/// A new target of `service` named `name` in [`TENANT_ACCOUNT`] on the emulator.
async fn emulator_target(stack: &Stack, service: Service, name: &str) -> Result<String, String> {
    let tenant = converger_stack::emulator::account_config(
        &stack.aws()?.clients.config,
        TENANT_ACCOUNT,
        "eu-west-1",
    )
    .await?;
    tenant_target(&tenant, service, name).await
}

/// A new target of `service` named `name` in the emulator's account `tenant` (eu-west-1, the
/// account [`TENANT_ACCOUNT`]'s role `converger-delivery`): its queue URL, ARN or (S3) bucket
/// name. A delivery stream writes to a bucket of its own, `<name>-fh`.
pub async fn tenant_target(
    tenant: &aws_config::SdkConfig,
    service: Service,
    name: &str,
) -> Result<String, String> {
    let tenant = tenant.clone();
    let fail = |e: &dyn std::fmt::Display| format!("the tenant's {}: {e}", service.label());
    let target = match service {
        Service::Sqs => {
            aws_sdk_sqs::Client::new(&tenant)
                .create_queue()
                .queue_name(name)
                .send()
                .await
                .map_err(|e| fail(&e))?;
            format!("https://sqs.eu-west-1.amazonaws.com/{TENANT_ACCOUNT}/{name}")
        }
        Service::EventBridge => aws_sdk_eventbridge::Client::new(&tenant)
            .create_event_bus()
            .name(name)
            .send()
            .await
            .map_err(|e| fail(&e))?
            .event_bus_arn
            .ok_or("no bus ARN")?,
        Service::Kinesis => {
            aws_sdk_kinesis::Client::new(&tenant)
                .create_stream()
                .stream_name(name)
                .shard_count(1)
                .send()
                .await
                .map_err(|e| fail(&e))?;
            format!("arn:aws:kinesis:eu-west-1:{TENANT_ACCOUNT}:stream/{name}")
        }
        Service::Sns => aws_sdk_sns::Client::new(&tenant)
            .create_topic()
            .name(name)
            .send()
            .await
            .map_err(|e| fail(&e))?
            .topic_arn
            .ok_or("no topic ARN")?,
        Service::S3 | Service::Firehose => {
            // The stream's own bucket beside the S3 case's.
            let bucket = if service == Service::S3 {
                name.to_owned()
            } else {
                format!("{name}-fh")
            };
            let s3 = aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&tenant)
                    .force_path_style(true)
                    .build(),
            );
            s3.create_bucket()
                .bucket(&bucket)
                .create_bucket_configuration(
                    aws_sdk_s3::types::CreateBucketConfiguration::builder()
                        .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::EuWest1)
                        .build(),
                )
                .send()
                .await
                .map_err(|e| fail(&aws_sdk_s3::error::DisplayErrorContext(e)))?;
            if service == Service::S3 {
                bucket
            } else {
                let destination =
                    aws_sdk_firehose::types::ExtendedS3DestinationConfiguration::builder()
                        .role_arn(format!(
                            "arn:aws:iam::{TENANT_ACCOUNT}:role/converger-delivery"
                        ))
                        .bucket_arn(format!("arn:aws:s3:::{bucket}"))
                        .build()
                        .map_err(|e| fail(&e))?;
                aws_sdk_firehose::Client::new(&tenant)
                    .create_delivery_stream()
                    .delivery_stream_name(name)
                    .extended_s3_destination_configuration(destination)
                    .send()
                    .await
                    .map_err(|e| fail(&e))?
                    .delivery_stream_arn
                    .ok_or("no delivery stream ARN")?
            }
        }
        Service::StepFunctions => {
            aws_sdk_sfn::Client::new(&tenant)
                .create_state_machine()
                .name(name)
                .role_arn(format!(
                    "arn:aws:iam::{TENANT_ACCOUNT}:role/converger-delivery"
                ))
                .definition(
                    json!({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": true}}})
                        .to_string(),
                )
                .send()
                .await
                .map_err(|e| fail(&e))?
                .state_machine_arn
        }
    };
    Ok(target)
}

/// Longest wait for a case's deliveries to settle.
const WAIT: Duration = Duration::from_secs(60);

/// The event type of the `first_try_by_event_type` case; only its channel subscribes.
const BENCH_EVENT: &str = "bench.created";

/// Posts `k` activities at once for `case` through the tenant API; their delivery ids.
async fn post(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    case: &Case,
    first: usize,
    k: usize,
) -> Result<Vec<DeliveryId>, String> {
    let sends = (first..first + k).map(|n| async move {
        match case.event_type {
            None => super::post_activity(http, url, key, &case.channel.id, n).await,
            Some(t) => {
                // As `post_activity`'s, with the seq given (no counter update).
                let body = json!({"conversation_id": format!("conv-{}", n % 100), "seq": n + 1,
                                  "event_type": t, "payload": {"text": "hello", "n": n}});
                super::post_body(http, url, key, body.to_string()).await
            }
        }
    });
    futures::future::try_join_all(sends).await
}

/// One case's counts divided by its deliveries, with the billed total and the cost.
pub fn per_delivery(counts: &Counts, deliveries: usize, took: Duration) -> Value {
    let n = deliveries.max(1) as f64;
    let round = |x: f64| (x * 100.0).round() / 100.0;
    let mut by_op = Map::new();
    let (mut billed, mut dollars, mut idle) = (0.0, 0.0, 0u64);
    for ((service, op), tally) in counts {
        if service == "esm" {
            idle += tally.requests;
            continue;
        }
        if service == converger_store::counter::EVENT_TYPES {
            continue;
        }
        by_op.insert(
            format!("{service}/{op}"),
            json!(round(tally.requests as f64 / n)),
        );
        let price = match service.as_str() {
            "dynamodb" if WRITES.contains(&op.as_str()) => PRICE_DYNAMODB_WRITE_UNIT,
            "dynamodb" => PRICE_DYNAMODB_READ_UNIT,
            "sqs" => PRICE_SQS_REQUEST,
            "events" => PRICE_EVENTBRIDGE_EVENT,
            _ => 0.0,
        };
        dollars += tally.units * price / n;
        if service == "dynamodb" || service == "sqs" {
            billed += tally.requests as f64 / n;
        }
    }
    json!({
        "per_delivery": by_op,
        "billed_requests_per_delivery": round(billed),
        "cost_per_million_usd": round(dollars),
        "idle_empty_receives": idle,
        "seconds": round(took.as_secs_f64()),
    })
}
