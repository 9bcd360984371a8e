//! Platform events reach the EventBridge bus: a rule on the emulator's bus forwards them to a
//! queue the test reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_tests::{Receiver, TestStack, settled};
use serde_json::json;
use std::time::Duration;

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
        .wait_delivery(&key, &id, Duration::from_secs(15), settled)
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
    assert_eq!(dead["source"], "converger");
    assert_eq!(dead["detail"]["delivery_id"], id.as_str());
    assert_eq!(dead["detail"]["activity_id"], act.activity_id);
    assert_eq!(dead["detail"]["channel_id"], ch.id);
    assert_eq!(dead["detail"]["tenant_id"], tenant.as_str());
    assert_eq!(dead["detail"]["attempts"], 1);
    assert!(dead["detail"]["error"].as_str().unwrap().contains("400"));
    let changed = find("delivery.status_changed");
    assert_eq!(changed["detail"]["status"], "failed");
    assert_eq!(changed["detail"]["conversation_id"], "conv-1");
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
    let events = tap
        .wait(Duration::from_secs(60), |e| {
            e.iter().any(|e| {
                e["detail"]["delivery_id"] == id.as_str() && e["detail"]["status"] == "sent"
            })
        })
        .await;
    let sent = events
        .iter()
        .find(|e| e["detail"]["delivery_id"] == id.as_str() && e["detail"]["status"] == "sent")
        .unwrap();
    assert!(sent["detail"]["event_id"].is_string(), "{sent}");
}
