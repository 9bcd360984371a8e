//! The live stream (`docs/stream.md`): a tenant's client connects to the WebSocket API with its
//! API key or a stream token, subscribes to a conversation, and is sent every status change of
//! its deliveries; another tenant's conversation is refused like an unknown one. One scenario
//! runs on the emulator (the bus's rule, the stream queue and the stream function as deployed).

use converger_tests::client::{Tenant, is_settled};
use converger_tests::stream::{Frame, StreamClient, refused_status};
use converger_tests::views::StreamTokenView;
use converger_tests::{Receiver, Reply, TestStack};
use serde_json::json;
use std::time::Duration;

async fn post(t: &Tenant<'_>, conversation: &str, ch: &str) -> String {
    let (status, i) = t
        .post_activity(json!({"conversation_id": conversation, "channel_ids": [ch], "payload": {"text": "hi"}}))
        .await
        .unwrap();
    assert_eq!(status, 201);
    i.deliveries[0].id.clone()
}

/// The frames of delivery `id`, read until one has `status`.
async fn frames_until(s: &mut StreamClient, id: &str, status: &str) -> Vec<Frame> {
    s.until(|f| {
        f.iter()
            .any(|f| f.delivery_id.as_deref() == Some(id) && f.status.as_deref() == Some(status))
    })
    .await
}

fn statuses(frames: &[Frame], id: &str) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.delivery_id.as_deref() == Some(id))
        .filter_map(|f| f.status.clone())
        .collect()
}

#[tokio::test]
async fn a_conversation_streams_its_whole_life_to_its_tenant_only() {
    let t = TestStack::start().await;
    // Acts 1 and 2 delivered, act 3 refused for good, then every request delivered.
    let rx = Receiver::start(
        vec![Reply::status(200), Reply::status(200), Reply::status(400)],
        Reply::status(200),
    )
    .await
    .unwrap();
    let a = t.new_tenant("default").await;
    let b = t.new_tenant("default").await;
    let ch = a
        .webhook(&rx.url, json!({"max_attempts": 3}))
        .await
        .channel
        .id;
    let d1 = post(&a, "conv-s", &ch).await;
    a.wait_delivery(&d1, Duration::from_secs(20), is_settled)
        .await;

    let mut s = a.stream().await;
    let ok = s.subscribe("conversation:conv-s").await;
    assert_eq!(
        (ok.kind.as_str(), ok.topic.as_deref()),
        ("subscribed", Some("conversation:conv-s"))
    );
    // A conversation with no activity yet is followed from before its first one.
    let early = s.subscribe("conversation:conv-new").await;
    assert_eq!(
        (early.kind.as_str(), early.topic.as_deref()),
        ("subscribed", Some("conversation:conv-new"))
    );
    let first = post(&a, "conv-new", &ch).await;
    let seen = frames_until(&mut s, &first, "sent").await;
    assert!(statuses(&seen, &first).contains(&"sent".to_owned()));
    let bad = s.subscribe("deliveries").await;
    assert_eq!(bad.code.as_deref(), Some("invalid_request"));
    s.send(json!({"action": "ping"})).await;
    assert_eq!(s.next().await.kind, "pong");

    // Tenant b follows its own conv-s (none yet): it hears of its own deliveries only, never
    // of a's conversation of the same id.
    let mut other = b.stream().await;
    let own = other.subscribe("conversation:conv-s").await;
    assert_eq!(own.kind, "subscribed");
    let b_ch = b.webhook(&rx.url, json!({})).await.channel.id;

    // A dead letter, then its replay.
    let d2 = post(&a, "conv-s", &ch).await;
    let seen = frames_until(&mut s, &d2, "failed").await;
    let dead = seen
        .iter()
        .find(|f| f.delivery_id.as_deref() == Some(&d2))
        .unwrap();
    assert_eq!(dead.conversation_id.as_deref(), Some("conv-s"));
    assert_eq!(dead.channel_id.as_deref(), Some(ch.as_str()));
    assert_eq!(dead.attempts, Some(1));
    assert!(
        dead.activity_id
            .as_deref()
            .is_some_and(|a| a.starts_with("act_"))
    );
    assert!(dead.at.is_some());
    let r = a
        .api("POST", &format!("/api/v1/deliveries/{d2}/retry"), None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let seen = frames_until(&mut s, &d2, "sent").await;
    assert_eq!(statuses(&seen, &d2), ["pending", "sent"]);

    // Parked behind a pause, released by the resume.
    let r = a
        .api("POST", &format!("/api/v1/channels/{ch}/pause"), None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d3 = post(&a, "conv-s", &ch).await;
    let _ = post(&a, "another-conversation", &ch).await;
    let seen = frames_until(&mut s, &d3, "paused").await;
    assert_eq!(statuses(&seen, &d3), ["paused"]);
    let r = a
        .api("POST", &format!("/api/v1/channels/{ch}/resume"), None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let seen = frames_until(&mut s, &d3, "sent").await;
    assert_eq!(statuses(&seen, &d3), ["pending", "sent"]);
    // Only conv-s was followed.
    assert!(
        seen.iter()
            .all(|f| f.conversation_id.as_deref() == Some("conv-s"))
    );

    // b's own conv-s: its delivery reaches b; none of a's ever did.
    let b1 = post(&b, "conv-s", &b_ch).await;
    b.wait_delivery(&b1, Duration::from_secs(20), is_settled)
        .await;
    let b2 = post(&b, "conv-s", &b_ch).await;
    let _ = post(&a, "conv-s", &ch).await;
    let got = frames_until(&mut other, &b2, "sent").await;
    // b followed conv-s before its first activity: b1's frames came too, and only b's.
    assert!(
        got.iter()
            .all(|f| [b1.as_str(), b2.as_str()].contains(&f.delivery_id.as_deref().unwrap_or(""))),
        "{got:?}"
    );
    assert!(statuses(&got, &b1).contains(&"sent".to_owned()), "{got:?}");

    // Unsubscribed, nothing more comes.
    s.send(json!({"action": "unsubscribe", "topic": "conversation:conv-s"}))
        .await;
    let f = s
        .until(|f| f.last().is_some_and(|f| f.kind == "unsubscribed"))
        .await;
    assert_eq!(
        f.last().unwrap().topic.as_deref(),
        Some("conversation:conv-s")
    );
    let tenant = converger_core::TenantId::parse(&a.id).unwrap();
    assert!(
        t.stack
            .store
            .subscribers(&tenant, "conversation:conv-s")
            .await
            .unwrap()
            .is_empty()
    );

    // A closed connection leaves no subscription behind.
    let btenant = converger_core::TenantId::parse(&b.id).unwrap();
    assert_eq!(
        t.stack
            .store
            .subscribers(&btenant, "conversation:conv-s")
            .await
            .unwrap()
            .len(),
        1
    );
    other.close().await;
    let store = t.stack.store.clone();
    let gone = converger_tests::wait_until(Duration::from_secs(10), || {
        let (store, btenant) = (store.clone(), btenant.clone());
        async move {
            store
                .subscribers(&btenant, "conversation:conv-s")
                .await
                .unwrap()
                .is_empty()
        }
    })
    .await;
    assert!(gone, "the closed connection's subscription is removed");
    s.close().await;
}

#[tokio::test]
async fn a_browser_connects_with_a_short_lived_token_and_nothing_else_gets_in() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let r = a.api("POST", "/api/v1/stream/tokens", None).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let given: StreamTokenView = r.typed(201).unwrap();
    let token = given.token;
    let expires = chrono::DateTime::parse_from_rfc3339(&given.expires_at).unwrap();
    let left = expires
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((290..=300).contains(&left), "{left}");
    let mut s = t.stream_with_token(&token).await.expect("the token admits");
    assert_eq!(s.subscribe("channel_health").await.kind, "subscribed");
    s.close().await;

    // A token asked for with topics follows those and no others.
    let r = a
        .api(
            "POST",
            "/api/v1/stream/tokens",
            Some(json!({"topics": ["conversation:c-9"]})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let limited = r.typed::<StreamTokenView>(201).unwrap().token;
    let mut s = t
        .stream_with_token(&limited)
        .await
        .expect("the token admits");
    assert_eq!(s.subscribe("conversation:c-9").await.kind, "subscribed");
    let refused = s.subscribe("channel_health").await;
    assert_eq!(
        (refused.kind.as_str(), refused.code.as_deref()),
        ("error", Some("topic_not_allowed"))
    );
    s.close().await;
    for bad in [
        json!({"topics": []}),
        json!({"topics": ["nope"]}),
        json!({"topic": "x"}),
    ] {
        let r = a.api("POST", "/api/v1/stream/tokens", Some(bad)).await;
        assert_eq!(r.status, 422, "{:?}", r.body);
    }

    // A wrong token, a wrong key, no credentials: the handshake is refused with 401.
    for refused in [
        t.stream_with_token("not-a-token").await.err(),
        t.stream_with_key("not-a-key").await.err(),
        tokio_tungstenite::connect_async(t.stack.ws_url.as_str())
            .await
            .err(),
    ] {
        let e = refused.expect("refused");
        assert_eq!(refused_status(&e), Some(401), "{e}");
    }
    // Tokens are for the tenant API's keys only.
    let r = t.api("POST", "/api/v1/stream/tokens", "nope", None).await;
    assert_eq!(r.status, 401);
}

/// A tenant's pause and resume are transitions like any other: each is a `circuit_changed`
/// frame on `channel_health` (`paused`, then `closed`), naming who did it.
#[tokio::test]
async fn a_pause_and_a_resume_stream_on_channel_health() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = a.webhook(&rx.url, json!({})).await.channel.id;
    let mut s = a.stream().await;
    assert_eq!(s.subscribe("channel_health").await.kind, "subscribed");
    let changed = |state: &'static str| {
        move |f: &[Frame]| {
            f.iter()
                .any(|f| f.kind == "circuit_changed" && f.state.as_deref() == Some(state))
        }
    };
    for (action, state) in [("pause", "paused"), ("resume", "closed")] {
        let r = a
            .api("POST", &format!("/api/v1/channels/{ch}/{action}"), None)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let seen = s.until(changed(state)).await;
        let f = seen
            .iter()
            .find(|f| f.kind == "circuit_changed" && f.state.as_deref() == Some(state))
            .unwrap();
        assert_eq!(f.channel_id.as_deref(), Some(ch.as_str()));
        assert!(
            f.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("tenant_api:key_")),
            "{f:?}"
        );
    }
    s.close().await;
}

mod emulator {
    use super::*;

    /// On the emulator: the deliver function's events go through the bus's rule to the stream
    /// queue, and the stream function pushes them through the management API.
    #[tokio::test]
    async fn the_bus_feeds_the_stream_on_the_emulator() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let a = t.new_tenant("default").await;
        let ch = a.webhook(&rx.url, json!({})).await.channel.id;
        let d1 = post(&a, "conv-e", &ch).await;
        a.wait_delivery(&d1, Duration::from_secs(30), is_settled)
            .await;
        let mut s = a.stream().await;
        assert_eq!(s.subscribe("conversation:conv-e").await.kind, "subscribed");
        let d2 = post(&a, "conv-e", &ch).await;
        let seen = frames_until(&mut s, &d2, "sent").await;
        let sent = seen.last().unwrap();
        assert_eq!(sent.conversation_id.as_deref(), Some("conv-e"));
        assert_eq!(sent.attempts, Some(1));
        s.close().await;
    }
}

/// A failed attempt whose retry is to come is a frame of its own, with its attempts, its error
/// and the retry's time, before the frame of the attempt that succeeds (a delivery's frames in
/// the order its row changed).
#[tokio::test]
async fn a_retried_attempt_streams_with_its_error_and_next_time() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    // The conversation exists (a subscription to an unknown one is refused) before the
    // delivery to follow starts.
    let ok = Receiver::always(200).await.unwrap();
    let first = a.webhook(&ok.url, json!({})).await.channel.id;
    let d0 = post(&a, "conv-r", &first).await;
    a.wait_delivery(&d0, Duration::from_secs(30), is_settled)
        .await;
    let mut s = a.stream().await;
    assert_eq!(s.subscribe("conversation:conv-r").await.kind, "subscribed");
    let rx = Receiver::start(vec![Reply::status(503)], Reply::status(200))
        .await
        .unwrap();
    let ch = a
        .webhook(&rx.url, json!({"max_attempts": 3, "schedule": [1000]}))
        .await
        .channel
        .id;
    let d = post(&a, "conv-r", &ch).await;
    let seen = frames_until(&mut s, &d, "sent").await;
    let mine: Vec<&Frame> = seen
        .iter()
        .filter(|f| f.delivery_id.as_deref() == Some(d.as_str()))
        .collect();
    assert_eq!(statuses(&seen, &d), ["pending", "sent"], "{mine:?}");
    let retry = mine[0];
    assert_eq!(retry.attempts, Some(1));
    assert!(
        retry.error.as_deref().is_some_and(|e| e.contains("503")),
        "{retry:?}"
    );
    assert!(retry.next_attempt_at.is_some(), "{retry:?}");
    assert_eq!(mine[1].attempts, Some(2));
    assert!(mine[1].next_attempt_at.is_none());
}

/// A `$connect` nobody vouches for is throttled by its source as the API's calls are: past 60
/// refused connects in a minute (bad keys here), an address is refused 429 `source_throttled`
/// before its key is read, its good key included. Another address is refused 401 as ever, and
/// its good key connects.
#[tokio::test]
async fn an_address_that_keeps_failing_to_connect_is_throttled_and_no_one_else_is() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let status = |r: Result<StreamClient, tokio_tungstenite::tungstenite::Error>| match r {
        Ok(_) => (200, String::new()),
        Err(e) => {
            let body = match &e {
                tokio_tungstenite::tungstenite::Error::Http(r) => r
                    .body()
                    .as_deref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
                _ => String::new(),
            };
            (refused_status(&e).unwrap_or(0), body)
        }
    };
    let mut seen = Vec::new();
    for n in 0..70 {
        let (code, body) = status(
            t.stream_with_key_from("127.0.0.8", &format!("cvg_not_a_key_{n}"))
                .await,
        );
        if code == 429 {
            assert!(body.contains("source_throttled"), "{body}");
        }
        seen.push(code);
    }
    // The refusal past the 60th is answered as ever and throttles what follows.
    assert!(seen[..60].iter().all(|s| *s == 401), "{seen:?}");
    let first = seen.iter().position(|s| *s == 429).expect("throttled");
    assert!(seen[first..].iter().all(|s| *s == 429), "{seen:?}");
    // Its good key is not read while it waits.
    let (code, body) = status(t.stream_with_key_from("127.0.0.8", &a.key).await);
    assert_eq!(code, 429, "{body}");
    // Another address: refused for its bad key, admitted with its good one.
    let (code, _) = status(t.stream_with_key_from("127.0.0.9", "cvg_not_a_key").await);
    assert_eq!(code, 401);
    let (code, body) = status(t.stream_with_key_from("127.0.0.9", &a.key).await);
    assert_eq!(code, 200, "{body}");
}

/// The local gateway holds the WebSocket stage's routes to their throttle as API Gateway does
/// (`WebSocketThrottleRate`, `WebSocketThrottleBurst`, a bucket per route): a message past the
/// `$default` route's burst is answered `Too Many Requests` and dropped while the connection
/// stays open, and a handshake past `$connect`'s is refused with 429.
#[tokio::test]
async fn the_websocket_stage_throttles_each_route_as_api_gateway_does() {
    let burst = 3;
    let t = TestStack::with(|o| {
        o.parameters
            .insert("WebSocketThrottleRate".to_owned(), "1".to_owned());
        o.parameters
            .insert("WebSocketThrottleBurst".to_owned(), burst.to_string());
    })
    .await;
    let (_, key) = t.tenant("default").await;
    let mut s = t.stream_with_key(&key).await.unwrap();
    let sent = 2 * burst;
    for i in 0..sent {
        s.send(json!({"action": "subscribe", "topic": format!("conversation:c{i}")}))
            .await;
    }
    let (mut answered, mut throttled) = (0, 0);
    for _ in 0..sent {
        let f = s.next_json_within(Duration::from_secs(30)).await.unwrap();
        if f["message"] == "Too Many Requests" {
            assert!(
                f["connectionId"].is_string() && f["requestId"].is_string(),
                "{f}"
            );
            throttled += 1;
        } else {
            assert_eq!(f["type"], "subscribed", "{f}");
            answered += 1;
        }
    }
    assert_eq!(answered + throttled, sent);
    assert!(
        answered >= burst && throttled >= 1,
        "{answered} answered, {throttled} throttled"
    );
    // The connection stays: once the bucket refills, a message is answered again.
    let mut again = false;
    for _ in 0..20 {
        s.send(json!({"action": "subscribe", "topic": "conversation:again"}))
            .await;
        let f = s.next_json_within(Duration::from_secs(30)).await.unwrap();
        if f["type"] == "subscribed" {
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        again,
        "the connection answers again once the bucket refills"
    );
    // Handshakes have their own bucket: the burst's worth at once, then 429.
    let mut refused = None;
    for _ in 0..=burst {
        if let Err(e) = t.stream_with_key(&key).await {
            refused = refused_status(&e);
            break;
        }
    }
    assert_eq!(refused, Some(429));
}
