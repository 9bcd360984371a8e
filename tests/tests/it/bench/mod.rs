//! Smoke runs of the benchmark command's scenarios with tiny sizes: they check that the
//! harness works and that its figures are there and sane. The figures themselves come from
//! full runs (`docs/benchmarks.md`), never from a test. `requests` is the exception: request
//! counts do not depend on the machine's speed, so its budget is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_bench as bench;
use reports::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

mod reports;

/// A scenario's line read as the fields a test checks (the line's other fields are ignored);
/// panics with the line when it does not have them.
fn report<T: DeserializeOwned>(line: &Value) -> T {
    T::deserialize(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// The figure of `name` (a request kind, a table) in a map keyed by name, which the line must
/// have.
fn named(m: &BTreeMap<String, f64>, name: &str, line: &Value) -> f64 {
    m.get(name)
        .copied()
        .unwrap_or_else(|| panic!("no `{name}`: {line}"))
}

#[tokio::test]
async fn latency_scenario_measures_each_delivery_and_the_floor() {
    let line = bench::latency::run(bench::latency::Options {
        activities: 10,
        rate: 20,
    })
    .await
    .unwrap();
    let r: LatencyReport = report(&line);
    assert_eq!(r.scenario, "latency");
    assert_eq!(r.ingest_to_receiver.n, 10, "{line}");
    assert_eq!(r.api_answer.n, 10, "{line}");
    assert_eq!(r.floor_bare_post.n, 10, "{line}");
    let delivered = &r.ingest_to_receiver;
    assert!(delivered.p50_ms > 0.0, "{line}");
    assert!(delivered.p50_ms <= delivered.p99_ms);
    assert!(r.machine.cores >= 1);
}

#[tokio::test]
async fn throughput_scenario_counts_deliveries_and_cpu_on_both_backends() {
    let line = bench::throughput::run(bench::throughput::Options {
        in_process: 200,
        emulator: 20,
    })
    .await
    .unwrap();
    let r: ThroughputReport = report(&line);
    for b in [&r.in_process, &r.emulator] {
        assert!(b.deliveries_per_s > 0.0, "{line}");
        assert!(b.cpu_s.is_some_and(|c| c >= 0.0), "{line}");
        assert!(b.cpu_s_per_1000_deliveries.is_some(), "{line}");
    }
    assert_eq!(r.in_process.deliveries, 200);
    // The emulator's CPU is read when the scenario started it (not under the test command,
    // which shares one emulator through AWS_ENDPOINT_URL).
    assert!(r.emulator.emulator_cpu_s.is_none_or(|c| c > 0.0), "{line}");
    assert!(r.in_process.emulator_cpu_s.is_none());
}

#[tokio::test]
async fn requests_scenario_counts_every_aws_request_of_a_delivery() {
    // Four per case: a cache that expires while the emulator is slow (a stray channel or flow
    // read, which the functions' own caches make rare but timing-dependent) moves the
    // per-delivery figure by a quarter, not a half.
    // Two per retrying case: each waits out its backoffs, and its figures are whole
    // receives per delivery.
    let line = bench::requests::run(bench::requests::Options {
        deliveries: 4,
        retried: 2,
        warm: 10,
    })
    .await
    .unwrap();
    let r: RequestsReport = report(&line);
    let cases = &r.cases;
    let first = &cases.first_try.per_delivery;
    // One batch write of the new rows, one send, one receive and
    // one delete per delivery; two item updates (claim, sent): a healthy channel's `auto`
    // window costs no write. Request counts do not depend on the machine: a change that adds
    // one to the hot path fails here.
    assert_eq!(first.get("dynamodb/BatchWriteItem"), Some(&1.0), "{line}");
    // Beside the fixed cost, two things depend on how slow the shared emulator is at that
    // moment: a channel or flow item read again after a function's cache expired, and a
    // message that comes before its row (sent beside the row's write): its claim finds no
    // row (one more `UpdateItem`) and reads the row before it claims again (a `GetItem`).
    // So every `UpdateItem` beyond two comes with a `GetItem`, and nothing else varies: no
    // counter is written on the deliver path (counts come from the table's stream).
    // A channel without a cap of its own has the platform's bound, always counted: a slot
    // taken at ingest and given back (the flow item, or a slot item of its own, is written
    // twice more per delivery).
    let counted = &cases.first_try_no_window.per_delivery;
    assert!(
        named(counted, "dynamodb/UpdateItem", &line)
            >= named(first, "dynamodb/UpdateItem", &line) + 1.0,
        "{line}"
    );
    {
        let case = "first_try";
        let c = &cases.first_try;
        let per = &c.per_delivery;
        let reads = per.get("dynamodb/GetItem").copied().unwrap_or(0.0);
        // The API rate limit's takes of a batch of the key's schedule: well under one a call.
        let limit = c.api_rate_limit_takes_per_call;
        assert!(limit <= 0.5, "{case}: {line}");
        // A take is one conditional `UpdateItem`, or two when the schedule was busy.
        let updates = named(per, "dynamodb/UpdateItem", &line);
        let early = updates - 2.0 - limit;
        assert!(
            (-0.001..=reads + limit + 0.001).contains(&early),
            "{case}: {line}"
        );
        let billed = c.billed_requests_per_delivery;
        // Six for the delivery itself; its watch copy (`core::policy::WATCH_DELAY_S`) adds a
        // receive and a delete, at most one each (shared by the copies that come together:
        // a quarter each when the case's four come in one batch), and a read, counted above.
        assert!(billed - reads - early - limit <= 8.001, "{case}: {line}");
    }
    // Sending by event type reads the subscriber list once per `CHANNEL_CACHE_TTL_MS` (5 s)
    // and API instance, not once per delivery: a refresh is all a slow run may add.
    let by_type = &cases.first_try_by_event_type;
    let queries = by_type
        .per_delivery
        .get("dynamodb/Query")
        .copied()
        .unwrap_or(0.0)
        * 4.0;
    let seconds = by_type.seconds;
    assert!(queries <= 1.0 + seconds / 5.0, "{line}");
    assert_eq!(
        by_type.per_delivery.get("dynamodb/BatchWriteItem"),
        Some(&1.0),
        "{line}"
    );
    // One batch send holds a first try's message and its watch copy; the watch copy is
    // received and deleted on its own, shared by the copies that come together.
    assert_eq!(first.get("sqs/SendMessageBatch"), Some(&1.0), "{line}");
    assert!(!first.contains_key("sqs/SendMessage"), "{line}");
    for request in ["sqs/ReceiveMessage", "sqs/DeleteMessageBatch"] {
        let n = named(first, request, &line);
        assert!((1.0..=2.0).contains(&n), "{request}: {line}");
    }
    // No event on the delivery's path: its status event comes from the table's stream, sent
    // by the changes function with others of its batch (counted apart as `changes:`).
    assert!(!first.contains_key("events/PutEvents"), "{line}");
    let put = named(first, "changes:events/PutEvents", &line);
    // The live stream is on, and no client of the tenant ever connected: the changes
    // function reads the live tenants (at most once a second), never a conversation's
    // subscribers.
    assert_eq!(first.get("changes:dynamodb/Query"), None, "{line}");
    assert!(put > 0.0 && put <= 1.0, "{line}");
    // An AWS channel: the tenant's queue gets one `SendMessage` a delivery, made as the
    // tenant's role (counted apart: the tenant's account pays it), and the role is not assumed
    // again while its session lasts (the warm-up took it).
    for (case, c, send) in [
        (
            "aws_sqs_first_try",
            &cases.aws_sqs_first_try,
            "tenant:sqs/SendMessage",
        ),
        (
            "aws_eventbridge_first_try",
            &cases.aws_eventbridge_first_try,
            "tenant:events/PutEvents",
        ),
        (
            "aws_kinesis_first_try",
            &cases.aws_kinesis_first_try,
            "tenant:kinesis/PutRecord",
        ),
        (
            "aws_sns_first_try",
            &cases.aws_sns_first_try,
            "tenant:sns/Publish",
        ),
        (
            "aws_firehose_first_try",
            &cases.aws_firehose_first_try,
            "tenant:firehose/PutRecord",
        ),
        (
            "aws_stepfunctions_first_try",
            &cases.aws_stepfunctions_first_try,
            "tenant:states/StartExecution",
        ),
        (
            "aws_s3_first_try",
            &cases.aws_s3_first_try,
            "tenant:s3/PutObject",
        ),
    ] {
        let aws = &c.per_delivery;
        assert_eq!(aws.get(send), Some(&1.0), "{case}: {line}");
        assert!(!aws.contains_key("sts/AssumeRole"), "{case}: {line}");
        assert_eq!(
            aws.get("dynamodb/BatchWriteItem"),
            Some(&1.0),
            "{case}: {line}"
        );
    }
    // A RabbitMQ channel: what a webhook's first try pays, no request into an account.
    let mq = &cases.rabbitmq_first_try.per_delivery;
    assert_eq!(mq.get("dynamodb/BatchWriteItem"), Some(&1.0), "{line}");
    assert!(!mq.keys().any(|k| k.starts_with("tenant:")), "{line}");
    // An endpoint behind OAuth 2.0: one token for the warm-up and the counted deliveries
    // together (two if the first two raced past an empty cache on two instances).
    let tokens = cases.oauth2_first_try.token_requests;
    assert!(tokens.is_some_and(|n| (1..=2).contains(&n)), "{line}");
    // Three attempts: at most three receives (an attempt that the task handing it its window
    // slot runs itself needs none), and one for each attempt's watch copy (a retry within
    // one hop rides its message and a watch copy, ADR 0094); a dead letter after three
    // attempts likewise. A message SQS hands out before its due time (its delay is whole
    // seconds) is sent again for the rest: one more receive per attempt at most.
    for (case, c) in [
        ("three_attempts", &cases.three_attempts),
        ("dead_letter", &cases.dead_letter),
    ] {
        let receives = named(&c.per_delivery, "sqs/ReceiveMessage", &line);
        assert!((2.0..=9.0).contains(&receives), "{case}: {line}");
    }
    for c in [
        &cases.first_try,
        &cases.first_try_burst,
        &cases.three_attempts,
        &cases.dead_letter,
    ] {
        assert!(c.cost_per_million_usd > 0.0, "{line}");
    }
}

/// The units of `table` itself (not its indexes) in a `keys` case line, per delivery.
fn table_units(case: &KeysCase, table: &str) -> f64 {
    case.writes
        .iter()
        .filter(|f| f.table == table && f.index.is_none())
        .map(|f| f.units_per_delivery)
        .sum()
}

/// The units of `index` on the deliveries table in a `keys` case line, per delivery.
fn index_units(case: &KeysCase, index: &str) -> f64 {
    case.writes
        .iter()
        .filter(|f| f.index.as_deref() == Some(index))
        .map(|f| f.units_per_delivery)
        .sum()
}

#[tokio::test]
async fn keys_scenario_counts_units_per_key_family_on_every_index() {
    let line = bench::keys::run(bench::keys::Options {
        deliveries: 3,
        replay: 20,
        warm: 2,
    })
    .await
    .unwrap();
    let r: KeysReport = report(&line);
    let cases = &r.cases;
    let first = &cases.first_try;
    // A producer without `seq` writes its conversation's sequence item for each activity;
    // in a batch, once per conversation.
    let activities = |case: &KeysCase| table_units(case, "activities");
    assert!(
        activities(&cases.first_try_without_seq) > activities(&cases.first_try),
        "{line}"
    );
    assert!(
        activities(&cases.first_try_batch) < activities(&cases.first_try_without_seq),
        "{line}"
    );
    // Unit counts follow from the requests, not the machine's speed. A first try enters its
    // tenant's listing once, when it is sent (not when it is created), and never the
    // channel index (sparse: dead letters and parked deliveries only).
    assert_eq!(index_units(first, "by_tenant_status_s"), 1.0, "{line}");
    assert_eq!(index_units(first, "by_channel_status_s"), 0.0, "{line}");
    // The due index: a first try in flight is in none (its watch message covers it).
    assert_eq!(index_units(first, "by_due"), 0.0, "{line}");
    // Nor a retry within one hop: its message and watch copy carry it (ADR 0094).
    for (case, c) in [
        ("three_attempts", &cases.three_attempts),
        ("dead_letter", &cases.dead_letter),
    ] {
        assert_eq!(index_units(c, "by_due"), 0.0, "{case}: {line}");
    }
    assert!(first.write_units_per_delivery >= 7.0, "{line}");
    assert!(
        first
            .hottest_write
            .tenant
            .as_ref()
            .and_then(|t| t.ceiling_per_s)
            .is_some_and(|c| c > 0.0),
        "{line}"
    );
    // No key the whole deployment shares is written by a first try, or by retries within
    // one hop.
    assert!(first.hottest_write.deployment.is_none(), "{line}");
    assert!(
        cases.three_attempts.hottest_write.deployment.is_none(),
        "{line}"
    );
    // Every seeded dead letter replayed (a call whose transaction committed but whose
    // answer was lost still counts its rows).
    let replay = &cases.bulk_replay;
    assert!(
        replay.error.is_none() && replay.write_units_per_delivery.is_some_and(|u| u > 0.0),
        "{line}"
    );
    // A dead letter enters the channel index, once.
    let dead = &cases.dead_letter;
    assert_eq!(index_units(dead, "by_channel_status_s"), 1.0, "{line}");
    assert!(
        dead.write_units_per_delivery > first.write_units_per_delivery,
        "{line}"
    );
    assert!(cases.sweep.read_units_per_delivery > 0.0, "{line}");
}

#[tokio::test]
async fn cost_scenario_prices_every_part_of_a_delivery() {
    converger_tests::init_tracing();
    let line = bench::cost::run(bench::cost::Options {
        deliveries: 2,
        warm: 2,
    })
    .await
    .unwrap();
    let r: CostReport = report(&line);
    let cases = &r.cases;
    for (case, c) in [
        ("first_try", &cases.first_try),
        ("aws_sqs_first_try", &cases.aws_sqs_first_try),
        ("three_attempts", &cases.three_attempts),
        ("dead_letter", &cases.dead_letter),
        ("first_try_1mib", &cases.first_try_1mib),
    ] {
        let per = &c.per_delivery;
        // One activity per delivery, posted once through the tenant API.
        assert_eq!(per.api_requests, 1.0, "{case}: {line}");
        assert!(per.dynamodb_write_units > 0.0, "{case}: {line}");
        // A send per delivery, and the receives and deletes of its batches (two deliveries
        // may share one batch: half of each per delivery).
        assert!(per.sqs_requests > 1.0, "{case}: {line}");
        // The API's invocation and a share of the deliver function's.
        assert!(per.lambda_invocations > 1.0, "{case}: {line}");
        assert!(per.lambda_gb_seconds > 0.0, "{case}: {line}");
        // What the functions log about each delivery (Lambda's own lines are off: the
        // template's system log level is `WARN`).
        assert!(per.log_bytes > 0.0, "{case}: {line}");
        let lambda = &c.lambda;
        assert_eq!(
            lambda
                .get("ApiFunction")
                .map(|f| f.invocations_per_delivery),
            Some(1.0),
            "{line}"
        );
        assert!(
            lambda
                .get("DeliverFunction")
                .is_some_and(|f| f.invocations_per_delivery > 0.0),
            "{case}: {line}"
        );
        assert!(c.usd_per_million_total > 0.0);
    }
    // Every change is one event (a failed attempt with its retry to come included: three
    // attempts are three, a dead letter after three is three and the dead letter); a health
    // change beside it (the machine's load can make a warm endpoint look slow) is counted too,
    // and under its own type.
    for (case, c, changes) in [
        ("first_try", &cases.first_try, 1.0),
        ("three_attempts", &cases.three_attempts, 3.0),
        ("dead_letter", &cases.dead_letter, 3.0),
    ] {
        let per = &c.per_delivery;
        let types = &per.eventbridge_events_by_type;
        assert_eq!(
            types.get("delivery.status_changed"),
            Some(&changes),
            "{case}: {line}"
        );
        // A dead letter is announced twice: its status (failed) and the dead letter itself.
        let dead_lettered = if case == "dead_letter" { 1.0 } else { 0.0 };
        assert_eq!(
            types.get("delivery.dead_lettered").copied().unwrap_or(0.0),
            dead_lettered,
            "{case}: {line}"
        );
        let by_type: f64 = types.values().sum();
        assert_eq!(per.eventbridge_events, by_type, "{case}: {line}");
    }
    // A 1 MiB payload: one PUT to the payload bucket, one GET for its one attempt, and the
    // receiver takes the whole of it; a small one touches no bucket.
    let large = &cases.first_try_1mib.per_delivery;
    assert_eq!(large.s3_puts, 1.0, "{line}");
    assert_eq!(large.s3_gets, 1.0, "{line}");
    assert!(large.bytes_to_receivers > 1_048_576.0, "{line}");
    assert_eq!(cases.first_try.per_delivery.s3_puts, 0.0, "{line}");
    let priced = &cases.first_try_1mib.usd_per_million;
    assert!(priced.s3_storage_for_the_retention > 20.0, "{line}");
    assert!(priced.data_out_to_receivers > 90.0, "{line}");
    // Retries cost more than a first try.
    assert!(
        cases.three_attempts.usd_per_million_total > cases.first_try.usd_per_million_total,
        "{line}"
    );
    assert!(r.fixed_monthly_usd.total > 0.0, "{line}");
}

#[tokio::test]
async fn hot_tenant_scenario_meets_the_throttles_its_key_layout_implies() {
    // A hundredth of the rates against a hundredth of each partition's limits.
    let line = bench::hot_tenant::run(bench::hot_tenant::Options {
        seconds: 2,
        scale: 100.0,
        changes_everywhere: false,
        ..bench::hot_tenant::Options::default()
    })
    .await
    .unwrap();
    let r: HotTenantReport = report(&line);
    let cases = &r.cases;
    let throttled = |case: &HotTenantCase, family: &str| -> u64 {
        case.capacity
            .throttled_by_family
            .iter()
            .filter(|(k, _)| k.contains(family))
            .map(|(_, v)| v)
            .sum()
    };
    for (case, c) in [
        ("tenant_default_shards", &cases.tenant_default_shards),
        ("tenant_64_shards", &cases.tenant_64_shards),
        ("one_channel", &cases.one_channel),
        ("one_channel_rate_limited", &cases.one_channel_rate_limited),
        ("tenant_shards_grow", &cases.tenant_shards_grow),
    ] {
        let (n, got, refused) = (c.activities, c.delivered, c.refused);
        assert!(n > 0 && got + refused >= n, "{case}: {line}");
        assert!(c.capacity.write_units_per_delivery > 0.0, "{case}: {line}");
    }
    // Two listing shards take 5,000 first tries a second at 2,500 units a second each: over
    // a partition's limit. Sixty-four take it.
    assert_eq!(cases.tenant_default_shards.listing_shards, 2);
    assert!(
        throttled(&cases.tenant_default_shards, "by_tenant_status_s") > 0,
        "{line}"
    );
    assert_eq!(cases.tenant_64_shards.listing_shards, 64);
    assert_eq!(cases.tenant_64_shards.due_shards, 64);
    // The tenant as created, its load rising, run and reported. Whether a grant comes within
    // this smoke's seconds depends on the tenant's usage counter being written, and at a
    // hundredth of a partition's limits that one key is throttled (the counter's own limit,
    // docs/scaling.md); the grant itself is the use cases' and the store suite's to prove.
    let grown = &cases.tenant_shards_grow;
    assert_eq!(grown.listing_shards, 2, "{line}");
    let growth = grown.growth.as_ref();
    assert_eq!(growth.map(|g| g.tenant_refresh_s), Some(5), "{line}");
    assert!(
        growth.and_then(|g| g.granted).is_none_or(|g| g >= 4),
        "{line}"
    );
    // A window of 2,000 is spread over slot items: no slot write throttled on the flow item.
    assert!(
        cases
            .one_channel
            .capacity
            .writes
            .iter()
            .any(|w| w.family == "flow (table): <channel>#slots#<n>"),
        "{line}"
    );
    // The flow item itself (its slot items, `<channel>#slots#<n>`, may throttle when a slow
    // machine bunches the first tries into a burst).
    assert!(
        !cases
            .one_channel
            .capacity
            .throttled_by_family
            .contains_key("flow (table): <channel>"),
        "{line}"
    );
    assert_eq!(
        throttled(&cases.tenant_64_shards, "by_tenant_status_s"),
        0,
        "{line}"
    );
    // A channel offered as much as its rate limit: every request takes a place in the
    // schedule, reserved in batches (one reservation at a time per instance), so the
    // schedule's key is written less than once per delivery and never throttled. (At a
    // hundredth of the limits the window's own keys may throttle ingest: those activities
    // are refused, none lost.)
    let limited = &cases.one_channel_rate_limited;
    assert_eq!(throttled(limited, "rate#"), 0, "{line}");
    let schedule = limited
        .capacity
        .writes
        .iter()
        .find(|w| w.family == "flow (table): rate#<channel>")
        .unwrap_or_else(|| panic!("the schedule is written: {line}"));
    assert!(schedule.units_per_delivery < 1.0, "{line}");
}

#[tokio::test]
async fn fairness_scenario_runs_quiet_tenants_beside_a_backlog_in_each_queue_order() {
    let line = bench::fairness::run(bench::fairness::Options {
        backlog: 200,
        tenants: 5,
        seconds: 2,
        slow: std::time::Duration::from_millis(500),
    })
    .await
    .unwrap();
    let r: FairnessReport = report(&line);
    let orders = &r.orders;
    for (order, o) in [
        ("fair", &orders.fair),
        ("fair_default_window", &orders.fair_default_window),
        ("fair_fixed_window", &orders.fair_fixed_window),
        ("fair_hostile_middleware", &orders.fair_hostile_middleware),
        ("oldest_first", &orders.oldest_first),
    ] {
        for (run, q) in [
            ("baseline", &o.baseline),
            ("beside_the_backlog", &o.beside_the_backlog),
        ] {
            // Every quiet tenant's activity arrives, whatever the order costs in time.
            assert_eq!(q.quiet_sent, 10, "{order} {run}: {line}");
            assert_eq!(q.quiet_delivered, 10, "{order} {run}: {line}");
            assert_eq!(q.quiet.n, 10, "{order} {run}: {line}");
        }
        assert!(o.beside_the_backlog.backlog_ingest_s.is_some(), "{line}");
        assert!(o.p95_ratio.is_some_and(|p| p > 0.0), "{line}");
    }
}

#[tokio::test]
async fn binaries_scenario_starts_a_function_as_lambda_does() {
    // The debug build of one function: the release build of all nine is the full run's.
    let line = bench::binaries::run(bench::binaries::Options {
        function: Some("health".into()),
        release: false,
    })
    .await
    .unwrap();
    let r: BinariesReport = report(&line);
    let f = r
        .functions
        .get("health")
        .unwrap_or_else(|| panic!("no `health`: {line}"));
    assert!(f.size_mib > 0.0, "{line}");
    assert!(f.init_ms > 0.0, "{line}");
    assert!(f.first_event_ms >= f.init_ms, "{line}");
}

#[tokio::test]
async fn bulk_replay_scenario_runs_in_process() {
    let line = bench::maintenance::replay_in_process(100).await.unwrap();
    let r: BulkReplayReport = report(&line);
    assert_eq!(r.scenario, "bulk-replay");
    assert_eq!(r.retried, 100, "{line}");
}

#[tokio::test]
async fn pages_scenario_times_every_page_and_exports_every_row() {
    let line = bench::pages::run(120).await.unwrap();
    let r: PagesReport = report(&line);
    assert_eq!(r.scenario, "pages");
    for page in [
        "deliveries_first_page_ms",
        "deliveries_all_tenants_ms",
        "load_more_page_ms",
        "search_error_text_ms",
        "search_until_found_ms",
        "delivery_page_ms",
        "dashboard_ms",
        "channels_ms",
    ] {
        assert!(
            r.pages.get(page).is_some_and(|&ms| ms > 0.0),
            "{page}: {line}"
        );
    }
    assert_eq!(r.load_more_pages_followed, 3, "120 rows, 50 a page: {line}");
    assert_eq!(r.search_rows_found, 1, "{line}");
    assert_eq!(r.search_answers_until_found, 1, "{line}");
    assert_eq!(r.export_rows, 120, "{line}");
}

#[tokio::test]
async fn head_of_line_scenario_measures_a_channel_beside_its_retrying_delivery() {
    let line = bench::flow_cost::head_of_line(bench::flow_cost::HeadOfLine {
        in_process: true,
        seconds: 2,
        rate: 10,
    })
    .await
    .unwrap();
    let r: HeadOfLineReport = report(&line);
    for phase in [&r.with_retrying, &r.baseline] {
        assert_eq!(phase.sent, 20, "{line}");
        assert_eq!(phase.delivered, 20, "{line}");
    }
    // The failing delivery was tried, and only in its own phase.
    assert!(r.with_retrying.failing_attempts >= 1, "{line}");
    assert_eq!(r.baseline.failing_attempts, 0, "{line}");
    assert!(r.p95_ratio > 0.0, "{line}");
}

#[tokio::test]
async fn burst_scenario_keeps_the_receiver_within_the_cap() {
    let line = bench::flow_cost::burst(bench::flow_cost::Burst {
        in_process: true,
        deliveries: 40,
        receiver_ms: 100,
    })
    .await
    .unwrap();
    let r: BurstReport = report(&line);
    // Every delivery arrived (the scenario fails otherwise), never more than the cap at once.
    assert!(r.capped_max_concurrent <= 10, "{line}");
    // Without a cap of its own, the platform's bound (100): the backlog is fed into the
    // slots the window grows by as it grows, not only at the pace of the window it started
    // with (2).
    let bound = r.bound_max_concurrent;
    assert!(
        bound > u64::from(converger_core::flow::INITIAL_WINDOW) && bound <= 100,
        "{line}"
    );
    assert!(r.capped_s > 0.0, "{line}");
}

#[tokio::test]
async fn cost_shape_scenario_prices_every_line_of_a_deployments_shape() {
    converger_tests::init_tracing();
    let line = bench::shape::cost(bench::shape::smoke()).await.unwrap();
    let r: CostShapeReport = report(&line);
    assert_eq!(r.scenario, "cost-shape", "{line}");
    let per_million = &r.per_million;
    for (k, usd) in [
        ("single_on_demand", per_million.single_on_demand),
        ("single_provisioned", per_million.single_provisioned),
        ("batch_on_demand", per_million.batch_on_demand),
        ("batch_provisioned", per_million.batch_provisioned),
    ] {
        assert!(usd > 0.0, "{k}: {line}");
    }
    for (mode, m) in [("single", &r.modes.single), ("batch", &r.modes.batch)] {
        // Every activity offered was taken and delivered once.
        assert_eq!(m.offered, 60, "{mode}: {line}");
        assert_eq!(m.accepted, m.offered, "{mode}: {line}");
        assert_eq!(m.delivered, m.accepted, "{mode}: {line}");
        let usd = &m.usd_per_million;
        for (part, v) in [
            ("dynamodb_writes", usd.dynamodb_writes),
            ("dynamodb_reads", usd.dynamodb_reads),
            ("sqs", usd.sqs),
            ("eventbridge", usd.eventbridge),
            ("api_gateway", usd.api_gateway),
            ("lambda_requests", usd.lambda_requests),
            ("lambda_duration", usd.lambda_duration),
            ("logs", usd.logs),
            ("data_out", usd.data_out),
            (
                "dynamodb_writes_provisioned",
                usd.dynamodb_writes_provisioned,
            ),
        ] {
            assert!(v > 0.0, "{mode} {part}: {line}");
        }
        // Provisioned capacity at 70% costs less than the same units on demand.
        assert!(
            usd.dynamodb_writes_provisioned < usd.dynamodb_writes,
            "{line}"
        );
        // X-Ray is off in the template's defaults.
        assert_eq!(usd.xray, 0.0, "{line}");
        // Index entries are charged: the listing and the conversation index are written.
        let by_table = &m.per_delivery.dynamodb_write_units_by_table;
        assert!(named(by_table, "deliveries", &line) > 1.0, "{line}");
        assert!(named(by_table, "activities", &line) > 1.0, "{line}");
        // Each function ran on instances of its own.
        let instances = |f: &str| m.lambda.get(f).and_then(|l| l.instances);
        assert!(
            instances("DeliverFunction").is_some_and(|n| n >= 1),
            "{line}"
        );
        assert!(instances("ApiFunction").is_some_and(|n| n >= 1), "{line}");
        assert!(m.storage.bytes_per_delivery > 0.0, "{line}");
    }
    // One request an activity, one a gathered batch: fewer requests than activities.
    assert_eq!(r.modes.single.api_requests, 60, "{line}");
    assert!(r.modes.batch.api_requests < 60, "{line}");
}

#[tokio::test]
async fn throughput_shape_scenario_delivers_every_activity_and_counts_throttles() {
    let line = bench::shape::throughput(bench::shape::Options {
        fewer_tenants: false,
        rate: 400.0,
        scale: 20.0,
        modes: vec![bench::shape::Mode::Batch],
        ..bench::shape::smoke()
    })
    .await
    .unwrap();
    let r: ThroughputShapeReport = report(&line);
    assert_eq!(r.scenario, "throughput-shape", "{line}");
    let c = &r.cases.batch;
    assert_eq!(c.offered, 60, "{line}");
    assert_eq!(c.delivered, c.accepted, "{line}");
    assert_eq!(c.accepted, c.offered, "{line}");
    assert!(c.throttled_requests.is_some(), "{line}");
    assert!(r.stage_throttle_per_s.is_some_and(|s| s > 0.0), "{line}");
    assert!(c.ingest_to_receiver.n == c.delivered, "{line}");
}
