//! Ordered lanes: a retrying head, a crash before the hand-on.

use crate::common::*;

#[tokio::test]
async fn a_retrying_head_holds_only_its_own_conversation() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let c = ordered_hook(&f, &t, &rx.url, "hold").await;
    said(&f, &t, &c, "a", "a1").await;
    pump(&f, &clock).await;
    // a1 failed and waits for its retry; its conversation waits behind it, the other does not.
    rx.answer(200);
    let a2 = said(&f, &t, &c, "a", "a2").await;
    said(&f, &t, &c, "a", "a3").await;
    said(&f, &t, &c, "b", "b1").await;
    said(&f, &t, &c, "b", "b2").await;
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a1", "b1", "b2"]);
    let waiting = f.store.get_delivery(&a2.id).await.unwrap().unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
    assert_eq!(waiting.attempts, 0, "never tried while a1 holds the lane");
    // The retry is due: a1 goes, then a2 and a3 in their order, one at a time.
    clock.advance(std::time::Duration::from_millis(1000));
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a1", "b1", "b2", "a1", "a2", "a3"]);
}

#[tokio::test]
async fn a_lane_moves_on_after_a_crash_between_its_heads_outcome_and_the_hand_on() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let c = ordered_hook(&f, &t, &rx.url, "hold").await;
    let a1 = said(&f, &t, &c, "a", "a1").await;
    said(&f, &t, &c, "a", "a2").await;
    said(&f, &t, &c, "a", "a3").await;
    // The deliver function takes a1's message, records it sent, and dies before it hands
    // the lane on: nothing is queued for a2 or a3.
    let msgs = f.queue.take_due(clock.now_ms());
    assert_eq!(
        msgs.iter()
            .map(|m| m.delivery_id.clone())
            .collect::<Vec<_>>(),
        std::slice::from_ref(&a1.id),
        "only the head is enqueued"
    );
    let now = clock.now();
    let converger_ports::Claim::Claimed(row) =
        f.store.claim(&a1.id, "crashed", now, 10_000).await.unwrap()
    else {
        panic!("a1 claims")
    };
    let log = converger_ports::LogUpdate {
        recent: Vec::new(),
        spill: Vec::new(),
    };
    let info = converger_ports::SentInfo::default();
    assert!(
        f.store
            .mark_sent(&row, "crashed", &info, &log, now)
            .await
            .unwrap()
    );
    pump(&f, &clock).await;
    assert!(rx.texts().is_empty(), "nothing was due");
    // At their first look the waiting deliveries are swept, find a1 ended, and go in order.
    clock.advance(
        PipelineConfig::default().lane_recheck
            + PipelineConfig::default().sweep_grace
            + std::time::Duration::from_secs(1),
    );
    f.pipeline.sweeper().sweep().await.unwrap();
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a2", "a3"]);
}
