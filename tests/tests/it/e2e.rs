//! End to end: the tenant API, the queues, the deliver function and a real HTTP receiver, on
//! the emulator. Each test has its own stack (resource prefix) and tenant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_tests::{Receiver, Reply, TestStack, settled};
use serde_json::{Value, json};
use std::time::Duration;

fn first_delivery(act: &Value) -> String {
    act["deliveries"][0]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_permanent_error_dead_letters_after_one_attempt() {
    let t = TestStack::start().await;
    let rx = Receiver::start(vec![], Reply::status(400).body("invalid recipient"))
        .await
        .unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let id = first_delivery(&t.activity(&key, &[ch["id"].as_str().unwrap()]).await);

    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), settled)
        .await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["attempts"], 1);
    let err = d["last_error"].as_str().unwrap();
    assert!(
        err.contains("400") && err.contains("invalid recipient"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.requests().len(), 1);
    t.stop().await;
}

#[tokio::test]
async fn exhausted_retries_dead_letter_at_max_attempts() {
    let t = TestStack::start().await;
    let rx = Receiver::always(500).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .webhook(
            &key,
            &rx.url,
            json!({"max_attempts": 5, "backoff": "fixed", "base_ms": 1000}),
        )
        .await;
    let id = first_delivery(&t.activity(&key, &[ch["id"].as_str().unwrap()]).await);

    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(40), settled)
        .await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["attempts"], 5);
    assert!(d["last_error"].as_str().unwrap().contains("500"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.requests().len(), 5, "no attempt after the dead letter");
    t.stop().await;
}

#[tokio::test]
async fn retry_after_overrides_the_policy_backoff() {
    let t = TestStack::start().await;
    let rx = Receiver::start(
        vec![Reply::status(429).header("retry-after", "2")],
        Reply::status(200),
    )
    .await
    .unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .webhook(&key, &rx.url, json!({"backoff": "fixed", "base_ms": 1000}))
        .await;
    let id = first_delivery(&t.activity(&key, &[ch["id"].as_str().unwrap()]).await);

    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(20), settled)
        .await;
    assert_eq!(d["status"], "sent", "{d}");
    assert_eq!(d["attempts"], 2, "Retry-After still counts as an attempt");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at.duration_since(reqs[0].at);
    assert!(
        gap >= Duration::from_millis(1950),
        "next attempt came after {gap:?}, before Retry-After"
    );
    t.stop().await;
}

#[tokio::test]
async fn private_destinations_are_refused() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    // The local stack allows loopback only; the metadata endpoint stays closed.
    let ch = t
        .webhook(&key, "http://169.254.169.254/latest/meta-data", json!({}))
        .await;
    let id = first_delivery(&t.activity(&key, &[ch["id"].as_str().unwrap()]).await);
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), settled)
        .await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["attempts"], 1);
    assert!(
        d["last_error"].as_str().unwrap().contains("not allowed"),
        "{d}"
    );
    t.stop().await;
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
mod emulator {
    use super::*;

    /// The deepest payload the store keeps (32 levels) is stored and delivered whole; one
    /// level more, or a number DynamoDB cannot hold, is refused with 422, never a 503 that a
    /// producer would retry for ever.
    #[tokio::test]
    async fn payloads_the_store_cannot_keep_are_refused_and_the_deepest_it_can_is_delivered() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let ch = ch["id"].as_str().unwrap();
        let nested = |depth: usize| {
            let mut v = json!("leaf");
            for i in 0..depth {
                v = if i % 2 == 0 {
                    json!({ "k": v })
                } else {
                    json!([v])
                };
            }
            v
        };
        let post = |payload: Value| {
            let t = &t;
            let key = &key;
            async move {
                t.api(
                    "POST",
                    "/api/v1/activities",
                    key,
                    Some(json!({"conversation_id": "c", "channel_ids": [ch], "payload": payload})),
                )
                .await
            }
        };
        let deepest = nested(converger_core::payload::MAX_DEPTH);
        let a = post(deepest.clone()).await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let id = a.body["deliveries"][0]["id"].as_str().unwrap().to_owned();
        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(15), settled)
            .await;
        assert_eq!(d["status"], "sent", "{d}");
        let got: Value = serde_json::from_slice(&rx.requests()[0].body).unwrap();
        assert_eq!(got["payload"], deepest);

        for (payload, what) in [
            (nested(converger_core::payload::MAX_DEPTH + 1), "too deep"),
            (json!({"n": 1e200}), "too large"),
            (json!({"n": [1e-200]}), "too small"),
        ] {
            let a = post(payload).await;
            assert_eq!(a.status, 422, "{what}: {:?}", a.body);
            assert_eq!(a.body["error"]["code"], "invalid_payload", "{what}");
        }
        assert_eq!(rx.requests().len(), 1, "nothing refused was delivered");
        t.stop().await;
    }

    #[tokio::test]
    async fn delivers_a_signed_webhook_once() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let secret = ch["signing_secret"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("whsec_"));
        let act = t.activity(&key, &[ch["id"].as_str().unwrap()]).await;
        let id = first_delivery(&act);

        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(15), settled)
            .await;
        assert_eq!(d["status"], "sent", "{d}");
        assert_eq!(d["attempts"], 1);
        assert!(d["sent_at"].is_string());
        assert_eq!(d["response_status"], 200);
        assert_eq!(d["attempt_log"].as_array().unwrap().len(), 1);

        // Exactly one request, and its signature verifies under Standard Webhooks.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let reqs = rx.requests();
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.headers["webhook-id"], id.as_str());
        let wh = standardwebhooks::Webhook::new(&secret).unwrap();
        let mut headers = http::HeaderMap::new();
        for h in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            headers.insert(h, r.headers[h].to_str().unwrap().parse().unwrap());
        }
        wh.verify(&r.body, &headers).expect("signature verifies");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["activity_id"], act["activity_id"]);
        assert_eq!(body["conversation_id"], "conv-1");
        assert_eq!(body["seq"], act["seq"]);
        assert_eq!(body["payload"]["text"], "hi");
        t.stop().await;
    }

    #[tokio::test]
    async fn transient_failures_retry_with_the_channel_policy() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::start(
            vec![Reply::status(503), Reply::status(503), Reply::status(503)],
            Reply::status(200),
        )
        .await
        .unwrap();
        let (_, key) = t.tenant("default").await;
        let ch = t
            .webhook(&key, &rx.url, json!({"backoff": "fixed", "base_ms": 1000}))
            .await;
        let act = t.activity(&key, &[ch["id"].as_str().unwrap()]).await;
        let id = first_delivery(&act);

        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(30), settled)
            .await;
        assert_eq!(d["status"], "sent", "{d}");
        assert_eq!(d["attempts"], 4);
        let reqs = rx.requests();
        assert_eq!(reqs.len(), 4);
        for pair in reqs.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            // Never before its backoff; "not too late" is the wait's 30 s bound above (a
            // retry left to the queue's visibility timeout would not make it).
            assert!(
                gap >= Duration::from_millis(950),
                "retried too early: {gap:?}"
            );
        }
        let log = d["attempt_log"].as_array().unwrap();
        assert_eq!(log.len(), 4);
        assert_eq!(log[0]["status_code"], 200, "newest first");
        assert_eq!(log[3]["status_code"], 503);
        assert_eq!(log[3]["attempt"], 1);
        assert!(log[3]["next_retry_at"].is_string());
        t.stop().await;
    }

    #[tokio::test]
    async fn a_duplicate_message_sends_once() {
        use converger_ports::DeliveryMessage;
        let t = TestStack::on_emulator().await;
        // A slow receiver keeps the first attempt's lease live while the duplicate arrives.
        let rx = Receiver::start(
            vec![],
            Reply {
                delay: Duration::from_millis(700),
                ..Reply::status(200)
            },
        )
        .await
        .unwrap();
        let (tenant_id, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;

        // Write the activity and its delivery without enqueueing, then send the same message twice.
        let p = &t.stack;
        let d = t
            .bare_delivery(
                &tenant_id,
                ch["id"].as_str().unwrap(),
                converger_core::time::now_ms(),
            )
            .await;
        let msg = DeliveryMessage::new(d.id.clone(), d.tier, None);
        p.queue
            .send_many(&[msg.clone(), msg.clone()])
            .await
            .unwrap();

        let row = t
            .wait_delivery(&key, d.id.as_str(), Duration::from_secs(15), settled)
            .await;
        assert_eq!(row["status"], "sent");
        // And once more after it was sent.
        p.queue.send(&msg, 0).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            rx.requests().len(),
            1,
            "the receiver saw exactly one request"
        );
        assert_eq!(t.delivery(&key, d.id.as_str()).await["attempts"], 1);
        t.stop().await;
    }

    #[tokio::test]
    async fn the_same_activity_id_twice_creates_nothing_new() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("high").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let body = json!({"id": "act_producer-chosen-1", "conversation_id": "c", "channel_ids": [ch["id"]], "payload": {"n": 1}});
        let first = t
            .api("POST", "/api/v1/activities", &key, Some(body.clone()))
            .await;
        assert_eq!(first.status, 201, "{:?}", first.body);
        let again = t.api("POST", "/api/v1/activities", &key, Some(body)).await;
        assert_eq!(again.status, 200, "{:?}", again.body);
        assert_eq!(
            again.body["deliveries"][0]["id"],
            first.body["deliveries"][0]["id"]
        );
        let id = first_delivery(&first.body);
        // Generous: the emulator is shared with the whole suite, and this is not a timing test.
        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(30), settled)
            .await;
        assert_eq!(d["status"], "sent");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(rx.requests().len(), 1);
        t.stop().await;
    }

    /// Activity ids are the producer's and belong to its tenant: another tenant may use the
    /// same id (no 409 that would tell it the id exists, no way to block it), each tenant's
    /// retry finds its own activity, and each receiver gets its own tenant's payload.
    #[tokio::test]
    async fn an_activity_id_is_per_tenant() {
        let t = TestStack::on_emulator().await;
        let (rx_a, rx_b) = (
            Receiver::always(200).await.unwrap(),
            Receiver::always(200).await.unwrap(),
        );
        let (_, key_a) = t.tenant("default").await;
        let (_, key_b) = t.tenant("default").await;
        let ch_a = t.webhook(&key_a, &rx_a.url, json!({})).await;
        let ch_b = t.webhook(&key_b, &rx_b.url, json!({})).await;
        let body = |ch: &Value, n: u32| json!({"id": "act_shared-by-two", "conversation_id": "c", "channel_ids": [ch["id"]], "payload": {"n": n}});
        let a = t
            .api("POST", "/api/v1/activities", &key_a, Some(body(&ch_a, 1)))
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let b = t
            .api("POST", "/api/v1/activities", &key_b, Some(body(&ch_b, 2)))
            .await;
        assert_eq!(b.status, 201, "another tenant's id is unused: {:?}", b.body);
        let again = t
            .api("POST", "/api/v1/activities", &key_b, Some(body(&ch_b, 2)))
            .await;
        assert_eq!(again.status, 200, "{:?}", again.body);
        assert_eq!(
            again.body["deliveries"][0]["id"],
            b.body["deliveries"][0]["id"]
        );
        for (key, rx, resp, n) in [(&key_a, &rx_a, &a, 1), (&key_b, &rx_b, &b, 2)] {
            let id = first_delivery(&resp.body);
            let d = t
                .wait_delivery(key, &id, Duration::from_secs(30), settled)
                .await;
            assert_eq!(d["status"], "sent");
            let seen = rx.requests();
            assert_eq!(seen.len(), 1);
            let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
            assert_eq!(
                sent["payload"]["n"], n,
                "each receiver gets its tenant's payload"
            );
            let listed = t
                .api(
                    "GET",
                    "/api/v1/deliveries?activity_id=act_shared-by-two",
                    key,
                    None,
                )
                .await;
            let ids: Vec<&str> = listed.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, [id.as_str()], "a tenant lists only its own deliveries");
        }
        t.stop().await;
    }

    /// An activity the ingest function parks (its channel's breaker is open) schedules the
    /// breaker's probe on the probe queue, as the API's ingest does: the function's policy
    /// allows the send (a backlog row whose mark failed sends its feed job there too).
    #[tokio::test]
    async fn the_ingest_function_parks_behind_an_open_breaker_and_schedules_its_probe() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t
            .channel(
                &key,
                json!({"type": "webhook", "name": "q", "config": {"url": rx.url},
                       "circuit_breaker": {"cooldown_ms": 60_000}}),
            )
            .await;
        let channel = converger_core::ChannelId::parse(ch["id"].as_str().unwrap()).unwrap();
        let store = t.stack.store.clone();
        let open = converger_ports::Transition::new(
            &[converger_core::CircuitState::Closed],
            converger_core::CircuitState::Open,
            converger_core::time::now_ms(),
        );
        assert!(store.transition(&channel, &open).await.unwrap().is_some());
        let url = t
            .aws()
            .resources
            .queue_url(&converger_store::resources::ACTIVITIES_QUEUE)
            .unwrap()
            .to_owned();
        let body = json!({"tenant_id": tenant, "activity": {"conversation_id": "conv-q",
                          "channel_ids": [ch["id"]], "payload": {"text": "parked"}}});
        t.aws()
            .clients
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(
            converger_tests::wait_until(Duration::from_secs(20), || async {
                let f = store.get_flow(&channel).await.unwrap();
                f.parked_at.is_some() && f.probe_due.is_some()
            })
            .await,
            "parked, with its probe scheduled: {:?}",
            store.get_flow(&channel).await.unwrap()
        );
        assert!(
            rx.requests().is_empty(),
            "nothing reaches an open breaker's endpoint"
        );
        assert!(
            t.stack.iam_violations().is_empty(),
            "{:?}",
            t.stack.iam_violations()
        );
        t.stop().await;
    }

    /// Producers that write to the activities queue instead of calling the API: the ingest
    /// function (its deployed mapping, environment and policy) takes the message to the receiver.
    #[tokio::test]
    async fn an_activity_on_the_activities_queue_is_ingested_and_delivered() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t
            .channel(
                &key,
                json!({"type": "webhook", "name": "q", "event_types": ["queue.sent"],
                       "config": {"url": rx.url}}),
            )
            .await;
        let url = t
            .aws()
            .resources
            .queue_url(&converger_store::resources::ACTIVITIES_QUEUE)
            .unwrap()
            .to_owned();
        // One to the channel by id, one by event type to its subscribers.
        for activity in [
            json!({"conversation_id": "conv-q", "channel_ids": [ch["id"]],
                   "payload": {"text": "from the queue"}}),
            json!({"conversation_id": "conv-q", "event_type": "queue.sent",
                   "payload": {"text": "by event type"}}),
        ] {
            let body = json!({"tenant_id": tenant, "activity": activity});
            t.aws()
                .clients
                .sqs
                .send_message()
                .queue_url(&url)
                .message_body(body.to_string())
                .send()
                .await
                .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while rx.requests().len() < 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let got = rx.requests();
        assert_eq!(got.len(), 2, "each delivered once");
        let mut texts: Vec<String> = got
            .iter()
            .map(|r| {
                let sent: Value = serde_json::from_slice(&r.body).unwrap();
                sent["payload"]["text"].as_str().unwrap().to_owned()
            })
            .collect();
        texts.sort();
        assert_eq!(texts, ["by event type", "from the queue"]);
        assert!(
            t.stack.iam_violations().is_empty(),
            "{:?}",
            t.stack.iam_violations()
        );
        t.stop().await;
    }
}

/// A stack dropped without `stop` (a test that panicked) stops serving at once: its listeners
/// and pollers are aborted by its drop, not left running until the runtime ends.
#[tokio::test]
async fn a_dropped_stack_stops_serving() {
    let t = TestStack::start().await;
    let url = format!("{}/api/health", t.stack.api_url);
    assert!(t.http.get(&url).send().await.unwrap().status().is_success());
    drop(t);
    // A new client each time: no kept-alive connection from before the drop.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match reqwest::Client::new().get(&url).send().await {
            Err(e) => {
                assert!(e.is_connect(), "{e}");
                break;
            }
            Ok(r) if std::time::Instant::now() < deadline => {
                drop(r);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(r) => panic!("still serving after the drop: {}", r.status()),
        }
    }
}
