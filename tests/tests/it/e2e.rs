//! End to end: the tenant API, the queues, the deliver function and a real HTTP receiver.
//! The scenarios run in process; the `emulator` module's on the template deployed on the
//! emulator. Each test has its own stack (resource prefix) and tenant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::Timestamp;
use converger_core::time::Clock;
use converger_http::views::Ingested;
use converger_tests::client::is_settled;
use converger_tests::{Receiver, Reply, TestStack, wait_until};
use serde_json::{Value, json};
use std::time::Duration;

fn first_delivery(act: &Ingested) -> String {
    act.deliveries[0].id.clone()
}

#[tokio::test]
async fn a_permanent_error_dead_letters_after_one_attempt() {
    let t = TestStack::start().await;
    let rx = Receiver::start(vec![], Reply::status(400).body("invalid recipient"))
        .await
        .unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant.webhook(&rx.url, json!({})).await.channel;
    let id = first_delivery(&tenant.activity(&[&ch.id]).await);

    let d = tenant
        .wait_delivery(&id, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(d.attempts, 1);
    let err = d.last_error.unwrap();
    assert!(
        err.contains("400") && err.contains("invalid recipient"),
        "{err}"
    );
    // Its one attempt is logged as the one that dead-lettered it.
    let log = d.attempt_log.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].outcome.as_deref(), Some("dead"), "{log:?}");
    assert_eq!(log[0].next_retry_at, None);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.requests().len(), 1);
}

/// On the stack's clock: each retry comes exactly its backoff after the attempt before it,
/// not before, and none after the fifth.
#[tokio::test]
async fn exhausted_retries_dead_letter_at_max_attempts() {
    let (t, clock) = TestStack::on_clock().await;
    let rx = Receiver::always(500).await.unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .webhook(
            &rx.url,
            json!({"max_attempts": 5, "backoff": "fixed", "base_ms": 1000}),
        )
        .await
        .channel;
    let id = first_delivery(&tenant.activity(&[&ch.id]).await);
    for n in 1..=4 {
        let d = tenant
            .wait_delivery(&id, Duration::from_secs(20), |d| d.attempts == n)
            .await;
        assert_eq!(d.status, "pending", "{d:?}");
        let due = Timestamp::parse(d.next_attempt_at.as_deref().unwrap()).unwrap();
        assert_eq!(due.ms() - clock.now_ms(), 1000, "attempt {n}: {d:?}");
        clock.advance(Duration::from_millis(999));
        assert!(
            !wait_until(Duration::from_millis(300), || async {
                rx.count() > n as usize
            })
            .await,
            "attempt {} before its backoff",
            n + 1
        );
        clock.advance(Duration::from_millis(1));
    }
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(d.attempts, 5);
    assert!(d.last_error.unwrap().contains("500"));
    // Newest first: the fifth attempt dead-lettered it, each before it failed with a retry.
    let outcomes: Vec<_> = d
        .attempt_log
        .unwrap()
        .iter()
        .map(|e| e.outcome.clone().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["dead", "failed", "failed", "failed", "failed"]);
    // Past any backoff on the clock: still five.
    clock.advance(Duration::from_secs(3600));
    assert!(!wait_until(Duration::from_millis(500), || async { rx.count() > 5 }).await);
    assert_eq!(rx.count(), 5, "no attempt after the dead letter");
}

/// On the stack's clock: a 429's `Retry-After: 2` puts the next attempt two seconds after
/// it, over the policy's one second.
#[tokio::test]
async fn retry_after_overrides_the_policy_backoff() {
    let (t, clock) = TestStack::on_clock().await;
    let rx = Receiver::start(
        vec![Reply::status(429).header("retry-after", "2")],
        Reply::status(200),
    )
    .await
    .unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .webhook(&rx.url, json!({"backoff": "fixed", "base_ms": 1000}))
        .await
        .channel;
    let id = first_delivery(&tenant.activity(&[&ch.id]).await);
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), |d| d.attempts == 1)
        .await;
    let due = Timestamp::parse(d.next_attempt_at.as_deref().unwrap()).unwrap();
    assert_eq!(due.ms() - clock.now_ms(), 2000, "{d:?}");
    // Where the policy alone would have retried: nothing yet.
    clock.advance(Duration::from_millis(1500));
    assert!(!wait_until(Duration::from_millis(500), || async { rx.count() > 1 }).await);
    clock.advance(Duration::from_millis(500));
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    assert_eq!(d.attempts, 2, "Retry-After still counts as an attempt");
    assert_eq!(rx.count(), 2);
}

#[tokio::test]
async fn private_destinations_are_refused() {
    let t = TestStack::start().await;
    let tenant = t.new_tenant("default").await;
    // The local stack allows loopback only; the metadata endpoint stays closed.
    let ch = tenant
        .webhook("http://169.254.169.254/latest/meta-data", json!({}))
        .await
        .channel;
    let id = first_delivery(&tenant.activity(&[&ch.id]).await);
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(d.attempts, 1);
    assert!(
        d.last_error.as_deref().unwrap().contains("not allowed"),
        "{d:?}"
    );
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
        let tenant = t.new_tenant("default").await;
        let ch = tenant.webhook(&rx.url, json!({})).await.channel.id;
        let ch = ch.as_str();
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
            let tenant = &tenant;
            async move {
                tenant
                    .post_activity(
                        json!({"conversation_id": "c", "channel_ids": [ch], "payload": payload}),
                    )
                    .await
            }
        };
        let deepest = nested(converger_core::payload::MAX_DEPTH);
        let (status, a) = post(deepest.clone()).await.unwrap();
        assert_eq!(status, 201);
        let d = tenant
            .wait_delivery(&first_delivery(&a), Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
        let got: Value = serde_json::from_slice(&rx.requests()[0].body).unwrap();
        assert_eq!(got["payload"], deepest);

        for (payload, what) in [
            (nested(converger_core::payload::MAX_DEPTH + 1), "too deep"),
            (json!({"n": 1e200}), "too large"),
            (json!({"n": [1e-200]}), "too small"),
        ] {
            let e = post(payload).await.unwrap_err();
            assert_eq!(
                (e.status, e.code.as_str()),
                (422, "invalid_payload"),
                "{what}: {e:?}"
            );
        }
        assert_eq!(rx.requests().len(), 1, "nothing refused was delivered");
    }

    #[tokio::test]
    async fn delivers_a_signed_webhook_once() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let tenant = t.new_tenant("default").await;
        let created = tenant.webhook(&rx.url, json!({})).await;
        let secret = created.signing_secret;
        assert!(secret.starts_with("whsec_"));
        let act = tenant.activity(&[&created.channel.id]).await;
        let id = first_delivery(&act);

        let d = tenant
            .wait_delivery(&id, Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
        assert_eq!(d.attempts, 1);
        assert!(d.sent_at.is_some());
        assert_eq!(d.response_status, Some(200));
        assert_eq!(d.attempt_log.unwrap().len(), 1);

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
        assert_eq!(body["activity_id"], act.activity_id.as_str());
        assert_eq!(body["conversation_id"], "conv-1");
        assert_eq!(body["seq"], act.seq);
        assert_eq!(body["payload"]["text"], "hi");
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
        let tenant = t.new_tenant("default").await;
        let ch = tenant
            .webhook(&rx.url, json!({"backoff": "fixed", "base_ms": 1000}))
            .await
            .channel;
        let id = first_delivery(&tenant.activity(&[&ch.id]).await);

        let d = tenant
            .wait_delivery(&id, Duration::from_secs(30), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
        assert_eq!(d.attempts, 4);
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
        let log = d.attempt_log.unwrap();
        assert_eq!(log.len(), 4);
        assert_eq!(log[0].status_code, Some(200), "newest first");
        assert_eq!(log[0].outcome.as_deref(), Some("delivered"));
        assert_eq!(log[3].status_code, Some(503));
        assert_eq!(log[3].attempt, 1);
        assert_eq!(log[3].outcome.as_deref(), Some("failed"));
        assert!(log[3].next_retry_at.is_some());
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
        let tenant = t.new_tenant("default").await;
        let ch = tenant.webhook(&rx.url, json!({})).await.channel;

        // Write the activity and its delivery without enqueueing, then send the same message twice.
        let p = &t.stack;
        let d = t
            .bare_delivery(&tenant.id, &ch.id, converger_core::time::now_ms())
            .await;
        let msg = DeliveryMessage::new(d.id.clone(), d.tier, None);
        p.queue
            .send_many(&[msg.clone(), msg.clone()])
            .await
            .unwrap();

        let row = tenant
            .wait_delivery(d.id.as_str(), Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(row.status, "sent");
        // And once more after it was sent.
        p.queue.send(&msg, 0).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            rx.requests().len(),
            1,
            "the receiver saw exactly one request"
        );
        assert_eq!(tenant.delivery(d.id.as_str()).await.attempts, 1);
    }

    #[tokio::test]
    async fn the_same_activity_id_twice_creates_nothing_new() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let tenant = t.new_tenant("high").await;
        let ch = tenant.webhook(&rx.url, json!({})).await.channel;
        let body = json!({"id": "act_producer-chosen-1", "conversation_id": "c", "channel_ids": [ch.id], "payload": {"n": 1}});
        let (status, first) = tenant.post_activity(body.clone()).await.unwrap();
        assert_eq!(status, 201);
        let (status, again) = tenant.post_activity(body).await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(again.deliveries[0].id, first.deliveries[0].id);
        let id = first_delivery(&first);
        // Generous: the emulator is shared with the whole suite, and this is not a timing test.
        let d = tenant
            .wait_delivery(&id, Duration::from_secs(30), is_settled)
            .await;
        assert_eq!(d.status, "sent");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(rx.requests().len(), 1);
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
        let ta = t.new_tenant("default").await;
        let tb = t.new_tenant("default").await;
        let ch_a = ta.webhook(&rx_a.url, json!({})).await.channel;
        let ch_b = tb.webhook(&rx_b.url, json!({})).await.channel;
        let body = |ch: &str, n: u32| json!({"id": "act_shared-by-two", "conversation_id": "c", "channel_ids": [ch], "payload": {"n": n}});
        let (status, a) = ta.post_activity(body(&ch_a.id, 1)).await.unwrap();
        assert_eq!(status, 201);
        let (status, b) = tb.post_activity(body(&ch_b.id, 2)).await.unwrap();
        assert_eq!(status, 201, "another tenant's id is unused");
        let (status, again) = tb.post_activity(body(&ch_b.id, 2)).await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(again.deliveries[0].id, b.deliveries[0].id);
        for (tenant, rx, resp, n) in [(&ta, &rx_a, &a, 1), (&tb, &rx_b, &b, 2)] {
            let id = first_delivery(resp);
            let d = tenant
                .wait_delivery(&id, Duration::from_secs(30), is_settled)
                .await;
            assert_eq!(d.status, "sent");
            let seen = rx.requests();
            assert_eq!(seen.len(), 1);
            let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
            assert_eq!(
                sent["payload"]["n"], n,
                "each receiver gets its tenant's payload"
            );
            let listed = tenant.deliveries("activity_id=act_shared-by-two").await;
            let ids: Vec<&str> = listed.data.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(ids, [id.as_str()], "a tenant lists only its own deliveries");
        }
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
        let channel = converger_core::ChannelId::parse(ch.id.as_str()).unwrap();
        let store = t.stack.store.clone();
        let open = converger_ports::Transition::new(
            &[converger_core::CircuitState::Closed],
            converger_core::CircuitState::Open,
            Timestamp::from_ms(converger_core::time::now_ms()),
        );
        assert!(store.transition(&channel, &open).await.unwrap().is_some());
        let url = t
            .aws()
            .resources
            .queue_url(&converger_store::resources::ACTIVITIES_QUEUE)
            .unwrap()
            .to_owned();
        let body = json!({"tenant_id": tenant, "activity": {"conversation_id": "conv-q",
                          "channel_ids": [ch.id], "payload": {"text": "parked"}}});
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
            json!({"conversation_id": "conv-q", "channel_ids": [ch.id],
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
