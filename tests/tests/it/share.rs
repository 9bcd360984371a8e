//! A tenant's share of its tier over all its channels (`core::flow::tenant_window_bound`):
//! a second slow channel of a tenant whose first holds the whole share gets what the first
//! leaves (one slot) rather than a share of its own, and every delivery still goes out.
//! In process, where the receiver can hold its answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{BatchResult, BatchResults};
use converger_core::flow::{slot_items, tier_share};
use converger_core::{ChannelId, Tier, TierConcurrency, Timestamp, time};
use converger_http::schemas::DeliveryStateDoc;
use converger_ports::{Outcome, Settle};
use converger_tests::{Receiver, TestStack, is_settled, wait_until};
use serde_json::json;
use std::time::Duration;

async fn state(t: &TestStack, key: &str, ch: &str) -> DeliveryStateDoc {
    t.api("GET", &format!("/api/v1/channels/{ch}/delivery"), key, None)
        .await
        .typed(200)
        .unwrap()
}

/// `n` activities to `channel` in one batch request (a producer with a backlog sends them
/// so, and its messages reach the tier's consumers in full batches); their delivery ids.
async fn batch(t: &TestStack, key: &str, channel: &str, n: usize) -> Vec<String> {
    let items: Vec<_> = (0..n)
        .map(|i| json!({"conversation_id": format!("c{i}"), "channel_ids": [channel], "payload": {"i": i}}))
        .collect();
    let r = t
        .api(
            "POST",
            "/api/v1/activities/batch",
            key,
            Some(json!({"activities": items})),
        )
        .await;
    r.typed::<BatchResults>(200)
        .unwrap()
        .results
        .into_iter()
        .map(|r| match r {
            BatchResult::Ingested { activity, .. } => activity.deliveries[0].id.clone(),
            BatchResult::Refused { error, .. } => panic!("refused: {error:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_tenants_second_slow_channel_gets_what_the_first_leaves_of_its_share() {
    // Three consumers on the bulk tier: a share of 15, a window that fits on the flow item.
    let consumers = TierConcurrency {
        bulk: 3,
        ..TierConcurrency::default()
    };
    let share = tier_share(Tier::Bulk, consumers);
    assert_eq!((share, slot_items(share)), (15, 1));
    let (share, extra) = (share as usize, 10);
    let t = TestStack::with(|o| o.config.tier_concurrency = consumers).await;
    let rx = Receiver::start(Vec::new(), converger_tests::Reply::status(200))
        .await
        .unwrap();
    rx.hold();
    let (_, key) = t.tenant("bulk").await;
    // Two channels without a cap of their own (`null`: the platform's bound, the share), to
    // one endpoint that holds every answer; each window as a channel that kept up has it.
    let mut ids = Vec::new();
    for name in ["first", "second"] {
        let body = json!({"type": "webhook", "name": name,
                          "config": {"url": rx.url},
                          "retry_policy": {"timeout_ms": 30_000},
                          "circuit_breaker": {"max_in_flight": null}});
        let ch = t.channel(&key, body).await;
        t.stack
            .store
            .settle(
                &ChannelId::parse(ch.id.as_str()).unwrap(),
                &Settle {
                    free: None,
                    pass_to: None,
                    outcome: Outcome::Neutral,
                    failed: false,
                    window: Some(share as u32),
                    now: Timestamp::from_ms(time::now_ms()),
                },
            )
            .await
            .unwrap();
        ids.push(ch.id.to_string());
    }
    let (first, second) = (ids[0].as_str(), ids[1].as_str());

    // The first channel takes the whole share; the rest waits in its backlog (or is taken
    // out of it by the running attempts, to run when their calls end).
    let mut sent = batch(&t, &key, first, share + extra).await;
    assert!(
        wait_until(Duration::from_secs(30), || async {
            rx.count() >= share && state(&t, &key, first).await.in_flight == share as u64
        })
        .await,
        "{} calls, {:?}",
        rx.count(),
        state(&t, &key, first).await
    );

    // The second gets what the first leaves: one slot, not a share of its own.
    sent.extend(batch(&t, &key, second, share + extra).await);
    assert!(
        wait_until(Duration::from_secs(30), || async {
            rx.count() > share
                && state(&t, &key, second).await.backlog == (share + extra - 1) as u64
        })
        .await,
        "{} calls, {:?}",
        rx.count(),
        state(&t, &key, second).await
    );
    assert_eq!(state(&t, &key, second).await.in_flight, 1);
    assert_eq!(state(&t, &key, first).await.in_flight, share as u64);
    assert_eq!(
        rx.count(),
        share + 1,
        "the tenant holds its share and one slot more"
    );

    // Every delivery still goes out once the endpoint answers.
    rx.release();
    for id in &sent {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(60), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert_eq!(rx.count(), 2 * (share + extra));
}
