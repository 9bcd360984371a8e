//! A finishing attempt hands its window slot to its channel's next backlog row, taken while
//! its call ran, and the same invocation runs that row next: one message, the whole backlog.

use crate::common::*;

#[tokio::test]
async fn one_message_runs_the_backlog_rows_its_attempts_hand_their_slot_on_to() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let window_of_one = json!({"retry_policy": {}, "circuit_breaker": {"max_in_flight": 1}});
    let c = hook_to(&f, &t, &rx.url, window_of_one).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let mut a = activity(None, &[&c]);
        a.payload = Some(json!({"text": format!("m{n}")}));
        let done = f.pipeline.intake().ingest(&t, a).await.unwrap();
        ids.push(done.deliveries[0].id.clone());
        // Each due a millisecond after the one before: the backlog goes oldest first.
        clock.advance(std::time::Duration::from_millis(1));
    }
    // The window's one slot went to the first; the others wait in the backlog, unqueued.
    let live: Vec<_> = f
        .queue
        .take_due(i64::MAX)
        .into_iter()
        .filter(|m| !m.watch)
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].delivery_id, ids[0]);

    f.pipeline
        .attempts()
        .deliver(live[0].clone())
        .await
        .unwrap();
    assert_eq!(
        rx.texts(),
        ["m0", "m1", "m2"],
        "oldest first, from one message"
    );
    for id in &ids {
        let d = f.store.get_delivery(id).await.unwrap().unwrap();
        assert_eq!((d.status, d.attempts), (DeliveryStatus::Sent, 1), "{d:?}");
        assert!(!d.slot && !d.in_backlog, "{d:?}");
    }
    let queued: Vec<_> = f.queue.take_due(i64::MAX);
    assert!(
        queued.iter().all(|m| m.watch),
        "none needed a message: {queued:?}"
    );
}
