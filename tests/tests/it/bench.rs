//! Smoke runs of the benchmark command's scenarios with tiny sizes: they check that the
//! harness works and that its figures are there and sane. The figures themselves come from
//! full runs (`docs/benchmarks.md`), never from a test. `requests` is the exception: request
//! counts do not depend on the machine's speed, so its budget is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_local::bench;

#[tokio::test]
async fn latency_scenario_measures_each_delivery_and_the_floor() {
    let line = bench::latency::run(bench::latency::Options {
        activities: 10,
        rate: 20,
    })
    .await
    .unwrap();
    assert_eq!(line["scenario"], "latency");
    assert_eq!(line["ingest_to_receiver"]["n"], 10, "{line}");
    assert_eq!(line["api_answer"]["n"], 10, "{line}");
    assert_eq!(line["floor_bare_post"]["n"], 10, "{line}");
    let p = |k: &str, q: &str| line[k][q].as_f64().unwrap();
    assert!(p("ingest_to_receiver", "p50_ms") > 0.0, "{line}");
    assert!(p("ingest_to_receiver", "p50_ms") <= p("ingest_to_receiver", "p99_ms"));
    assert!(line["machine"]["cores"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn throughput_scenario_counts_deliveries_and_cpu_on_both_backends() {
    let line = bench::throughput::run(bench::throughput::Options {
        in_process: 200,
        emulator: 20,
    })
    .await
    .unwrap();
    for backend in ["in_process", "emulator"] {
        let b = &line[backend];
        assert!(b["deliveries_per_s"].as_f64().unwrap() > 0.0, "{line}");
        assert!(b["cpu_s"].as_f64().unwrap() >= 0.0, "{line}");
        assert!(b["cpu_s_per_1000_deliveries"].is_number(), "{line}");
    }
    assert_eq!(line["in_process"]["deliveries"], 200);
    // The emulator's CPU is read when the scenario started it (not under the test command,
    // which shares one emulator through AWS_ENDPOINT_URL).
    let em = &line["emulator"]["emulator_cpu_s"];
    assert!(em.is_null() || em.as_f64().unwrap() > 0.0, "{line}");
    assert!(line["in_process"]["emulator_cpu_s"].is_null());
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
    let cases = &line["cases"];
    let first = &cases["first_try"]["per_delivery"];
    // One batch write of the new rows, one send, one receive and
    // one delete per delivery; two item updates (claim, sent): a healthy channel's `auto`
    // window costs no write. Request counts do not depend on the machine: a change that adds
    // one to the hot path fails here.
    assert_eq!(first["dynamodb/BatchWriteItem"], 1.0, "{line}");
    // Beside the fixed cost, two things depend on how slow the shared emulator is at that
    // moment: a channel or flow item read again after a function's cache expired, and a
    // message that comes before its row (sent beside the row's write): its claim finds no
    // row (one more `UpdateItem`) and reads the row before it claims again (a `GetItem`).
    // So every `UpdateItem` beyond two comes with a `GetItem`, and nothing else varies but
    // one write of an instance's health counts, at most once a minute (`HEALTH_FLUSH`): at
    // most one in a case of four.
    // A channel without a cap of its own has the platform's bound, always counted: a slot
    // taken at ingest and given back (the flow item, or a slot item of its own, is written
    // twice more per delivery).
    let counted = &cases["first_try_no_window"]["per_delivery"];
    assert!(
        counted["dynamodb/UpdateItem"].as_f64().unwrap()
            >= first["dynamodb/UpdateItem"].as_f64().unwrap() + 1.0,
        "{line}"
    );
    {
        let case = "first_try";
        let per = &cases[case]["per_delivery"];
        let reads = per["dynamodb/GetItem"].as_f64().unwrap_or(0.0);
        // The API rate limit's takes of a batch of the key's schedule: well under one a call.
        let limit = cases[case]["api_rate_limit_takes_per_call"]
            .as_f64()
            .unwrap();
        assert!(limit <= 0.5, "{case}: {line}");
        // A take is one conditional `UpdateItem`, or two when the schedule was busy.
        let updates = per["dynamodb/UpdateItem"].as_f64().unwrap();
        let early = updates - 2.0 - limit;
        let flush = 1.0 / 4.0;
        assert!(
            (-0.001..=reads + limit + flush + 0.001).contains(&early),
            "{case}: {line}"
        );
        let billed = cases[case]["billed_requests_per_delivery"]
            .as_f64()
            .unwrap();
        // Six for the delivery itself; its watch copy (`core::policy::WATCH_DELAY_S`) adds a
        // receive and a delete, at most one each (shared by the copies that come together:
        // a quarter each when the case's four come in one batch), and a read, counted above.
        assert!(billed - reads - early - limit <= 8.001, "{case}: {line}");
    }
    // Sending by event type reads the subscriber list once per `CHANNEL_CACHE_TTL_MS` (5 s)
    // and API instance, not once per delivery: a refresh is all a slow run may add.
    let by_type = &cases["first_try_by_event_type"];
    let queries = by_type["per_delivery"]["dynamodb/Query"]
        .as_f64()
        .unwrap_or(0.0)
        * 4.0;
    let seconds = by_type["seconds"].as_f64().unwrap();
    assert!(queries <= 1.0 + seconds / 5.0, "{line}");
    assert_eq!(
        by_type["per_delivery"]["dynamodb/BatchWriteItem"], 1.0,
        "{line}"
    );
    // One batch send holds a first try's message and its watch copy; the watch copy is
    // received and deleted on its own, shared by the copies that come together.
    assert_eq!(first["sqs/SendMessageBatch"], 1.0, "{line}");
    assert!(first["sqs/SendMessage"].is_null(), "{line}");
    for request in ["sqs/ReceiveMessage", "sqs/DeleteMessageBatch"] {
        let n = first[request].as_f64().unwrap();
        assert!((1.0..=2.0).contains(&n), "{request}: {line}");
    }
    // No event on the delivery's path: its status event comes from the table's stream, sent
    // by the changes function with others of its batch (counted apart as `changes:`).
    assert!(first["events/PutEvents"].is_null(), "{line}");
    let put = first["changes:events/PutEvents"].as_f64().unwrap();
    assert!(put > 0.0 && put <= 1.0, "{line}");
    // An AWS channel: the tenant's queue gets one `SendMessage` a delivery, made as the
    // tenant's role (counted apart: the tenant's account pays it), and the role is not assumed
    // again while its session lasts (the warm-up took it).
    for (case, send) in [
        ("aws_sqs_first_try", "tenant:sqs/SendMessage"),
        ("aws_eventbridge_first_try", "tenant:events/PutEvents"),
        ("aws_kinesis_first_try", "tenant:kinesis/PutRecord"),
        ("aws_sns_first_try", "tenant:sns/Publish"),
        ("aws_firehose_first_try", "tenant:firehose/PutRecord"),
        (
            "aws_stepfunctions_first_try",
            "tenant:states/StartExecution",
        ),
        ("aws_s3_first_try", "tenant:s3/PutObject"),
    ] {
        let aws = &cases[case]["per_delivery"];
        assert_eq!(aws[send], 1.0, "{case}: {line}");
        assert!(aws.get("sts/AssumeRole").is_none(), "{case}: {line}");
        assert_eq!(aws["dynamodb/BatchWriteItem"], 1.0, "{case}: {line}");
    }
    // A RabbitMQ channel: what a webhook's first try pays, no request into an account.
    let mq = cases["rabbitmq_first_try"]["per_delivery"]
        .as_object()
        .unwrap();
    assert_eq!(mq["dynamodb/BatchWriteItem"], 1.0, "{line}");
    assert!(!mq.keys().any(|k| k.starts_with("tenant:")), "{line}");
    // An endpoint behind OAuth 2.0: one token for the warm-up and the counted deliveries
    // together (two if the first two raced past an empty cache on two instances).
    let tokens = cases["oauth2_first_try"]["token_requests"]
        .as_u64()
        .unwrap();
    assert!((1..=2).contains(&tokens), "{line}");
    // Three attempts: at most three receives (an attempt that the task handing it its window
    // slot runs itself needs none), and the first try's watch copy's; a dead letter after
    // three attempts likewise.
    for case in ["three_attempts", "dead_letter"] {
        let receives = cases[case]["per_delivery"]["sqs/ReceiveMessage"]
            .as_f64()
            .unwrap();
        assert!((2.0..=4.0).contains(&receives), "{case}: {line}");
    }
    for case in [
        "first_try",
        "first_try_burst",
        "three_attempts",
        "dead_letter",
    ] {
        assert!(
            cases[case]["cost_per_million_usd"].as_f64().unwrap() > 0.0,
            "{line}"
        );
    }
}

/// The units of `table` itself (not its indexes) in a `keys` case line, per delivery.
fn table_units(case: &serde_json::Value, table: &str) -> f64 {
    case["writes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["table"] == table && f["index"].is_null())
        .map(|f| f["units_per_delivery"].as_f64().unwrap())
        .sum()
}

/// The units of `index` on the deliveries table in a `keys` case line, per delivery.
fn index_units(case: &serde_json::Value, index: &str) -> f64 {
    case["writes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["index"] == index)
        .map(|f| f["units_per_delivery"].as_f64().unwrap())
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
    let cases = &line["cases"];
    let first = &cases["first_try"];
    // A producer without `seq` writes its conversation's sequence item for each activity;
    // in a batch, once per conversation.
    let activities = |case: &str| table_units(&cases[case], "activities");
    assert!(
        activities("first_try_without_seq") > activities("first_try"),
        "{line}"
    );
    assert!(
        activities("first_try_batch") < activities("first_try_without_seq"),
        "{line}"
    );
    // Unit counts follow from the requests, not the machine's speed. A first try enters its
    // tenant's listing once, when it is sent (not when it is created), and never the
    // channel index (sparse: dead letters and parked deliveries only).
    assert_eq!(index_units(first, "by_tenant_status_s"), 1.0, "{line}");
    assert_eq!(index_units(first, "by_channel_status_s"), 0.0, "{line}");
    // The due index: a first try in flight is in none (its watch message covers it).
    assert_eq!(index_units(first, "by_due"), 0.0, "{line}");
    assert!(
        first["write_units_per_delivery"].as_f64().unwrap() >= 7.0,
        "{line}"
    );
    assert!(
        first["hottest_write"]["tenant"]["ceiling_per_s"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{line}"
    );
    // No key the whole deployment shares is written by a first try.
    assert!(first["hottest_write"]["deployment"].is_null(), "{line}");
    // Every seeded dead letter replayed (a call whose transaction committed but whose
    // answer was lost still counts its rows).
    assert!(
        cases["bulk_replay"]["error"].is_null()
            && cases["bulk_replay"]["write_units_per_delivery"]
                .as_f64()
                .unwrap()
                > 0.0,
        "{line}"
    );
    // A dead letter enters the channel index, once.
    let dead = &cases["dead_letter"];
    assert_eq!(index_units(dead, "by_channel_status_s"), 1.0, "{line}");
    assert!(
        dead["write_units_per_delivery"].as_f64().unwrap()
            > first["write_units_per_delivery"].as_f64().unwrap(),
        "{line}"
    );
    assert!(
        cases["sweep"]["read_units_per_delivery"].as_f64().unwrap() > 0.0,
        "{line}"
    );
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
    let cases = &line["cases"];
    for case in [
        "first_try",
        "aws_sqs_first_try",
        "three_attempts",
        "dead_letter",
        "first_try_1mib",
    ] {
        let per = &cases[case]["per_delivery"];
        let f = |k: &str| per[k].as_f64().unwrap();
        // One activity per delivery, posted once through the tenant API.
        assert_eq!(f("api_requests"), 1.0, "{case}: {line}");
        assert!(f("dynamodb_write_units") > 0.0, "{case}: {line}");
        // A send per delivery, and the receives and deletes of its batches (two deliveries
        // may share one batch: half of each per delivery).
        assert!(f("sqs_requests") > 1.0, "{case}: {line}");
        // The API's invocation and a share of the deliver function's.
        assert!(f("lambda_invocations") > 1.0, "{case}: {line}");
        assert!(f("lambda_gb_seconds") > 0.0, "{case}: {line}");
        // What the functions log about each delivery (Lambda's own lines are off: the
        // template's system log level is `WARN`).
        assert!(f("log_bytes") > 0.0, "{case}: {line}");
        let lambda = &cases[case]["lambda"];
        assert_eq!(
            lambda["ApiFunction"]["invocations_per_delivery"], 1.0,
            "{line}"
        );
        assert!(
            lambda["DeliverFunction"]["invocations_per_delivery"]
                .as_f64()
                .unwrap()
                > 0.0,
            "{case}: {line}"
        );
        assert!(cases[case]["usd_per_million_total"].as_f64().unwrap() > 0.0);
    }
    // Every change is one event (a failed attempt with its retry to come included: three
    // attempts are three, a dead letter after three is three and the dead letter); a health
    // change beside it (the machine's load can make a warm endpoint look slow) is counted too,
    // and under its own type.
    for (case, changes) in [
        ("first_try", 1.0),
        ("three_attempts", 3.0),
        ("dead_letter", 3.0),
    ] {
        let per = &cases[case]["per_delivery"];
        assert_eq!(
            per["eventbridge_events_by_type"]["delivery.status_changed"], changes,
            "{case}: {line}"
        );
        // A dead letter is announced twice: its status (failed) and the dead letter itself.
        let dead_lettered = if case == "dead_letter" { 1.0 } else { 0.0 };
        assert_eq!(
            per["eventbridge_events_by_type"]["delivery.dead_lettered"]
                .as_f64()
                .unwrap_or(0.0),
            dead_lettered,
            "{case}: {line}"
        );
        let by_type: f64 = per["eventbridge_events_by_type"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert_eq!(
            per["eventbridge_events"].as_f64().unwrap(),
            by_type,
            "{case}: {line}"
        );
    }
    // A 1 MiB payload: one PUT to the payload bucket, one GET for its one attempt, and the
    // receiver takes the whole of it; a small one touches no bucket.
    let large = &cases["first_try_1mib"]["per_delivery"];
    assert_eq!(large["s3_puts"], 1.0, "{line}");
    assert_eq!(large["s3_gets"], 1.0, "{line}");
    assert!(
        large["bytes_to_receivers"].as_f64().unwrap() > 1_048_576.0,
        "{line}"
    );
    assert_eq!(cases["first_try"]["per_delivery"]["s3_puts"], 0.0, "{line}");
    let priced = |c: &str, k: &str| cases[c]["usd_per_million"][k].as_f64().unwrap();
    assert!(
        priced("first_try_1mib", "s3_storage_for_the_retention") > 20.0,
        "{line}"
    );
    assert!(
        priced("first_try_1mib", "data_out_to_receivers") > 90.0,
        "{line}"
    );
    // Retries cost more than a first try.
    let total = |c: &str| cases[c]["usd_per_million_total"].as_f64().unwrap();
    assert!(total("three_attempts") > total("first_try"), "{line}");
    assert!(
        line["fixed_monthly_usd"]["total"].as_f64().unwrap() > 0.0,
        "{line}"
    );
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
    let cases = &line["cases"];
    let throttled = |case: &str, family: &str| -> u64 {
        cases[case]["capacity"]["throttled_by_family"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.contains(family))
            .map(|(_, v)| v.as_u64().unwrap())
            .sum()
    };
    for case in [
        "tenant_default_shards",
        "tenant_64_shards",
        "one_channel",
        "one_channel_rate_limited",
        "tenant_shards_grow",
    ] {
        let c = &cases[case];
        let (n, got, refused) = (
            c["activities"].as_u64().unwrap(),
            c["delivered"].as_u64().unwrap(),
            c["refused"].as_u64().unwrap(),
        );
        assert!(n > 0 && got + refused >= n, "{case}: {line}");
        assert!(
            c["capacity"]["write_units_per_delivery"].as_f64().unwrap() > 0.0,
            "{case}: {line}"
        );
    }
    // Two listing shards take 5,000 first tries a second at 2,500 units a second each: over
    // a partition's limit. Sixty-four take it.
    assert_eq!(cases["tenant_default_shards"]["listing_shards"], 2);
    assert!(
        throttled("tenant_default_shards", "by_tenant_status_s") > 0,
        "{line}"
    );
    assert_eq!(cases["tenant_64_shards"]["listing_shards"], 64);
    assert_eq!(cases["tenant_64_shards"]["due_shards"], 64);
    // The tenant as created, its load rising, run and reported. Whether a grant comes within
    // this smoke's seconds depends on the tenant's usage counter being written, and at a
    // hundredth of a partition's limits that one key is throttled (the counter's own limit,
    // docs/scaling.md); the grant itself is the use cases' and the store suite's to prove.
    let grown = &cases["tenant_shards_grow"];
    assert_eq!(grown["listing_shards"], 2, "{line}");
    assert_eq!(grown["growth"]["tenant_refresh_s"], 5, "{line}");
    assert!(
        grown["growth"]["granted"].is_null() || grown["growth"]["granted"].as_u64() >= Some(4),
        "{line}"
    );
    // A window of 2,000 is spread over slot items: no slot write throttled on the flow item.
    assert!(
        cases["one_channel"]["capacity"]["writes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["family"] == "flow (table): <channel>#slots#<n>"),
        "{line}"
    );
    // The flow item itself (its slot items, `<channel>#slots#<n>`, may throttle when a slow
    // machine bunches the first tries into a burst).
    assert!(
        !cases["one_channel"]["capacity"]["throttled_by_family"]
            .as_object()
            .unwrap()
            .contains_key("flow (table): <channel>"),
        "{line}"
    );
    assert_eq!(
        throttled("tenant_64_shards", "by_tenant_status_s"),
        0,
        "{line}"
    );
    // A channel offered as much as its rate limit: every request takes a place in the
    // schedule, reserved in batches (one reservation at a time per instance), so the
    // schedule's key is written less than once per delivery and never throttled. (At a
    // hundredth of the limits the window's own keys may throttle ingest: those activities
    // are refused, none lost.)
    let limited = &cases["one_channel_rate_limited"];
    assert_eq!(throttled("one_channel_rate_limited", "rate#"), 0, "{line}");
    let schedule = limited["capacity"]["writes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["family"] == "flow (table): rate#<channel>")
        .unwrap_or_else(|| panic!("the schedule is written: {line}"));
    assert!(
        schedule["units_per_delivery"].as_f64().unwrap() < 1.0,
        "{line}"
    );
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
    for order in [
        "fair",
        "fair_default_window",
        "fair_fixed_window",
        "fair_hostile_middleware",
        "oldest_first",
    ] {
        let o = &line["orders"][order];
        for run in ["baseline", "beside_the_backlog"] {
            let r = &o[run];
            // Every quiet tenant's activity arrives, whatever the order costs in time.
            assert_eq!(r["quiet_sent"], 10, "{order} {run}: {line}");
            assert_eq!(r["quiet_delivered"], 10, "{order} {run}: {line}");
            assert_eq!(r["quiet"]["n"], 10, "{order} {run}: {line}");
        }
        assert!(
            o["beside_the_backlog"]["backlog_ingest_s"].is_number(),
            "{line}"
        );
        assert!(o["p95_ratio"].as_f64().unwrap() > 0.0, "{line}");
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
    let f = &line["functions"]["health"];
    assert!(f["size_mib"].as_f64().unwrap() > 0.0, "{line}");
    assert!(f["init_ms"].as_f64().unwrap() > 0.0, "{line}");
    assert!(
        f["first_event_ms"].as_f64().unwrap() >= f["init_ms"].as_f64().unwrap(),
        "{line}"
    );
}

#[tokio::test]
async fn bulk_replay_scenario_runs_in_process() {
    let line = bench::maintenance::replay_in_process(100).await.unwrap();
    assert_eq!(line["scenario"], "bulk-replay");
    assert_eq!(line["retried"], 100, "{line}");
}

#[tokio::test]
async fn pages_scenario_times_every_page_and_exports_every_row() {
    let line = bench::pages::run(120).await.unwrap();
    assert_eq!(line["scenario"], "pages");
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
            line["pages"][page].as_f64().unwrap() > 0.0,
            "{page}: {line}"
        );
    }
    assert_eq!(
        line["load_more_pages_followed"], 3,
        "120 rows, 50 a page: {line}"
    );
    assert_eq!(line["search_rows_found"], 1, "{line}");
    assert_eq!(line["search_answers_until_found"], 1, "{line}");
    assert_eq!(line["export_rows"], 120, "{line}");
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
    for phase in ["with_retrying", "baseline"] {
        assert_eq!(line[phase]["sent"], 20, "{line}");
        assert_eq!(line[phase]["delivered"], 20, "{line}");
    }
    // The failing delivery was tried, and only in its own phase.
    assert!(
        line["with_retrying"]["failing_attempts"].as_u64().unwrap() >= 1,
        "{line}"
    );
    assert_eq!(line["baseline"]["failing_attempts"], 0, "{line}");
    assert!(line["p95_ratio"].as_f64().unwrap() > 0.0, "{line}");
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
    // Every delivery arrived (the scenario fails otherwise), never more than the cap at once.
    assert!(
        line["capped_max_concurrent"].as_u64().unwrap() <= 10,
        "{line}"
    );
    // Without a cap of its own, the platform's bound (100): the backlog is fed into the
    // slots the window grows by as it grows, not only at the pace of the window it started
    // with (2).
    let bound = line["bound_max_concurrent"].as_u64().unwrap();
    assert!(
        bound > u64::from(converger_core::flow::INITIAL_WINDOW) && bound <= 100,
        "{line}"
    );
    assert!(line["capped_s"].as_f64().unwrap() > 0.0, "{line}");
}

#[tokio::test]
async fn cost_shape_scenario_prices_every_line_of_a_deployments_shape() {
    converger_tests::init_tracing();
    let line = bench::shape::cost(bench::shape::smoke()).await.unwrap();
    assert_eq!(line["scenario"], "cost-shape", "{line}");
    for k in [
        "single_on_demand",
        "single_provisioned",
        "batch_on_demand",
        "batch_provisioned",
    ] {
        assert!(
            line["per_million"][k].as_f64().unwrap() > 0.0,
            "{k}: {line}"
        );
    }
    for mode in ["single", "batch"] {
        let m = &line["modes"][mode];
        let n = |k: &str| m[k].as_u64().unwrap();
        // Every activity offered was taken and delivered once.
        assert_eq!(n("offered"), 60, "{mode}: {line}");
        assert_eq!(n("accepted"), n("offered"), "{mode}: {line}");
        assert_eq!(n("delivered"), n("accepted"), "{mode}: {line}");
        let usd = &m["usd_per_million"];
        for part in [
            "dynamodb_writes",
            "dynamodb_reads",
            "sqs",
            "eventbridge",
            "api_gateway",
            "lambda_requests",
            "lambda_duration",
            "logs",
            "data_out",
            "dynamodb_writes_provisioned",
        ] {
            assert!(usd[part].as_f64().unwrap() > 0.0, "{mode} {part}: {line}");
        }
        // Provisioned capacity at 70% costs less than the same units on demand.
        assert!(
            usd["dynamodb_writes_provisioned"].as_f64().unwrap()
                < usd["dynamodb_writes"].as_f64().unwrap(),
            "{line}"
        );
        // X-Ray is off in the template's defaults.
        assert_eq!(usd["xray"].as_f64().unwrap(), 0.0, "{line}");
        // Index entries are charged: the listing and the conversation index are written.
        let by_table = &m["per_delivery"]["dynamodb_write_units_by_table"];
        assert!(by_table["deliveries"].as_f64().unwrap() > 1.0, "{line}");
        assert!(by_table["activities"].as_f64().unwrap() > 1.0, "{line}");
        // Each function ran on instances of its own.
        assert!(
            m["lambda"]["DeliverFunction"]["instances"]
                .as_u64()
                .unwrap()
                >= 1,
            "{line}"
        );
        assert!(
            m["lambda"]["ApiFunction"]["instances"].as_u64().unwrap() >= 1,
            "{line}"
        );
        assert!(
            m["storage"]["bytes_per_delivery"].as_f64().unwrap() > 0.0,
            "{line}"
        );
    }
    // One request an activity, one a gathered batch: fewer requests than activities.
    let requests = |mode: &str| line["modes"][mode]["api_requests"].as_u64().unwrap();
    assert_eq!(requests("single"), 60, "{line}");
    assert!(requests("batch") < 60, "{line}");
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
    assert_eq!(line["scenario"], "throughput-shape", "{line}");
    let c = &line["cases"]["batch"];
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(n("offered"), 60, "{line}");
    assert_eq!(n("delivered"), n("accepted"), "{line}");
    assert_eq!(n("accepted"), n("offered"), "{line}");
    assert!(c["throttled_requests"].is_u64(), "{line}");
    assert!(
        line["stage_throttle_per_s"].as_f64().unwrap() > 0.0,
        "{line}"
    );
    assert!(
        c["ingest_to_receiver"]["n"].as_u64().unwrap() == n("delivered"),
        "{line}"
    );
}
