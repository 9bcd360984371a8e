//! A webhook endpoint behind OAuth 2.0 client credentials: one token request serves several
//! deliveries, a token the receiver refuses is fetched again once, a refused token request
//! fails the attempt without reaching the receiver, and the client secret is never read back
//! (and is sealed at rest).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{Client, NewActivity, NewChannel};
use converger_local::receiver::Reply;
use converger_tests::{Receiver, TestStack, settled_delivery as settled};
use serde_json::{Value, json};

fn token(name: &str) -> Reply {
    Reply::status(200)
        .header("content-type", "application/json")
        .body(&format!(
            r#"{{"access_token": "{name}", "token_type": "Bearer", "expires_in": 3600}}"#
        ))
}

fn auth(token_url: &str, secret: &str) -> Value {
    json!({"type": "oauth2_client_credentials", "token_url": token_url,
           "client_id": "converger", "client_secret": secret, "scope": "hooks"})
}

async fn channel(api: &Client, url: &str, auth: Value, settings: Value) -> String {
    api.create_channel(&NewChannel {
        kind: "webhook".into(),
        name: "oauth".into(),
        config: json!({"url": url, "auth": auth})
            .as_object()
            .cloned()
            .unwrap(),
        settings: settings.as_object().cloned().unwrap(),
    })
    .await
    .unwrap()
    .channel
    .id
}

async fn post(api: &Client, ch: &str, payload: Value) -> String {
    api.post_activity(&NewActivity {
        conversation_id: "conv-oauth".into(),
        channel_ids: vec![ch.to_owned()],
        payload,
        ..Default::default()
    })
    .await
    .unwrap()
    .deliveries[0]
        .id
        .clone()
}

fn header(r: &converger_local::receiver::Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn basic(id: &str, secret: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    )
}

#[tokio::test]
async fn one_token_serves_many_deliveries_and_a_refused_one_is_fetched_again_once() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let idp = Receiver::start(vec![token("tok-1"), token("tok-2")], token("tok-3"))
        .await
        .unwrap();
    let rx = Receiver::always(200).await.unwrap();
    let ch = channel(&api, &rx.url, auth(&idp.url, "s3cret"), json!({})).await;

    // Several deliveries at once: one token request, every request with its token.
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(post(&api, &ch, json!({"n": n})).await);
    }
    for id in &ids {
        assert_eq!(settled(&api, id).await.status, "sent");
    }
    let token_requests = idp.requests();
    assert_eq!(token_requests.len(), 1, "one token for all six");
    let tr = &token_requests[0];
    assert_eq!(header(tr, "authorization"), basic("converger", "s3cret"));
    assert_eq!(
        header(tr, "content-type"),
        "application/x-www-form-urlencoded"
    );
    assert_eq!(
        String::from_utf8_lossy(&tr.body),
        "grant_type=client_credentials&scope=hooks"
    );
    assert!(
        rx.requests()
            .iter()
            .all(|r| header(r, "authorization") == "Bearer tok-1")
    );

    // The receiver refuses the token once: a new one is fetched and the request sent again,
    // within the same attempt.
    rx.answer_once_when("expire-me", Reply::status(401));
    let id = post(&api, &ch, json!({"text": "expire-me"})).await;
    let d = settled(&api, &id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
    let seen: Vec<String> = rx
        .requests()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("expire-me"))
        .map(|r| header(r, "authorization"))
        .collect();
    assert_eq!(seen, ["Bearer tok-1", "Bearer tok-2"]);
    assert_eq!(idp.requests().len(), 2);

    // A receiver that refuses the fresh token too: the attempt fails as a 401 after one
    // new token, not a loop.
    rx.set_fallback(Reply::status(401));
    let id = post(&api, &ch, json!({"text": "never"})).await;
    let d = settled(&api, &id).await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(idp.requests().len(), 3);
    rx.set_fallback(Reply::status(200));

    // The secret is never read back; the config sent back as read keeps it.
    let read = api.channel(&ch).await.unwrap();
    assert_eq!(read.config["auth"]["client_secret"], "[REDACTED]");
    assert_eq!(read.config["auth"]["client_id"], "converger");
    // At rest it is sealed under the deployment's channel key.
    let stored = t
        .stack
        .store
        .get_channel(&converger_core::ChannelId::parse(&ch).unwrap())
        .await
        .unwrap()
        .unwrap();
    let sealed = stored.config["auth"]["client_secret"].as_str().unwrap();
    assert!(
        sealed.starts_with(converger_core::mtls::SEALED) && !sealed.contains("s3cret"),
        "{sealed}"
    );
    let mut config = read.config.clone();
    config["auth"]["scope"] = json!("hooks events");
    api.patch_channel(&ch, &json!({ "config": config }))
        .await
        .unwrap();
    let id = post(&api, &ch, json!({"text": "new scope"})).await;
    assert_eq!(settled(&api, &id).await.status, "sent");
    let last = idp.requests().pop().unwrap();
    assert_eq!(
        header(&last, "authorization"),
        basic("converger", "s3cret"),
        "the stored secret, not the redacted mark"
    );
    assert_eq!(
        String::from_utf8_lossy(&last.body),
        "grant_type=client_credentials&scope=hooks+events"
    );
}

#[tokio::test]
async fn a_refused_token_request_fails_the_attempt_without_reaching_the_receiver() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let idp = Receiver::start(
        vec![],
        Reply::status(401)
            .header("content-type", "application/json")
            .body(r#"{"error": "invalid_client", "error_description": "secret s3cret is wrong"}"#),
    )
    .await
    .unwrap();
    let rx = Receiver::always(200).await.unwrap();
    let ch = channel(
        &api,
        &rx.url,
        auth(&idp.url, "s3cret"),
        json!({"retry_policy": {"max_attempts": 1}}),
    )
    .await;
    let id = post(&api, &ch, json!({"n": 1})).await;
    let d = settled(&api, &id).await;
    assert_eq!(d.status, "failed");
    let why = d.last_error.unwrap_or_default();
    assert!(
        why.contains("token endpoint refused the request: HTTP 401 (invalid_client)"),
        "{why}"
    );
    assert!(!why.contains("s3cret"), "{why}");
    assert!(rx.requests().is_empty());

    // Settings that do not fit are refused when written.
    let refused = api
        .create_channel(&NewChannel {
            kind: "webhook".into(),
            name: "bad".into(),
            config: json!({"url": rx.url, "auth": {"type": "oauth2_client_credentials"}})
                .as_object()
                .cloned()
                .unwrap(),
            settings: Default::default(),
        })
        .await;
    assert!(
        matches!(&refused, Err(converger_client::Error::Api { status: 422, code, .. }) if code == "invalid_config"),
        "{refused:?}"
    );
}

/// The token request is under the SSRF guard: a token endpoint at the metadata address is
/// refused before any request, for good (a dead letter at the first attempt, not a retry),
/// and the receiver is never reached.
#[tokio::test]
async fn a_token_endpoint_the_guard_refuses_dead_letters_at_once() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let rx = Receiver::always(200).await.unwrap();
    let ch = channel(
        &api,
        &rx.url,
        auth("http://169.254.169.254/latest/api/token", "s3cret"),
        json!({"retry_policy": {"max_attempts": 5}}),
    )
    .await;
    let id = post(&api, &ch, json!({"n": 1})).await;
    let d = settled(&api, &id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1));
    let why = d.last_error.unwrap_or_default();
    assert!(why.contains("169.254.169.254 is not allowed"), "{why}");
    assert!(rx.requests().is_empty());
}
