//! The channel adapters against local fakes of each provider's wire format, the echo bot,
//! websocket hand-offs through the local WebSocket API, and provider receipts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::providers::meta_signature;
use converger_http::schemas::ReceiptsApplied;
use converger_tests::fakes::{self, ProviderFake, ProviderReply};
use converger_tests::views::{ChannelView, DeliveryView, Ingested};
use converger_tests::{Answer, Receiver, TestStack, is_settled};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "EAAGm0PX4ZCpsBA-test-token";
const APP_SECRET: &str = "meta-app-secret-for-tests";
const VERIFY: &str = "verify-token-for-tests";
const IB_KEY: &str = "infobip-api-key-0123";
const IB_RECEIPTS: &str = "infobip-receipt-token-0123";
const WS_TOKEN: &str = "websocket-client-token-0123";

async fn meta_channel(t: &TestStack, key: &str, fake: &ProviderFake) -> String {
    let c = t
        .channel(
            key,
            json!({"type": "whatsapp_meta", "name": "wa", "config": {
                "phone_number_id": "106540352242922", "access_token": TOKEN, "base_url": fake.url,
                "app_secret": APP_SECRET, "verify_token": VERIFY},
                "retry_policy": {"base_ms": 100, "max_attempts": 3}}),
        )
        .await;
    assert_eq!(c.config["access_token"], "[REDACTED]", "{c:?}");
    assert_eq!(c.rate_limit, None);
    c.id.as_str().to_owned()
}

async fn infobip_channel(t: &TestStack, key: &str, fake: &ProviderFake) -> String {
    let c = t
        .channel(
            key,
            json!({"type": "whatsapp_infobip", "name": "ib", "config": {
                "base_url": fake.url, "api_key": IB_KEY, "sender": "447860099299",
                "receipt_token": IB_RECEIPTS},
                "retry_policy": {"base_ms": 100, "max_attempts": 3}}),
        )
        .await;
    c.id.as_str().to_owned()
}

/// Posts an activity with `payload` to `channels`; returns the delivery ids in order.
async fn post(t: &TestStack, key: &str, channels: &[&str], payload: Value) -> Vec<String> {
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            key,
            Some(
                json!({"conversation_id": "conv-wa", "channel_ids": channels, "payload": payload}),
            ),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let ingested: Ingested = a.typed(201).unwrap();
    ingested.deliveries.into_iter().map(|d| d.id).collect()
}

/// What a receipt notification answered that it applied (a 200 answer, else a panic).
fn applied(a: &Answer) -> ReceiptsApplied {
    a.typed(200)
        .unwrap_or_else(|e| panic!("not applied ({e:?}): {:?}", a.body))
}

fn text_to(recipient: &str) -> Value {
    json!({"recipient": recipient, "text": "Your order has shipped"})
}

async fn settle(t: &TestStack, key: &str, id: &str) -> DeliveryView {
    t.wait_delivery(key, id, Duration::from_secs(20), is_settled)
        .await
}

#[tokio::test]
async fn whatsapp_meta_sends_text_and_templates_and_stores_the_message_id() {
    let t = TestStack::start().await;
    let fake = fakes::meta(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = meta_channel(&t, &key, &fake).await;

    let id = post(&t, &key, &[&ch], text_to("+1 (555) 123-4567")).await;
    let d = settle(&t, &key, &id[0]).await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(
        d.provider_message_id.as_deref(),
        Some(fake.ids()[0].as_str())
    );
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v21.0/106540352242922/messages");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}"))
    );
    assert_eq!(seen[0].body["to"], "15551234567");
    assert_eq!(seen[0].body["type"], "text");
    assert_eq!(seen[0].body["text"]["body"], "Your order has shipped");

    let tpl = json!({"to": "15551234567", "template": {"name": "order_update", "language": "en_US",
        "components": [{"type": "body", "parameters": [{"type": "text", "text": "A-42"}]}]}});
    let id = post(&t, &key, &[&ch], tpl).await;
    let d = settle(&t, &key, &id[0]).await;
    assert_eq!(d.status, "sent", "{d:?}");
    let seen = fake.seen();
    assert_eq!(seen[1].body["type"], "template");
    assert_eq!(seen[1].body["template"]["name"], "order_update");
    assert_eq!(seen[1].body["template"]["language"]["code"], "en_US");

    // No recipient: a permanent error, no request made.
    let id = post(&t, &key, &[&ch], json!({"text": "to nobody"})).await;
    let d = settle(&t, &key, &id[0]).await;
    assert_eq!(d.status, "failed");
    assert_eq!(d.attempts, 1);
    assert!(
        d.last_error.as_deref().unwrap().contains("no recipient"),
        "{d:?}"
    );
    assert_eq!(fake.seen().len(), 2);

    // The channel shows the adapter's default rate limit.
    let c = t
        .api(
            "GET",
            &format!("/api/v1/channels/{ch}/delivery"),
            &key,
            None,
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
}

/// Each mapped error, answered once before an accepting answer: a retryable one ends `sent`
/// on the 2nd attempt, a permanent one `failed` after the 1st.
async fn classify(
    t: &TestStack,
    key: &str,
    fake: &ProviderFake,
    ch: &str,
    cases: &[(ProviderReply, bool)],
) {
    for (reply, retryable) in cases {
        fake.then(vec![reply.clone()]);
        let id = post(t, key, &[ch], text_to("15551234567")).await;
        let d = settle(t, key, &id[0]).await;
        if *retryable {
            assert_eq!(d.status, "sent", "{reply:?} is retryable: {d:?}");
            assert_eq!(d.attempts, 2, "{reply:?}: {d:?}");
        } else {
            assert_eq!(d.status, "failed", "{reply:?} is permanent: {d:?}");
            assert_eq!(d.attempts, 1, "{reply:?}: {d:?}");
        }
    }
}

#[tokio::test]
async fn whatsapp_meta_errors_are_classified_by_code() {
    let t = TestStack::start().await;
    let fake = fakes::meta(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = meta_channel(&t, &key, &fake).await;
    classify(
        &t,
        &key,
        &fake,
        &ch,
        &[
            (ProviderReply::error(400, 130429, "Rate limit hit"), true),
            (
                ProviderReply::error(400, 131048, "Spam rate limit hit"),
                true,
            ),
            (
                ProviderReply::error(500, 131000, "Something went wrong"),
                true,
            ),
            (
                ProviderReply::error(503, 2, "Service temporarily unavailable"),
                true,
            ),
            (
                ProviderReply::error(400, 131026, "Message undeliverable"),
                false,
            ),
            (ProviderReply::error(400, 100, "Invalid parameter"), false),
            (
                ProviderReply::error(401, 190, "Access token has expired"),
                false,
            ),
            (
                ProviderReply::error(404, 132001, "Template name does not exist"),
                false,
            ),
            (
                ProviderReply::error(400, 131047, "Re-engagement message"),
                false,
            ),
        ],
    )
    .await;
    // The reason names Meta's code.
    fake.then(vec![ProviderReply::error(
        400,
        131026,
        "Message undeliverable",
    )]);
    let id = post(&t, &key, &[&ch], text_to("15551234567")).await;
    let d = settle(&t, &key, &id[0]).await;
    assert!(
        d.last_error
            .as_deref()
            .unwrap()
            .contains("(131026) Message undeliverable"),
        "{d:?}"
    );
}

#[tokio::test]
async fn whatsapp_infobip_sends_and_classifies() {
    let t = TestStack::start().await;
    let fake = fakes::infobip(IB_KEY, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = infobip_channel(&t, &key, &fake).await;

    let id = post(&t, &key, &[&ch], text_to("+44 7700 900123")).await;
    let d = settle(&t, &key, &id[0]).await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(
        d.provider_message_id.as_deref(),
        Some(fake.ids()[0].as_str())
    );
    let seen = fake.seen();
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("App {IB_KEY}"))
    );
    assert_eq!(seen[0].body["from"], "447860099299");
    assert_eq!(seen[0].body["to"], "447700900123");
    assert_eq!(seen[0].body["content"]["text"], "Your order has shipped");

    classify(
        &t,
        &key,
        &fake,
        &ch,
        &[
            (
                ProviderReply::error(429, "TOO_MANY_REQUESTS", "Too many requests"),
                true,
            ),
            (
                ProviderReply::error(500, "GENERAL_ERROR", "Something went wrong"),
                true,
            ),
            (
                ProviderReply::error(401, "UNAUTHORIZED", "Invalid login details"),
                false,
            ),
            (
                ProviderReply::error(400, "BAD_REQUEST", "Invalid destination address"),
                false,
            ),
            (ProviderReply::Rejected, false),
        ],
    )
    .await;
}

async fn receipt(t: &TestStack, ch: &str, body: &Value, signature: Option<String>) -> Answer {
    let text = body.to_string();
    let mut req = t
        .http
        .post(format!("{}/api/v1/channels/{ch}/status", t.stack.api_url))
        .header("content-type", "application/json");
    if let Some(sig) = signature {
        req = req.header("x-hub-signature-256", sig);
    }
    Answer::read(req.body(text).send().await.unwrap()).await
}

async fn meta_receipt(t: &TestStack, ch: &str, statuses: &[(&str, &str)]) -> Answer {
    let body = fakes::meta_statuses(statuses);
    let sig = meta_signature(APP_SECRET, body.to_string().as_bytes());
    receipt(t, ch, &body, Some(sig)).await
}

/// A message sent and then failed by the provider's receipt reaches the provider again when
/// it is replayed: a new request, whose new message id the receipts follow from then on.
#[tokio::test]
async fn a_delivery_failed_by_a_receipt_reaches_the_provider_again_when_replayed() {
    let t = TestStack::start().await;
    let fake = fakes::meta(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = meta_channel(&t, &key, &fake).await;
    let id = post(&t, &key, &[&ch], text_to("15551234567")).await[0].clone();
    assert_eq!(settle(&t, &key, &id).await.status, "sent");
    let first = fake.ids()[0].clone();
    let a = meta_receipt(&t, &ch, &[(&first, "failed")]).await;
    assert_eq!(applied(&a).applied, 1, "{:?}", a.body);
    assert_eq!(t.delivery(&key, &id).await.status, "failed");

    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{id}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(20), |d| {
            d.status == "sent" && d.retry_count == 1
        })
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    // Two requests to the provider, and the row names the second message.
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].body, seen[0].body, "the same message again");
    let second = fake.ids()[1].clone();
    assert_ne!(second, first);
    assert_eq!(
        d.provider_message_id.as_deref(),
        Some(second.as_str()),
        "{d:?}"
    );
    // The new message's receipt moves it forward.
    let a = meta_receipt(&t, &ch, &[(&second, "delivered")]).await;
    assert_eq!(applied(&a).applied, 1, "{:?}", a.body);
    assert_eq!(t.delivery(&key, &id).await.status, "delivered");
}

#[tokio::test]
async fn meta_receipts_need_a_valid_signature_and_a_known_message() {
    let t = TestStack::start().await;
    let fake = fakes::meta(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = meta_channel(&t, &key, &fake).await;
    let id = post(&t, &key, &[&ch], text_to("15551234567")).await;
    assert_eq!(settle(&t, &key, &id[0]).await.status, "sent");
    let wamid = fake.ids()[0].clone();
    let body = fakes::meta_statuses(&[(&wamid, "delivered")]);

    let forged = meta_signature("not-the-app-secret", body.to_string().as_bytes());
    let a = receipt(&t, &ch, &body, Some(forged)).await;
    assert_eq!(a.status, 401, "{:?}", a.body);
    assert_eq!(a.code(), "invalid_signature");
    let a = receipt(&t, &ch, &body, None).await;
    assert_eq!(a.status, 401);
    // A body changed after signing.
    let sig = meta_signature(APP_SECRET, body.to_string().as_bytes());
    let tampered = fakes::meta_statuses(&[(&wamid, "read")]);
    assert_eq!(receipt(&t, &ch, &tampered, Some(sig)).await.status, 401);
    assert_eq!(
        t.delivery(&key, &id[0]).await.status,
        "sent",
        "nothing changed"
    );

    let a = meta_receipt(&t, &ch, &[("wamid.unknown", "delivered")]).await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    assert_eq!(a.code(), "unknown_message");
    // Not a receipt channel / unknown channel.
    let hook = t.webhook(&key, "http://127.0.0.1:9/x", json!({})).await;
    let a = meta_receipt(&t, hook.id.as_str(), &[(&wamid, "read")]).await;
    assert_eq!(a.status, 404);
    let a = receipt(
        &t,
        &ch,
        &json!({"not": "a notification"}),
        Some(meta_signature(APP_SECRET, br#"{"not":"a notification"}"#)),
    )
    .await;
    assert_eq!(a.status, 422, "{:?}", a.body);
    assert_eq!(a.code(), "invalid_body");

    // Meta's subscription check.
    let url = |token: &str| {
        format!(
            "{}/api/v1/channels/{ch}/status?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444",
            t.stack.api_url
        )
    };
    let ok = t.http.get(url(VERIFY)).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    let bad = t.http.get(url("wrong")).send().await.unwrap();
    assert_eq!(bad.status().as_u16(), 403);
}

#[tokio::test]
async fn infobip_reports_apply_with_the_channel_token() {
    let t = TestStack::start().await;
    let fake = fakes::infobip(IB_KEY, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = infobip_channel(&t, &key, &fake).await;
    let a = post(&t, &key, &[&ch], text_to("15551234567")).await;
    let b = post(&t, &key, &[&ch], text_to("15551234567")).await;
    for id in [&a[0], &b[0]] {
        assert_eq!(settle(&t, &key, id).await.status, "sent");
    }
    let ids = fake.ids();
    let report = async |reports: Vec<(&str, &str)>, token: &str| {
        t.infobip_reports(&ch, token, &reports).await.status
    };
    assert_eq!(report(vec![(&ids[0], "DELIVERED")], "wrong").await, 401);
    assert_eq!(t.delivery(&key, &a[0]).await.status, "sent");
    // Seen before delivered: read, and the late delivered is ignored.
    assert_eq!(
        report(vec![(&ids[0], "SEEN"), (&ids[0], "DELIVERED")], IB_RECEIPTS).await,
        200
    );
    assert_eq!(t.delivery(&key, &a[0]).await.status, "read");
    assert_eq!(
        report(vec![(&ids[1], "UNDELIVERABLE")], IB_RECEIPTS).await,
        200
    );
    let d = t.delivery(&key, &b[0]).await;
    assert_eq!(d.status, "failed");
    assert!(
        d.last_error.as_deref().unwrap().contains("UNDELIVERABLE"),
        "{d:?}"
    );
    assert_eq!(report(vec![("nope", "DELIVERED")], IB_RECEIPTS).await, 404);
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn websocket_channel(t: &TestStack, key: &str, require_ack: bool) -> String {
    let c = t
        .channel(
            key,
            json!({"type": "websocket", "name": "app", "config": {"token": WS_TOKEN, "require_ack": require_ack}}),
        )
        .await;
    assert_eq!(c.config["token"], "[REDACTED]");
    c.id.as_str().to_owned()
}

async fn connect(t: &TestStack, ch: &str) -> Socket {
    let url = format!("{}?channel_id={ch}&token={WS_TOKEN}", t.stack.ws_url);
    let (ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("connects");
    // The connection is registered before the handshake completes; give the index a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    ws
}

async fn next_frame(ws: &mut Socket) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a frame");
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// Sends a replay frame, and again after the wait it is told when a replay began on the
/// connection too recently; the first frame of the answer.
async fn replay_when_allowed(ws: &mut Socket) -> Value {
    send(ws, json!({"action": "replay"})).await;
    let f = next_frame(ws).await;
    if f["code"] != "replay_throttled" {
        return f;
    }
    let wait = f["retry_after_ms"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(wait + 50)).await;
    send(ws, json!({"action": "replay"})).await;
    next_frame(ws).await
}

/// A client sending replay frames in a loop pushes each waiting delivery once per
/// interval, not once a frame: the frames inside the interval are answered
/// `replay_throttled` with when to send again.
#[tokio::test]
async fn a_replay_flood_pushes_each_waiting_delivery_once_per_interval() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, true).await;
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.extend(post(&t, &key, &[&ch], json!({"n": n})).await);
    }
    for id in &ids {
        t.wait_delivery(&key, id, Duration::from_secs(30), |d| d.attempts == 1)
            .await;
    }
    let mut ws = connect(&t, &ch).await;
    for _ in 0..30 {
        send(&mut ws, json!({"action": "replay"})).await;
    }
    let (mut pushed, mut replays, mut throttled) = (0, 0, 0);
    while replays + throttled < 30 {
        let f = next_frame(&mut ws).await;
        match (f["type"].as_str(), f["code"].as_str()) {
            (Some("activity"), _) => pushed += 1,
            (Some("replayed"), _) => {
                replays += 1;
                assert_eq!(f["count"], 20, "{f}");
            }
            (_, Some("replay_throttled")) => {
                throttled += 1;
                assert!(f["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0), "{f}");
            }
            _ => panic!("unexpected frame {f}"),
        }
    }
    assert_eq!(
        pushed,
        20 * replays,
        "each replay pushes every waiting delivery once"
    );
    assert!(
        (1..=15).contains(&replays),
        "30 frames sent at once are not 30 replays: {replays} replays, {throttled} throttled"
    );
}

#[tokio::test]
async fn hand_offs_are_not_failures_and_do_not_disable_the_channel() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    // Auto-disable after 3 failed attempts; no client ever connects.
    let ch = t
        .channel(
            &key,
            json!({"type": "websocket", "name": "app", "config": {"token": WS_TOKEN},
                   "auto_disable": {"failed_attempts": 3}}),
        )
        .await
        .id
        .as_str()
        .to_owned();
    for n in 0..5 {
        let ids = post(&t, &key, &[&ch], json!({"text": format!("queued {n}")})).await;
        let d = t
            .wait_delivery(&key, &ids[0], Duration::from_secs(20), |d| d.attempts == 1)
            .await;
        assert!(d.awaiting_ack, "{d:?}");
    }
    let flow = t
        .stack
        .store
        .get_flow(&converger_core::ChannelId::parse(&ch).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (flow.failed_attempts, flow.consecutive_failures),
        (0, 0),
        "a hand-off is neither a failure nor a success"
    );
    let c: ChannelView = t
        .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
        .await
        .typed(200)
        .unwrap();
    assert!(c.active, "{c:?}");
}

/// A replay frame pushes what the hand-off pushed: the channel's middleware over the stored
/// payload, not the stored payload itself, so a client never gets a field the tenant's steps
/// remove. A step that halts now pushes nothing and the delivery keeps waiting.
#[tokio::test]
async fn a_replay_frame_carries_the_payload_the_channels_middleware_made() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = t
        .channel(
            &key,
            json!({"type": "websocket", "name": "app", "config": {"token": WS_TOKEN, "require_ack": true},
                   "middleware": [
                       {"type": "halt", "if": "payload.hold == true", "reason": "held"},
                       {"type": "transform", "script": "payload.remove(\"secret\"); payload.shown = true;"},
                   ]}),
        )
        .await
        .id
        .clone();
    // No client yet: handed off, waiting for one.
    let ids = post(&t, &key, &[&ch], json!({"text": "hi", "secret": "s-1"})).await;
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), |d| d.attempts == 1)
        .await;
    assert!(d.awaiting_ack, "{d:?}");

    let mut ws = connect(&t, &ch).await;
    send(&mut ws, json!({"action": "replay"})).await;
    let mut frames = vec![next_frame(&mut ws).await, next_frame(&mut ws).await];
    frames.sort_by_key(|f| f["type"].as_str().unwrap_or("").to_owned());
    let (activity, done) = (&frames[0], &frames[1]);
    assert_eq!(
        (&activity["type"], &activity["replay"]),
        (&json!("activity"), &json!(true)),
        "{frames:?}"
    );
    assert_eq!(activity["delivery_id"], ids[0].as_str());
    assert_eq!(
        activity["payload"],
        json!({"text": "hi", "shown": true}),
        "{activity}"
    );
    assert_eq!(
        (&done["type"], &done["count"]),
        (&json!("replayed"), &json!(1)),
        "{done}"
    );

    // The tenant changes its steps so that this delivery would now halt: a replay pushes
    // nothing, and the delivery still waits.
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{ch}"),
            &key,
            Some(json!({"middleware": [{"type": "halt", "if": "payload.text == \"hi\"", "reason": "no"}]})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let f = replay_when_allowed(&mut ws).await;
    assert_eq!(
        (&f["type"], &f["count"]),
        (&json!("replayed"), &json!(0)),
        "{f}"
    );
    let d = t.delivery(&key, &ids[0]).await;
    assert_eq!(
        (d.status.as_str(), d.awaiting_ack),
        ("pending", true),
        "{d:?}"
    );
}

/// A token change cuts off the clients that connected with the old token: nothing more is
/// pushed to them and their frames are refused; a client with the new token gets the
/// deliveries. A deactivated channel's clients are cut off the same way.
#[tokio::test]
async fn a_token_change_or_deactivation_cuts_off_connected_clients() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, false).await;
    let mut old = connect(&t, &ch).await;
    let new_token = "rotated-websocket-token-4567";
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{ch}"),
            &key,
            Some(json!({"config": {"token": new_token, "require_ack": false}})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let ids = post(&t, &key, &[&ch], json!({"text": "after the rotation"})).await;
    let handed = |d: &DeliveryView| d.attempts == 1;
    t.wait_delivery(&key, &ids[0], Duration::from_secs(20), handed)
        .await;
    // Nothing reached the old client; its frames are refused.
    let got = tokio::time::timeout(Duration::from_millis(1500), old.next()).await;
    assert!(got.is_err(), "no frame for the old token: {got:?}");
    // (The push found it stale and forgot it, so the frame finds no registration.)
    send(&mut old, json!({"action": "replay"})).await;
    let f = next_frame(&mut old).await;
    assert_eq!(
        (&f["type"], &f["code"]),
        (&json!("error"), &json!("not_connected")),
        "{f}"
    );

    // The new token's client gets what waits.
    let url = format!("{}?channel_id={ch}&token={new_token}", t.stack.ws_url);
    let (mut fresh, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&mut fresh, json!({"action": "replay"})).await;
    let mut frames = vec![next_frame(&mut fresh).await, next_frame(&mut fresh).await];
    frames.sort_by_key(|f| f["type"].as_str().unwrap_or("").to_owned());
    assert_eq!(frames[0]["delivery_id"], ids[0].as_str(), "{frames:?}");

    // Deactivated: the remaining client is cut off too.
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{ch}"),
            &key,
            Some(json!({"active": false})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    send(&mut fresh, json!({"action": "replay"})).await;
    let f = next_frame(&mut fresh).await;
    assert_eq!(
        (&f["type"], &f["code"]),
        (&json!("error"), &json!("unauthorized")),
        "{f}"
    );
}

mod emulator;
mod frames;

/// API Gateway's WebSocket API carries at most 128 KB a message, and the local gateway
/// refuses more as it does: a delivery whose frame cannot fit is dead-lettered at its first
/// attempt with the reason, connected client or not, never retried into an unclear error.
#[tokio::test]
async fn a_websocket_frame_past_128_kb_dead_letters_at_once_with_its_reason() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, false).await;
    let mut ws = connect(&t, &ch).await;
    // Within the ingest's 256 KiB, past the WebSocket API's 128 KB.
    let big = "x".repeat(140_000);
    let ids = post(&t, &key, &[&ch], json!({"text": big})).await;
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), |d| {
            d.status == "failed"
        })
        .await;
    assert_eq!(d.attempts, 1, "dead-lettered at once: {d:?}");
    let error = d.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("128 KB"), "{error}");
    // The connection is untouched: a small delivery after it arrives.
    let ids = post(&t, &key, &[&ch], json!({"text": "small"})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(f["delivery_id"], ids[0].as_str(), "{f}");
}

/// A replay pushes every waiting delivery it can: one whose frame the WebSocket API cannot
/// carry (here, a hand-off frame of exactly 128 KB, which the replay's mark makes larger) is
/// passed over, and the deliveries after it are still pushed.
#[tokio::test]
async fn a_replay_goes_on_past_a_delivery_it_cannot_push() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, true).await;
    let mut ws = connect(&t, &ch).await;
    // A first delivery measures the frame around a payload: ids are of one length.
    let pad = 1000;
    let first = post(&t, &key, &[&ch], json!({"text": "x".repeat(pad)})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(f["delivery_id"], first[0].as_str());
    let around = f.to_string().len() - pad;
    let fill = converger_core::websocket::MAX_MESSAGE_BYTES - around;
    let edge = post(&t, &key, &[&ch], json!({"text": "x".repeat(fill)})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(
        (f["delivery_id"].as_str(), f.to_string().len()),
        (
            Some(edge[0].as_str()),
            converger_core::websocket::MAX_MESSAGE_BYTES
        ),
        "the hand-off frame is exactly the limit"
    );
    let last = post(&t, &key, &[&ch], json!({"text": "last"})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(f["delivery_id"], last[0].as_str());

    // None acknowledged: all three wait. The replay pushes the first and the last.
    send(&mut ws, json!({"action": "replay"})).await;
    let mut pushed = Vec::new();
    loop {
        let f = next_frame(&mut ws).await;
        if f["type"] == "replayed" {
            assert_eq!(f["count"], 2, "{f}");
            break;
        }
        assert_eq!(f["replay"], true, "{f}");
        pushed.push(f["delivery_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(pushed, vec![first[0].clone(), last[0].clone()]);
    let d = t.delivery(&key, &edge[0]).await;
    assert_eq!(
        (d.status.as_str(), d.awaiting_ack),
        ("pending", true),
        "{d:?}"
    );
}
