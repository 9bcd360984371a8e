//! Email channels: sent through SES v2 on the emulator (the SES message id stored, an
//! unverified sender refused for good), only as the tenant's own sender identities (refused
//! when the channel is written and again at send), SES's events through the `email-events` function's
//! handler (a bounce fails a sent delivery, a delivery delivers one, both forward only), and
//! every classified `SendEmail` error against a local fake of SES's REST answers, and the SES
//! tenant an operator names sent with each of its tenant's mails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use converger_core::email::{CHANNEL_TAG, DELIVERY_TAG, Email};
use converger_http::admin::PatchedTenant;
use converger_ports::Mailer;
use converger_tests::TestStack;
use converger_tests::views::{CreatedChannel, DeliveryView, TenantView};
use serde_json::{Value, json};

const FROM: &str = "alerts@converger-tests.example";
/// The identity an operator grants the tests' tenants: `FROM`'s domain.
const DOMAIN: &str = "converger-tests.example";

/// What SES publishes to EventBridge for one of its messages.
fn ses_event(
    kind: &str,
    d: &DeliveryView,
    extra: Value,
    age: chrono::Duration,
) -> EventBridgeEvent {
    let detail_type = match kind {
        "Bounce" => "Email Bounced",
        "Delivery" => "Email Delivered",
        "Complaint" => "Email Complaint Received",
        _ => "Email Sent",
    };
    let mut detail = json!({
        "eventType": kind,
        "mail": {
            "timestamp": "2026-12-01T09:00:02.000Z",
            "source": FROM,
            "messageId": d.provider_message_id,
            "destination": ["ops@example.com"],
            "tags": {
                "ses:configuration-set": ["converger-email"],
                CHANNEL_TAG: [d.channel_id],
                DELIVERY_TAG: [d.id],
            }
        }
    });
    for (k, v) in extra.as_object().unwrap() {
        detail[k] = v.clone();
    }
    serde_json::from_value(json!({
        "version": "0", "id": uuid::Uuid::new_v4().to_string(), "detail-type": detail_type,
        "source": "aws.ses", "account": "123456789012", "region": "us-east-1",
        "time": (chrono::Utc::now() - age).to_rfc3339(), "resources": [],
        "detail": detail,
    }))
    .unwrap()
}

fn bounce() -> Value {
    json!({"bounce": {"bounceType": "Permanent", "bounceSubType": "General",
        "bouncedRecipients": [{"emailAddress": "ops@example.com", "action": "failed",
                               "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}})
}

#[tokio::test]
async fn email_is_sent_through_ses_and_its_events_move_the_delivery_forward() {
    let t = TestStack::on_emulator().await;
    let (tenant, key) = tenant_with_identity(&t, FROM).await;
    let a = t
        .patch_tenant(
            &tenant,
            json!({"email_senders": [DOMAIN, "unverified.example"]}),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let ch = t
        .channel(
            &key,
            json!({"type": "email", "name": "ops mail",
                   "config": {"from": FROM, "to": "ops@example.com", "subject": "Alert"},
                   "retry_policy": {"base_ms": 100, "max_attempts": 3}}),
        )
        .await;
    let ch = ch.id.as_str().to_owned();

    // Sent: SES's message id is the provider message id.
    let sent = t
        .deliver_settled(
            &key,
            &ch,
            json!({"text": "disk full", "html": "<p>disk full</p>"}),
        )
        .await;
    assert_eq!(sent.status, "sent", "{sent:?}");
    let message_id = sent.provider_message_id.as_deref().unwrap().to_owned();
    assert!(!message_id.is_empty());

    // Nothing to send: permanent, no call.
    let d = t
        .deliver_settled(&key, &ch, json!({"subject": "empty"}))
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1));
    assert!(
        d.last_error.as_deref().unwrap().contains("no `text`"),
        "{d:?}"
    );

    // A bounce fails the sent delivery, with SES's reason.
    let fun = &t.stack.functions.email_events;
    let out = converger_lambda::handlers::email_event(
        fun,
        ses_event("Bounce", &sent, bounce(), chrono::Duration::zero()),
    )
    .await
    .unwrap();
    assert_eq!(out.applied, 1, "{out:?}");
    let d = t.delivery(&key, sent.id.as_str()).await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(
        d.last_error.as_deref(),
        Some("email bounce: Permanent/General: ops@example.com: smtp; 550 5.1.1 user unknown")
    );
    // It is a dead letter like any other: replayable.
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{}/retry", d.id.as_str()),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    // A delivery event delivers; a late duplicate changes nothing.
    let other = t
        .deliver_settled(&key, &ch, json!({"text": "second"}))
        .await;
    assert_eq!(other.status, "sent", "{other:?}");
    for applied in [1, 0] {
        let out = converger_lambda::handlers::email_event(
            fun,
            ses_event("Delivery", &other, json!({}), chrono::Duration::zero()),
        )
        .await
        .unwrap();
        assert_eq!(out.applied, applied, "{out:?}");
    }
    assert_eq!(
        t.delivery(&key, other.id.as_str()).await.status,
        "delivered"
    );
    // A complaint after delivery fails it (forward only: failed applies from any status but
    // read).
    let out = converger_lambda::handlers::email_event(
        fun,
        ses_event(
            "Complaint",
            &other,
            json!({"complaint": {"complaintFeedbackType": "abuse"}}),
            chrono::Duration::zero(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(out.applied, 1);
    let d = t.delivery(&key, other.id.as_str()).await;
    assert_eq!(
        (d.status.as_str(), d.last_error.as_deref()),
        ("failed", Some("email complaint: abuse"))
    );

    // An event for a message no delivery has yet is retried while it is young, then dropped.
    let mut unknown = other.clone();
    unknown.provider_message_id = Some("0100-not-sent-by-this-stack".into());
    let young = ses_event("Delivery", &unknown, json!({}), chrono::Duration::zero());
    assert!(
        converger_lambda::handlers::email_event(fun, young)
            .await
            .is_err()
    );
    let old = ses_event("Delivery", &unknown, json!({}), chrono::Duration::hours(1));
    let out = converger_lambda::handlers::email_event(fun, old)
        .await
        .unwrap();
    assert_eq!(out.unknown, ["0100-not-sent-by-this-stack"]);
    // Events of opens (or another stack's channels) change nothing.
    let open = ses_event("Open", &other, json!({}), chrono::Duration::zero());
    let out = converger_lambda::handlers::email_event(fun, open)
        .await
        .unwrap();
    assert_eq!(out.skipped, 1);

    // An unverified sender: SES's MessageRejected, permanent.
    let unverified = t
        .channel(
            &key,
            json!({"type": "email", "name": "unverified",
                   "config": {"from": "someone@unverified.example", "to": "ops@example.com"},
                   "retry_policy": {"base_ms": 100, "max_attempts": 3}}),
        )
        .await;
    let d = t
        .deliver_settled(&key, unverified.id.as_str(), json!({"text": "x"}))
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1));
    let why = d.last_error.as_deref().unwrap();
    assert!(why.contains("MessageRejected"), "{why}");
}

/// PATCHes a tenant's `field` with each of `bad` and asserts each is refused with 422 `code`.
async fn refused_patches(t: &TestStack, tenant: &str, field: &str, bad: &[Value], code: &str) {
    for value in bad {
        let a = t.patch_tenant(tenant, json!({ field: value })).await;
        assert_eq!(a.status, 422, "{field}={value}: {:?}", a.body);
        assert_eq!(a.code(), code, "{field}={value}");
    }
}

/// PATCHes a tenant with `body`, asserts it is applied and returns the tenant.
async fn patched(t: &TestStack, tenant: &str, body: Value) -> TenantView {
    let a = t.patch_tenant(tenant, body).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.typed::<PatchedTenant>(200).unwrap().tenant
}

/// A tenant as an operator reads it.
async fn operator_view(t: &TestStack, tenant: &str) -> TenantView {
    t.admin_get(&format!("/admin/api/tenants/{tenant}"))
        .await
        .typed(200)
        .unwrap()
}

/// Verifies `identity` in the account's SES and makes a tenant (not yet granted it).
async fn tenant_with_identity(t: &TestStack, identity: &str) -> (String, String) {
    aws_sdk_sesv2::Client::new(&t.aws().clients.config)
        .create_email_identity()
        .email_identity(identity)
        .send()
        .await
        .unwrap();
    t.tenant("default").await
}

/// Creates an email channel sending as `from` (asserting it is allowed); returns its id.
async fn email_channel_id(t: &TestStack, key: &str, from: &str) -> String {
    let ch = email_channel(t, key, from).await;
    assert_eq!(ch.status, 201, "{:?}", ch.body);
    ch.typed::<CreatedChannel>(201).unwrap().channel.id
}

/// POSTs an email channel sending as `from`.
async fn email_channel(t: &TestStack, key: &str, from: &str) -> converger_tests::Answer {
    t.api(
        "POST",
        "/api/v1/channels",
        key,
        Some(json!({"type": "email", "name": "m",
                    "config": {"from": from, "to": "ops@example.com"}})),
    )
    .await
}

#[tokio::test]
async fn a_tenant_sends_email_only_as_the_identities_an_operator_granted_it() {
    let t = TestStack::start().await;
    let (tenant, key) = t.tenant("default").await;
    let (other, other_key) = t.tenant("default").await;
    let refused = |a: &converger_tests::Answer| {
        assert_eq!(a.status, 403, "{:?}", a.body);
        assert_eq!(a.code(), "email_sender_not_allowed");
    };
    // None granted: no email channel at all.
    refused(&email_channel(&t, &key, FROM).await);

    // An operator's list is checked: addresses and domains only, at most 20.
    let bad = [
        json!(["not a domain"]),
        json!(["@x.example"]),
        json!((0..21).map(|i| format!("d{i}.example")).collect::<Vec<_>>()),
    ];
    refused_patches(&t, &tenant, "email_senders", &bad, "invalid_email_senders").await;
    let a = patched(
        &t,
        &tenant,
        json!({"email_senders": ["Converger-Tests.example", "news@platform.example"]}),
    )
    .await;
    assert_eq!(a.email_senders, [DOMAIN, "news@platform.example"], "{a:?}");

    // Its domain (any address of it) and its one address; not the address's neighbours, not
    // a subdomain, not a look-alike.
    let ok = email_channel(&t, &key, FROM).await;
    assert_eq!(ok.status, 201, "{:?}", ok.body);
    assert_eq!(
        email_channel(&t, &key, "news@platform.example")
            .await
            .status,
        201
    );
    for from in [
        "billing@platform.example",
        "x@mail.converger-tests.example",
        "x@converger-tests.example.evil.example",
    ] {
        refused(&email_channel(&t, &key, from).await);
    }
    // A change of `from` is checked too.
    let id = ok.typed::<CreatedChannel>(201).unwrap().channel.id;
    let a = t
        .api(
            "PATCH",
            &format!("/api/v1/channels/{id}"),
            &key,
            Some(json!({"config": {"from": "ceo@platform.example", "to": "ops@example.com"}})),
        )
        .await;
    refused(&a);

    // Another tenant cannot use them.
    refused(&email_channel(&t, &other_key, FROM).await);
    let a = operator_view(&t, &other).await;
    assert_eq!(a.email_senders, Vec::<String>::new(), "{a:?}");
}

#[tokio::test]
async fn an_identity_taken_away_stops_the_channels_mail_at_send() {
    let t = TestStack::on_emulator().await;
    // SES would send it: the identity is verified in the account.
    let (tenant, key) = tenant_with_identity(&t, DOMAIN).await;
    patched(&t, &tenant, json!({"email_senders": [DOMAIN]})).await;
    let ch = email_channel_id(&t, &key, FROM).await;
    let sent = t
        .deliver_settled(&key, &ch, json!({"text": "granted"}))
        .await;
    assert_eq!(sent.status, "sent", "{sent:?}");

    // The operator takes it back: the channel is unchanged, its next mail is refused for
    // good before SES is asked (no message id), with the reason.
    patched(&t, &tenant, json!({"email_senders": []})).await;
    let d = t
        .deliver_settled(&key, &ch, json!({"text": "revoked"}))
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
    assert!(d.provider_message_id.is_none(), "{d:?}");
    let why = d.last_error.as_deref().unwrap();
    assert!(
        why.contains("not one of the tenant's sender identities"),
        "{why}"
    );
}

#[tokio::test]
async fn email_configs_are_checked_when_written() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    for config in [
        json!({}),
        json!({"from": "not-an-address"}),
        json!({"from": FROM, "to": []}),
        json!({"from": FROM, "to": "a@b"}),
        json!({"from": FROM, "bcc": "x@example.com"}),
        json!({"from": FROM, "subject": "two\nlines"}),
    ] {
        let a = t
            .api(
                "POST",
                "/api/v1/channels",
                &key,
                Some(json!({"type": "email", "name": "m", "config": config})),
            )
            .await;
        assert_eq!(a.status, 422, "{config}: {:?}", a.body);
        assert_eq!(a.code(), "invalid_config");
    }
}

/// A local stand-in for SES's REST API that answers every `SendEmail` with one error, as SES
/// does: the status, `x-amzn-ErrorType` and a JSON body with the message.
async fn ses_fault(status: u16, code: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/v2/email/outbound-emails",
        axum::routing::post(move || async move {
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                [
                    ("x-amzn-ErrorType", code),
                    ("content-type", "application/json"),
                ],
                json!({"message": format!("{code} for the test")}).to_string(),
            )
                .into_response()
        }),
    );
    let (url, task) = serve(app).await;
    (url, task)
}

/// A one-recipient text email from `FROM`, with no tags and no SES tenant.
fn plain_email() -> Email {
    Email {
        from: FROM.into(),
        to: vec!["ops@example.com".into()],
        reply_to: vec![],
        subject: "s".into(),
        text: Some("t".into()),
        html: None,
        tags: vec![],
    }
}

/// Serves `app` on a free local port: its URL and the serving task.
async fn serve(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

#[tokio::test]
async fn ses_errors_are_classified() {
    let email = Email {
        tags: vec![(CHANNEL_TAG.into(), "ch_1".into())],
        ..plain_email()
    };
    for (status, code, retryable) in [
        (429, "TooManyRequestsException", true),
        (400, "LimitExceededException", true),
        (400, "SendingPausedException", true),
        (500, "InternalFailure", true),
        (503, "ServiceUnavailable", true),
        (400, "MessageRejected", false),
        (400, "MailFromDomainNotVerifiedException", false),
        (400, "AccountSuspendedException", false),
        (400, "BadRequestException", false),
        (404, "NotFoundException", false),
    ] {
        let (url, task) = ses_fault(status, code).await;
        let sdk = converger_store::aws::load_config_for(Some(&url)).await;
        // No SDK retries: one request, one classification.
        let sdk = sdk
            .into_builder()
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build();
        let mailer = converger_store::SesMailer::new(&sdk, &[], Some("converger-email".into()));
        let e = mailer.send(&email, None).await.unwrap_err();
        assert_eq!(e.retryable, retryable, "{code}: {e:?}");
        assert_eq!(e.status, Some(status), "{code}");
        assert!(e.reason.contains(code), "{code}: {}", e.reason);
        task.abort();
    }
}

/// An operator names the SES tenant a tenant's email is sent on behalf of: the name is
/// checked (SES's rule), shown, sent with every `SendEmail` of that tenant (allowed by the
/// template's grant on SES tenants, as the IAM check proves) and removed with `null`.
#[tokio::test]
async fn an_ses_tenant_is_named_on_every_send_of_its_tenant() {
    let t = TestStack::on_emulator().await;
    let (tenant, key) = tenant_with_identity(&t, DOMAIN).await;
    let bad = [json!("acme prod"), json!("acme.example"), json!("")];
    refused_patches(&t, &tenant, "ses_tenant", &bad, "invalid_ses_tenant").await;
    let a = patched(
        &t,
        &tenant,
        json!({"email_senders": [DOMAIN], "ses_tenant": "acme-prod"}),
    )
    .await;
    assert_eq!(a.ses_tenant.as_deref(), Some("acme-prod"), "{a:?}");
    let ch = email_channel_id(&t, &key, FROM).await;
    let sent = t
        .deliver_settled(&key, &ch, json!({"text": "on behalf"}))
        .await;
    assert_eq!(sent.status, "sent", "{sent:?}");

    let a = patched(&t, &tenant, json!({"ses_tenant": null})).await;
    assert_eq!(a.ses_tenant, None, "{a:?}");
    let a = operator_view(&t, &tenant).await;
    assert_eq!(a.ses_tenant, None, "{a:?}");
}

/// A local SES endpoint that answers every `SendEmail` and keeps the request bodies.
async fn ses_recorder() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    tokio::task::JoinHandle<()>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    let app = axum::Router::new().route(
        "/v2/email/outbound-emails",
        axum::routing::post(move |body: axum::body::Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock()
                    .unwrap()
                    .push(serde_json::from_slice::<Value>(&body).unwrap());
                axum::Json(json!({"MessageId": "recorded-1"}))
            }
        }),
    );
    let (url, task) = serve(app).await;
    (url, seen, task)
}

/// On the wire: `TenantName` is the email's SES tenant, and absent without one.
#[tokio::test]
async fn a_send_on_behalf_of_an_ses_tenant_names_it() {
    let (url, seen, task) = ses_recorder().await;
    let sdk = converger_store::aws::load_config_for(Some(&url)).await;
    let mailer = converger_store::SesMailer::new(&sdk, &[], Some("converger-email".into()));
    let email = plain_email();
    assert_eq!(
        mailer.send(&email, Some("acme-prod")).await.unwrap(),
        "recorded-1"
    );
    mailer.send(&email, None).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["TenantName"], "acme-prod", "{}", seen[0]);
    assert_eq!(seen[0]["ConfigurationSetName"], "converger-email");
    assert!(seen[1].get("TenantName").is_none(), "{}", seen[1]);
    task.abort();
}
