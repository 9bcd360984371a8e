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

/// A deliver function that dies right after it wrote a dead letter (before anything else)
/// loses nothing: the row's change is on the table's stream, and what follows from it (the
/// status change, `delivery.dead_lettered`, the health and usage counts) is derived from it.
#[tokio::test]
async fn a_writer_that_dies_after_its_write_loses_no_event_and_no_count() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    // The attempt as far as its write: claimed, then recorded dead, then the process is gone.
    let now = converger_core::Timestamp::from_ms(clock.now_ms());
    let converger_ports::Claim::Claimed(row) = f.store.claim(&id, "lt", now, 30_000).await.unwrap()
    else {
        panic!("not claimed")
    };
    let entry = converger_ports::AttemptEntry {
        attempt: 1,
        started_at: now,
        duration_ms: 5,
        status_code: Some(400),
        response_snippet: None,
        error: Some("webhook: HTTP 400".into()),
        next_retry_at: None,
        trigger: "auto".into(),
        outcome: Some(converger_ports::AttemptOutcome::Dead),
        expires_at: None,
    };
    let log = converger_ports::LogUpdate::append(&row.attempt_log, entry);
    assert!(
        f.store
            .mark_dead(&row, "lt", "webhook: HTTP 400", &log, now)
            .await
            .unwrap()
    );
    assert!(f.events.published.lock().unwrap().is_empty());
    // Whenever the table's stream is read next (another instance, after the restart):
    f.consume_changes().await;
    let published = f.events.published.lock().unwrap().clone();
    let of = |t: EventType| published.iter().filter(|e| e.detail_type == t).count();
    assert_eq!(of(EventType::DeliveryDeadLettered), 1, "{published:?}");
    let dead = published
        .iter()
        .find(|e| e.detail_type == EventType::DeliveryDeadLettered)
        .unwrap();
    assert_eq!(dead.detail["delivery_id"], id.as_str());
    assert_eq!(dead.detail["error"], "webhook: HTTP 400");
    assert!(dead.detail["event_id"].is_string());
    let today = converger_core::usage::Grain::Day.bucket(clock.now_ms());
    let u = f
        .pipeline
        .usage()
        .tenant_usage(&t.id, today, today)
        .await
        .unwrap()
        .total;
    assert_eq!((u.deliveries, u.attempts, u.dead_letters), (1, 1, 1));
    // Read again (a repeat of the stream's records): the same ids, no count twice.
    f.changes_read.store(0, std::sync::atomic::Ordering::SeqCst);
    f.consume_changes().await;
    let again = f.events.published.lock().unwrap().clone();
    let ids: std::collections::BTreeSet<_> = again
        .iter()
        .map(|e| e.detail["event_id"].to_string())
        .collect();
    assert_eq!(ids.len(), published.len(), "a repeat has the same ids");
    let u2 = f
        .pipeline
        .usage()
        .tenant_usage(&t.id, today, today)
        .await
        .unwrap()
        .total;
    assert_eq!(u2, u);
}
