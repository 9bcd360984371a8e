//! Bad input is refused with the right 4xx and a JSON error; nothing reaches a client as a 500.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::schemas::ErrorBody;
use converger_http::views::{ChannelView, DeliveryView, Page};
use converger_tests::{Answer, TestStack};
use serde_json::json;

/// An error answer's body, which must be the error body every refusal has.
fn error_body(a: &Answer) -> ErrorBody {
    serde_json::from_value(a.body.clone())
        .unwrap_or_else(|e| panic!("not an error body ({e}): {:?}", a.body))
}

fn assert_error(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status, status, "{:?}", a.body);
    assert_eq!(a.code(), code, "{:?}", a.body);
    assert!(!error_body(a).error.message.is_empty(), "{:?}", a.body);
}

#[tokio::test]
async fn bad_input_gets_a_clear_error() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let (_, other_key) = t.tenant("default").await;
    let api = &t.stack.api_url;
    let mine = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let theirs = t
        .webhook(&other_key, "http://127.0.0.1:9/hook", json!({}))
        .await;

    // Authentication.
    let a = t
        .raw(
            "GET",
            format!("{api}/api/v1/channels/{}", mine.id.as_str()),
            None,
            None,
        )
        .await;
    assert_error(&a, 401, "unauthorized");
    let a = t
        .raw(
            "GET",
            format!("{api}/api/v1/channels/{}", mine.id.as_str()),
            Some("cvg_wrong"),
            None,
        )
        .await;
    assert_error(&a, 401, "unauthorized");

    // Names with control characters (NUL, a terminal escape) are refused, as in a PATCH.
    for name in ["a\u{0}b", "x\u{1b}[2J"] {
        let a = t
            .api(
                "POST",
                "/api/v1/channels",
                &key,
                Some(json!({"type": "webhook", "name": name, "config": {"url": "http://127.0.0.1:9/h"}})),
            )
            .await;
        assert_error(&a, 422, "invalid_name");
        let a = t
            .api(
                "PATCH",
                &format!("/api/v1/channels/{}", mine.id.as_str()),
                &key,
                Some(json!({"name": name})),
            )
            .await;
        assert_error(&a, 422, "invalid_name");
    }

    // Malformed JSON and wrong shapes.
    let a = t
        .raw(
            "POST",
            format!("{api}/api/v1/channels"),
            Some(&key),
            Some("{not json".into()),
        )
        .await;
    assert_error(&a, 400, "malformed_json");
    let a = t
        .raw(
            "POST",
            format!("{api}/api/v1/activities"),
            Some(&key),
            Some("[1,2".into()),
        )
        .await;
    assert_error(&a, 400, "malformed_json");
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c"})),
        )
        .await;
    assert_error(&a, 422, "invalid_body");
    let a = t
        .api(
            "POST",
            "/api/v1/channels",
            &key,
            Some(json!({"type": "carrier-pigeon", "name": "x"})),
        )
        .await;
    assert_error(&a, 422, "unsupported_channel_type");
    let a = t
        .api(
            "POST",
            "/api/v1/channels",
            &key,
            Some(json!({"type": "webhook", "name": "x", "config": {"url": "ftp://x"}})),
        )
        .await;
    assert_error(&a, 422, "invalid_config");

    // Unknown and foreign channels look the same.
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(
                json!({"conversation_id": "c", "channel_ids": ["ch_doesnotexist"], "payload": {}}),
            ),
        )
        .await;
    assert_error(&a, 422, "unknown_channel");
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c", "channel_ids": [theirs.id], "payload": {}})),
        )
        .await;
    assert_error(&a, 422, "unknown_channel");
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c", "channel_ids": ["not-an-id"], "payload": {}})),
        )
        .await;
    assert_error(&a, 422, "invalid_body");
    let a = t
        .api(
            "GET",
            &format!("/api/v1/channels/{}", theirs.id.as_str()),
            &key,
            None,
        )
        .await;
    assert_error(&a, 404, "not_found");
    let a = t.api("GET", "/api/v1/channels/ch_nope", &key, None).await;
    assert_error(&a, 404, "not_found");
    let a = t
        .api("GET", "/api/v1/deliveries/dlv_nope", &key, None)
        .await;
    assert_error(&a, 404, "not_found");
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{}", theirs.id.as_str()),
            &key,
            Some(json!({"active": false})),
        )
        .await;
    assert_error(&a, 404, "not_found");

    // Invalid retry policies, on create and on update; nothing is stored.
    let a = t.api("POST", "/api/v1/channels", &key, Some(json!({"type": "webhook", "name": "x", "config": {"url": "http://127.0.0.1:9/"}, "retry_policy": {"max_attempts": 0, "backoff": "random", "colour": 1}}))).await;
    assert_error(&a, 422, "invalid_retry_policy");
    let msg = error_body(&a).error.message;
    assert!(
        msg.contains("max_attempts") && msg.contains("backoff") && msg.contains("colour"),
        "{msg}"
    );
    let path = format!("/api/v1/channels/{}", mine.id.as_str());
    let a = t
        .api(
            "PATCH",
            &path,
            &key,
            Some(json!({"retry_policy": {"base_ms": -1}})),
        )
        .await;
    assert_error(&a, 422, "invalid_retry_policy");
    let a = t.api("GET", &path, &key, None).await;
    let unchanged: ChannelView = a.typed(200).unwrap();
    assert!(unchanged.retry_policy.is_empty(), "{unchanged:?}");

    // A valid update is applied and returned; the secret is never shown again.
    let a = t
        .api(
            "PATCH",
            &path,
            &key,
            Some(json!({"retry_policy": {"max_attempts": 3}, "name": "renamed"})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(a.body.get("signing_secret").is_none());
    let updated: ChannelView = a.typed(200).unwrap();
    assert_eq!(
        updated.retry_policy.get("max_attempts"),
        Some(&json!(3)),
        "{updated:?}"
    );
    assert_eq!(updated.name, "renamed");

    // An inactive channel is refused as a target.
    let a = t
        .api("PATCH", &path, &key, Some(json!({"active": false})))
        .await;
    assert_eq!(a.status, 200);
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c", "channel_ids": [mine.id], "payload": {}})),
        )
        .await;
    assert_error(&a, 422, "channel_inactive");

    // Unknown routes and methods.
    let a = t.api("GET", "/api/v1/nothing-here", &key, None).await;
    assert_error(&a, 404, "no_route");
    let a = t.api("DELETE", "/api/v1/activities", &key, None).await;
    assert_error(&a, 405, "method_not_allowed");

    // The admin API wants its token.
    let admin = &t.stack.admin_url;
    let a = t
        .raw(
            "POST",
            format!("{admin}/admin/api/tenants"),
            None,
            Some(json!({"name": "x"}).to_string()),
        )
        .await;
    assert_error(&a, 401, "unauthorized");
    let a = t
        .raw(
            "POST",
            format!("{admin}/admin/api/tenants"),
            Some("wrong-token"),
            Some(json!({"name": "x"}).to_string()),
        )
        .await;
    assert_error(&a, 401, "unauthorized");
    let a = t
        .raw(
            "POST",
            format!("{admin}/admin/api/tenants"),
            Some(&t.stack.admin_token),
            Some(json!({"name": "x", "tier": "gold"}).to_string()),
        )
        .await;
    assert_error(&a, 422, "invalid_tier");

    // A listing cursor pages through the list it was given for: the same tenant and filters.
    let listed = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let ch = listed.id.as_str();
    t.activities(&key, ch, 2, 2).await;
    // A delivery joins the listing when its first attempt ends (here: refused at once).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let all = t
            .api(
                "GET",
                &format!("/api/v1/deliveries?channel_id={ch}"),
                &key,
                None,
            )
            .await;
        if all
            .typed::<Page<DeliveryView>>(200)
            .is_ok_and(|p| p.data.len() == 2)
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", all.body);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let page = t
        .api(
            "GET",
            &format!("/api/v1/deliveries?channel_id={ch}&limit=1"),
            &key,
            None,
        )
        .await;
    assert_eq!(page.status, 200, "{:?}", page.body);
    let cursor = page
        .typed::<Page<DeliveryView>>(200)
        .unwrap()
        .next_cursor
        .unwrap();
    let next = format!("/api/v1/deliveries?channel_id={ch}&limit=1&cursor={cursor}");
    assert_eq!(t.api("GET", &next, &key, None).await.status, 200);
    assert_error(
        &t.api("GET", &next, &other_key, None).await,
        422,
        "invalid_cursor",
    );
    let other_query = format!("/api/v1/deliveries?channel_id={ch}&status=sent&cursor={cursor}");
    assert_error(
        &t.api("GET", &other_query, &key, None).await,
        422,
        "invalid_cursor",
    );
    let audit = format!("/api/v1/audit?cursor={cursor}");
    assert_error(
        &t.api("GET", &audit, &key, None).await,
        422,
        "invalid_cursor",
    );
}

/// The deliveries list filters by the activity's event type, shows it on each delivery, and
/// refuses a name that cannot be one.
#[tokio::test]
async fn deliveries_filter_by_event_type() {
    use std::time::Duration;
    let t = TestStack::start().await;
    let rx = converger_tests::Receiver::always(200).await.unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant.webhook(&rx.url, json!({})).await.channel;
    let mut by_type = std::collections::BTreeMap::<&str, Vec<String>>::new();
    for kind in ["order.paid", "order.created", "order.paid"] {
        let (_, a) = tenant
            .post_activity(json!({"conversation_id": "c", "channel_ids": [ch.id],
                                  "event_type": kind, "payload": {}}))
            .await
            .unwrap();
        let id = a.deliveries[0].id.clone();
        tenant
            .wait_delivery(
                &id,
                Duration::from_secs(15),
                converger_tests::client::is_settled,
            )
            .await;
        by_type.entry(kind).or_default().push(id);
    }
    // No event type: not in either list.
    tenant.activity(&[&ch.id]).await;
    for (kind, ids) in &by_type {
        let page = tenant
            .deliveries(&format!("status=sent&event_type={kind}&sort=oldest"))
            .await;
        let got: Vec<&str> = page.data.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(got, ids.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            page.data
                .iter()
                .all(|d| d.event_type.as_deref() == Some(*kind))
        );
    }
    let one = tenant.delivery(&by_type["order.paid"][0]).await;
    assert_eq!(one.event_type.as_deref(), Some("order.paid"));
    let bad = tenant
        .api("GET", "/api/v1/deliveries?event_type=no%20spaces", None)
        .await;
    assert_eq!(bad.status, 422, "{:?}", bad.body);
    assert_eq!(bad.code(), "invalid_query");
}

/// Every API answer, refusals included, tells browsers not to sniff its type.
#[tokio::test]
async fn every_api_answer_forbids_content_sniffing() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let api = &t.stack.api_url;
    let admin = &t.stack.admin_url;
    for (url, bearer, status) in [
        (format!("{api}/api/v1/channels"), Some(key.as_str()), 200),
        (format!("{api}/api/v1/channels"), None, 401),
        (
            format!("{api}/api/v1/nothing-here"),
            Some(key.as_str()),
            404,
        ),
        (format!("{api}/api/v1/openapi.json"), None, 200),
        (format!("{admin}/admin/api/health"), None, 200),
        (format!("{admin}/admin/api/tenants/ten_x"), None, 401),
    ] {
        let mut req = t.http.get(&url);
        if let Some(k) = bearer {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{url}");
        assert_eq!(
            resp.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{url}"
        );
    }
}
