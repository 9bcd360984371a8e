//! Backoffs and cooldowns on the stack's own clock (the in-process backend with a manual
//! clock): a retry a minute away and a breaker's ten-minute cooldown pass when the test moves
//! the clock, not when it waits; until then nothing is attempted, however long it waits.

use converger_core::time::{Clock, ManualClock};
use converger_tests::client::is_settled;
use converger_tests::{Receiver, Reply, TestStack, wait_until};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A stack on a manual clock, and a receiver that fails once, then takes everything.
async fn clocked() -> (TestStack, Arc<ManualClock>, Receiver) {
    let (t, clock) = TestStack::on_clock().await;
    let rx = Receiver::start(vec![Reply::status(503)], Reply::status(200))
        .await
        .unwrap();
    (t, clock, rx)
}

#[tokio::test]
async fn a_retry_a_minute_away_runs_when_the_clock_gets_there() {
    let (t, clock, rx) = clocked().await;
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .webhook(
            &rx.url,
            json!({"max_attempts": 2, "backoff": "fixed", "base_ms": 60_000}),
        )
        .await;
    let id = tenant.activity(&[&ch.id]).await.deliveries[0].id.clone();
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), |d| d.attempts == 1)
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("pending", 1), "{d:?}");
    let due = converger_core::Timestamp::parse(d.next_attempt_at.as_deref().unwrap()).unwrap();
    assert_eq!(
        due.ms() - clock.now_ms(),
        60_000,
        "a minute on the stack's clock: {d:?}"
    );
    // The clock stands still: the retry stays where it is, whatever the wait.
    assert!(!wait_until(Duration::from_secs(2), || async { rx.count() > 1 }).await);
    assert_eq!(tenant.delivery(&id).await.attempts, 1);

    clock.advance(Duration::from_secs(61));
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 2), "{d:?}");
    assert_eq!(rx.count(), 2);
}

#[tokio::test]
async fn an_open_breaker_probes_once_its_cooldown_passed_on_the_clock() {
    let (t, clock, rx) = clocked().await;
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .create_channel(
            json!({"type": "webhook", "name": "hook", "config": {"url": rx.url},
            "retry_policy": {"max_attempts": 5, "backoff": "fixed", "base_ms": 1000},
            "circuit_breaker": {"failure_threshold": 1, "cooldown_ms": 600_000}}),
        )
        .await
        .unwrap();
    let id = tenant.activity(&[&ch.id]).await.deliveries[0].id.clone();
    // One failure opens the breaker; the delivery waits parked behind it.
    let open = wait_until(Duration::from_secs(20), || async {
        let s = tenant
            .api("GET", &format!("/api/v1/channels/{}/delivery", ch.id), None)
            .await;
        s.body["circuit_state"] == "open"
    })
    .await;
    assert!(open, "the breaker opens on its first failure");
    clock.advance(Duration::from_secs(5));
    assert!(!wait_until(Duration::from_secs(2), || async { rx.count() > 1 }).await);
    assert_eq!(
        tenant.delivery(&id).await.status,
        "paused",
        "parked behind the breaker"
    );

    // Ten minutes on: the probe is the waiting delivery, and its success closes the breaker.
    clock.advance(Duration::from_secs(601));
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 2), "{d:?}");
    assert_eq!(d.log()[0].trigger, "probe", "{d:?}");
    assert_eq!(rx.count(), 2);
}
