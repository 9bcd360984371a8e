//! The AWS destinations past queues and streams, on the emulator: an S3 object per delivery
//! under the channel's prefix, a Firehose record, a Step Functions execution named after its
//! delivery. Each is sent into a second account (the tenant's) as the channel's role, and
//! read back there; a missing bucket, delivery stream or state machine dead-letters at its
//! first attempt; a start the service finds made already counts as sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_tests::client::{Tenant, is_settled};
use converger_tests::{TestStack, verifies};
use serde_json::{Value, json};
use std::time::Duration;

const TENANT_ACCOUNT: &str = "222233334444";
const ROLE: &str = "arn:aws:iam::222233334444:role/converger-delivery";
const REGION: &str = "eu-west-1";

async fn channel(t: &Tenant<'_>, kind: &str, config: Value) -> (String, String) {
    let mut config = config;
    config["role_arn"] = json!(ROLE);
    let c = t
        .create_channel(json!({
            "type": kind, "name": kind, "config": config,
            "retry_policy": {"max_attempts": 3, "backoff": "fixed", "base_ms": 200},
        }))
        .await
        .unwrap();
    (c.channel.id, c.signing_secret)
}

/// A producer's `traceparent`, and its trace's id.
const PRODUCER_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The executions of the state machine `machine`.
async fn executions_of(
    sfn: &aws_sdk_sfn::Client,
    machine: &str,
) -> Vec<aws_sdk_sfn::types::ExecutionListItem> {
    sfn.list_executions()
        .state_machine_arn(machine)
        .send()
        .await
        .unwrap()
        .executions
}

#[tokio::test]
async fn s3_firehose_and_step_functions_receive_into_the_tenants_account() {
    let t = TestStack::on_emulator().await;
    let a = t.new_tenant("default").await;
    let tenant = t.account(TENANT_ACCOUNT, REGION).await;
    let name = format!("dst-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);

    let target = |service| converger_bench::requests::tenant_target(&tenant, service, &name);
    use converger_core::aws::Service;
    let bucket = target(Service::S3).await.unwrap();
    let stream_arn = target(Service::Firehose).await.unwrap();
    let firehose_bucket = format!("{name}-fh");
    let machine = target(Service::StepFunctions).await.unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&tenant)
            .force_path_style(true)
            .build(),
    );
    let sfn = aws_sdk_sfn::Client::new(&tenant);

    let (s3_ch, s3_secret) = channel(
        &a,
        "aws_s3",
        json!({"bucket": bucket, "region": REGION, "key_prefix": "converger/"}),
    )
    .await;
    let (firehose_ch, _) = channel(
        &a,
        "aws_firehose",
        json!({"delivery_stream_arn": stream_arn}),
    )
    .await;
    let (sfn_ch, _) = channel(
        &a,
        "aws_stepfunctions",
        json!({"state_machine_arn": machine}),
    )
    .await;
    let (no_bucket, _) = channel(
        &a,
        "aws_s3",
        json!({"bucket": format!("{name}-missing"), "region": REGION}),
    )
    .await;
    let (no_machine, _) = channel(
        &a,
        "aws_stepfunctions",
        json!({"state_machine_arn": format!("arn:aws:states:{REGION}:{TENANT_ACCOUNT}:stateMachine:{name}-missing")}),
    )
    .await;
    let (no_stream, _) = channel(
        &a,
        "aws_firehose",
        json!({"delivery_stream_arn": format!("arn:aws:firehose:{REGION}:{TENANT_ACCOUNT}:deliverystream/{name}-missing")}),
    )
    .await;
    // Settings that do not fit are refused when written.
    let refused = a
        .create_channel(json!({"type": "aws_s3", "name": "bad",
            "config": {"bucket": "Not_A_Bucket", "region": REGION, "role_arn": ROLE}}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, "invalid_config");

    // The producer's trace goes with the activity to every destination.
    let answer = t
        .http
        .post(format!("{}/api/v1/activities", t.stack.api_url))
        .bearer_auth(&a.key)
        .header("traceparent", PRODUCER_TRACE)
        .json(&json!({
            "conversation_id": "conv-d",
            "event_type": "order.paid",
            "channel_ids": [s3_ch, firehose_ch, sfn_ch, no_bucket, no_machine, no_stream],
            "payload": {"text": "hello"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    let ingested: converger_tests::views::Ingested = answer.json().await.unwrap();
    assert_eq!(ingested.trace_id, TRACE_ID);
    let in_trace = |tp: &str| {
        let parts: Vec<&str> = tp.split('-').collect();
        // The trace's id, a span of the attempt's own (not the producer's).
        assert_eq!((parts.len(), parts[1]), (4, TRACE_ID), "{tp}");
        assert_ne!(parts[2], "00f067aa0ba902b7", "{tp}");
    };
    let mut ids = std::collections::HashMap::new();
    for d in &ingested.deliveries {
        let d = a
            .wait_delivery(&d.id, Duration::from_secs(90), is_settled)
            .await;
        if [&no_bucket, &no_machine, &no_stream].contains(&&d.channel_id) {
            assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
            let error = d.last_error.clone().unwrap();
            assert!(error.contains("the target does not exist"), "{error}");
        } else {
            assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
        }
        ids.insert(d.channel_id.clone(), d.id.clone());
    }

    // S3: one object under the prefix, named after the delivery; the signed body, with the
    // Standard Webhooks headers as its metadata.
    let key = format!("converger/{}.json", ids[&s3_ch]);
    let object = s3
        .get_object()
        .bucket(&bucket)
        .key(&key)
        .send()
        .await
        .unwrap();
    let metadata = object.metadata().cloned().unwrap_or_default();
    let body = String::from_utf8(object.body.collect().await.unwrap().to_vec()).unwrap();
    let parsed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(parsed["payload"]["text"], "hello");
    assert_eq!(metadata["webhook-id"], ids[&s3_ch]);
    assert_eq!(metadata["event-type"], "order.paid");
    in_trace(&metadata["traceparent"]);
    assert!(verifies(
        &s3_secret,
        &ids[&s3_ch],
        &metadata["webhook-timestamp"],
        &body,
        &metadata["webhook-signature"],
    ));

    // Firehose: one record, a line, delivered by the stream into its bucket.
    let listed = s3
        .list_objects_v2()
        .bucket(&firehose_bucket)
        .send()
        .await
        .unwrap();
    let keys: Vec<String> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let records = s3
        .get_object()
        .bucket(&firehose_bucket)
        .key(&keys[0])
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .to_vec();
    let line = String::from_utf8(records).unwrap();
    assert!(line.ends_with('\n'), "{line}");
    let record: Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(record["id"], ids[&firehose_ch].as_str());
    assert_eq!(record["event_type"], "order.paid");
    in_trace(record["traceparent"].as_str().unwrap());

    // Step Functions: one execution, named after the delivery, the record as its input.
    let executions = executions_of(&sfn, &machine).await;
    assert_eq!(executions.len(), 1);
    assert_eq!(executions[0].name, ids[&sfn_ch]);
    let input = sfn
        .describe_execution()
        .execution_arn(&executions[0].execution_arn)
        .send()
        .await
        .unwrap()
        .input
        .unwrap();
    let input: Value = serde_json::from_str(&input).unwrap();
    assert_eq!(input["id"], ids[&sfn_ch].as_str());
    assert_eq!(input["conversation_id"], "conv-d");
    in_trace(input["traceparent"].as_str().unwrap());

    let violations = t.stack.iam_violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// A Step Functions start repeated after a crash (the execution named after the delivery is
/// there already, with another input) is refused by the service as `ExecutionAlreadyExists`,
/// which counts as sent: the delivery is `sent` at its first attempt and the machine keeps its
/// one execution.
#[tokio::test]
async fn a_step_functions_start_found_already_made_counts_as_sent() {
    use converger_core::ids::{ActivityId, ChannelId, DeliveryId};
    let t = TestStack::on_emulator().await;
    let a = t.new_tenant("default").await;
    let tenant = t.account(TENANT_ACCOUNT, REGION).await;
    let name = format!("rep-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let machine = converger_bench::requests::tenant_target(
        &tenant,
        converger_core::aws::Service::StepFunctions,
        &name,
    )
    .await
    .unwrap();
    let (ch, _) = channel(
        &a,
        "aws_stepfunctions",
        json!({"state_machine_arn": machine}),
    )
    .await;
    let activity = format!("act_{name}");
    let id = DeliveryId::for_pair(
        &ActivityId::parse(&activity).unwrap(),
        &ChannelId::parse(&ch).unwrap(),
    );
    let sfn = aws_sdk_sfn::Client::new(&tenant);
    sfn.start_execution()
        .state_machine_arn(&machine)
        .name(id.as_str())
        .input("{}")
        .send()
        .await
        .unwrap();
    let (_, ingested) = a
        .post_activity(json!({
            "id": activity, "conversation_id": "conv-r",
            "channel_ids": [ch], "payload": {"text": "again"},
        }))
        .await
        .unwrap();
    assert_eq!(ingested.deliveries[0].id, id.as_str());
    let d = a
        .wait_delivery(id.as_str(), Duration::from_secs(90), is_settled)
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
    let executions = executions_of(&sfn, &machine).await;
    assert_eq!(executions.len(), 1);
}
