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
    f.pipeline.flow().pause(&c, &operator()).await.unwrap();
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

    f.pipeline.flow().resume(&c, &operator()).await.unwrap();
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
    f.pipeline.flow().pause(&c, &operator()).await.unwrap();
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

#[tokio::test]
async fn a_first_try_whose_attempt_died_is_attempted_by_its_watch_copy() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let c = hook_to(
        &f,
        &t,
        &rx.url,
        json!({"retry_policy": {}, "circuit_breaker": {}}),
    )
    .await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    // The first try's message is taken by an instance that dies with it: claimed, never
    // finished. The row is in no due index; its watch copy comes 15 s later.
    let taken = f.queue.take_due(clock.now_ms());
    assert_eq!(taken.len(), 1);
    let lease_ms = i64::try_from(f.pipeline.config().lease_slice.as_millis()).unwrap();
    assert!(matches!(
        f.store
            .claim(&id, "dead", clock.now(), lease_ms)
            .await
            .unwrap(),
        converger_ports::Claim::Claimed(_)
    ));
    let overdue = f.pipeline.sweeper().sweep().await.unwrap();
    assert_eq!(overdue.enqueued, 0, "the sweeper has nothing to find");
    // While the dead attempt's lease lasts, the watch copy comes back later; once it has
    // ended, the watch copy attempts the delivery.
    clock.advance(std::time::Duration::from_secs(u64::from(
        converger_core::policy::WATCH_DELAY_S,
    )));
    let watch = f.queue.take_due(clock.now_ms());
    assert!(watch.len() == 1 && watch[0].watch, "{watch:?}");
    f.pipeline
        .attempts()
        .deliver(watch[0].clone())
        .await
        .unwrap();
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 1));
    assert_eq!(rx.bodies.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_watch_copy_leaves_a_first_try_that_ended_alone() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let c = hook_to(
        &f,
        &t,
        &rx.url,
        json!({"retry_policy": {}, "circuit_breaker": {}}),
    )
    .await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    assert_eq!(run_due(&f, &clock).await, 1);
    clock.advance(std::time::Duration::from_secs(u64::from(
        converger_core::policy::WATCH_DELAY_S,
    )));
    assert_eq!(run_due(&f, &clock).await, 1, "the watch copy comes");
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 1));
    assert_eq!(rx.bodies.lock().unwrap().len(), 1, "and sends nothing");
    assert!(f.queue.take_due(i64::MAX).is_empty());
}
