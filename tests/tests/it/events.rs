//! Platform events reach the EventBridge bus: a rule on the emulator's bus forwards them to a
//! queue the test reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_ports::events::{DeliveryDeadLettered, DeliveryStatusChanged};
use converger_tests::{EventTap, Receiver, TestStack, is_settled};
use serde_json::{Value, json};
use std::time::Duration;

/// A platform event's `detail` as `T`, when it is one.
#[tokio::test]
async fn a_dead_letter_is_announced_on_the_bus() {
    let t = TestStack::on_emulator().await;
    let tap = t.tap_events().await;

    let rx = Receiver::always(400).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let act = t.activity(&key, &[ch.id.as_str()]).await;
    let id = act.deliveries[0].id.as_str().to_owned();
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "failed");

    let events = tap.wait(Duration::from_secs(15), |e| e.len() >= 2).await;
    let find = |kind: &str| {
        events
            .iter()
            .find(|e| e["detail-type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} event in {events:?}"))
            .clone()
    };
    let dead = find("delivery.dead_lettered");
    // The envelope is EventBridge's: its `source` as the bus delivers it.
    assert_eq!(dead["source"], "converger");
    let dead: DeliveryDeadLettered = EventTap::detail(&dead);
    let named = &dead.delivery;
    assert_eq!(named.delivery_id.as_str(), id);
    assert_eq!(named.activity_id.as_str(), act.activity_id);
    assert_eq!(named.channel_id.as_str(), ch.id);
    assert_eq!(named.tenant_id.as_str(), tenant);
    assert_eq!(named.attempts, 1);
    assert!(named.error.as_deref().unwrap().contains("400"), "{dead:?}");
    let changed = find("delivery.status_changed");
    let changed: DeliveryStatusChanged = EventTap::detail(&changed);
    assert_eq!(changed.status, "failed");
    assert_eq!(changed.delivery.conversation_id, "conv-1");
}

/// A record of the deliveries table's stream that is no delivery row fails every try: after
/// the mapping's ten retries its batch's place (its shard and sequence numbers) goes to
/// `ChangesDlq`, and the shard goes on: a delivery after it is announced.
#[tokio::test]
async fn a_poison_stream_record_goes_to_the_dead_letter_queue_and_the_shard_goes_on() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let t = TestStack::on_emulator().await;
    let tap = t.tap_events().await;
    let aws = t.aws();
    aws.clients
        .dynamodb
        .put_item()
        .table_name(&aws.resources.deliveries)
        .item("id", AttributeValue::S("dlv_poison".into()))
        .item("status", AttributeValue::S("no such status".into()))
        .send()
        .await
        .unwrap();
    let dlq = aws.deployed.queues["ChangesDlq"].url.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let message = loop {
        let out = aws
            .clients
            .sqs
            .receive_message()
            .queue_url(&dlq)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        if let Some(m) = out.messages.unwrap_or_default().pop() {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing in ChangesDlq"
        );
    };
    let body: serde_json::Value = serde_json::from_str(message.body().unwrap()).unwrap();
    assert_eq!(
        body["requestContext"]["condition"], "RetryAttemptsExhausted",
        "{body}"
    );
    let info = &body["DDBStreamBatchInfo"];
    assert!(info["shardId"].is_string(), "{body}");
    assert!(info["startSequenceNumber"].is_string(), "{body}");
    assert!(info["endSequenceNumber"].is_string(), "{body}");

    let rx = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let act = t.activity(&key, &[ch.id.as_str()]).await;
    let id = act.deliveries[0].id.as_str().to_owned();
    let sent_of = |events: &[Value]| {
        events
            .iter()
            .filter_map(EventTap::detail_of::<DeliveryStatusChanged>)
            .find(|d| d.delivery.delivery_id.as_str() == id && d.status == "sent")
    };
    let events = tap
        .wait(Duration::from_secs(60), |e| sent_of(e).is_some())
        .await;
    let sent = sent_of(&events).unwrap();
    assert!(!sent.event_id.is_empty(), "{sent:?}");
}
