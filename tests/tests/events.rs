//! Platform events reach the EventBridge bus: a rule on the emulator's bus forwards them to a
//! queue the test reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_sdk_eventbridge::types::Target;
use aws_sdk_sqs::types::QueueAttributeName;
use converger_tests::{Receiver, TestStack, settled};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_dead_letter_is_announced_on_the_bus() {
    let t = TestStack::start().await;
    let sqs = &t.stack.clients.sqs;
    let eb = &t.stack.clients.eventbridge;
    let bus = &t.stack.resources.bus;
    let tap = sqs
        .create_queue()
        .queue_name(format!("{}events-tap", t.stack.resources.prefix))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&tap)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()
        .remove(&QueueAttributeName::QueueArn)
        .unwrap();
    eb.put_rule()
        .name("tap")
        .event_bus_name(bus)
        .event_pattern(json!({"source": ["converger"]}).to_string())
        .send()
        .await
        .unwrap();
    eb.put_targets()
        .rule("tap")
        .event_bus_name(bus)
        .targets(Target::builder().id("tap").arn(arn).build().unwrap())
        .send()
        .await
        .unwrap();

    let rx = Receiver::always(400).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let act = t.activity(&key, &[ch["id"].as_str().unwrap()]).await;
    let id = act["deliveries"][0]["id"].as_str().unwrap().to_owned();
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), settled)
        .await;
    assert_eq!(d["status"], "failed");

    let mut events: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while events.len() < 2 && Instant::now() < deadline {
        let out = sqs
            .receive_message()
            .queue_url(&tap)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in out.messages.unwrap_or_default() {
            events.push(serde_json::from_str(m.body.as_deref().unwrap()).unwrap());
        }
    }
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
    assert_eq!(dead["detail"]["activity_id"], act["activity_id"]);
    assert_eq!(dead["detail"]["channel_id"], ch["id"]);
    assert_eq!(dead["detail"]["tenant_id"], tenant.as_str());
    assert_eq!(dead["detail"]["attempts"], 1);
    assert!(dead["detail"]["error"].as_str().unwrap().contains("400"));
    let changed = find("delivery.status_changed");
    assert_eq!(changed["detail"]["status"], "failed");
    assert_eq!(changed["detail"]["conversation_id"], "conv-1");
    t.stop().await;
}
