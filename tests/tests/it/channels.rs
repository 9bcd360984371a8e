//! The channel lifecycle and routing a webhook-platform user expects: channels listed,
//! deleted without losing what they still had to deliver, signing secrets read and rotated
//! with an overlap; activities routed by event type to subscribers and read back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::Timestamp;
use converger_http::views::{ActivityView, AuditView, ChannelView, Ingested, Page, SecretsView};
use converger_tests::{Receiver, TestStack, is_settled};
use serde_json::{Value, json};
use std::time::Duration;

/// Whether `secret` verifies a request the receiver got, by the Standard Webhooks verifier.
fn verifies(secret: &str, r: &converger_local::receiver::Received) -> bool {
    let wh = standardwebhooks::Webhook::new(secret).unwrap();
    let mut headers = http::HeaderMap::new();
    for h in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(h, r.headers[h].to_str().unwrap().parse().unwrap());
    }
    wh.verify(&r.body, &headers).is_ok()
}

/// A channel's effective breaker settings, as its view shows them.
#[derive(Debug, serde::Deserialize)]
struct Breaker {
    failure_threshold: u32,
    cooldown_ms: u64,
    /// A number, `"auto"` or `null` (no cap of the channel's own).
    max_in_flight: Value,
}

/// A channel's effective auto-disable settings, as its view shows them.
#[derive(Debug, serde::Deserialize)]
struct AutoDisable {
    failed_attempts: u32,
    success_window_ms: i64,
}

fn breaker(c: &ChannelView) -> Breaker {
    serde_json::from_value(c.circuit_breaker.clone()).unwrap()
}

fn auto_disable(c: &ChannelView) -> AutoDisable {
    serde_json::from_value(c.auto_disable.clone()).unwrap()
}

/// The tenant's audit log (its first page).
async fn audit(t: &TestStack, key: &str) -> Page<AuditView> {
    t.api("GET", "/api/v1/audit", key, None)
        .await
        .typed(200)
        .unwrap()
}

/// Posts one activity to `channel` and waits until it is sent; the request it made.
async fn send_one(
    t: &TestStack,
    key: &str,
    channel: &str,
    rx: &Receiver,
) -> converger_local::receiver::Received {
    let before = rx.requests().len();
    let act = t.activity(key, &[channel]).await;
    let d = act.deliveries[0].id.as_str().to_owned();
    let d = t
        .wait_delivery(key, &d, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), before + 1);
    reqs[before].clone()
}

#[tokio::test]
async fn invalid_event_types_are_refused_on_channels_and_activities() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    for types in [
        json!(["has space"]),
        json!(["a", "a"]),
        json!([""]),
        json!("order.paid"),
    ] {
        let a = t
            .api(
                "POST",
                "/api/v1/channels",
                &key,
                Some(json!({"type": "webhook", "name": "x", "event_types": types,
                            "config": {"url": "http://127.0.0.1:9/h"}})),
            )
            .await;
        assert_eq!(a.status, 422, "{types}: {:?}", a.body);
    }
    let c = t.webhook(&key, "http://127.0.0.1:9/h", json!({})).await;
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{}", c.id.clone()),
            &key,
            Some(json!({"event_types": ["*", "bad;name"]})),
        )
        .await;
    assert_eq!(
        (a.status, Some(a.code())),
        (422, Some("invalid_event_types"))
    );
    for body in [
        json!({"conversation_id": "c", "event_type": "no spaces allowed", "payload": {}}),
        json!({"conversation_id": "c", "event_type": "*", "payload": {}}),
        json!({"conversation_id": "c", "payload": {}}),
    ] {
        let a = t
            .api("POST", "/api/v1/activities", &key, Some(body.clone()))
            .await;
        assert_eq!(a.status, 422, "{body}: {:?}", a.body);
    }
}

#[tokio::test]
async fn a_deleted_channel_that_a_pause_still_holds_is_let_go_by_the_sweeper() {
    // A pause that raced the delete (or a delete whose clean-up a crash cut short): the
    // channel is deleted in the store alone, its deliveries parked behind the pause.
    let t = TestStack::start().await;
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let path = format!("/api/v1/channels/{}", ch.id.clone());
    assert_eq!(
        t.api("POST", &format!("{path}/pause"), &key, None)
            .await
            .status,
        200
    );
    let mut parked = Vec::new();
    for _ in 0..3 {
        let act = t.activity(&key, &[&ch.id]).await;
        parked.push(act.deliveries[0].id.as_str().to_owned());
    }
    // Parked behind the pause: written `paused`, never attempted.
    for d in &parked {
        let d = t
            .wait_delivery(&key, d, Duration::from_secs(10), |d| d.status == "paused")
            .await;
        assert_eq!((d.status.as_str(), d.attempts), ("paused", 0), "{d:?}");
    }
    let store = &t.stack.store;
    let tenant = converger_core::TenantId::parse(&tenant).unwrap();
    let channel = converger_core::ChannelId::parse(&ch.id).unwrap();
    let now = Timestamp::now();
    store
        .delete_channel(&tenant, &channel, now, i64::MAX / 2000)
        .await
        .unwrap()
        .unwrap();
    // Nothing moves while the pause holds them; one sweep lets them go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    t.stack.pipeline.sweeper().sweep().await.unwrap();
    for d in &parked {
        let d = t
            .wait_delivery(&key, d, Duration::from_secs(20), |d| d.status == "failed")
            .await;
        assert_eq!(d.last_error.as_deref(), Some("channel deleted"), "{d:?}");
    }
    assert!(rx.requests().is_empty(), "no request for a deleted channel");
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
mod emulator {
    use super::*;

    #[tokio::test]
    async fn channels_list_in_pages_by_type_and_state() {
        let t = TestStack::on_emulator().await;
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let mut webhooks = Vec::new();
        for i in 0..5 {
            let c = t
                .channel(
                    &key,
                    json!({"type": "webhook", "name": format!("hook {i}"), "active": i != 0,
                           "config": {"url": "http://127.0.0.1:9/h"}}),
                )
                .await;
            webhooks.push(c.id.clone());
        }
        let echo = t
            .channel(&key, json!({"type": "echo", "name": "bot"}))
            .await;
        t.webhook(&other, "http://127.0.0.1:9/h", json!({})).await;

        let mut all = webhooks.clone();
        all.push(echo.id.clone());
        all.sort();
        let (mut seen, mut cursor) = (Vec::new(), None::<String>);
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/v1/channels?limit=2&cursor={c}"),
                None => "/api/v1/channels?limit=2".to_owned(),
            };
            let a = t.api("GET", &path, &key, None).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            for c in a.body["data"].as_array().unwrap() {
                assert!(c.get("signing_secret").is_none(), "never in a list");
            }
            let page: Page<ChannelView> = a.typed(200).unwrap();
            assert!(page.data.len() <= 2);
            seen.extend(page.data.into_iter().map(|c| c.id));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, all, "every channel once, in id order");

        let a = t
            .api(
                "GET",
                "/api/v1/channels?type=webhook&active=true",
                &key,
                None,
            )
            .await;
        let got: Vec<String> = (a.typed::<Page<ChannelView>>(200).unwrap().data)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got.len(), 4);
        assert!(!got.contains(&webhooks[0]) && !got.contains(&echo.id));
        let a = t
            .api("GET", "/api/v1/channels?active=false", &key, None)
            .await;
        assert_eq!(a.typed::<Page<ChannelView>>(200).unwrap().data.len(), 1);

        // A cursor belongs to its list; bad filters are refused.
        let a = t.api("GET", "/api/v1/channels?limit=1", &key, None).await;
        let c = a
            .typed::<Page<ChannelView>>(200)
            .unwrap()
            .next_cursor
            .unwrap();
        let a = t
            .api(
                "GET",
                &format!("/api/v1/channels?type=echo&cursor={c}"),
                &key,
                None,
            )
            .await;
        assert_eq!((a.status, Some(a.code())), (422, Some("invalid_cursor")));
        for q in [
            "type=pigeon",
            "active=maybe",
            "limit=0",
            "limit=501",
            "colour=red",
        ] {
            let a = t
                .api("GET", &format!("/api/v1/channels?{q}"), &key, None)
                .await;
            assert_eq!(a.status, 422, "{q}: {:?}", a.body);
            assert_eq!(a.code(), "invalid_query", "{q}");
        }
    }

    #[tokio::test]
    async fn a_rotated_secret_signs_beside_the_new_one_until_its_grace_ends() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let path = format!("/api/v1/channels/{}", ch.id.clone());
        let first = ch.signing_secret.as_str().to_owned();

        // The secret can be read again, by its tenant only.
        let a = t.api("GET", &format!("{path}/secret"), &key, None).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let s: SecretsView = a.typed(200).unwrap();
        assert_eq!(s.signing_secret, first);
        assert!(s.retiring.is_empty(), "{s:?}");
        let a = t.api("GET", &format!("{path}/secret"), &other, None).await;
        assert_eq!(a.status, 404);

        // Rotated with the default grace: both secrets sign, each verifies the message.
        let a = t
            .api("POST", &format!("{path}/secret/rotate"), &key, None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let s: SecretsView = a.typed(200).unwrap();
        let second = s.signing_secret.clone();
        assert_ne!(second, first);
        assert_eq!(s.retiring[0].signing_secret, first, "{s:?}");
        let until = s.retiring[0].signs_until.as_str();
        let left =
            converger_core::time::rfc3339_to_ms(until).unwrap() - converger_core::time::now_ms();
        assert!(
            (86_000_000..=86_400_000).contains(&left),
            "24 h grace: {left}"
        );
        let r = send_one(&t, &key, &ch.id, &rx).await;
        let sig = r.headers["webhook-signature"].to_str().unwrap();
        assert_eq!(sig.split(' ').count(), 2, "{sig}");
        assert!(verifies(&first, &r), "the old secret still verifies");
        assert!(verifies(&second, &r), "the new secret verifies");
        let a = t.api("GET", &format!("{path}/secret"), &key, None).await;
        assert_eq!(a.typed::<SecretsView>(200).unwrap().signing_secret, second);

        // A secret the tenant brings, with no grace: only it signs from now on.
        let third = converger_core::secret::new_signing_secret();
        let a = t
            .api(
                "POST",
                &format!("{path}/secret/rotate"),
                &key,
                Some(json!({"signing_secret": third, "grace_seconds": 0})),
            )
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let s: SecretsView = a.typed(200).unwrap();
        assert_eq!(s.signing_secret, third);
        let retiring: Vec<&str> = s
            .retiring
            .iter()
            .map(|r| r.signing_secret.as_str())
            .collect();
        assert_eq!(retiring, [first.as_str()], "the second stopped at once");
        let r = send_one(&t, &key, &ch.id, &rx).await;
        assert!(verifies(&third, &r));
        assert!(verifies(&first, &r), "the first's grace has not ended");
        assert!(!verifies(&second, &r), "the second's grace was zero");

        // Refused: a malformed secret, a grace beyond 7 days, another tenant's channel.
        for body in [
            json!({"signing_secret": "whsec_c2hvcnQ="}),
            json!({"signing_secret": "plain"}),
            json!({"grace_seconds": 8 * 86_400}),
            json!({"grace_seconds": -1}),
            json!({"colour": 1}),
        ] {
            let a = t
                .api(
                    "POST",
                    &format!("{path}/secret/rotate"),
                    &key,
                    Some(body.clone()),
                )
                .await;
            assert_eq!(a.status, 422, "{body}: {:?}", a.body);
            assert_eq!(a.code(), "invalid_body", "{body}");
        }
        let a = t
            .api("POST", &format!("{path}/secret/rotate"), &other, None)
            .await;
        assert_eq!(a.status, 404);
        // Audited.
        let log = audit(&t, &key).await;
        let rotations = log
            .data
            .iter()
            .filter(|e| e.action == "rotate_signing_secret")
            .count();
        assert_eq!(rotations, 2, "{log:?}");
    }

    #[tokio::test]
    async fn a_deleted_channel_is_gone_and_its_pending_deliveries_are_dead_lettered() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let path = format!("/api/v1/channels/{}", ch.id.clone());
        // One delivery sent before, two parked by a pause.
        let sent = send_one(&t, &key, &ch.id, &rx).await;
        let sent_id = sent.headers["webhook-id"].to_str().unwrap().to_owned();
        let a = t.api("POST", &format!("{path}/pause"), &key, None).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let mut parked = Vec::new();
        for _ in 0..2 {
            let act = t.activity(&key, &[&ch.id]).await;
            parked.push(act.deliveries[0].id.as_str().to_owned());
        }

        assert_eq!(t.api("DELETE", &path, &other, None).await.status, 404);
        let a = t.api("DELETE", &path, &key, None).await;
        assert_eq!(a.status, 204, "{:?}", a.body);

        // Gone for the tenant: reads, writes, lists, new activities; deleting again is 404.
        for (method, p, body) in [
            ("GET", path.clone(), None),
            ("PATCH", path.clone(), Some(json!({"name": "again"}))),
            ("DELETE", path.clone(), None),
            ("GET", format!("{path}/secret"), None),
            ("POST", format!("{path}/secret/rotate"), None),
        ] {
            let a = t.api(method, &p, &key, body).await;
            assert_eq!(a.status, 404, "{method} {p}: {:?}", a.body);
        }
        let a = t.api("GET", "/api/v1/channels", &key, None).await;
        let page: Page<ChannelView> = a.typed(200).unwrap();
        assert!(page.data.is_empty(), "{page:?}");
        let a = t
            .api(
                "POST",
                "/api/v1/activities",
                &key,
                Some(
                    json!({"conversation_id": "c", "channel_ids": [ch.id.clone()], "payload": {}}),
                ),
            )
            .await;
        assert_eq!((a.status, Some(a.code())), (422, Some("unknown_channel")));

        // What it still had to deliver is dead-lettered, without a request; the history
        // stays readable.
        for d in &parked {
            let d = t
                .wait_delivery(&key, d, Duration::from_secs(30), |d| d.status == "failed")
                .await;
            assert_eq!(d.last_error.as_deref(), Some("channel deleted"), "{d:?}");
        }
        assert_eq!(rx.requests().len(), 1, "no request after the delete");
        let d = t.delivery(&key, &sent_id).await;
        assert_eq!(d.status, "sent");
        let a = t
            .api(
                "POST",
                &format!("/api/v1/deliveries/{}/retry", parked[0]),
                &key,
                None,
            )
            .await;
        assert_ne!(
            a.status, 200,
            "a deleted channel's dead letter is not replayed: {:?}",
            a.body
        );
        let log = audit(&t, &key).await;
        assert!(
            log.data.iter().any(|e| e.action == "delete_channel"),
            "{log:?}"
        );
    }

    #[tokio::test]
    async fn an_event_type_reaches_its_subscribers_only() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let hook = |name: &str, types: Value, body: &str, active: bool| {
            json!({"type": "webhook", "name": name, "event_types": types, "active": active,
                   "config": {"url": format!("{}/{name}", rx.url), "body": body}})
        };
        let paid = t
            .channel(&key, hook("paid", json!(["order.paid"]), "standard", true))
            .await;
        let all = t
            .channel(&key, hook("all", json!(["*"]), "envelope", true))
            .await;
        t.channel(
            &key,
            hook("created", json!(["message.created"]), "envelope", true),
        )
        .await;
        t.channel(&key, hook("off", json!(["*"]), "envelope", false))
            .await;
        t.channel(&key, hook("none", json!([]), "envelope", true))
            .await;
        t.channel(&other, hook("theirs", json!(["*"]), "envelope", true))
            .await;
        assert_eq!(paid.event_types, ["order.paid"]);

        let a = t
            .api(
                "POST",
                "/api/v1/activities",
                &key,
                Some(
                    json!({"conversation_id": "orders", "event_type": "order.paid",
                            "payload": {"order": 42}}),
                ),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let ingested: Ingested = a.typed(201).unwrap();
        let mut targets: Vec<String> = ingested
            .deliveries
            .iter()
            .map(|d| d.channel_id.clone())
            .collect();
        targets.sort();
        let mut want = vec![paid.id.clone(), all.id.clone()];
        want.sort();
        assert_eq!(targets, want);
        for d in &ingested.deliveries {
            let d = t
                .wait_delivery(&key, &d.id, Duration::from_secs(15), is_settled)
                .await;
            assert_eq!(d.status, "sent", "{d:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reqs = rx.requests();
        let mut paths: Vec<&str> = reqs.iter().map(|r| r.uri.path()).collect();
        paths.sort();
        assert_eq!(paths, ["/hook/all", "/hook/paid"], "the subscribers only");
        let standard = reqs
            .iter()
            .find(|r| r.uri.path().ends_with("/paid"))
            .unwrap();
        let body: Value = serde_json::from_slice(&standard.body).unwrap();
        assert_eq!(body["type"], "order.paid");
        assert_eq!(body["data"], json!({"order": 42}));
        assert!(
            converger_core::time::rfc3339_to_ms(body["timestamp"].as_str().unwrap()).is_some(),
            "{body}"
        );
        assert!(verifies(paid.signing_secret.as_str(), standard));

        // The activity reads back with its event type.
        let act = t
            .api(
                "GET",
                &format!("/api/v1/activities/{}", ingested.activity_id),
                &key,
                None,
            )
            .await;
        let act: ActivityView = act.typed(200).unwrap();
        assert_eq!(act.event_type.as_deref(), Some("order.paid"), "{act:?}");
        // Another type reaches `*` only; once that channel narrows its subscriptions, an
        // activity nobody subscribes to is stored and goes nowhere.
        let refunded = json!({"conversation_id": "orders", "event_type": "order.refunded",
                              "channel_ids": [], "payload": {}});
        let a = t
            .api("POST", "/api/v1/activities", &key, Some(refunded.clone()))
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let ingested: Ingested = a.typed(201).unwrap();
        assert_eq!(ingested.deliveries[0].channel_id, all.id, "{ingested:?}");
        assert_eq!(ingested.deliveries.len(), 1);
        let a = t
            .api(
                "PATCH",
                &format!("/api/v1/channels/{}", all.id.clone()),
                &key,
                Some(json!({"event_types": ["order.paid"]})),
            )
            .await;
        assert_eq!(
            a.typed::<ChannelView>(200).unwrap().event_types,
            ["order.paid"]
        );
        let a = t
            .api("POST", "/api/v1/activities", &key, Some(refunded))
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let ingested: Ingested = a.typed(201).unwrap();
        assert!(ingested.deliveries.is_empty(), "{ingested:?}");
    }

    #[tokio::test]
    async fn activities_read_back_by_id_and_by_conversation() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let mut ids = Vec::new();
        for i in 0..5 {
            let a = t
                .api(
                    "POST",
                    "/api/v1/activities",
                    &key,
                    Some(
                        json!({"conversation_id": "conv-read", "channel_ids": [ch.id.clone()],
                                "payload": {"n": i}}),
                    ),
                )
                .await;
            assert_eq!(a.status, 201, "{:?}", a.body);
            ids.push(a.typed::<Ingested>(201).unwrap().activity_id);
        }
        let a = t
            .api("GET", &format!("/api/v1/activities/{}", ids[2]), &key, None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let act: ActivityView = a.typed(200).unwrap();
        assert_eq!(act.payload, json!({"n": 2}));
        assert_eq!(act.conversation_id, "conv-read");
        assert_eq!(act.seq, 3);
        assert_eq!(act.channel_ids, std::slice::from_ref(&ch.id));
        let deliveries = act.deliveries.as_deref().unwrap_or_default();
        assert_eq!(deliveries[0].channel_id, ch.id, "{act:?}");
        assert!(!deliveries[0].status.is_empty(), "{act:?}");
        for (k, p) in [
            (&other, format!("/api/v1/activities/{}", ids[2])),
            (&key, "/api/v1/activities/act_nope".to_owned()),
        ] {
            let a = t.api("GET", &p, k, None).await;
            assert_eq!((a.status, Some(a.code())), (404, Some("not_found")));
        }

        let (mut seen, mut seqs, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
        loop {
            let mut p = "/api/v1/activities?conversation_id=conv-read&limit=2".to_owned();
            if let Some(c) = &cursor {
                p.push_str(&format!("&cursor={c}"));
            }
            let page: Page<ActivityView> = t.api("GET", &p, &key, None).await.typed(200).unwrap();
            for x in page.data {
                seen.push(x.id);
                seqs.push(x.seq);
            }
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ids);
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        let a = t
            .api(
                "GET",
                "/api/v1/activities?conversation_id=conv-read",
                &other,
                None,
            )
            .await;
        assert!(
            a.typed::<Page<ActivityView>>(200).unwrap().data.is_empty(),
            "another tenant's conversation of that name"
        );
        let a = t.api("GET", "/api/v1/activities", &key, None).await;
        assert_eq!((a.status, Some(a.code())), (422, Some("invalid_query")));
    }
}

/// A channel's settings are checked when written, each with its own error code, and a refused
/// write changes nothing; what was written reads back, the breaker and auto-disable with their
/// defaults filled in.
#[tokio::test]
async fn channel_settings_are_checked_on_write_and_read_back_typed() {
    let t = TestStack::start().await;
    let tenant = t.new_tenant("default").await;
    let hook = json!({"url": "http://127.0.0.1:9/hook"});
    let created = tenant
        .create_channel(json!({
            "type": "webhook", "name": "typed", "config": hook,
            "retry_policy": {"max_attempts": 7, "schedule": [5000, 30000], "jitter": 0.1},
            "circuit_breaker": {"failure_threshold": 3, "max_in_flight": null},
            "rate_limit": "80/s",
            "auto_disable": {"failed_attempts": 0},
        }))
        .await
        .unwrap()
        .channel;
    assert_eq!(
        Value::Object(created.retry_policy.clone()),
        json!({"max_attempts": 7, "schedule": [5000, 30000], "jitter": 0.1})
    );
    let b = breaker(&created);
    assert_eq!(b.failure_threshold, 3);
    assert_eq!(b.max_in_flight, Value::Null);
    assert_eq!(b.cooldown_ms, 30_000, "a default");
    assert_eq!(created.rate_limit.as_deref(), Some("80/s"));
    let ad = auto_disable(&created);
    assert_eq!(ad.failed_attempts, 0);
    assert_eq!(ad.success_window_ms, 86_400_000, "a default");
    assert_eq!(tenant.channel(&created.id).await.unwrap(), created);

    let bad = [
        (
            json!({"retry_policy": {"max_attempts": 0}}),
            "invalid_retry_policy",
        ),
        (
            json!({"retry_policy": {"colour": "red"}}),
            "invalid_retry_policy",
        ),
        (
            json!({"circuit_breaker": {"cooldown_ms": 10}}),
            "invalid_circuit_breaker",
        ),
        (
            json!({"circuit_breaker": {"max_in_flight": "lots"}}),
            "invalid_circuit_breaker",
        ),
        (json!({"rate_limit": "80 per second"}), "invalid_rate_limit"),
        (
            json!({"auto_disable": {"after": 3}}),
            "invalid_auto_disable",
        ),
    ];
    for (setting, code) in bad {
        let mut body = json!({"type": "webhook", "name": "bad", "config": hook});
        body.as_object_mut()
            .unwrap()
            .extend(setting.as_object().unwrap().clone());
        let e = tenant.create_channel(body).await.unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (422, code), "{setting}: {e:?}");
        let path = format!("/api/v1/channels/{}", created.id);
        let a = tenant.api("PATCH", &path, Some(setting.clone())).await;
        assert_eq!((a.status, a.code()), (422, code), "{setting}: {:?}", a.body);
        assert_eq!(
            tenant.channel(&created.id).await.unwrap(),
            created,
            "a refused patch changes nothing"
        );
    }
    let path = format!("/api/v1/channels/{}", created.id);
    let a = tenant
        .api(
            "PATCH",
            &path,
            Some(json!({"retry_policy": {}, "circuit_breaker": {}, "rate_limit": null, "auto_disable": {}})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let cleared = tenant.channel(&created.id).await.unwrap();
    assert!(cleared.retry_policy.is_empty());
    let b = breaker(&cleared);
    assert_eq!(b.failure_threshold, 5);
    assert_eq!(b.max_in_flight, "auto");
    assert_eq!(cleared.rate_limit, None);
    assert_eq!(auto_disable(&cleared).failed_attempts, 20);
}
