//! Status changes announced with their conversation.

use crate::common::*;

/// Every status change of a delivery is announced with its conversation, from the row's
/// change: a failed attempt with its retry to come, parked behind an open breaker, pending
/// again when the probe takes it or the close releases it, sent, failed, and pending after a
/// single and after a bulk replay.
#[tokio::test]
async fn every_status_change_is_announced_with_its_conversation() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"schedule": [1000], "max_attempts": 5},
        "circuit_breaker": {"failure_threshold": 1, "cooldown_ms": 30000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let ingest = || async {
        f.pipeline
            .intake()
            .ingest(&t, activity(None, &[&c]))
            .await
            .unwrap()
            .deliveries[0]
            .id
            .to_string()
    };
    // The first attempt fails and opens the breaker: its retry is parked. The second
    // activity is written parked, which is announced too (its conversation sees it wait).
    let first = ingest().await;
    pump(&f, &clock).await;
    let second = ingest().await;
    f.consume_changes().await;
    assert_eq!(
        status_changes(&f, "conv-1"),
        vec![
            (first.clone(), "pending".into(), 1, false),
            (first.clone(), "paused".into(), 1, false),
            (second.clone(), "paused".into(), 0, false)
        ]
    );
    // After the cooldown the probe takes one of the two parked deliveries (either: both
    // wait in the parked index) and the close releases the other: each is pending again,
    // then sent.
    rx.answer(200);
    clock.advance(std::time::Duration::from_secs(30));
    pump(&f, &clock).await;
    let of = |id: &str| -> Vec<(String, u64)> {
        status_changes(&f, "conv-1")
            .into_iter()
            .filter(|(d, ..)| d == id)
            .map(|(_, status, attempts, _)| (status, attempts))
            .collect()
    };
    assert_eq!(
        of(&first),
        [
            ("pending".into(), 1),
            ("paused".into(), 1),
            ("pending".into(), 1),
            ("sent".into(), 2)
        ]
    );
    assert_eq!(
        of(&second),
        [
            ("paused".into(), 0),
            ("pending".into(), 0),
            ("sent".into(), 1)
        ]
    );

    // A permanent failure, then a single replay and a bulk replay of it.
    rx.answer(400);
    let third = ingest().await;
    pump(&f, &clock).await;
    let replays = f.pipeline.replays();
    replays
        .replay_one(
            Some(&t.id),
            &converger_core::DeliveryId::parse(&third).unwrap(),
            &operator(),
        )
        .await
        .unwrap();
    pump(&f, &clock).await;
    clock.advance(std::time::Duration::from_secs(1));
    let r = replays
        .replay_channel(&t.id, &c.id, Default::default(), &operator())
        .await
        .unwrap();
    assert_eq!(r.retried, 1);
    f.consume_changes().await;
    assert_eq!(
        of(&third),
        [
            ("failed".into(), 1),
            ("pending".into(), 0),
            ("failed".into(), 1),
            ("pending".into(), 0)
        ]
    );
    assert!(status_changes(&f, "conv-1").iter().all(|(.., ack)| !ack));
}
