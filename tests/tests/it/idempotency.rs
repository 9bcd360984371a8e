//! `Idempotency-Key` on the tenant API's POSTs: concurrent duplicates do the work once and
//! get the same answer; a reused key with another body is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::schemas::ErrorBody;
use converger_http::views::{
    ActivityView, ChannelView, CreatedChannel, Ingested, Page, ReplayJobView,
};
use converger_tests::{TestStack, view};
use serde_json::{Value, json};

/// An answer's body as its view.
/// The error code of an error answer's body, if it is one.
fn code(body: &Value) -> Option<&'static str> {
    serde_json::from_value::<ErrorBody>(body.clone())
        .ok()
        .map(|e| e.error.code.as_str())
}

/// A POST with an `Idempotency-Key`: status, body and whether it was a replay.
async fn post(
    t: &TestStack,
    key: &str,
    path: &str,
    idem: &str,
    body: &Value,
) -> (u16, Value, bool) {
    let resp = t
        .http
        .post(format!("{}{path}", t.stack.api_url))
        .bearer_auth(key)
        .header("idempotency-key", idem)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        replayed,
    )
}

#[tokio::test]
async fn a_reused_key_is_refused_and_keys_are_per_tenant() {
    let t = TestStack::start().await;
    let (tenant, key) = t.tenant("default").await;
    let (_, other) = t.tenant("default").await;
    let body =
        json!({"type": "webhook", "name": "once", "config": {"url": "http://127.0.0.1:9/h"}});
    let (s1, first, r1) = post(&t, &key, "/api/v1/channels", "chan-1", &body).await;
    assert_eq!((s1, r1), (201, false), "{first}");
    let (s2, again, r2) = post(&t, &key, "/api/v1/channels", "chan-1", &body).await;
    assert_eq!((s2, r2), (201, true));
    assert_eq!(again, first, "the first answer, secret included");
    // As kept, the answer does not show the secret: it is sealed under the API key.
    let tenant_id = converger_core::TenantId::parse(&tenant).unwrap();
    let kept = t
        .stack
        .store
        .get_key(&tenant_id, "chan-1")
        .await
        .unwrap()
        .unwrap();
    let created: CreatedChannel = view(&first);
    let kept_body = kept.body.unwrap();
    assert!(!kept_body.contains(&created.signing_secret), "{kept_body}");
    assert!(!kept_body.contains(&created.id), "{kept_body}");
    let a = t.api("GET", "/api/v1/channels", &key, None).await;
    let page: Page<ChannelView> = a.typed(200).unwrap();
    assert_eq!(page.data.len(), 1, "one channel");

    // Another body, or another path, with the same key.
    let other_body =
        json!({"type": "webhook", "name": "twice", "config": {"url": "http://127.0.0.1:9/h"}});
    let (s, e, _) = post(&t, &key, "/api/v1/channels", "chan-1", &other_body).await;
    assert_eq!((s, code(&e)), (422, Some("idempotency_key_reused")), "{e}");
    let ch = created.id.as_str();
    let (s, e, _) = post(
        &t,
        &key,
        &format!("/api/v1/channels/{ch}/pause"),
        "chan-1",
        &json!({}),
    )
    .await;
    assert_eq!((s, code(&e)), (422, Some("idempotency_key_reused")), "{e}");
    // The same key for another tenant is that tenant's own.
    let (s, e, r) = post(&t, &other, "/api/v1/channels", "chan-1", &body).await;
    assert_eq!((s, r), (201, false), "{e}");
    assert_ne!(view::<CreatedChannel>(&e).id, created.id);

    // Refusals are kept too; malformed keys and unauthenticated requests are refused as such.
    let bad = json!({"type": "pigeon", "name": "x"});
    let (s, _, r) = post(&t, &key, "/api/v1/channels", "bad-1", &bad).await;
    assert_eq!((s, r), (422, false));
    let (s, _, r) = post(&t, &key, "/api/v1/channels", "bad-1", &bad).await;
    assert_eq!((s, r), (422, true));
    let (s, e, _) = post(&t, &key, "/api/v1/channels", "with space", &body).await;
    assert_eq!((s, code(&e)), (422, Some("invalid_idempotency_key")), "{e}");
    let (s, e, _) = post(&t, &key, "/api/v1/channels", &"k".repeat(256), &body).await;
    assert_eq!((s, code(&e)), (422, Some("invalid_idempotency_key")), "{e}");
    let (s, e, _) = post(&t, "cvg_wrong", "/api/v1/channels", "chan-1", &body).await;
    assert_eq!((s, code(&e)), (401, Some("unauthorized")), "{e}");
    // After the tenant's key is rotated, its answers sealed under the old key cannot be
    // replayed: the retry is told to use a new key, and nothing is done twice.
    let new_key = "cvg_rotated_key_for_the_idempotency_test";
    assert!(
        t.stack
            .store
            .rotate_api_key(&tenant_id, &converger_core::secret::hash_api_key(new_key))
            .await
            .unwrap()
    );
    let (s, e, r) = post(&t, new_key, "/api/v1/channels", "chan-1", &body).await;
    assert_eq!(
        (s, code(&e), r),
        (422, Some("idempotency_key_reused"), false),
        "{e}"
    );
    let a = t.api("GET", "/api/v1/channels", new_key, None).await;
    let page: Page<ChannelView> = a.typed(200).unwrap();
    assert_eq!(page.data.len(), 1, "still one channel");
}

mod emulator {
    use super::*;

    #[tokio::test]
    async fn twenty_concurrent_posts_with_one_key_create_one_activity() {
        let t = TestStack::on_emulator().await;
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, "http://127.0.0.1:9/h", json!({})).await;
        let body = json!({"conversation_id": "idem", "channel_ids": [ch.id],
                          "payload": {"text": "once"}});
        let answers = futures::future::join_all(
            (0..20).map(|_| post(&t, &key, "/api/v1/activities", "act-key-1", &body)),
        )
        .await;
        let first = &answers[0].1;
        for (status, b, _) in &answers {
            assert_eq!(*status, 201, "{b}");
            assert_eq!(b, first, "every duplicate gets the first answer");
        }
        let replays = answers.iter().filter(|(_, _, r)| *r).count();
        assert_eq!(replays, 19, "one did the work");
        let first: Ingested = view(first);
        let a = t
            .api("GET", "/api/v1/activities?conversation_id=idem", &key, None)
            .await;
        let page: Page<ActivityView> = a.typed(200).unwrap();
        assert_eq!(page.data.len(), 1, "{page:?}");
        assert_eq!(page.data[0].id, first.activity_id);
        // Named after the key: a retry after a server error that came once the rows were
        // written (the key freed) finds the activity instead of making a second one.
        let tenant = converger_core::TenantId::parse(&tenant).unwrap();
        assert_eq!(
            first.activity_id,
            converger_core::ActivityId::for_idempotency_key(&tenant, "act-key-1").as_str()
        );

        // A replay job started twice with one key is one job.
        let path = format!("/api/v1/channels/{}/deliveries/replays", ch.id.as_str());
        let (s1, j1, _) = post(&t, &key, &path, "job-1", &json!({})).await;
        let (s2, j2, r2) = post(&t, &key, &path, "job-1", &json!({})).await;
        assert_eq!((s1, s2, r2), (202, 202, true), "{j1} {j2}");
        assert_eq!(view::<ReplayJobView>(&j1).id, view::<ReplayJobView>(&j2).id);
    }
}
