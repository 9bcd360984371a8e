//! The local stack is the template deployed: the functions run as the deployed stack says, the
//! IAM check refuses what a policy does not allow, and every sample event in `events/` parses
//! into its function's event type.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use converger_lambda::handlers::IngestMessage;
use converger_local::iam::IamGuard;
use converger_ports::DeliveryMessage;
use converger_store::aws::Clients;
use converger_store::resources::DELIVER_TIMEOUT_S;
use converger_tests::TestStack;
use serde_yaml::Value;
use std::path::PathBuf;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn template() -> Value {
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// How many resources of `kind` the template declares.
fn resources_of(kind: &str) -> usize {
    template()["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some(kind))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_functions_run_as_the_deployed_stack_says() {
    let t = TestStack::on_emulator().await;
    let d = &t.aws().deployed;
    // Every function runs with every name from its deployed environment, and every queue it
    // names is one CloudFormation created.
    for (logical, f) in &d.functions {
        let res = f.resources().unwrap_or_else(|e| panic!("{logical}: {e}"));
        for url in res.queue_urls.values() {
            assert!(
                d.queues.values().any(|q| &q.url == url),
                "{logical} names queue {url}, which the stack did not create"
            );
        }
        assert_eq!(f.architectures, vec!["x86_64"], "{logical}");
    }
    // One mapping per tier queue, partial batch failures on, the tier's concurrency as the
    // stack's pipeline sizes its windows, and the functions told the same.
    let deliver = d.function("DeliverFunction").unwrap();
    let tiers = converger_core::TierConcurrency::default();
    let told = deliver
        .environment
        .get("TIER_CONCURRENCY")
        .and_then(|v| v.as_str())
        .map(converger_core::TierConcurrency::parse);
    assert_eq!(told, Some(Ok(tiers)));
    assert_eq!(deliver.timeout_s, Some(DELIVER_TIMEOUT_S));
    for tier in converger_core::Tier::ALL {
        let url = t.aws().queue_url(tier).unwrap();
        let queue = d.queues.values().find(|q| q.url == url).unwrap();
        let m = deliver
            .event_source_mappings
            .iter()
            .find(|m| m.queue_arn == queue.arn)
            .unwrap_or_else(|| panic!("no mapping for the {tier:?} queue"));
        assert!(m.report_batch_item_failures);
        assert_eq!(
            m.maximum_concurrency,
            Some(tiers.of(tier) as u32),
            "{tier:?}"
        );
        // What a channel without a cap of its own may hold is worked out from this.
        assert_eq!(
            m.batch_size as usize,
            converger_core::flow::DELIVERY_BATCH_SIZE,
            "{tier:?}"
        );
        assert!(queue.visibility_timeout_s >= 6 * DELIVER_TIMEOUT_S);
    }
    // Every queue a function consumes has a dead-letter queue of the stack after 100 receives,
    // but the live stream's: its messages expire after five minutes, long before a hundredth
    // receive, and expiry counts from the first send (a dead-letter queue would never get one).
    for f in d.functions.values() {
        for m in &f.event_source_mappings {
            if m.source == "dynamodb" {
                // The deliveries table's stream: a failing record comes back (bisected on a
                // crash) a bounded number of times, then its batch's place goes to a queue
                // of the stack; the window names the shard.
                assert!(
                    m.report_batch_item_failures && m.bisect_on_error,
                    "{}",
                    f.name
                );
                assert_eq!(m.maximum_retry_attempts, Some(10), "{}", f.name);
                assert!(m.tumbling_window_s.is_some_and(|w| w > 0), "{}", f.name);
                let dlq = m.on_failure.as_deref().unwrap_or_default();
                assert!(d.queue_by_arn(dlq).is_some(), "{}: {dlq}", f.name);
                continue;
            }
            let (id, q) = d.queue_by_arn(&m.queue_arn).unwrap();
            if id == "StreamQueue" {
                assert!(q.redrive_policy.is_none(), "{id}");
                continue;
            }
            let redrive = q.redrive_policy.as_ref().unwrap_or_else(|| panic!("{id}"));
            assert_eq!(redrive["maxReceiveCount"].as_u64(), Some(100), "{id}");
            let dlq = redrive["deadLetterTargetArn"].as_str().unwrap();
            assert!(d.queue_by_arn(dlq).is_some(), "{id}'s dead-letter queue");
            assert!(
                q.visibility_timeout_s >= 6 * f.timeout_s.unwrap_or(3),
                "{id}: visibility at least six times {}'s timeout",
                f.name
            );
        }
    }
    assert_eq!(
        d.function("RetrySchedulerFunction")
            .unwrap()
            .schedule_period(),
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(
        d.function("HealthFunction").unwrap().schedule_period(),
        Some(std::time::Duration::from_secs(300))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_depths_come_from_the_deployed_dead_letter_queues() {
    let t = TestStack::on_emulator().await;
    let dlq = t.aws().dlq_url(converger_core::Tier::Default).unwrap();
    // CloudFormation named it: nothing derives it from the queue's own name.
    assert!(dlq.contains("DeliveriesDlq"), "{dlq}");
    for _ in 0..2 {
        t.aws()
            .clients
            .sqs
            .send_message()
            .queue_url(&dlq)
            .message_body("{}")
            .send()
            .await
            .unwrap();
    }
    // The admin function's view, through its IAM-checked clients.
    let depths = t.stack.functions.admin.queue_depths().await.unwrap();
    let names: Vec<&str> = depths.iter().map(|d| d.queue.as_str()).collect();
    assert_eq!(
        names,
        [
            "deliveries-high",
            "deliveries-high-dlq",
            "deliveries",
            "deliveries-dlq",
            "deliveries-bulk",
            "deliveries-bulk-dlq"
        ]
    );
    let dlq_depth = depths.iter().find(|d| d.queue == "deliveries-dlq").unwrap();
    assert_eq!(dlq_depth.visible, 2);
    assert!(
        depths
            .iter()
            .filter(|d| d.queue != "deliveries-dlq")
            .all(|d| d.visible == 0)
    );
    assert!(t.stack.iam_violations().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_iam_check_refuses_what_the_policy_does_not_allow() {
    let t = TestStack::on_emulator().await;
    let d = &t.aws().deployed;
    let ingest = d.function("IngestFunction").unwrap();
    // The ingest function's deployed policy, in a guard that keeps its denials to itself.
    let guard = IamGuard::private(
        "IngestFunction",
        ingest.parsed_policies().unwrap(),
        d.arns(),
    );
    let sdk = converger_store::aws::load_config_for(t.stack.aws_endpoint_url.as_deref()).await;
    let clients = Clients::intercepted(
        &sdk,
        vec![converger_store::aws::SharedInterceptor::new(guard.clone())],
    );
    let res = ingest.resources().unwrap();
    // Allowed: reading a tenant.
    clients
        .dynamodb
        .get_item()
        .table_name(&res.tenants)
        .key("pk", AttributeValue::S("nobody".into()))
        .send()
        .await
        .unwrap();
    assert!(guard.violations().is_empty());
    // Not allowed: scanning the deliveries table, or a query on an index it has no grant for.
    let scan = clients
        .dynamodb
        .scan()
        .table_name(&res.deliveries)
        .send()
        .await;
    assert!(scan.is_err());
    let query = clients
        .dynamodb
        .query()
        .table_name(&res.deliveries)
        .index_name("by_due")
        .key_condition_expression("due_shard = :s")
        .expression_attribute_values(":s", AttributeValue::S("due#0".into()))
        .send()
        .await;
    assert!(query.is_err());
    let v = guard.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    let table_arn = &d.tables["DeliveriesTable"].arn;
    assert_eq!(v[0].function, "IngestFunction");
    assert_eq!(v[0].action, "dynamodb:Scan");
    assert_eq!(&v[0].resource, table_arn);
    assert_eq!(v[1].action, "dynamodb:Query");
    assert_eq!(v[1].resource, format!("{table_arn}/index/by_due"));
    // The functions themselves made no request their policies refuse.
    assert!(t.stack.iam_violations().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ingested_activity_and_its_deliveries_expire_after_the_retention_period() {
    let t = TestStack::on_emulator().await;
    let rx = converger_tests::Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, serde_json::json!({})).await;
    let a = t.activity(&key, &[ch.id.as_str()]).await;
    let store = &t.stack.store;
    let activity = store
        .get_activity(
            &converger_core::TenantId::parse(&tenant).unwrap(),
            &converger_core::ActivityId::parse(a.activity_id.as_str()).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    let want = converger_core::time::now_ms() / 1000 + 30 * 86_400;
    let at = activity.expires_at.unwrap();
    assert!((want - 120..=want).contains(&at), "{at} vs {want}");
    let id = a.deliveries[0].id.as_str();
    let d = store
        .get_delivery(&converger_core::DeliveryId::parse(id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.expires_at, Some(at));
    // The tables the template declares expire rows on that attribute.
    let ddb = &t.aws().clients.dynamodb;
    for table in [&t.aws().resources.activities, &t.aws().resources.deliveries] {
        let ttl = ddb
            .describe_time_to_live()
            .table_name(table)
            .send()
            .await
            .unwrap();
        let desc = ttl.time_to_live_description.unwrap();
        assert_eq!(
            desc.attribute_name.as_deref(),
            Some("expires_at"),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_no_route_of_the_template_takes_never_reaches_a_function() {
    let t = TestStack::on_emulator().await;
    // The admin API's path on the tenant API's gateway: the template routes it to the admin
    // function only.
    let a = t
        .raw(
            "POST",
            format!("{}/admin/api/tenants", t.stack.api_url),
            Some(&t.stack.admin_token),
            Some("{}".into()),
        )
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.body["message"], "Not Found");
    let a = t
        .raw(
            "GET",
            format!("{}/elsewhere", t.stack.admin_url),
            None,
            None,
        )
        .await;
    assert_eq!(a.status, 404);
}

#[test]
fn every_function_is_in_the_template() {
    let t = template();
    let res = t["Resources"].as_mapping().unwrap();
    for dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let name = dir.unwrap().file_name().into_string().unwrap();
        let found = res.values().any(|r| {
            r["Type"].as_str() == Some("AWS::Serverless::Function")
                && r["Metadata"]["BuildProperties"]["Binary"].as_str() == Some(name.as_str())
                && r["Metadata"]["BuildMethod"].as_str() == Some("rust-cargolambda")
                && r["Properties"]["Policies"].is_sequence()
        });
        assert!(
            found,
            "functions/{name} has a function with its own policies in the template"
        );
    }
}

fn event(name: &str) -> String {
    std::fs::read_to_string(root().join("events").join(name)).unwrap()
}

#[test]
fn sample_events_parse() {
    let ingest: SqsEvent = serde_json::from_str(&event("ingest.json")).unwrap();
    let body = ingest.records[0].body.as_deref().unwrap();
    let _: IngestMessage = serde_json::from_str(body).unwrap();

    for f in ["retry-scheduler.json", "health.json"] {
        let _: aws_lambda_events::event::eventbridge::EventBridgeEvent<serde_json::Value> =
            serde_json::from_str(&event(f)).unwrap();
    }

    // An SES bounce, as EventBridge hands it to the email-events function: it reads as one
    // of this stack's email events.
    let ses: aws_lambda_events::event::eventbridge::EventBridgeEvent<serde_json::Value> =
        serde_json::from_str(&event("email-events.json")).unwrap();
    let (channel, receipt) = converger_core::email::ses_event(&ses.detail).unwrap();
    assert!(channel.starts_with("ch_"));
    assert_eq!(receipt.status, converger_core::DeliveryStatus::Failed);

    // The platform's own messages, as their functions read them (versioned).
    use converger_ports::message::decode;
    let deliver: SqsEvent = serde_json::from_str(&event("deliver.json")).unwrap();
    let body = deliver.records[0].body.as_deref().unwrap();
    let _: DeliveryMessage = decode(body).unwrap();

    let probe: SqsEvent = serde_json::from_str(&event("probe.json")).unwrap();
    let body = probe.records[0].body.as_deref().unwrap();
    let _: converger_ports::FlowJob = decode(body).unwrap();

    // A platform event as the bus's rule puts it on the stream queue: a frame for its topic.
    let stream: SqsEvent = serde_json::from_str(&event("stream.json")).unwrap();
    let bus: aws_lambda_events::event::eventbridge::EventBridgeEvent<serde_json::Value> =
        serde_json::from_str(stream.records[0].body.as_deref().unwrap()).unwrap();
    let routed = converger_core::stream::route(&bus.detail_type, &bus.detail).unwrap();
    assert_eq!(routed.topic.to_string(), "conversation:conv-42");

    let replay: SqsEvent = serde_json::from_str(&event("replay.json")).unwrap();
    let body = replay.records[0].body.as_deref().unwrap();
    let _: converger_ports::ReplayMessage = decode(body).unwrap();

    for f in ["api.json", "admin.json"] {
        let req: ApiGatewayV2httpRequest = serde_json::from_str(&event(f)).unwrap();
        assert!(req.raw_path.is_some(), "{f}");
        // lambda_http accepts it as an API Gateway HTTP API request.
        let _: lambda_http::request::LambdaRequest = serde_json::from_str(&event(f)).unwrap();
    }
    let ws: aws_lambda_events::event::apigw::ApiGatewayWebsocketProxyRequest =
        serde_json::from_str(&event("websocket.json")).unwrap();
    assert_eq!(ws.request_context.route_key.as_deref(), Some("$default"));
    assert!(ws.request_context.connection_id.is_some());
    // The changes function's: a tumbling window's batch of the deliveries table's stream,
    // whose images are delivery rows.
    let changes: aws_lambda_events::event::dynamodb::TimeWindowEvent =
        serde_json::from_str(&event("changes.json")).unwrap();
    assert!(changes.time_window_properties.shard_id.is_some());
    for r in &changes.dynamo_db_event.records {
        for image in [&r.change.old_image, &r.change.new_image] {
            let _: converger_ports::Delivery = serde_dynamo::from_item(image.clone()).unwrap();
        }
    }
    let names: Vec<String> = std::fs::read_dir(root().join("events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let f = dir.unwrap().file_name().into_string().unwrap();
        assert!(
            names.contains(&format!("{f}.json")),
            "events/{f}.json exists"
        );
    }
}

/// The HTTP surfaces read anything a tenant names through the scoped reads (`channel_in`,
/// `delivery_in`, `replay_job_in`; activities are read by tenant and id): another tenant's
/// row reads as missing, so a forgotten tenant check cannot compile into a leak. `Reads` has
/// no unscoped delivery or replay job read at all; the reads of a channel by global id that
/// remain are listed here with why each is safe, and a new one fails this test until it is
/// scoped or listed.
#[test]
fn the_http_surfaces_read_by_global_id_only_where_listed() {
    const GLOBAL_READS: [&str; 5] = [
        "reads().channel(",
        "store.get_channel(",
        "store.get_delivery(",
        "store.get_replay_job(",
        "channel_cache().channel(",
    ];
    // (file under `src`, the line's text, why it is safe)
    let allowed: [(&str, &str, &str); 4] = [
        (
            "admin.rs",
            "state.pipeline.reads().channel(id)",
            "operators only; the id is the tenant's own alert channel",
        ),
        (
            "receipts.rs",
            "state.pipeline.reads().channel(&id)",
            "provider receipts: the caller is authenticated by the channel's own secret",
        ),
        (
            "web/scope.rs",
            "let name = match state.pipeline.channel_cache().channel(id).await {",
            "the channel of a row already read in scope (names in a listing, a conversation)",
        ),
        (
            "web/deliveries.rs",
            "state.pipeline.channel_cache().channel(&d.channel_id).await.ok().flatten()",
            "the channel of a delivery already read in scope (its page)",
        ),
    ];
    let dir = root().join("shared/http/src");
    let mut found = Vec::new();
    // Every file under `src`, folders included (`web/`), named by its path from `src`.
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let file = path
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap();
            // A method chain split over lines is read as one line.
            let mut lines: Vec<String> = Vec::new();
            for line in text.lines() {
                match lines.last_mut() {
                    Some(last) if line.trim_start().starts_with('.') => last.push_str(line.trim()),
                    _ => lines.push(line.trim().to_owned()),
                }
            }
            for line in lines {
                if GLOBAL_READS.iter().any(|g| line.contains(g)) {
                    found.push((file.clone(), line));
                }
            }
        }
    }
    for (file, line) in &found {
        assert!(
            allowed
                .iter()
                .any(|(f, needle, _)| f == file && line.contains(needle)),
            "{file}: `{line}` reads by global id; use a scoped read or list it here"
        );
    }
    assert_eq!(found.len(), allowed.len(), "{found:?}");
}

/// The rules read the time from the pipeline's clock (ADR 0063): a direct read of the
/// system's time in `shared/pipeline/src` would run on a different time from the one a test's
/// clock sets. Only the metrics' timestamps (a log line's own time) read it.
#[test]
fn the_pipeline_reads_the_time_only_from_its_clock() {
    const SYSTEM_TIME: [&str; 4] = [
        "time::now_ms()",
        "time::now_rfc3339()",
        "SystemTime::now()",
        "Utc::now()",
    ];
    let allowed = [("metrics.rs", "chrono::Utc::now().timestamp_millis()")];
    let dir = root().join("shared/pipeline/src");
    let mut found = Vec::new();
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let file = path
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let line = line.trim();
                if !line.starts_with("//") && SYSTEM_TIME.iter().any(|t| line.contains(t)) {
                    found.push((file.clone(), line.to_owned()));
                }
            }
        }
    }
    for (file, line) in &found {
        assert!(
            allowed.iter().any(|(f, l)| f == file && line.contains(l)),
            "{file}: `{line}` reads the system's time; use the use case's `clock`"
        );
    }
    assert_eq!(found.len(), allowed.len(), "{found:?}");
}

#[test]
fn every_channel_type_has_its_alarm_and_dashboard_lines_and_every_function_its_widgets() {
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    let t = template();
    let res = t["Resources"].as_mapping().unwrap();
    for kind in converger_core::ChannelType::ALL {
        let kind = kind.as_str();
        let alarm = res.values().any(|r| {
            r["Type"].as_str() == Some("AWS::CloudWatch::Alarm")
                && r["Properties"]["MetricName"].as_str() == Some("dead_lettered")
                && r["Properties"]["Dimensions"][0]["Value"].as_str() == Some(kind)
        });
        assert!(alarm, "no dead-letters-growing alarm for {kind}");
        for metric in ["sent", "dead_lettered"] {
            let line = format!(r#"["Converger", "{metric}", "ChannelType", "{kind}""#);
            // The by-type widget and the success-share SLO widget.
            assert_eq!(text.matches(&line).count(), 2, "{line} on the dashboard");
        }
    }
    for (id, r) in res {
        if r["Type"].as_str() == Some("AWS::Serverless::Function") {
            let id = id.as_str().unwrap();
            for metric in ["Errors", "Duration"] {
                let line = format!(r#"["AWS/Lambda", "{metric}", "FunctionName", "${{{id}}}"]"#);
                assert!(text.contains(&line), "{line} on the dashboard");
            }
        }
    }
}

/// API Gateway throttles each route of the HTTP API on its own, and the local gateway as it
/// does: past the tenant API's throttle a request is answered 429 by the gateway (no
/// `Retry-After`, no error code), while provider receipts, on a route of their own with their
/// own throttle, still reach the function; and past theirs, receipts are answered 429 too.
#[tokio::test]
async fn receipts_are_throttled_apart_from_the_tenant_api() {
    let t = TestStack::with(|o| {
        for (k, v) in [
            ("ApiThrottleRate", "1"),
            ("ApiThrottleBurst", "4"),
            ("ReceiptThrottleRate", "1"),
            ("ReceiptThrottleBurst", "6"),
        ] {
            o.parameters.insert(k.to_owned(), v.to_owned());
        }
    })
    .await;
    let (_, key) = t.tenant("default").await;
    let gateway_429 = |a: &converger_tests::Answer| {
        a.status == 429 && a.body["message"] == "Too Many Requests" && a.retry_after.is_none()
    };
    // The tenant API's bucket: four at once, then about one a second.
    let calls =
        futures::future::join_all((0..12).map(|_| t.api("GET", "/api/v1/channels", &key, None)))
            .await;
    let throttled = calls.iter().filter(|a| gateway_429(a)).count();
    assert!(
        (7..=12).contains(&throttled),
        "{throttled} of 12 throttled: {:?}",
        calls.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    // Receipts have their own bucket: the same moment, they reach the function (which refuses
    // an unknown channel's receipt itself).
    let receipt = || {
        t.raw(
            "POST",
            format!(
                "{}/api/v1/channels/ch_00000000000000000000000000000000/status?token=x",
                t.stack.api_url
            ),
            None,
            Some("{}".into()),
        )
    };
    let receipts = futures::future::join_all((0..5).map(|_| receipt())).await;
    assert!(
        receipts.iter().all(|a| !gateway_429(a)),
        "{:?}",
        receipts
            .iter()
            .map(|a| (a.status, &a.body))
            .collect::<Vec<_>>()
    );
    let more = futures::future::join_all((0..10).map(|_| receipt())).await;
    assert!(
        more.iter().filter(|a| gateway_429(a)).count() >= 5,
        "{:?}",
        more.iter().map(|a| a.status).collect::<Vec<_>>()
    );
}

/// Every resource the emulator's CloudFormation does not implement is made through its own
/// service's API on the emulator (the APIs with their routes, stages and integration, the
/// alarms, SES's configuration set, the event invoke configs, ...): each one the template
/// creates has the id its service gave, and a property its service refuses fails the
/// deployment (see `infra/local/deploy.py`).
#[tokio::test(flavor = "multi_thread")]
async fn every_resource_the_emulator_skips_is_made_through_its_service() {
    let t = TestStack::with(|o| {
        o.backend = converger_local::Backend::Emulator;
        o.skipped = converger_local::cfn::SkippedMade::All;
        o.config.live_stream = true;
    })
    .await;
    let d = &t.aws().deployed;
    let kinds: std::collections::BTreeSet<&str> =
        d.skipped.iter().map(|s| s.kind.as_str()).collect();
    for kind in [
        "AWS::ApiGatewayV2::Api",
        "AWS::ApiGatewayV2::Stage",
        "AWS::ApiGatewayV2::Route",
        "AWS::ApiGatewayV2::Integration",
        "AWS::CloudWatch::Alarm",
        "AWS::SES::ConfigurationSet",
        "AWS::Lambda::EventInvokeConfig",
        "AWS::SQS::QueuePolicy",
        "AWS::S3::BucketPolicy",
        "AWS::SecretsManager::Secret",
    ] {
        assert!(
            kinds.contains(kind),
            "{kind} is no longer skipped: {kinds:?}"
        );
    }
    // The account's logging role is set only when the operator asks: not made here.
    let not_made = ["ApiGatewayAccount"];
    for s in &d.skipped {
        if not_made.contains(&s.logical_id.as_str()) {
            assert!(!d.made.contains_key(&s.logical_id), "{}", s.logical_id);
            continue;
        }
        let id = d
            .made
            .get(&s.logical_id)
            .unwrap_or_else(|| panic!("{} ({}) was not made", s.logical_id, s.kind));
        assert_ne!(id, &s.logical_id, "{}", s.logical_id);
    }
    let alarms = resources_of("AWS::CloudWatch::Alarm");
    let made_alarms = d
        .skipped
        .iter()
        .filter(|s| s.kind == "AWS::CloudWatch::Alarm" && d.made.contains_key(&s.logical_id))
        .count();
    assert_eq!(made_alarms, alarms);
}

/// `WarmWriteUnits` pre-warms the two tables every first try writes and the index of each it
/// enters (the activities table with `by_conversation`, the deliveries table with
/// `by_tenant_status_s`), and nothing else: created by the emulator's CloudFormation.
#[tokio::test]
async fn warm_write_units_warm_the_tables_a_first_try_writes() {
    let t = TestStack::with(|o| {
        o.backend = converger_local::Backend::Emulator;
        o.parameters
            .insert("WarmWriteUnits".to_owned(), "8000".to_owned());
    })
    .await;
    let aws = t.aws();
    let ddb = &aws.clients.dynamodb;
    let r = &aws.resources;
    let warm = |w: Option<&aws_sdk_dynamodb::types::TableWarmThroughputDescription>| {
        w.and_then(|w| w.write_units_per_second)
    };
    let gsi_warm = |d: &aws_sdk_dynamodb::types::TableDescription, name: &str| {
        d.global_secondary_indexes()
            .iter()
            .find(|g| g.index_name() == Some(name))
            .and_then(|g| g.warm_throughput())
            .and_then(|w| w.write_units_per_second)
    };
    for (table, index, other) in [
        (&r.activities, "by_conversation", None),
        (&r.deliveries, "by_tenant_status_s", Some("by_due")),
    ] {
        let d = ddb.describe_table().table_name(table).send().await.unwrap();
        let d = d.table().unwrap();
        assert_eq!(warm(d.warm_throughput()), Some(8000), "{table}");
        assert_eq!(gsi_warm(d, index), Some(8000), "{table} {index}");
        if let Some(other) = other {
            assert_ne!(gsi_warm(d, other), Some(8000), "{table} {other}");
        }
    }
    let tenants = ddb
        .describe_table()
        .table_name(&r.tenants)
        .send()
        .await
        .unwrap();
    assert_ne!(warm(tenants.table().unwrap().warm_throughput()), Some(8000));
}

/// The operator's price list counts the template's alarms (each is paid monthly).
#[test]
fn the_deploying_page_counts_the_templates_alarms() {
    let alarms = resources_of("AWS::CloudWatch::Alarm");
    let page = std::fs::read_to_string(root().join("docs/deploying.md")).unwrap();
    let at = page.find(" alarms (about $").expect("the alarms' line");
    let said: usize = page[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count before ` alarms`");
    assert_eq!(said, alarms);
}

/// Every template parameter has its row in the deploying page's table.
#[test]
fn the_deploying_page_names_every_parameter() {
    let page = std::fs::read_to_string(root().join("docs/deploying.md")).unwrap();
    let named: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('|').nth(1))
        .collect();
    let missing: Vec<String> = template()["Parameters"]
        .as_mapping()
        .unwrap()
        .keys()
        .filter_map(|k| k.as_str())
        .filter(|p| !named.iter().any(|cell| cell.contains(&format!("`{p}`"))))
        .map(str::to_owned)
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
}
