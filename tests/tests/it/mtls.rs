//! A webhook endpoint that asks for a client certificate (`auth` of type mtls), on both
//! backends (on the emulator the channel key comes from the stack's Secrets Manager secret,
//! read as each function reads it): the channel's certificate is presented and the receiver's
//! private CA trusted; a certificate of another CA is refused by the receiver; the private
//! key is sealed in the store, never read back, kept when the config is written back as
//! read, and not taken into another channel; a key that is not the certificate's, or a
//! plain-HTTP URL, is refused when written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_local::pki::Ca;
use converger_local::receiver::{Receiver, Reply};
use converger_tests::TestStack;
use converger_tests::client::is_settled;
use serde_json::{Value, json};
use std::time::Duration;

fn auth(cert: &converger_local::pki::Pair, key: &str, server_ca: &Ca) -> Value {
    json!({"type": "mtls", "certificate": cert.cert, "private_key": key,
           "ca_certificate": server_ca.pem()})
}

async fn client_certificates(t: TestStack) {
    let server_ca = Ca::new("receiver CA").unwrap();
    let client_ca = Ca::new("tenant CA").unwrap();
    let other_ca = Ca::new("another CA").unwrap();
    let rx = Receiver::start_mtls(vec![], Reply::status(200), &server_ca, &client_ca)
        .await
        .unwrap();
    let ours = client_ca.client("acme-converger").unwrap();
    let stranger = other_ca.client("stranger").unwrap();
    let a = t.new_tenant("default").await;
    let once = json!({"max_attempts": 1});
    let create = |name: &str, auth: Value| {
        a.create_channel(
            json!({"type": "webhook", "name": name, "retry_policy": once,
                                "config": {"url": rx.url, "auth": auth}}),
        )
    };
    let good = create("mtls", auth(&ours, &ours.key, &server_ca))
        .await
        .unwrap()
        .channel
        .id;
    let refused = create("stranger", auth(&stranger, &stranger.key, &server_ca))
        .await
        .unwrap()
        .channel
        .id;

    // A key that is not the certificate's, and a URL without TLS, are refused when written.
    let e = create("mismatch", auth(&ours, &stranger.key, &server_ca))
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid_config", "{e:?}");
    let e = a
        .create_channel(json!({"type": "webhook", "name": "plain",
            "config": {"url": rx.url.replace("https://", "http://"),
                       "auth": auth(&ours, &ours.key, &server_ca)}}))
        .await
        .unwrap_err();
    assert!(e.message.contains("needs an https url"), "{e:?}");

    // Never read back; sealed in the store.
    let read = a.channel(&good).await.unwrap();
    let shown = &read.config["auth"];
    assert_eq!(shown["private_key"], "[REDACTED]", "{read:?}");
    assert_eq!(shown["certificate"], ours.cert.as_str());
    let stored = t
        .stack
        .store
        .get_channel(&converger_core::ChannelId::parse(&good).unwrap())
        .await
        .unwrap()
        .unwrap();
    let sealed = stored.config["auth"]["private_key"].as_str().unwrap();
    assert!(
        sealed.starts_with(converger_core::mtls::SEALED) && !sealed.contains("PRIVATE KEY"),
        "{sealed}"
    );

    // A sealed key copied into another channel is refused: only `[REDACTED]` keeps one.
    let e = create("copied", auth(&ours, sealed, &server_ca))
        .await
        .unwrap_err();
    assert!(
        e.message
            .contains("`auth.private_key` must be the secret itself"),
        "{e:?}"
    );

    let (_, ingested) = a
        .post_activity(
            json!({"conversation_id": "conv-mtls", "channel_ids": [good, refused],
                              "payload": {"n": 1}}),
        )
        .await
        .unwrap();
    for d in &ingested.deliveries {
        let d = a
            .wait_delivery(&d.id, Duration::from_secs(60), is_settled)
            .await;
        if d.channel_id == good {
            assert_eq!(d.status, "sent", "{d:?}");
        } else {
            assert_eq!(
                d.status, "failed",
                "the receiver refuses another CA's: {d:?}"
            );
        }
    }
    assert_eq!(
        rx.count(),
        1,
        "only the trusted certificate's request arrived"
    );

    // The config written back as read keeps the sealed key.
    let mut config = read.config.clone();
    config.insert("headers".into(), json!({"x-tenant": "acme"}));
    let patched = a
        .api(
            "PATCH",
            &format!("/api/v1/channels/{good}"),
            Some(json!({"config": config})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let d = a.activity(&[&good]).await.deliveries[0].id.clone();
    let d = a
        .wait_delivery(&d, Duration::from_secs(60), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let last = rx.requests().pop().unwrap();
    assert_eq!(last.headers["x-tenant"], "acme");
}

#[tokio::test]
async fn a_client_certificate_is_presented_sealed_and_never_read_back() {
    client_certificates(TestStack::start().await).await;
}

#[tokio::test]
async fn a_client_certificate_on_the_emulator_is_sealed_under_the_stacks_secret() {
    client_certificates(TestStack::on_emulator().await).await;
}
