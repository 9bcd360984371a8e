//! RabbitMQ channels against a real broker (the machine's `rabbitmq-server`, a private node
//! per test): each delivery is one persistent message on the exchange with the routing key,
//! signed, confirmed before it counts as sent, over plain AMQP and over TLS to a private CA;
//! what the broker refuses for good (a missing exchange, a missing virtual host, a
//! certificate of an unknown CA) dead-letters at the first attempt; a key no queue is bound
//! to (yet, after a restart) and a wrong password (a closed socket, as a broker going away)
//! after their retries; a broker that is down is retried until it is back, and the message
//! then arrives once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_local::rabbitmq::{Broker, USER};
use converger_tests::client::{Tenant, is_settled};
use converger_tests::{TestStack, verifies};
use serde_json::{Value, json};
use std::time::Duration;

async fn channel(t: &Tenant<'_>, name: &str, config: Value, policy: Value) -> (String, String) {
    let c = t
        .create_channel(json!({"type": "rabbitmq", "name": name, "config": config,
                               "retry_policy": policy}))
        .await
        .unwrap();
    (c.channel.id, c.signing_secret)
}

#[tokio::test]
async fn each_delivery_is_one_confirmed_message_and_refusals_dead_letter_at_once() {
    let broker = Broker::start(true).await.unwrap();
    broker.bind("events", "orders", "orders.#").await.unwrap();
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let login = |url: &str| json!({"url": url, "username": USER, "password": broker.password});
    let policy = json!({"max_attempts": 3, "backoff": "fixed", "base_ms": 200});

    let mut plain = login(&broker.url());
    plain["exchange"] = json!("events");
    plain["routing_key"] = json!("orders.created");
    let (plain_ch, secret) = channel(&a, "plain", plain.clone(), policy.clone()).await;
    let (tls_url, ca) = broker.tls_url().unwrap();
    let mut tls = login(&tls_url);
    tls["exchange"] = json!("events");
    tls["routing_key"] = json!("orders.tls");
    tls["ca_certificate"] = json!(ca);
    tls["body"] = json!("payload");
    let (tls_ch, _) = channel(&a, "tls", tls, policy.clone()).await;
    // The default exchange: the routing key is the queue.
    let mut direct = login(&broker.url());
    direct["exchange"] = json!("");
    direct["routing_key"] = json!("orders");
    let (direct_ch, _) = channel(&a, "direct", direct, policy.clone()).await;

    let mut missing = plain.clone();
    missing["exchange"] = json!("no-such-exchange");
    let (missing_ch, _) = channel(&a, "missing", missing, policy.clone()).await;
    let mut unroutable = plain.clone();
    unroutable["routing_key"] = json!("invoices.created");
    let (unroutable_ch, _) = channel(&a, "unroutable", unroutable, policy.clone()).await;
    let mut refused = plain.clone();
    refused["password"] = json!("wrong");
    let (refused_ch, _) = channel(&a, "refused", refused, policy.clone()).await;
    let mut no_vhost = plain.clone();
    no_vhost["url"] = json!(format!("{}/nope", broker.url()));
    let (no_vhost_ch, _) = channel(&a, "no-vhost", no_vhost, policy.clone()).await;
    // TLS to a broker whose CA the channel does not trust.
    let mut untrusted = login(&tls_url);
    untrusted["exchange"] = json!("events");
    untrusted["routing_key"] = json!("orders.x");
    let (untrusted_ch, _) = channel(&a, "untrusted", untrusted, policy.clone()).await;

    // The password is never read back; settings that do not fit are refused when written.
    let read = a.channel(&plain_ch).await.unwrap();
    assert_eq!(read.config["password"], "[REDACTED]", "{read:?}");
    assert_eq!(read.config["username"], USER);
    assert_eq!(read.config["routing_key"], "orders.created");
    let bad = a
        .create_channel(json!({"type": "rabbitmq", "name": "bad",
            "config": {"url": "amqps://user:pw@mq.example.com", "exchange": "e",
                       "routing_key": "k", "username": "u", "password": "p"}}))
        .await
        .unwrap_err();
    assert_eq!(bad.code, "invalid_config");
    assert!(
        bad.message.contains("must not carry credentials"),
        "{}",
        bad.message
    );

    let channels = [
        &plain_ch,
        &tls_ch,
        &direct_ch,
        &missing_ch,
        &unroutable_ch,
        &refused_ch,
        &no_vhost_ch,
        &untrusted_ch,
    ];
    let (_, ingested) = a
        .post_activity(json!({
            "conversation_id": "conv-mq",
            "event_type": "order.created",
            "channel_ids": channels,
            "payload": {"order": 7},
        }))
        .await
        .unwrap();
    let mut sent = std::collections::HashMap::new();
    for d in &ingested.deliveries {
        let d = a
            .wait_delivery(&d.id, Duration::from_secs(60), is_settled)
            .await;
        let error = d.last_error.clone().unwrap_or_default();
        let want = if d.channel_id == missing_ch {
            Some("404 NOT_FOUND")
        } else if d.channel_id == unroutable_ch {
            Some("312 NO_ROUTE")
        } else if d.channel_id == refused_ch {
            Some("403 ACCESS_REFUSED")
        } else if d.channel_id == no_vhost_ch {
            Some("530 NOT_ALLOWED")
        } else if d.channel_id == untrusted_ch {
            Some("TLS certificate was refused")
        } else {
            None
        };
        match want {
            // A refused login looks like a dropped connection: retried, then dead-lettered.
            // So does a key no queue is bound to (yet, after a broker's restart).
            Some(w) if d.channel_id == refused_ch || d.channel_id == unroutable_ch => {
                assert_eq!((d.status.as_str(), d.attempts), ("failed", 3), "{d:?}");
                assert!(error.contains(w), "{w}: {error}");
            }
            Some(w) => {
                assert_eq!((d.status.as_str(), d.attempts), ("failed", 1), "{d:?}");
                assert!(error.contains(w), "{w}: {error}");
            }
            None => {
                assert_eq!((d.status.as_str(), d.attempts), ("sent", 1), "{d:?}");
                sent.insert(d.channel_id.clone(), d.id.clone());
            }
        }
    }

    // One message per sent delivery, no more: the envelope (signed, its id the delivery's)
    // and the payload alone.
    let got = broker.take("orders").await.unwrap();
    assert_eq!(got.len(), 3, "{got:?}");
    let by = |ch: &str| {
        got.iter()
            .find(|m| m.message_id.as_deref() == Some(sent[ch].as_str()))
            .unwrap_or_else(|| panic!("no message for {ch}: {got:?}"))
    };
    let m = by(&plain_ch);
    let body: Value = serde_json::from_slice(&m.body).unwrap();
    assert_eq!(body["payload"], json!({"order": 7}));
    assert_eq!(body["conversation_id"], "conv-mq");
    assert_eq!(m.delivery_mode, Some(2), "persistent");
    assert_eq!(m.content_type.as_deref(), Some("application/json"));
    assert_eq!(m.message_type.as_deref(), Some("order.created"));
    assert_eq!(m.headers["webhook-id"], sent[&plain_ch]);
    assert_eq!(m.headers["event-type"], "order.created");
    assert!(verifies(
        &secret,
        &m.headers["webhook-id"],
        &m.headers["webhook-timestamp"],
        std::str::from_utf8(&m.body).unwrap(),
        &m.headers["webhook-signature"],
    ));
    let body: Value = serde_json::from_slice(&by(&tls_ch).body).unwrap();
    assert_eq!(body, json!({"order": 7}), "the payload alone, over TLS");
    by(&direct_ch);
}

#[tokio::test]
async fn a_broker_that_is_down_is_retried_and_the_message_arrives_once_it_is_back() {
    let mut broker = Broker::start(false).await.unwrap();
    broker.bind("events", "orders", "orders.#").await.unwrap();
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let (ch, _) = channel(
        &a,
        "down",
        json!({"url": broker.url(), "username": USER, "password": broker.password,
               "exchange": "events", "routing_key": "orders.created"}),
        json!({"max_attempts": 30, "backoff": "fixed", "base_ms": 500}),
    )
    .await;
    // A first message, so that the adapter holds a connection the broker's stop breaks.
    let first = a.activity(&[&ch]).await.deliveries[0].id.clone();
    let d = a
        .wait_delivery(&first, Duration::from_secs(60), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");

    broker.stop().await;
    let second = a.activity(&[&ch]).await.deliveries[0].id.clone();
    let d = a
        .wait_delivery(&second, Duration::from_secs(60), |d| d.attempts >= 2)
        .await;
    assert_eq!(
        d.status, "pending",
        "retried while the broker is down: {d:?}"
    );
    let error = d.last_error.clone().unwrap_or_default();
    assert!(error.starts_with("rabbitmq:"), "{error}");

    broker.start_again().await.unwrap();
    // A killed node keeps what it had written to disk: a declaration it had not may be gone
    // (its queue then takes nothing: `NO_ROUTE`, retried). The topology's owner declares it
    // again, as a service does when its broker comes back; the retries then get through.
    broker.bind("events", "orders", "orders.#").await.unwrap();
    let d = a
        .wait_delivery(&second, Duration::from_secs(90), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let got = broker.take("orders").await.unwrap();
    let ids: Vec<_> = got.iter().filter_map(|m| m.message_id.clone()).collect();
    assert_eq!(ids.iter().filter(|i| **i == second).count(), 1, "{ids:?}");
}
