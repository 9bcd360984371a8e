//! Auto-disable, replays on close, the `dead_letters` gauge.

use crate::common::*;

#[tokio::test]
async fn a_success_starts_the_auto_disable_count_again() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 1000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let active = |f: &Fixture| {
        let id = c.id.clone();
        let store = f.store.clone();
        async move { store.get_channel(&id).await.unwrap().unwrap() }
    };
    for _ in 0..19 {
        assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Failed);
    }
    rx.answer(200);
    assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Sent);
    // The success is a day old when the failures start again: only the count can spare the
    // channel now, and it started over at the success.
    clock.advance(std::time::Duration::from_secs(25 * 3600));
    rx.answer(503);
    for _ in 0..19 {
        assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Failed);
    }
    assert!(
        active(&f).await.active,
        "nineteen in a row since the success"
    );
    one(&f, &clock, &t, &c).await;
    let disabled = active(&f).await;
    assert!(!disabled.active, "the twentieth in a row disables it");
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some(converger_core::health::AUTO_DISABLED)
    );
}

#[tokio::test]
async fn a_close_replays_only_the_dead_letters_of_its_window() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 3, "cooldown_ms": 30000,
                            "replay_dead_letters_on_close": true, "replay_window_ms": 60000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let old = one(&f, &clock, &t, &c).await;
    clock.advance(std::time::Duration::from_secs(120));
    let recent = [one(&f, &clock, &t, &c).await, one(&f, &clock, &t, &c).await];
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Open,
        "{flow:?}"
    );
    // Parked behind the open breaker; after the cooldown it is the probe, which succeeds.
    let parked = one(&f, &clock, &t, &c).await;
    assert_eq!(parked.status, DeliveryStatus::Paused);
    rx.answer(200);
    clock.advance(std::time::Duration::from_secs(30));
    pump(&f, &clock).await;
    let row = |id: converger_core::DeliveryId| {
        let store = f.store.clone();
        async move { store.get_delivery(&id).await.unwrap().unwrap() }
    };
    assert_eq!(row(parked.id.clone()).await.status, DeliveryStatus::Sent);
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Closed,
        "{flow:?}"
    );
    // The two that failed 30 s before the close are replayed and sent; the one that failed
    // two and a half minutes before it, outside the 60 s window, stays dead.
    for d in &recent {
        let d = row(d.id.clone()).await;
        assert_eq!(
            (d.status, d.retry_count),
            (DeliveryStatus::Sent, 1),
            "{d:?}"
        );
    }
    let d = row(old.id.clone()).await;
    assert_eq!(
        (d.status, d.retry_count),
        (DeliveryStatus::Failed, 0),
        "{d:?}"
    );
}

#[tokio::test]
async fn the_dead_letters_gauge_counts_every_stored_dead_letter() {
    converger_pipeline::metrics::capture();
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 1000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let mut dead = Vec::new();
    for _ in 0..3 {
        let d = one(&f, &clock, &t, &c).await;
        assert_eq!(d.status, DeliveryStatus::Failed);
        dead.push(d);
    }
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 3.0);
    // Two days on, far outside the health window (and past the per-minute counters' two
    // hours), all three are still stored: still counted.
    clock.advance(std::time::Duration::from_secs(2 * 86_400));
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 3.0);
    // A replayed one is no longer a dead letter.
    f.pipeline
        .replays()
        .replay_one(Some(&t.id), &dead[0].id, &operator())
        .await
        .unwrap();
    f.consume_changes().await;
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 2.0);
    // Past the retention they have expired with their rows.
    let retention = PipelineConfig::default().retention;
    clock.advance(retention + std::time::Duration::from_secs(86_400));
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 0.0);
}
