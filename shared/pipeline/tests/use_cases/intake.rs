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
    assert_eq!(queued(&f.queue), ids);
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
    assert_eq!(queued(&f.queue), ids);
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
async fn the_sweep_enqueues_a_due_delivery_whose_message_was_lost() {
    // No grace: a delivery due now counts as overdue (deployed, the sweep waits 5 minutes
    // past a delivery's due time before it calls its message lost).
    let f = fixture_with(PipelineConfig {
        sweep_grace: std::time::Duration::ZERO,
        ..PipelineConfig::default()
    });
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    // The message is lost; the row stays pending and due (and a moment later, overdue).
    assert_eq!(queued(&f.queue).len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let report = f.pipeline.sweeper().sweep().await.unwrap();
    assert_eq!(report.enqueued, 1, "{report:?}");
    assert_eq!(queued(&f.queue), vec![done.deliveries[0].id.to_string()]);
}
