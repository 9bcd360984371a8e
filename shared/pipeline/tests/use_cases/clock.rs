//! Retries and the breaker on the pipeline's clock.

use crate::common::*;

#[tokio::test]
async fn a_retry_waits_out_its_backoff_on_the_pipelines_clock() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let c = refused(
        &f,
        &t,
        json!({"schedule": [60000], "max_attempts": 2}),
        json!({"failure_threshold": 1000}),
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
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 1));
    assert_eq!(row.next_attempt_at, clock.now_ms() + 60_000);
    // A second short of the backoff, nothing is due but the first try's watch copy, which
    // finds it ended and does nothing; at the backoff, the retry runs and, being the last
    // attempt, dead-letters.
    clock.advance(std::time::Duration::from_secs(59));
    assert_eq!(run_due(&f, &clock).await, 1);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 1));
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(run_due(&f, &clock).await, 1);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Failed, 2));
}

#[tokio::test]
async fn an_open_breaker_probes_after_its_cooldown_on_the_pipelines_clock() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    // The tenant has an alert webhook: it hears of the first opening only.
    let alerts = Responder::start(200).await;
    let t = f
        .pipeline
        .tenants()
        .set_alert_webhook(&t, Some(&alerts.url))
        .await
        .unwrap();
    let c = refused(
        &f,
        &t,
        json!({"schedule": [1000], "max_attempts": 5}),
        json!({"failure_threshold": 1, "cooldown_ms": 30000}),
    )
    .await;
    f.pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    assert_eq!(run_due(&f, &clock).await, 1);
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(flow.circuit_state, converger_core::CircuitState::Open);
    let opened = clock.now_ms();
    // The probe comes at the end of the cooldown, not before.
    clock.advance(std::time::Duration::from_secs(29));
    assert!(
        f.queue
            .take_flow_jobs(clock.now_ms())
            .iter()
            .all(|j| j.kind != FlowJobKind::Probe)
    );
    clock.advance(std::time::Duration::from_secs(1));
    let jobs = f.queue.take_flow_jobs(clock.now_ms());
    let probe = jobs
        .iter()
        .find(|j| j.kind == FlowJobKind::Probe)
        .expect("a probe at the end of the cooldown");
    assert_eq!(clock.now_ms() - opened, 30_000);
    f.pipeline.flow_jobs().flow_job(probe).await.unwrap();
    // The probe's attempt was refused too: the breaker is open again, from the probe's time.
    let _ = run_due(&f, &clock).await;
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Open,
        "{flow:?}"
    );
    assert!(flow.circuit_changed_at >= opened + 30_000, "{flow:?}");
    // Each opening is on the bus, the re-open with its reason and the probe's time; the
    // alert webhook got the first alone.
    let opened_events: Vec<serde_json::Value> = f
        .events
        .published
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.detail_type == EventType::ChannelCircuitOpened)
        .map(|e| e.detail.clone())
        .collect();
    assert_eq!(opened_events.len(), 2, "{opened_events:?}");
    assert_eq!(opened_events[0]["reason"], "failures");
    assert_eq!(opened_events[1]["reason"], "probe_failed");
    assert_eq!(opened_events[1]["channel_id"], c.id.as_str());
    assert_eq!(
        opened_events[1]["changed_at"],
        converger_core::time::ms_to_rfc3339(flow.circuit_changed_at)
    );
    let (alerted, _) = f
        .pipeline
        .reads()
        .conversation_activities(&t.id, "alerts", None, 10)
        .await
        .unwrap();
    assert_eq!(alerted.len(), 1, "{alerted:?}");
    assert_eq!(alerted[0].payload["reason"], "failures");
}
