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
    let act = t.activity(&key, &[ch["id"].as_str().unwrap()]).await;
    let id = act["deliveries"][0]["id"].as_str().unwrap().to_owned();
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), settled)
        .await;
    assert_eq!(d["status"], "failed");

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
