//! Ingest, pause and resume, a deleted channel, the sweep, API keys.

use crate::common::*;

#[tokio::test]
async fn a_rotated_api_key_resolves_and_the_old_one_does_not() {
    let f = fixture();
    let (t, first) = f
        .pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap();
    let hash = converger_core::secret::hash_api_key;
    let reads = f.pipeline.reads();
    assert_eq!(
        reads.api_key_tenant(&hash(&first)).await.unwrap(),
        Some(t.id.clone())
    );
    let second = f
        .pipeline
        .tenants()
        .rotate_api_key(&t.id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first, second);
    assert_eq!(reads.api_key_tenant(&hash(&first)).await.unwrap(), None);
    assert_eq!(
        reads.api_key_tenant(&hash(&second)).await.unwrap(),
        Some(t.id)
    );
}

#[tokio::test]
async fn an_activity_becomes_one_queued_delivery_per_channel_once() {
    let f = fixture();
    let t = tenant(&f).await;
    let (a, b) = (webhook(&f, &t).await, webhook(&f, &t).await);
    let intake = f.pipeline.intake();
    let done = intake
        .ingest(&t, activity(Some("act_1"), &[&a, &b]))
        .await
        .unwrap();
    assert!(done.created);
    assert_eq!(done.deliveries.len(), 2);
    let mut ids: Vec<String> = done.deliveries.iter().map(|d| d.id.to_string()).collect();
    ids.sort();
    // Each first try's message goes with its watch copy.
    assert_eq!(queued_with_watch(&f.queue), (ids.clone(), ids.clone()));
    for d in &done.deliveries {
        assert_eq!(d.status, DeliveryStatus::Pending);
    }
    // The same activity id again creates nothing new: it answers with the stored deliveries
    // and sends their messages again (the first ingest may have died before sending them;
    // a claim makes the duplicate harmless).
    let again = intake
        .ingest(&t, activity(Some("act_1"), &[&a, &b]))
        .await
        .unwrap();
    assert!(!again.created);
    let mut again_ids: Vec<String> = again.deliveries.iter().map(|d| d.id.to_string()).collect();
    again_ids.sort();
    assert_eq!(again_ids, ids);
    assert_eq!(queued_with_watch(&f.queue), (ids.clone(), ids));
    assert_eq!(f.store.delivery_count(), 2);
}

#[tokio::test]
async fn a_paused_channel_parks_new_deliveries_and_resume_releases_them() {
    let f = fixture();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    f.pipeline
        .flow()
        .operator()
        .pause(&c, &operator())
        .await
        .unwrap();
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    // Parked: written paused, nothing sent.
    assert_eq!(queued(&f.queue), Vec::<String>::new());
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!(row.status, DeliveryStatus::Paused);

    f.pipeline
        .flow()
        .operator()
        .resume(&c, &operator())
        .await
        .unwrap();
    let jobs = f.queue.take_flow_jobs(i64::MAX);
    assert!(
        jobs.iter().any(|j| j.kind == FlowJobKind::Release),
        "{jobs:?}"
    );
    for job in jobs.iter().filter(|j| j.kind == FlowJobKind::Release) {
        f.pipeline.flow_jobs().flow_job(job).await.unwrap();
    }
    assert_eq!(queued(&f.queue), vec![id.to_string()]);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!(row.status, DeliveryStatus::Pending);
}

#[tokio::test]
async fn a_deleted_channel_is_let_go_and_leaves_the_tenants_reads() {
    let f = fixture();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    f.pipeline
        .flow()
        .operator()
        .pause(&c, &operator())
        .await
        .unwrap();
    assert!(
        f.pipeline
            .channels()
            .delete_channel(&c, &operator())
            .await
            .unwrap()
    );
    // Its pause is lifted and a release is on its way, so what waited reaches an attempt
    // (which dead-letters it as `channel deleted`).
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(flow.circuit_state, converger_core::CircuitState::Closed);
    let jobs = f.queue.take_flow_jobs(i64::MAX);
    assert!(
        jobs.iter().any(|j| j.kind == FlowJobKind::Release),
        "{jobs:?}"
    );
    let scope = converger_core::Scope::Tenant(&t.id);
    assert!(
        f.pipeline
            .reads()
            .channel_in(scope, &c.id)
            .await
            .unwrap()
            .is_none()
    );
    // Deleting it again finds nothing.
    assert!(
        !f.pipeline
            .channels()
            .delete_channel(&c, &operator())
            .await
            .unwrap()
    );
}

/// A first try on the clock's time to a receiver answering 200: the fixture, the receiver and
/// the delivery's id.
async fn a_first_try(clock: &Arc<ManualClock>) -> (Fixture, Responder, converger_core::DeliveryId) {
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let settings = json!({"retry_policy": {}, "circuit_breaker": {}});
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    (f, rx, id)
}

/// Runs the messages due `secs` from now: each a watch copy.
async fn run_watch_after(f: &Fixture, clock: &ManualClock, secs: u64) {
    clock.advance(std::time::Duration::from_secs(secs));
    let watch = f.queue.take_due(clock.now_ms());
    assert!(
        !watch.is_empty() && watch.iter().all(|m| m.watch),
        "{watch:?}"
    );
    for m in watch {
        f.pipeline.attempts().deliver(m).await.unwrap();
    }
}

/// The one message due now (not a watch copy) is taken by an instance that dies with it,
/// holding a lease longer than the watch copy's delay; the row is in no due index, so the
/// sweeper finds nothing.
async fn taken_by_an_instance_that_dies(
    f: &Fixture,
    clock: &ManualClock,
    id: &converger_core::DeliveryId,
) {
    let taken = f.queue.take_due(clock.now_ms());
    assert!(taken.len() == 1 && !taken[0].watch, "{taken:?}");
    assert!(matches!(
        f.store
            .claim(id, "dead", clock.now(), 20_000)
            .await
            .unwrap(),
        converger_ports::Claim::Claimed(_)
    ));
    let overdue = f.pipeline.sweeper().sweep().await.unwrap();
    assert_eq!(overdue.enqueued, 0, "the sweeper has nothing to find");
}

/// The watch copy finds the lease live and calls no one; it comes back a lease slice later,
/// when the lease has ended, and attempts the delivery: one more request than `before`.
async fn the_watch_copy_attempts_it(
    f: &Fixture,
    clock: &ManualClock,
    rx: &Responder,
    before: usize,
) {
    run_watch_after(f, clock, u64::from(converger_core::policy::WATCH_DELAY_S)).await;
    assert_eq!(
        rx.bodies.lock().unwrap().len(),
        before,
        "the lease was live"
    );
    let again = converger_core::policy::watch_again_s(
        i64::try_from(f.pipeline.config().lease_slice.as_millis()).unwrap(),
    );
    run_watch_after(f, clock, u64::from(again)).await;
    assert_eq!(rx.bodies.lock().unwrap().len(), before + 1);
}

#[tokio::test]
async fn a_first_try_whose_attempt_died_is_attempted_by_its_watch_copy() {
    let clock = Arc::new(ManualClock::starting_now());
    let (f, rx, id) = a_first_try(&clock).await;
    taken_by_an_instance_that_dies(&f, &clock, &id).await;
    the_watch_copy_attempts_it(&f, &clock, &rx, 0).await;
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 1));
}

#[tokio::test]
async fn a_watch_copy_leaves_a_first_try_that_ended_alone() {
    let clock = Arc::new(ManualClock::starting_now());
    let (f, rx, id) = a_first_try(&clock).await;
    assert_eq!(run_due(&f, &clock).await, 1);
    run_watch_after(&f, &clock, u64::from(converger_core::policy::WATCH_DELAY_S)).await;
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 1));
    assert_eq!(rx.bodies.lock().unwrap().len(), 1, "and sends nothing");
    assert!(f.queue.take_due(i64::MAX).is_empty());
}

#[tokio::test]
async fn a_retry_whose_attempt_died_is_attempted_by_its_watch_copy() {
    use std::sync::atomic::Ordering;
    let clock = Arc::new(ManualClock::starting_now());
    let (f, rx, id) = a_first_try(&clock).await;
    rx.status.store(503, Ordering::Relaxed);
    // The first try fails: its retry (30 s on, the default schedule) goes out with a watch
    // copy 15 s after it, and is in no due index (ADR 0094).
    assert_eq!(run_due(&f, &clock).await, 1);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert!(row.watched && row.carried_by_messages(), "{row:?}");
    let retry_at = row.next_attempt_at;
    // The first try's own watch copy finds it waiting for its retry and leaves it.
    run_watch_after(&f, &clock, u64::from(converger_core::policy::WATCH_DELAY_S)).await;
    assert_eq!(rx.bodies.lock().unwrap().len(), 1);
    // The retry's message is taken by an instance that dies with it; its watch copy, sent
    // with it, attempts it.
    rx.status.store(200, Ordering::Relaxed);
    clock.advance(std::time::Duration::from_millis(
        u64::try_from(retry_at - clock.now_ms()).unwrap(),
    ));
    taken_by_an_instance_that_dies(&f, &clock, &id).await;
    the_watch_copy_attempts_it(&f, &clock, &rx, 1).await;
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 2));
    assert!(!row.watched);
}
