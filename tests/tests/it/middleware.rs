//! Channel middleware end to end on the emulator: a transform reaches the receiver while the
//! stored activity keeps the original, a halt dead-letters with no request and leaves the
//! breaker alone, a replay runs the steps again, and bad steps are refused when written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::schemas::{DeliveryStateDoc, ErrorBody};
use converger_http::views::{ActivityView, ChannelView, Ingested};
use converger_tests::{Receiver, TestStack, is_settled};
use serde_json::{Value, json};
use std::time::Duration;

async fn post(t: &TestStack, key: &str, channel: &str, payload: Value) -> String {
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            key,
            Some(
                json!({"conversation_id": "conv-mw", "channel_ids": [channel],
                        "event_type": "message.created", "payload": payload}),
            ),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone()
}

/// The channel's failed attempts (what auto-disable counts) and consecutive failures (what
/// the breaker counts).
async fn failures(t: &TestStack, ch: &str) -> (u32, u32) {
    let id = converger_core::ChannelId::parse(ch).unwrap();
    let flow = t.stack.store.get_flow(&id).await.unwrap();
    (flow.failed_attempts, flow.consecutive_failures)
}

fn body(r: &converger_local::receiver::Received) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test]
async fn transforms_reach_the_receiver_halts_send_nothing_and_replays_run_the_steps_again() {
    let t = TestStack::on_emulator().await;
    let rx = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .channel(
            &key,
            json!({"type": "webhook", "name": "mw", "config": {"url": rx.url, "body": "payload"},
                   "circuit_breaker": {"failure_threshold": 1},
                   "middleware": [
                       {"type": "halt", "if": "payload.internal == true", "reason": "internal note"},
                       {"type": "transform", "script":
                           "payload.text = `[${activity.event_type}] ${payload.text.to_upper()}`; payload.remove(\"api_key\");"},
                   ]}),
        )
        .await;
    let ch_id = ch.id.as_str();
    assert_eq!(ch.middleware.len(), 2, "{ch:?}");

    // A transform: the receiver gets the copy, the activity keeps the original.
    let sent = post(&t, &key, ch_id, json!({"text": "hi", "api_key": "k-1"})).await;
    let d = t
        .wait_delivery(&key, &sent, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(body(&reqs[0]), json!({"text": "[message.created] HI"}));
    let act: ActivityView = t
        .api(
            "GET",
            &format!("/api/v1/activities/{}", d.activity_id.as_str()),
            &key,
            None,
        )
        .await
        .typed(200)
        .unwrap();
    // The payload is the producer's own JSON.
    assert_eq!(act.payload["text"], "hi", "{act:?}");

    // A halt: a dead letter with the reason, no request, the breaker untouched (its
    // threshold is one failure).
    let halted = post(&t, &key, ch_id, json!({"text": "note", "internal": true})).await;
    let d = t
        .wait_delivery(&key, &halted, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(d.last_error.as_deref(), Some("halted: internal note"));
    assert_eq!(rx.requests().len(), 1, "a halt makes no request");
    let state: DeliveryStateDoc = t
        .api(
            "GET",
            &format!("/api/v1/channels/{ch_id}/delivery"),
            &key,
            None,
        )
        .await
        .typed(200)
        .unwrap();
    assert_eq!(state.circuit_state, "closed", "{state:?}");
    assert_eq!(state.consecutive_failures, 0, "{state:?}");
    // Nor does auto-disable count it.
    assert_eq!(failures(&t, ch_id).await, (0, 0));
    let ch_now: ChannelView = t
        .api("GET", &format!("/api/v1/channels/{ch_id}"), &key, None)
        .await
        .typed(200)
        .unwrap();
    assert!(ch_now.active, "{ch_now:?}");
    // A step that fails halts too, naming the step.
    let broken = post(&t, &key, ch_id, json!({"no_text": true})).await;
    let d = t
        .wait_delivery(&key, &broken, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    let why = d.last_error.as_deref().unwrap();
    assert!(
        why.starts_with("halted: step 2 (transform) failed:"),
        "{why}"
    );
    assert_eq!(rx.requests().len(), 1);
    assert_eq!(failures(&t, ch_id).await, (0, 0));

    // The tenant changes the steps, then replays the halted delivery: the new steps run on
    // the original activity.
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{ch_id}"),
            &key,
            Some(json!({"middleware": [
                {"type": "transform", "script": "payload.text = `${payload.text} (replayed ${activity.attempt})`;"}
            ]})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{halted}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let d = t
        .wait_delivery(&key, &halted, Duration::from_secs(20), |d| {
            d.status == "sent"
        })
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        body(&reqs[1]),
        json!({"text": "note (replayed 1)", "internal": true})
    );
}

#[tokio::test]
async fn bad_steps_are_refused_naming_the_step() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = t.webhook(&key, "http://127.0.0.1:9/h", json!({})).await;
    let path = format!("/api/v1/channels/{}", ch.id.as_str());
    for (steps, names) in [
        (json!({"type": "transform"}), "array"),
        (json!([{"type": "jq", "filter": "."}]), "step 1:"),
        (
            json!([{"type": "transform", "script": "payload.x = 1;"},
                   {"type": "transform", "script": "payload.y = ;"}]),
            "step 2 (transform):",
        ),
        (
            json!([{"type": "transform", "script": "payload.z = nowhere;"}]),
            "step 1 (transform):",
        ),
        (
            json!([{"type": "halt", "if": "true", "reason": ""}]),
            "step 1 (halt):",
        ),
    ] {
        let a = t
            .api("PATCH", &path, &key, Some(json!({"middleware": steps})))
            .await;
        assert_eq!(a.status, 422, "{steps}: {:?}", a.body);
        assert_eq!(a.code(), "invalid_middleware");
        let msg = a.typed::<ErrorBody>(422).unwrap().error.message;
        assert!(msg.contains(names), "{steps}: {msg}");
    }
    let a = t
        .api(
            "POST",
            "/api/v1/channels",
            &key,
            Some(
                json!({"type": "webhook", "name": "x", "config": {"url": "http://127.0.0.1:9/h"},
                        "middleware": [{"type": "transform", "script": "loop {"}]}),
            ),
        )
        .await;
    assert_eq!(a.status, 422, "{:?}", a.body);
    // Removing the steps.
    let a = t
        .api("PATCH", &path, &key, Some(json!({"middleware": []})))
        .await;
    assert_eq!(a.status, 200);
    let ch: ChannelView = a.typed(200).unwrap();
    assert!(ch.middleware.is_empty(), "{ch:?}");
}

/// Ten hostile scripts at once on one instance (long map keys the engine's limits do not
/// count, then copies of the map, one operation each) each halt their own delivery for the
/// memory they took; a healthy channel's delivery of the same activity, in the same batches,
/// is sent.
#[tokio::test]
async fn ten_hostile_scripts_at_once_halt_their_own_deliveries_only() {
    let t = TestStack::start().await;
    let rx = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let hostile = "let s = \"x\"; for i in 0..15 { s += s; } s += s.sub_string(0, 28000); \
                   let m = #{}; for i in 0..150 { m[s + i] = i; } \
                   let c1 = m; let c2 = m; let c3 = m; loop { let c = m; c.y = 1; }";
    let mut channels = Vec::new();
    for n in 0..10 {
        let ch = t
            .channel(
                &key,
                json!({"type": "webhook", "name": format!("hostile {n}"),
                       "config": {"url": rx.url},
                       "middleware": [{"type": "transform", "script": hostile}]}),
            )
            .await;
        channels.push(ch.id.as_str().to_owned());
    }
    let healthy = t
        .channel(
            &key,
            json!({"type": "webhook", "name": "healthy", "config": {"url": rx.url, "body": "payload"}}),
        )
        .await
        .id
        .clone();
    channels.push(healthy.clone());
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(
                json!({"conversation_id": "conv-hostile", "channel_ids": channels,
                        "payload": {"text": "hello"}}),
            ),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let deliveries: Vec<(String, String)> = a
        .typed::<Ingested>(201)
        .unwrap()
        .deliveries
        .into_iter()
        .map(|d| (d.channel_id, d.id))
        .collect();
    assert_eq!(deliveries.len(), 11);
    for (ch, id) in &deliveries {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(30), is_settled)
            .await;
        if *ch == healthy {
            assert_eq!(d.status, "sent", "{d:?}");
        } else {
            assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
            let why = d.last_error.as_deref().unwrap();
            assert!(
                why.starts_with("halted: step 1 (transform) failed: allocated more than 16 MB"),
                "{why}"
            );
        }
    }
    // Only the healthy channel's request was made.
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(body(&reqs[0]), json!({"text": "hello"}));
}
