//! AWS channel types through the API: each type delivers into the tenant's own account as
//! the role its channel names, with the tenant's external id (`GET /api/v1/aws-identity`);
//! the message carries the webhook's body and its signature; a FIFO target gets the
//! conversation as its group and the delivery as its deduplication id; the role is assumed
//! once, not per delivery; a missing target or an oversized message dead-letters after one
//! attempt with the error table's advice, a throttled one is retried; a role of the platform's own account is
//! refused when the channel is written; a rotated external id is audited and the role that
//! trusts only the old one refuses the platform; a role that admits any external id is not
//! sent as. The in-process backend's model of the
//! accounts stands in for AWS here; `emulator` runs the same sends through STS, SQS,
//! EventBridge, Kinesis and SNS in a second account of the emulator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::views::{AttemptView, AuditView, AwsIdentityView, DeliveryView, Page};
use converger_local::Backend;
use converger_tests::TestStack;
use converger_tests::client::{Tenant, is_settled};
use serde_json::{Value, json};
use std::time::Duration;

const TENANT_ACCOUNT: &str = "222233334444";
const ROLE: &str = "arn:aws:iam::222233334444:role/converger-delivery";
const QUEUE: &str = "https://sqs.eu-west-1.amazonaws.com/222233334444/activity";
const FIFO_QUEUE: &str = "https://sqs.eu-west-1.amazonaws.com/222233334444/activity.fifo";
const BUS: &str = "arn:aws:events:eu-west-1:222233334444:event-bus/activity";
const STREAM: &str = "arn:aws:kinesis:eu-west-1:222233334444:stream/activity";
const TOPIC: &str = "arn:aws:sns:eu-west-1:222233334444:activity.fifo";

async fn in_process() -> TestStack {
    TestStack::with(|o| o.backend = Backend::Memory).await
}

async fn identity(t: &Tenant<'_>) -> AwsIdentityView {
    t.api("GET", "/api/v1/aws-identity", None)
        .await
        .typed(200)
        .unwrap()
}

/// An AWS channel of `kind` sending to `target` as `role`; its id and signing secret.
async fn channel(t: &Tenant<'_>, kind: &str, target: &str, role: &str) -> (String, String) {
    let key = match kind {
        "aws_sqs" => "queue_url",
        "aws_eventbridge" => "event_bus_arn",
        "aws_kinesis" => "stream_arn",
        _ => "topic_arn",
    };
    let c = t
        .create_channel(json!({
            "type": kind, "name": kind,
            "config": {key: target, "role_arn": role},
            "retry_policy": {"max_attempts": 3, "backoff": "fixed", "base_ms": 200},
        }))
        .await
        .unwrap();
    (c.channel.id, c.signing_secret)
}

/// Bounded well past a lease and a queue's visibility timeout: on a loaded machine an
/// emulator call can outlast its lease, and the delivery is attempted again when its
/// message comes back.
async fn settled(t: &Tenant<'_>, id: &str) -> DeliveryView {
    t.wait_delivery(id, Duration::from_secs(90), is_settled)
        .await
}

fn attribute<'a>(attrs: &'a [(String, String)], name: &str) -> &'a str {
    attrs
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Checks `signature` over `body` for message `id` at `ts` with the channel's secret.
fn verifies(secret: &str, id: &str, ts: &str, body: &str, signature: &str) -> bool {
    let signer = converger_core::signing::Signer::new(secret).unwrap();
    signature
        .split(' ')
        .any(|s| s == signer.sign(id, ts.parse().unwrap(), body.as_bytes()))
}

#[tokio::test]
async fn each_aws_type_delivers_into_the_tenants_account_as_its_role() {
    let t = in_process().await;
    let a = t.new_tenant("default").await;
    let id = identity(&a).await;
    assert_eq!(id.account_id, converger_local::LOCAL_ACCOUNT);
    assert!(id.external_id.starts_with("cvg-"), "{}", id.external_id);
    assert!(id.role_template.contains(&id.external_id));
    assert_eq!(id.send_actions["aws_sqs"], "sqs:SendMessage");
    // Asked again, the same id.
    assert_eq!(identity(&a).await.external_id, id.external_id);

    let cloud = t.stack.memory().unwrap().tenant_aws.clone();
    cloud.add_role(ROLE, &id.external_id);
    for target in [QUEUE, FIFO_QUEUE, BUS, STREAM, TOPIC] {
        cloud.add_target(target);
    }
    let sqs = channel(&a, "aws_sqs", QUEUE, ROLE).await;
    let fifo = channel(&a, "aws_sqs", FIFO_QUEUE, ROLE).await;
    let bus = channel(&a, "aws_eventbridge", BUS, ROLE).await;
    let stream = channel(&a, "aws_kinesis", STREAM, ROLE).await;
    let topic = channel(&a, "aws_sns", TOPIC, ROLE).await;
    let (_, ingested) = a
        .post_activity(json!({
            "conversation_id": "conv-7",
            "channel_ids": [sqs.0, fifo.0, bus.0, stream.0, topic.0],
            "payload": {"text": "hello"},
        }))
        .await
        .unwrap();
    let mut by_channel = std::collections::HashMap::new();
    for d in &ingested.deliveries {
        let d = settled(&a, &d.id).await;
        assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
        // The service's id is in the attempt log, not the receipts index.
        assert_eq!(d.provider_message_id, None, "{d:?}");
        let log = d.attempt_log.clone().unwrap_or_default();
        assert!(
            log.iter().any(|e| e
                .response_snippet
                .as_deref()
                .is_some_and(|r| r.starts_with("message id mem-"))),
            "{d:?}"
        );
        by_channel.insert(d.channel_id.clone(), d.id.clone());
    }

    // SQS: the webhook's envelope as the body, the Standard Webhooks headers as attributes.
    let got = cloud.received(QUEUE);
    assert_eq!(got.len(), 1);
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(body["payload"]["text"], "hello");
    assert_eq!(body["conversation_id"], "conv-7");
    let delivery = &by_channel[&sqs.0];
    assert_eq!(attribute(&got[0].attributes, "webhook-id"), delivery);
    assert_eq!(attribute(&got[0].attributes, "conversation-id"), "conv-7");
    // The attempt's span of the activity's trace (one started for it: none was sent).
    let traceparent = attribute(&got[0].attributes, "traceparent");
    assert!(
        traceparent.len() == 55 && traceparent.starts_with("00-"),
        "{traceparent}"
    );
    assert!(verifies(
        &sqs.1,
        delivery,
        attribute(&got[0].attributes, "webhook-timestamp"),
        &got[0].body,
        attribute(&got[0].attributes, "webhook-signature"),
    ));
    assert_eq!(got[0].role_arn, ROLE);

    // FIFO queue and topic: the conversation is the group, the delivery the deduplication id.
    for (target, ch) in [(FIFO_QUEUE, &fifo.0), (TOPIC, &topic.0)] {
        let got = cloud.received(target);
        assert_eq!(got.len(), 1, "{target}");
        assert_eq!(got[0].group_id.as_deref(), Some("conv-7"));
        assert_eq!(
            got[0].deduplication_id.as_deref(),
            Some(by_channel[ch].as_str())
        );
    }

    // EventBridge and Kinesis: the id, timestamp and signature beside the signed body.
    for (target, ch, secret) in [(BUS, &bus.0, &bus.1), (STREAM, &stream.0, &stream.1)] {
        let got = cloud.received(target);
        assert_eq!(got.len(), 1, "{target}");
        let record: Value = serde_json::from_str(&got[0].body).unwrap();
        assert_eq!(record["id"], by_channel[ch].as_str());
        assert_eq!(record["conversation_id"], "conv-7");
        let signed = record["body"].as_str().unwrap();
        assert!(verifies(
            secret,
            &by_channel[ch],
            &record["timestamp"].to_string(),
            signed,
            record["signature"].as_str().unwrap(),
        ));
    }
    assert_eq!(
        cloud.received(BUS)[0].detail_type.as_deref(),
        Some("activity")
    );
    assert_eq!(
        cloud.received(STREAM)[0].group_id.as_deref(),
        Some("conv-7")
    );

    // One role, assumed once for five sends, and not again for more.
    assert_eq!(cloud.assumed(), 1);
    for _ in 0..3 {
        let i = a.activity(&[&sqs.0]).await;
        assert_eq!(settled(&a, &i.deliveries[0].id).await.status, "sent");
    }
    assert_eq!(cloud.received(QUEUE).len(), 4);
    assert_eq!(cloud.assumed(), 1);
}

#[tokio::test]
async fn a_missing_target_or_an_oversized_message_dead_letters_at_once_and_throttling_is_retried() {
    let t = in_process().await;
    let a = t.new_tenant("default").await;
    let id = identity(&a).await;
    let cloud = t.stack.memory().unwrap().tenant_aws.clone();
    cloud.add_role(ROLE, &id.external_id);
    cloud.add_target(QUEUE);
    let (missing, _) = channel(&a, "aws_sqs", FIFO_QUEUE, ROLE).await;
    let i = a.activity(&[&missing]).await;
    let d = settled(&a, &i.deliveries[0].id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
    let error = d.last_error.unwrap();
    assert!(
        error.contains("AWS.SimpleQueueService.NonExistentQueue")
            && error.contains("the target does not exist"),
        "{error}"
    );

    // A message over SQS's 256 KB (a payload the API takes, in the envelope with its
    // attributes) is refused before sending; Kinesis takes it.
    cloud.add_target(STREAM);
    let (stream, _) = channel(&a, "aws_kinesis", STREAM, ROLE).await;
    let (_, big) = a
        .post_activity(
            json!({"conversation_id": "c", "channel_ids": [missing, stream],
                              "payload": {"text": "x".repeat(256 * 1024 - 20)}}),
        )
        .await
        .unwrap();
    for d in &big.deliveries {
        let d = settled(&a, &d.id).await;
        if d.channel_id == stream {
            assert_eq!(d.status, "sent", "{d:?}");
        } else {
            assert_eq!((d.status.as_str(), d.attempts), ("failed", 1));
            let error = d.last_error.unwrap();
            assert!(error.contains("SQS takes at most 262144"), "{error}");
        }
    }
    assert_eq!(cloud.received(STREAM).len(), 1);

    cloud.fail_next(QUEUE, "ThrottlingException", 400, 1);
    let (throttled, _) = channel(&a, "aws_sqs", QUEUE, ROLE).await;
    let i = a.activity(&[&throttled]).await;
    let d = settled(&a, &i.deliveries[0].id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 2), "{d:?}");
    assert_eq!(cloud.received(QUEUE).len(), 1);
    // The attempt log (newest first) keeps the service's answer: its message id, and before
    // it the error code.
    let log: Page<AttemptView> = a
        .api(
            "GET",
            &format!("/api/v1/deliveries/{}/attempts", d.id),
            None,
        )
        .await
        .typed(200)
        .unwrap();
    let entries = &log.data;
    assert!(
        entries[1]
            .error
            .as_deref()
            .unwrap()
            .contains("ThrottlingException"),
        "{log:?}"
    );
    assert!(
        entries[0]
            .response_snippet
            .as_deref()
            .unwrap()
            .starts_with("message id mem-"),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_role_of_the_platforms_own_account_is_refused_when_the_channel_is_written() {
    let t = in_process().await;
    let a = t.new_tenant("default").await;
    let ours = format!(
        "arn:aws:iam::{}:role/converger-deliver",
        converger_local::LOCAL_ACCOUNT
    );
    let refused = a
        .create_channel(json!({"type": "aws_sqs", "name": "q",
                               "config": {"queue_url": QUEUE, "role_arn": ours}}))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (422, "role_in_platform_account")
    );
    // Nor can a channel be changed to one.
    let (ch, _) = channel(&a, "aws_sqs", QUEUE, ROLE).await;
    let patched = a
        .api(
            "PATCH",
            &format!("/api/v1/channels/{ch}"),
            Some(json!({"config": {"queue_url": QUEUE, "role_arn": ours}})),
        )
        .await;
    assert_eq!(
        (patched.status, patched.code()),
        (422, "role_in_platform_account")
    );
    // A stored key is not a setting.
    let keyed = a
        .create_channel(json!({"type": "aws_sqs", "name": "q",
                               "config": {"queue_url": QUEUE, "role_arn": ROLE,
                                          "secret_access_key": "x"}}))
        .await
        .unwrap_err();
    assert_eq!((keyed.status, keyed.code.as_str()), (422, "invalid_config"));
    assert!(TENANT_ACCOUNT != converger_local::LOCAL_ACCOUNT);
}

#[tokio::test]
async fn a_rotated_external_id_is_audited_and_a_role_trusting_the_old_one_refuses() {
    // Each instance keeps a tenant's external id for `CHANNEL_CACHE_TTL_MS`, which the test
    // stacks set to zero: the rotation applies to the very next send, whichever instance
    // makes it.
    let t = in_process().await;
    let a = t.new_tenant("default").await;
    let old = identity(&a).await.external_id;
    let cloud = t.stack.memory().unwrap().tenant_aws.clone();
    cloud.add_role(ROLE, &old);
    cloud.add_target(QUEUE);
    let (ch, _) = channel(&a, "aws_sqs", QUEUE, ROLE).await;
    let i = a.activity(&[&ch]).await;
    assert_eq!(settled(&a, &i.deliveries[0].id).await.status, "sent");

    let rotated: AwsIdentityView = a
        .api("POST", "/api/v1/aws-identity/rotate", None)
        .await
        .typed(200)
        .unwrap();
    assert_ne!(rotated.external_id, old);
    assert_eq!(identity(&a).await.external_id, rotated.external_id);
    let audit: Page<AuditView> = a
        .api("GET", "/api/v1/audit", None)
        .await
        .typed(200)
        .unwrap();
    assert!(
        audit.data.iter().any(|e| e.action == "rotate_external_id"),
        "{audit:?}"
    );
    // The session taken with the old id has ended; the role trusts only the old one.
    cloud.expire_sessions();
    let i = a.activity(&[&ch]).await;
    let d = settled(&a, &i.deliveries[0].id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
    let error = d.last_error.unwrap();
    assert!(
        error.starts_with("sts:AssumeRole: AccessDenied") && error.contains("external id"),
        "{error}"
    );
}

/// A role whose trust policy admits the platform without the `sts:ExternalId` condition
/// could be named by any tenant: nothing is sent as it, and the dead letter says what to add.
#[tokio::test]
async fn a_role_that_does_not_require_the_external_id_is_refused() {
    let t = in_process().await;
    let a = t.new_tenant("default").await;
    let cloud = t.stack.memory().unwrap().tenant_aws.clone();
    cloud.add_role_without_external_id(ROLE);
    cloud.add_target(QUEUE);
    let (ch, _) = channel(&a, "aws_sqs", QUEUE, ROLE).await;
    let i = a.activity(&[&ch]).await;
    let d = settled(&a, &i.deliveries[0].id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
    let error = d.last_error.unwrap();
    assert!(
        error.starts_with("sts:AssumeRole: ExternalIdNotRequired")
            && error.contains("sts:ExternalId"),
        "{error}"
    );
    assert!(cloud.received(QUEUE).is_empty(), "nothing sent as the role");
}

/// The same sends on the emulator: the deliver function, through its deployed policy,
/// assumes a role in a second account (the tenant's) and sends into that account's own
/// queue, FIFO queue, event bus, stream and FIFO topic, which the test reads back with the
/// tenant's credentials.
pub(crate) mod emulator {
    use super::*;
    use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};

    pub(crate) async fn queue(sqs: &aws_sdk_sqs::Client, name: &str) -> (String, String) {
        let mut req = sqs.create_queue().queue_name(name);
        if name.ends_with(".fifo") {
            req = req.attributes(QueueAttributeName::FifoQueue, "true");
        }
        let url = req.send().await.unwrap().queue_url.unwrap();
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap()[&QueueAttributeName::QueueArn]
            .clone();
        (url, arn)
    }

    /// The messages in a queue of the tenant's, with their attributes.
    pub(crate) async fn messages(
        sqs: &aws_sdk_sqs::Client,
        url: &str,
    ) -> Vec<aws_sdk_sqs::types::Message> {
        sqs.receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default()
    }

    fn message_attribute(m: &aws_sdk_sqs::types::Message, name: &str) -> String {
        m.message_attributes()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value())
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test]
    async fn each_type_delivers_into_another_account_on_the_emulator() {
        let t = TestStack::on_emulator().await;
        let a = t.new_tenant("default").await;
        let tenant = t.account(TENANT_ACCOUNT, "eu-west-1").await;
        let sqs = aws_sdk_sqs::Client::new(&tenant);
        // Names of this test's own: the emulator's second account outlives one test.
        let name = format!(
            "activity-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let at = |service: &str, what: &str| {
            format!("arn:aws:{service}:eu-west-1:{TENANT_ACCOUNT}:{what}")
        };
        let (queue_target, fifo_target) = (
            format!("https://sqs.eu-west-1.amazonaws.com/{TENANT_ACCOUNT}/{name}"),
            format!("https://sqs.eu-west-1.amazonaws.com/{TENANT_ACCOUNT}/{name}.fifo"),
        );
        let (bus, stream, topic_arn) = (
            at("events", &format!("event-bus/{name}")),
            at("kinesis", &format!("stream/{name}")),
            at("sns", &format!("{name}.fifo")),
        );
        let (queue_url, _) = queue(&sqs, &name).await;
        let (fifo_url, _) = queue(&sqs, &format!("{name}.fifo")).await;
        let (bus_events, bus_events_arn) = queue(&sqs, &format!("{name}-bus-events")).await;
        let (topic_messages, topic_messages_arn) =
            queue(&sqs, &format!("{name}-topic-messages.fifo")).await;
        let events = aws_sdk_eventbridge::Client::new(&tenant);
        events.create_event_bus().name(&name).send().await.unwrap();
        events
            .put_rule()
            .name("from-converger")
            .event_bus_name(&name)
            .event_pattern(json!({"source": ["converger"]}).to_string())
            .send()
            .await
            .unwrap();
        events
            .put_targets()
            .rule("from-converger")
            .event_bus_name(&name)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("queue")
                    .arn(&bus_events_arn)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        let kinesis = aws_sdk_kinesis::Client::new(&tenant);
        kinesis
            .create_stream()
            .stream_name(&name)
            .shard_count(1)
            .send()
            .await
            .unwrap();
        let sns = aws_sdk_sns::Client::new(&tenant);
        let topic = sns
            .create_topic()
            .name(format!("{name}.fifo"))
            .attributes("FifoTopic", "true")
            .send()
            .await
            .unwrap()
            .topic_arn
            .unwrap();
        assert_eq!(topic, topic_arn);
        sns.subscribe()
            .topic_arn(&topic)
            .protocol("sqs")
            .endpoint(&topic_messages_arn)
            .attributes("RawMessageDelivery", "true")
            .send()
            .await
            .unwrap();

        let sqs_ch = channel(&a, "aws_sqs", &queue_target, ROLE).await.0;
        let fifo_ch = channel(&a, "aws_sqs", &fifo_target, ROLE).await.0;
        let bus_ch = channel(&a, "aws_eventbridge", &bus, ROLE).await.0;
        let stream_ch = channel(&a, "aws_kinesis", &stream, ROLE).await.0;
        let topic_ch = channel(&a, "aws_sns", &topic_arn, ROLE).await.0;
        let missing = channel(
            &a,
            "aws_sqs",
            "https://sqs.eu-west-1.amazonaws.com/222233334444/missing",
            ROLE,
        )
        .await
        .0;
        let (_, ingested) = a
            .post_activity(json!({
                "conversation_id": "conv-9",
                "channel_ids": [sqs_ch, fifo_ch, bus_ch, stream_ch, topic_ch, missing],
                "payload": {"text": "hello"},
            }))
            .await
            .unwrap();
        let mut ids = std::collections::HashMap::new();
        for d in &ingested.deliveries {
            let d = settled(&a, &d.id).await;
            if d.channel_id == missing {
                // A missing queue: dead at its first attempt, with what to check.
                assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
                let error = d.last_error.clone().unwrap();
                assert!(error.contains("the target does not exist"), "{error}");
            } else {
                assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
            }
            ids.insert(d.channel_id.clone(), d.id.clone());
        }

        let got = messages(&sqs, &queue_url).await;
        assert_eq!(got.len(), 1);
        let body: Value = serde_json::from_str(got[0].body().unwrap()).unwrap();
        assert_eq!(body["payload"]["text"], "hello");
        assert_eq!(message_attribute(&got[0], "webhook-id"), ids[&sqs_ch]);
        assert!(message_attribute(&got[0], "webhook-signature").starts_with("v1,"));
        assert!(message_attribute(&got[0], "traceparent").starts_with("00-"));

        for (url, ch) in [(&fifo_url, &fifo_ch), (&topic_messages, &topic_ch)] {
            let got = messages(&sqs, url).await;
            assert_eq!(got.len(), 1, "{url}");
            let system = got[0].attributes().unwrap();
            assert_eq!(
                system[&MessageSystemAttributeName::MessageGroupId],
                "conv-9"
            );
            assert_eq!(message_attribute(&got[0], "webhook-id"), ids[ch]);
        }

        let got = messages(&sqs, &bus_events).await;
        assert_eq!(got.len(), 1);
        let event: Value = serde_json::from_str(got[0].body().unwrap()).unwrap();
        assert_eq!(event["source"], "converger");
        assert_eq!(event["detail-type"], "activity");
        assert_eq!(event["detail"]["id"], ids[&bus_ch].as_str());
        assert!(
            event["detail"]["traceparent"]
                .as_str()
                .is_some_and(|t| t.starts_with("00-")),
            "{event}"
        );

        let shard = kinesis
            .get_shard_iterator()
            .stream_arn(&stream)
            .shard_id("shardId-000000000000")
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator
            .unwrap();
        let records = kinesis
            .get_records()
            .stream_arn(&stream)
            .shard_iterator(shard)
            .send()
            .await
            .unwrap()
            .records;
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].partition_key.as_deref(), Some("conv-9"));
        let record: Value = serde_json::from_slice(records[0].data.as_ref()).unwrap();
        assert_eq!(record["id"], ids[&stream_ch].as_str());

        // The identity, and its rotation, through the API function's own policy.
        let before = identity(&a).await;
        assert_eq!(before.account_id, converger_local::LOCAL_ACCOUNT);
        let rotated: AwsIdentityView = a
            .api("POST", "/api/v1/aws-identity/rotate", None)
            .await
            .typed(200)
            .unwrap();
        assert_ne!(rotated.external_id, before.external_id);
        // A role of the platform's own account is refused on write.
        let ours = format!(
            "arn:aws:iam::{}:role/converger-deliver",
            converger_local::LOCAL_ACCOUNT
        );
        let refused = a
            .create_channel(json!({"type": "aws_sqs", "name": "q",
                                   "config": {"queue_url": QUEUE, "role_arn": ours}}))
            .await
            .unwrap_err();
        assert_eq!(refused.code, "role_in_platform_account");
        // The deliver function's AssumeRole passed its own policy's check.
        let violations = t.stack.iam_violations();
        assert!(violations.is_empty(), "{violations:?}");
    }
}
