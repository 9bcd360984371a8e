//! Slack channels against a local fake that speaks Slack's wire format, on the emulator: the
//! Web API's `chat.postMessage` (the message's `ts` stored) and incoming webhooks, and every
//! error of the classification table's kinds answered once before an accepting answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::schemas::DeliveryStateDoc;
use converger_tests::TestStack;
use converger_tests::fakes::{self, ProviderFake, ProviderReply};
use converger_tests::views::{ChannelView, CreatedChannel};
use serde_json::{Value, json};

const TOKEN: &str = "xoxb-1234-5678-slack-test-token";
const HOOK_SECRET: &str = "hooksecret0123456789";

async fn slack_channel(t: &TestStack, key: &str, config: Value) -> String {
    let c = t
        .channel(
            key,
            json!({"type": "slack", "name": "slack", "config": config, "rate_limit": "50/s",
                   "retry_policy": {"base_ms": 100, "max_attempts": 3}}),
        )
        .await;
    c.id.as_str().to_owned()
}

/// A channel as the API reads it back.
async fn read_channel(t: &TestStack, key: &str, ch: &str) -> ChannelView {
    t.api("GET", &format!("/api/v1/channels/{ch}"), key, None)
        .await
        .typed(200)
        .unwrap()
}

/// Each reply answered once before an accepting answer: a retryable one ends `sent` on the
/// 2nd attempt, a permanent one `failed` after the 1st with Slack's code in `last_error`.
async fn classify(
    t: &TestStack,
    key: &str,
    fake: &ProviderFake,
    ch: &str,
    cases: &[(u16, &str, bool)],
) {
    for (status, code, retryable) in cases {
        fake.then(vec![ProviderReply::error(*status, code, "")]);
        let d = t
            .deliver_settled(key, ch, json!({"text": "status update"}))
            .await;
        if *retryable {
            assert_eq!(d.status, "sent", "{code} is retryable: {d:?}");
            assert_eq!(d.attempts, 2, "{code}: {d:?}");
        } else {
            assert_eq!(d.status, "failed", "{code} is permanent: {d:?}");
            assert_eq!(d.attempts, 1, "{code}: {d:?}");
            let why = d.last_error.as_deref().unwrap();
            assert!(why.contains(code), "{code}: {why}");
        }
    }
}

#[tokio::test]
async fn slack_web_api_posts_stores_the_ts_and_classifies_errors() {
    // In process: nothing here is an AWS path of its own (the stored ts is the conformance
    // suite's, on both backends).
    let t = TestStack::start().await;
    let fake = fakes::slack(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = slack_channel(
        &t,
        &key,
        json!({"token": TOKEN, "channel": "C0123456", "base_url": fake.url}),
    )
    .await;
    let c = read_channel(&t, &key, &ch).await;
    assert_eq!(c.config["token"], "[REDACTED]", "{c:?}");

    let d = t.deliver_settled(&key,
        &ch,
        json!({"text": "Deploy finished", "thread_ts": "1764547100.000100",
               "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy* finished"}}]}),
    )
    .await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(
        d.provider_message_id.as_deref(),
        Some(fake.ids()[0].as_str()),
        "the ts"
    );
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/api/chat.postMessage");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}"))
    );
    assert_eq!(seen[0].body["channel"], "C0123456");
    assert_eq!(seen[0].body["text"], "Deploy finished");
    assert_eq!(seen[0].body["thread_ts"], "1764547100.000100");
    assert_eq!(seen[0].body["blocks"][0]["type"], "section");

    // Nothing to send: permanent, no request made.
    let d = t
        .deliver_settled(&key, &ch, json!({"title": "no text"}))
        .await;
    assert_eq!(d.status, "failed");
    assert!(
        d.last_error.as_deref().unwrap().contains("no `text`"),
        "{d:?}"
    );
    assert_eq!(fake.seen().len(), 1);

    classify(
        &t,
        &key,
        &fake,
        &ch,
        &[
            (429, "ratelimited", true),
            (200, "ratelimited", true),
            (200, "internal_error", true),
            (503, "service_unavailable", true),
            (200, "invalid_auth", false),
            (200, "channel_not_found", false),
            (200, "not_in_channel", false),
            (200, "is_archived", false),
            (200, "msg_too_long", false),
            (200, "missing_scope", false),
            (200, "some_future_error", false),
        ],
    )
    .await;
}

#[tokio::test]
async fn slack_incoming_webhooks_post_and_classify_errors() {
    let t = TestStack::start().await;
    let fake = fakes::slack(HOOK_SECRET, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let hook = format!("{}/services/T0001/B0001/{HOOK_SECRET}", fake.url);
    let ch = slack_channel(&t, &key, json!({"webhook_url": hook})).await;
    let c = read_channel(&t, &key, &ch).await;
    assert_eq!(c.config["webhook_url"], "[REDACTED]", "{c:?}");

    let d = t
        .deliver_settled(&key, &ch, json!({"text": {"body": "Build green"}}))
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(d.provider_message_id, None);
    let seen = fake.seen();
    assert_eq!(seen[0].body, json!({"text": "Build green"}));
    assert_eq!(seen[0].authorization, None);

    classify(
        &t,
        &key,
        &fake,
        &ch,
        &[
            (429, "rate_limited", true),
            (500, "rollup_error", true),
            (404, "channel_not_found", false),
            (410, "channel_is_archived", false),
            (403, "action_prohibited", false),
            (400, "invalid_payload", false),
            (404, "no_service", false),
        ],
    )
    .await;
}

#[tokio::test]
async fn slack_configs_are_checked_when_written() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    for config in [
        json!({}),
        json!({"token": TOKEN}),
        json!({"token": "not-a-slack-token", "channel": "C1"}),
        json!({"token": TOKEN, "channel": "C1", "webhook_url": "https://hooks.example/x"}),
        json!({"webhook_url": "https://hooks.example/x", "channel": "C1"}),
        json!({"webhook_url": "ftp://hooks.example/x"}),
        json!({"token": TOKEN, "channel": "C1", "colour": "red"}),
    ] {
        let a = t
            .api(
                "POST",
                "/api/v1/channels",
                &key,
                Some(json!({"type": "slack", "name": "s", "config": config})),
            )
            .await;
        assert_eq!(a.status, 422, "{config}: {:?}", a.body);
        assert_eq!(a.code(), "invalid_config");
    }
    // An incoming webhook's URL is its secret: not in the error of a failed connection.
    let closed = slack_channel(
        &t,
        &key,
        json!({"webhook_url": format!("http://127.0.0.1:1/services/T0/B0/{HOOK_SECRET}")}),
    )
    .await;
    let d = t.deliver_settled(&key, &closed, json!({"text": "x"})).await;
    let why = d.last_error.as_deref().unwrap();
    assert!(why.starts_with("slack:"), "{why}");
    assert!(!why.contains(HOOK_SECRET), "{why}");
    // Slack's guidance, about one message a second per channel, is the default limit.
    let a = t
        .api(
            "POST",
            "/api/v1/channels",
            &key,
            Some(
                json!({"type": "slack", "name": "s", "config": {"token": TOKEN, "channel": "C1"}}),
            ),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let created: CreatedChannel = a.typed(201).unwrap();
    let state: DeliveryStateDoc = t
        .api(
            "GET",
            &format!("/api/v1/channels/{}/delivery", created.id),
            &key,
            None,
        )
        .await
        .typed(200)
        .unwrap();
    assert_eq!(state.rate_limit.as_deref(), Some("1/s"), "{state:?}");
}
