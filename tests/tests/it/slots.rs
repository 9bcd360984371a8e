//! Window slots that come back: one leaked by an attempt that died after its send, one held
//! by a crashed worker, and a backlog row no mark announced. On the in-process backend (the
//! sweeper's own repair of a leaked slot is in `flow::emulator`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::flow::hook;
use converger_core::Timestamp;
use converger_core::{ChannelId, DeliveryId, time};
use converger_local::Backend;
use converger_ports::SlotTake;
use converger_tests::{Receiver, TestStack, is_settled, wait_until};
use serde_json::json;
use std::time::Duration;

/// A window of one whose slot is still held by a delivery that was sent (its attempt died
/// after the send, before it handed the slot on), and a second delivery waiting behind it.
/// Returns (API key, the leaked delivery, the waiting one).
pub(crate) async fn leaked_slot(t: &TestStack, rx: &Receiver) -> (String, DeliveryId, String) {
    let (_, key) = t.tenant("default").await;
    let ch = t
        .channel(&key, hook(&rx.url, json!({"max_in_flight": 1}), json!({})))
        .await;
    let ch_id = ch.id.as_str();
    let first = t.activities(&key, ch_id, 1, 1).await.remove(0);
    let d = t
        .wait_delivery(&key, &first, Duration::from_secs(10), is_settled)
        .await;
    assert_eq!(d.status, "sent");
    let channel = ChannelId::parse(ch_id).unwrap();
    let leaked = DeliveryId::parse(&first).unwrap();
    // The outcome is recorded before the attempt hands its slot back: once the slot is back,
    // nothing of the first attempt can free the slot taken below.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let f = t.stack.store.get_flow(&channel).await.unwrap();
            f.slots.is_empty()
        })
        .await,
        "the first attempt handed its slot back"
    );
    let taken = t
        .stack
        .store
        .take_slot(
            &channel,
            &leaked,
            1,
            Timestamp::from_ms(time::now_ms()),
            false,
        )
        .await
        .unwrap();
    assert!(matches!(taken, SlotTake::Taken(_)), "{taken:?}");
    let second = t.activities(&key, ch_id, 1, 1).await.remove(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let d = t.delivery(&key, &second).await;
    assert_eq!(d.status, "pending", "the window is full: {d:?}");
    assert!(d.waiting_for_slot, "{d:?}");
    (key, leaked, second)
}

/// An attempt that recorded its outcome and died before handing its slot on leaves the slot
/// held by a settled delivery. The next message for that delivery (its own, back from the
/// queue, or a bounced one) finds it settled and gives the slot back, feeding the backlog at
/// once rather than at the sweeper's reconciliation.
#[tokio::test]
async fn a_message_for_a_settled_delivery_gives_back_the_slot_it_still_holds() {
    let t = TestStack::with(|o| o.sweep_period = converger_local::Every::Never).await;
    let rx = Receiver::always(200).await.unwrap();
    let (key, leaked, second) = leaked_slot(&t, &rx).await;
    let p = &t.stack;

    let tier = converger_core::Tier::Default;
    p.queue
        .send(
            &converger_ports::DeliveryMessage::new(leaked, tier, None),
            0,
        )
        .await
        .unwrap();
    let d = t
        .wait_delivery(&key, &second, Duration::from_secs(10), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(rx.requests().len(), 2, "the settled one was not sent again");
}

/// A delivery written into the backlog whose mark could not be written (the flow item's
/// partition throttled past the SDK's retries) is safe but unannounced: the attempt that
/// ends sees no backlog to hand its slot to. A feed job sent instead of the mark brings the
/// row out once the slot is free, without waiting for the sweeper.
#[tokio::test]
async fn a_backlog_row_whose_mark_was_not_written_flows_without_the_sweeper() {
    let t = TestStack::with(|o| {
        o.backend = Backend::Memory;
        o.sweep_period = converger_local::Every::Never;
    })
    .await;
    let rx = Receiver::always(200).await.unwrap();
    rx.hold();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .channel(&key, hook(&rx.url, json!({"max_in_flight": 1}), json!({})))
        .await;
    let ch_id = ch.id.as_str();
    let first = t.activities(&key, ch_id, 1, 1).await.remove(0);
    assert!(
        wait_until(Duration::from_secs(10), || async { rx.count() == 1 }).await,
        "the first call is held at the receiver"
    );
    t.stack.memory().unwrap().store.fail_marks(1);
    let second = t.activities(&key, ch_id, 1, 1).await.remove(0);
    let d = t.delivery(&key, &second).await;
    assert!(d.waiting_for_slot, "{d:?}");
    let channel = ChannelId::parse(ch_id).unwrap();
    let flow = t.stack.store.get_flow(&channel).await.unwrap();
    assert_eq!(
        flow.backlog_at, None,
        "the injected failure kept the mark out"
    );

    rx.release();
    for id in [&first, &second] {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(20), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert_eq!(rx.requests().len(), 2);
}

/// A worker dies with one attempt in flight and one delivery whose message it had taken off
/// the queue but not yet claimed: both hold window slots, and a third waits in the backlog.
/// Once the lease ends, the reclaim pass runs the crashed attempt again and checks the
/// channel's other slots: the unclaimed delivery gets a new message, and the backlog flows,
/// without waiting for the sweeper's grace period.
#[tokio::test]
async fn a_crash_leaves_no_slot_behind_once_its_lease_ends() {
    let t = TestStack::with(|o| {
        o.sweep_period = converger_local::Every::Never;
        o.config.lease_slice = Duration::from_secs(2);
    })
    .await;
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t
        .channel(&key, hook(&rx.url, json!({"max_in_flight": 2}), json!({})))
        .await;
    let ch_id = ch.id.as_str();
    let channel = ChannelId::parse(ch_id).unwrap();
    let p = &t.stack;
    let now = time::now_ms();
    let in_flight = t.bare_delivery(&tenant, ch_id, now - 10_000).await;
    let unclaimed = t.bare_delivery(&tenant, ch_id, now - 10_000).await;
    for d in [&in_flight, &unclaimed] {
        let taken = p
            .store
            .take_slot(&channel, &d.id, 2, Timestamp::from_ms(now - 10_000), false)
            .await
            .unwrap();
        assert!(matches!(taken, SlotTake::Taken(_)), "{taken:?}");
    }
    let claim = p
        .store
        .claim(
            &in_flight.id,
            "died",
            Timestamp::from_ms(time::now_ms() - 4_000),
            1_000,
        )
        .await
        .unwrap();
    assert!(matches!(claim, converger_ports::Claim::Claimed(_)));
    let waiting = t.activities(&key, ch_id, 1, 1).await.remove(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(t.delivery(&key, &waiting).await.waiting_for_slot);
    assert!(rx.requests().is_empty());

    let (_, reclaimed) = t
        .stack
        .functions
        .retry_scheduler
        .sweeper()
        .reclaim()
        .await
        .unwrap();
    assert_eq!(reclaimed, 1);
    for id in [
        in_flight.id.as_str(),
        unclaimed.id.as_str(),
        waiting.as_str(),
    ] {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(10), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert_eq!(rx.requests().len(), 3);
}
