//! A window wider than one item holds (`core::flow::slot_items`): its slots spread over the
//! flow item and slot items of their own, the endpoint still never sees more than
//! `max_in_flight` at once, the backlog waits while every slot is held, and every slot comes
//! back when the calls end. On the in-process backend and on the emulator (IAM-checked).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::Timestamp;
use converger_core::{ChannelId, time};
use converger_http::schemas::DeliveryStateDoc;
use converger_ports::{Outcome, Settle};
use converger_tests::{Receiver, TestStack, is_settled, wait_until};
use serde_json::json;
use std::time::Duration;

const CAP: u32 = 24;

async fn state(t: &TestStack, key: &str, ch: &str) -> DeliveryStateDoc {
    t.api("GET", &format!("/api/v1/channels/{ch}/delivery"), key, None)
        .await
        .typed(200)
        .unwrap()
}

/// `total` activities to a channel of `max_in_flight` [`CAP`]. `hold`: the receiver holds
/// every answer until the window is full and the rest wait in the backlog (in process, with
/// 100: enough behind the window that the attempts which end take the backlog's next rows
/// while their calls run, the slot each hands on in its own slot item). On the emulator the
/// tier's consumers may hold fewer calls at once than the window, so the receiver answers
/// after 200 ms instead and the run checks the cap and that every slot comes back.
async fn a_wide_window_spreads_over_slot_items_and_keeps_its_cap(
    t: TestStack,
    total: usize,
    hold: bool,
) {
    let rx = Receiver::start(
        Vec::new(),
        converger_tests::Reply::status(200).delay(Duration::from_millis(if hold {
            0
        } else {
            200
        })),
    )
    .await
    .unwrap();
    if hold {
        rx.hold();
    }
    let (_, key) = t.tenant("default").await;
    // The calls wait at the receiver while the backlog fills: the longest timeout.
    let body = json!({"type": "webhook", "name": "wide",
                      "config": {"url": rx.url},
                      "retry_policy": {"timeout_ms": 30_000},
                      "circuit_breaker": {"max_in_flight": CAP}});
    let ch = t.channel(&key, body).await;
    let ch_id = ch.id.as_str();
    let channel = ChannelId::parse(ch_id).unwrap();
    let store = t.stack.store.clone();
    // The window as a channel that kept up has it: at its cap (it would grow there by one
    // per success; nothing succeeds while the receiver holds its answers).
    store
        .settle(
            &channel,
            &Settle {
                free: None,
                pass_to: None,
                outcome: Outcome::Neutral,
                failed: false,
                window: Some(CAP),
                now: Timestamp::from_ms(time::now_ms()),
            },
        )
        .await
        .unwrap();
    let ids = t.activities(&key, ch_id, total, 8).await;

    if hold {
        // Every slot held by a call the receiver holds; the rest wait in the backlog.
        assert!(
            wait_until(Duration::from_secs(30), || async {
                rx.count() >= CAP as usize
                    && state(&t, &key, ch_id).await.backlog == (total - CAP as usize) as u64
            })
            .await,
            "{} calls, {:?}",
            rx.count(),
            state(&t, &key, ch_id).await
        );
        let s = state(&t, &key, ch_id).await;
        assert_eq!(
            s.in_flight,
            u64::from(CAP),
            "{s:?}; the first delivery: {:?}",
            t.delivery(&key, &ids[0]).await
        );
        let items = converger_core::flow::slot_items(CAP);
        assert_eq!(items, 3);
        let on_flow_item = store.get_flow(&channel).await.unwrap().slots.len();
        let elsewhere = store.held_slots(&channel, items).await.unwrap();
        assert_eq!(on_flow_item + elsewhere.len(), CAP as usize);
        assert!(
            on_flow_item <= 8 && elsewhere.iter().all(|h| h.item >= 1 && h.item < items),
            "each item holds its share: {on_flow_item} on the flow item, {elsewhere:?}"
        );
        assert_eq!(
            rx.count(),
            CAP as usize,
            "nothing beyond the window was sent"
        );
    }
    rx.release();
    for id in &ids {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(60), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert!(
        rx.max_concurrent() <= CAP as usize,
        "{} at once",
        rx.max_concurrent()
    );
    assert_eq!(rx.count(), total);
    // Every slot came back, in every item.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            state(&t, &key, ch_id).await.in_flight == 0
        })
        .await
    );
    assert!(store.get_flow(&channel).await.unwrap().slots.is_empty());
    assert!(
        store
            .held_slots(&channel, converger_core::flow::slot_items(CAP))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_wide_window_spreads_over_slot_items_and_keeps_its_cap_in_process() {
    a_wide_window_spreads_over_slot_items_and_keeps_its_cap(TestStack::start().await, 100, true)
        .await;
}

mod emulator {
    use super::*;

    #[tokio::test]
    async fn a_wide_window_spreads_over_slot_items_and_keeps_its_cap() {
        super::a_wide_window_spreads_over_slot_items_and_keeps_its_cap(
            TestStack::on_emulator().await,
            40,
            false,
        )
        .await;
    }
}
