//! Retries without limits, end to end with real receivers: long delays in hops, the sweeper,
//! crashed attempts, Retry-After forms, policy changes, poison messages and the attempt log.
//! The scenarios run in process; those that also cover AWS code paths (the `emulator`
//! module) run on the template deployed on the emulator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::Timestamp;
use converger_core::time;
use converger_core::time::Clock;
use converger_http::views::{AttemptView, Page};
use converger_local::Backend;
use converger_local::QueueSettings;
use converger_ports::{Claim, DeliveryMessage};
use converger_tests::views::Ingested;
use converger_tests::{Receiver, Reply, TestStack, is_settled, wait_until};
use serde_json::json;
use std::time::{Duration, Instant};

fn first_delivery(act: &Ingested) -> String {
    act.deliveries[0].id.clone()
}

/// On the stack's clock: a `Retry-After` date and a `Retry-After` past the policy's `max_ms`
/// each set the next attempt, not the policy.
#[tokio::test]
async fn retry_after_as_an_http_date_and_beyond_max_ms() {
    let (t, clock) = TestStack::on_clock().await;
    let at = std::time::UNIX_EPOCH + Duration::from_millis(clock.now_ms() as u64 + 3_000);
    let date = httpdate::fmt_http_date(at);
    let dated = Receiver::start(
        vec![Reply::status(503).header("retry-after", &date)],
        Reply::status(200),
    )
    .await
    .unwrap();
    let long = Receiver::start(
        vec![Reply::status(429).header("retry-after", "3")],
        Reply::status(200),
    )
    .await
    .unwrap();
    let tenant = t.new_tenant("default").await;
    let policy = json!({"backoff": "fixed", "base_ms": 1000, "max_ms": 1000});
    let a = tenant.webhook(&dated.url, policy.clone()).await;
    let b = tenant.webhook(&long.url, policy).await;
    let act = tenant.activity(&[&a.channel.id, &b.channel.id]).await;
    let mut due = Vec::new();
    for d in &act.deliveries {
        let row = tenant
            .wait_delivery(&d.id, Duration::from_secs(20), |d| d.attempts == 1)
            .await;
        let at = Timestamp::parse(row.next_attempt_at.as_deref().unwrap()).unwrap();
        due.push(at.ms() - clock.now_ms());
    }
    // An HTTP date has one-second resolution: the retry is due at the date, within it.
    assert!((2_000..=3_000).contains(&due[0]), "dated: {due:?}");
    assert_eq!(due[1], 3_000, "Retry-After is not capped by max_ms");
    // Where the policy's one second would have retried: nothing.
    clock.advance(Duration::from_millis(1_500));
    assert!(
        !wait_until(Duration::from_millis(500), || async {
            dated.count() + long.count() > 2
        })
        .await
    );
    clock.advance(Duration::from_millis(1_500));
    for d in &act.deliveries {
        let row = tenant
            .wait_delivery(&d.id, Duration::from_secs(20), is_settled)
            .await;
        assert_eq!((row.status.as_str(), row.attempts), ("sent", 2), "{row:?}");
    }
}

/// On the stack's clock: the 404 of the second attempt dead-letters at once, and nothing is
/// attempted after it, however far the clock moves.
#[tokio::test]
async fn a_permanent_error_on_the_last_but_one_attempt_dead_letters() {
    let (t, clock) = TestStack::on_clock().await;
    let rx = Receiver::start(
        vec![Reply::status(503), Reply::status(404).body("no such route")],
        Reply::status(200),
    )
    .await
    .unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .webhook(
            &rx.url,
            json!({"max_attempts": 3, "backoff": "fixed", "base_ms": 1000}),
        )
        .await;
    let id = tenant.activity(&[&ch.channel.id]).await.deliveries[0]
        .id
        .clone();
    tenant
        .wait_delivery(&id, Duration::from_secs(20), |d| d.attempts == 1)
        .await;
    clock.advance(Duration::from_secs(1));
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(d.attempts, 2, "attempts counts every attempt made");
    assert!(d.last_error.unwrap().contains("404"));
    clock.advance(Duration::from_secs(3600));
    assert!(!wait_until(Duration::from_millis(500), || async { rx.count() > 2 }).await);
    assert_eq!(rx.requests().len(), 2);
}

#[tokio::test]
async fn a_policy_change_takes_effect_on_the_next_attempt() {
    let t = TestStack::start().await;
    let rx = Receiver::always(503).await.unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant
        .webhook(
            &rx.url,
            json!({"max_attempts": 10, "backoff": "fixed", "base_ms": 2000}),
        )
        .await;
    let path = format!("/api/v1/channels/{}", ch.channel.id);
    let id = tenant.activity(&[&ch.channel.id]).await.deliveries[0]
        .id
        .clone();
    rx.wait_for(1, Duration::from_secs(10)).await;
    let a = tenant
        .api(
            "PATCH",
            &path,
            Some(json!({"retry_policy": {"max_attempts": 2, "backoff": "fixed", "base_ms": 1000}})),
        )
        .await;
    assert_eq!(a.status, 200);
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(d.status, "failed", "{d:?}");
    assert_eq!(
        d.attempts, 2,
        "the new max_attempts applied to the second attempt"
    );
}

#[tokio::test]
async fn expired_attempt_log_entries_are_not_shown() {
    // A retention of zero: every entry is past its retention as soon as it is written, as if
    // the store's TTL had not deleted it yet.
    let t = TestStack::with(|o| o.config.attempt_retention = Duration::ZERO).await;
    let rx = Receiver::always(200).await.unwrap();
    let tenant = t.new_tenant("default").await;
    let ch = tenant.webhook(&rx.url, json!({})).await;
    let id = tenant.activity(&[&ch.channel.id]).await.deliveries[0]
        .id
        .clone();
    let d = tenant
        .wait_delivery(&id, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "sent");
    assert_eq!(d.attempts, 1);
    assert_eq!(d.attempt_log, Some(vec![]));
    let page: Page<AttemptView> = tenant
        .api("GET", &format!("/api/v1/deliveries/{id}/attempts"), None)
        .await
        .typed(200)
        .unwrap();
    assert!(page.data.is_empty());
    // The entry is stored with its expiry, for the TTL to delete.
    let row = t
        .stack
        .store
        .get_delivery(&converger_core::DeliveryId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(row.attempt_log[0].expires_at.is_some());
}

/// A webhook's `receive_timeout` bounds the wait for its answer, whatever the policy's
/// `timeout_ms` says, and a timeout is a transient failure (retried, then dead-lettered).
#[tokio::test]
async fn receive_timeout_overrides_the_policy_timeout() {
    let t = TestStack::start().await;
    let tenant = t.new_tenant("default").await;
    let slow = Reply {
        delay: Duration::from_millis(1500),
        ..Reply::status(200)
    };
    let rx = Receiver::start(vec![], slow).await.unwrap();
    let ch = tenant
        .create_channel(json!({
            "type": "webhook", "name": "slow",
            "config": {"url": rx.url, "receive_timeout": 300},
            "retry_policy": {"timeout_ms": 20000, "max_attempts": 2, "schedule": [1000]},
        }))
        .await
        .unwrap()
        .channel;
    let act = tenant.activity(&[&ch.id]).await;
    let d = tenant
        .wait_delivery(&act.deliveries[0].id, Duration::from_secs(20), is_settled)
        .await;
    assert_eq!((d.status.as_str(), d.attempts), ("failed", 2), "{d:?}");
    let error = d.last_error.unwrap_or_default();
    assert!(error.contains("timed out after 300 ms"), "{error}");
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
/// A storage outage: the attempts that find storage unreachable send their message again
/// after 1, 2, 4 ... s instead of leaving it to the queue's visibility timeout (30 s here), so
/// the delivery goes out seconds after storage is back, once.
#[tokio::test]
async fn after_a_storage_outage_deliveries_resume_in_seconds() {
    let t = TestStack::with(|o| o.backend = Backend::Memory).await;
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let d = t
        .bare_delivery(&tenant, ch.id.as_str(), time::now_ms())
        .await;
    let mem = t.stack.memory().unwrap().store.clone();
    mem.set_outage(true);
    t.stack
        .queue
        .send(&DeliveryMessage::new(d.id.clone(), d.tier, None), 0)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(rx.requests().is_empty());
    mem.set_outage(false);
    let back = Instant::now();
    let row = t
        .wait_delivery(&key, d.id.as_str(), Duration::from_secs(20), is_settled)
        .await;
    assert_eq!(row.status, "sent", "{row:?}");
    assert_eq!(row.attempts, 1);
    assert_eq!(rx.requests().len(), 1);
    // Not left to the 30 s visibility timeout: the wait above gives up after 20 s.
    println!("storage back -> sent: {:?}", back.elapsed());
}

mod emulator {
    use super::*;

    /// Ingest sends a new activity's messages beside the write of its rows: a message that comes
    /// before its row waits for it and is delivered once; one whose row never came (the write
    /// failed, and the producer was told) is dropped when its wait is over.
    #[tokio::test]
    async fn a_message_that_comes_before_its_row_waits_for_it() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let ch_id = ch.id.as_str();
        let now = time::now_ms();
        let (late_activity, late) = t.unwritten_delivery(&tenant, ch_id, now).await;
        let (_, never) = t.unwritten_delivery(&tenant, ch_id, now).await;
        let queue = &t.stack.queue;
        let msg = |d: &converger_ports::Delivery, by: i64| {
            DeliveryMessage::new(d.id.clone(), d.tier, None)
                .on(&d.channel_id)
                .beside_row(by)
        };
        queue.send(&msg(&late, now + 60_000), 0).await.unwrap();
        queue.send(&msg(&never, now - 1), 0).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(rx.requests().is_empty());
        t.stack
            .store
            .create_fresh_activity(&late_activity, std::slice::from_ref(&late))
            .await
            .unwrap();
        let row = t
            .wait_delivery(&key, late.id.as_str(), Duration::from_secs(20), is_settled)
            .await;
        assert_eq!(row.status, "sent", "{row:?}");
        assert_eq!(row.attempts, 1, "{row:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            rx.requests().len(),
            1,
            "delivered once, and the other never"
        );
    }

    #[tokio::test]
    async fn a_long_delay_is_made_of_hops_and_fires_once_not_before() {
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.config.hop_ceiling_s = 2;
        })
        .await;
        let rx = Receiver::start(vec![Reply::status(503)], Reply::status(200))
            .await
            .unwrap();
        let (_, key) = t.tenant("default").await;
        let ch = t
            .webhook(&key, &rx.url, json!({"backoff": "fixed", "base_ms": 7000}))
            .await;
        let id = first_delivery(&t.activity(&key, &[ch.id.as_str()]).await);

        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(30), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
        assert_eq!(d.attempts, 2, "hops are not attempts");
        let reqs = rx.requests();
        assert_eq!(reqs.len(), 2);
        let gap = reqs[1].at.duration_since(reqs[0].at);
        println!("hop test: 7 s delay in 2 s hops fired after {gap:?}");
        // Never early; not far too late is the wait's 30 s bound above.
        assert!(gap >= Duration::from_millis(7000), "fired early: {gap:?}");
    }

    #[tokio::test]
    async fn a_row_without_its_message_is_delivered_after_one_sweep() {
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.sweep_period = converger_local::Every::Never;
            o.config.sweep_grace = Duration::from_secs(1);
        })
        .await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let now = time::now_ms();
        let d = t.bare_delivery(&tenant, ch.id.as_str(), now - 3_000).await;
        // A row that is due but within the grace period is left to its own message.
        let fresh = t.bare_delivery(&tenant, ch.id.as_str(), now + 60_000).await;

        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(rx.requests().is_empty(), "nothing enqueued it yet");
        let report = t
            .stack
            .functions
            .retry_scheduler
            .sweeper()
            .sweep()
            .await
            .unwrap();
        assert_eq!(report.enqueued, 1, "{report:?}");
        assert_eq!(
            report.queries,
            2 * converger_store::resources::DUE_SHARDS,
            "one query per shard and part (waiting, leased)"
        );
        let row = t
            .wait_delivery(&key, d.id.as_str(), Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(row.status, "sent");
        assert_eq!(row.attempts, 1);
        assert_eq!(t.delivery(&key, fresh.id.as_str()).await.status, "pending");
        // Settled now: the next sweep finds nothing.
        let again = t
            .stack
            .functions
            .retry_scheduler
            .sweeper()
            .sweep()
            .await
            .unwrap();
        assert_eq!(again.found, 0, "{again:?}");
        assert_eq!(rx.requests().len(), 1);
    }

    /// A worker that dies mid-attempt leaves a claimed row. Its lease is sized to the
    /// channel's timeout, and the sweep after it ends runs the delivery again at once, without
    /// the grace period that rows waiting for their message get (the default 300 s here).
    #[tokio::test]
    async fn a_crashed_attempt_runs_again_once_its_lease_ends_and_a_live_one_is_not_duplicated() {
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.sweep_period = converger_local::Every::Never;
            o.config.reclaim_interval = Duration::from_millis(500);
        })
        .await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let now = time::now_ms();
        let d = t.bare_delivery(&tenant, ch.id.as_str(), now).await;
        let p = &t.stack;

        // An attempt claims the delivery and its Lambda dies: the lease is live for 2 s.
        let claim = p
            .store
            .claim(&d.id, "crashed", Timestamp::from_ms(time::now_ms()), 2_000)
            .await
            .unwrap();
        assert!(matches!(claim, Claim::Claimed(_)));
        // While the lease is live, a duplicate message and the sweeper do nothing.
        p.queue
            .send(&DeliveryMessage::new(d.id.clone(), d.tier, None), 0)
            .await
            .unwrap();
        let report = t
            .stack
            .functions
            .retry_scheduler
            .sweeper()
            .sweep()
            .await
            .unwrap();
        assert_eq!(
            (report.found, report.reclaimed, report.enqueued),
            (0, 0, 0),
            "{report:?}"
        );
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(rx.requests().is_empty(), "a live lease is not duplicated");

        // The scheduled run keeps watching after its sweep: once the lease has ended, it runs
        // the delivery again (no grace for a crashed attempt).
        let report = t
            .stack
            .functions
            .retry_scheduler
            .sweeper()
            .sweep_and_watch(Duration::from_secs(4))
            .await
            .unwrap();
        assert_eq!((report.reclaimed, report.enqueued), (1, 0), "{report:?}");
        assert!(
            report.queries > 2 * converger_store::resources::DUE_SHARDS,
            "one query per shard and part, then the leased part again: {report:?}"
        );
        let row = t
            .wait_delivery(&key, d.id.as_str(), Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(row.status, "sent");
        assert_eq!(row.attempts, 1, "the crashed attempt recorded nothing");
        assert_eq!(rx.requests().len(), 1);
        let after = t
            .stack
            .functions
            .retry_scheduler
            .sweeper()
            .sweep()
            .await
            .unwrap();
        assert_eq!((after.reclaimed, after.found), (0, 0), "{after:?}");
    }

    /// A call longer than one lease slice keeps its delivery: the lease is renewed while the
    /// receiver holds the call, so the sweeper's watch (every 500 ms here) takes nothing over
    /// and the receiver sees one request.
    #[tokio::test]
    async fn a_call_longer_than_its_lease_renews_it_and_is_not_taken_over() {
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.sweep_period = converger_local::Every::Never;
            // A slice with room for a slow emulator's renewal write (renewed at its half).
            o.config.lease_slice = Duration::from_secs(4);
            o.config.reclaim_interval = Duration::from_millis(500);
        })
        .await;
        let rx = Receiver::always(200).await.unwrap();
        rx.set_fallback(converger_tests::Reply::status(200).delay(Duration::from_secs(9)));
        let (_, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({"timeout_ms": 15000})).await;
        let started = time::now_ms();
        let id = first_delivery(&t.activity(&key, &[ch.id.as_str()]).await);
        let did = converger_core::DeliveryId::parse(&id).unwrap();
        let sweeper = t.stack.functions.retry_scheduler.clone();
        let watch = tokio::spawn(async move {
            sweeper
                .sweeper()
                .sweep_and_watch(Duration::from_secs(11))
                .await
        });
        let store = &t.stack.store;
        let mut latest = 0;
        for _ in 0..100 {
            let row = store.get_delivery(&did).await.unwrap().unwrap();
            if row.status != converger_core::DeliveryStatus::Pending {
                break;
            }
            latest = latest.max(row.lease_until.unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            latest - started > 8_000,
            "the 4 s lease was renewed during the 9 s call (last end {} ms after the start)",
            latest - started
        );
        let row = t
            .wait_delivery(&key, &id, Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(row.status, "sent");
        assert_eq!(row.attempts, 1);
        let report = watch.await.unwrap().unwrap();
        assert_eq!(
            report.reclaimed, 0,
            "a live call is not taken over: {report:?}"
        );
        assert_eq!(rx.requests().len(), 1);
    }

    #[tokio::test]
    async fn poison_messages_end_in_the_dead_letter_queue_without_blocking_their_batch() {
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.queues = QueueSettings {
                max_receive_count: 2,
                visibility_timeout_s: Some(1),
            };
        })
        .await;
        let rx = Receiver::always(200).await.unwrap();
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, &rx.url, json!({})).await;
        let doomed = t.webhook(&key, &rx.url, json!({})).await;
        let sqs = &t.aws().clients.sqs;
        let url = t.aws().queue_url(converger_core::Tier::Default).unwrap();

        // A body that cannot be parsed, a delivery whose channel was deleted, and a good one.
        let gone = t
            .bare_delivery(&tenant, doomed.id.as_str(), time::now_ms())
            .await;
        t.aws()
            .clients
            .dynamodb
            .delete_item()
            .table_name(&t.aws().resources.channels)
            .key(
                "id",
                aws_sdk_dynamodb::types::AttributeValue::S(doomed.id.as_str().into()),
            )
            .send()
            .await
            .unwrap();
        let good = t
            .bare_delivery(&tenant, ch.id.as_str(), time::now_ms())
            .await;
        let mut batch = sqs.send_message_batch().queue_url(&url);
        for (i, body) in [
            "{not json".to_owned(),
            serde_json::to_string(&DeliveryMessage::new(gone.id.clone(), gone.tier, None)).unwrap(),
            serde_json::to_string(&DeliveryMessage::new(good.id.clone(), good.tier, None)).unwrap(),
        ]
        .into_iter()
        .enumerate()
        {
            batch = batch.entries(
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .build()
                    .unwrap(),
            );
        }
        batch.send().await.unwrap();

        let row = t
            .wait_delivery(&key, good.id.as_str(), Duration::from_secs(15), is_settled)
            .await;
        assert_eq!(
            row.status, "sent",
            "the good record of the batch is delivered"
        );

        let dlq = t.aws().dlq_url(converger_core::Tier::Default).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut bodies: Vec<String> = Vec::new();
        while bodies.len() < 2 && Instant::now() < deadline {
            let out = sqs
                .receive_message()
                .queue_url(&dlq)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            bodies.extend(
                out.messages
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|m| m.body),
            );
        }
        assert_eq!(bodies.len(), 2, "{bodies:?}");
        assert!(bodies.iter().any(|b| b == "{not json"));
        assert!(bodies.iter().any(|b| b.contains(gone.id.as_str())));
        assert_eq!(
            t.delivery(&key, gone.id.as_str()).await.status,
            "pending",
            "the row is untouched"
        );
    }

    #[tokio::test]
    async fn the_attempt_log_pages_newest_first() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::start(
            vec![
                Reply::status(500).body("x".repeat(2000).as_str()),
                Reply::status(503),
                Reply::status(502),
            ],
            Reply::status(200),
        )
        .await
        .unwrap();
        let (_, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let ch = t
            .webhook(&key, &rx.url, json!({"backoff": "fixed", "base_ms": 1000}))
            .await;
        let id = first_delivery(&t.activity(&key, &[ch.id.as_str()]).await);
        let d = t
            .wait_delivery(&key, &id, Duration::from_secs(30), is_settled)
            .await;
        assert_eq!(d.attempts, 4);

        let page = t
            .api(
                "GET",
                &format!("/api/v1/deliveries/{id}/attempts?limit=2"),
                &key,
                None,
            )
            .await;
        assert_eq!(page.status, 200, "{:?}", page.body);
        let page: Page<AttemptView> = page.typed(200).unwrap();
        let nums: Vec<u32> = page.data.iter().map(|e| e.attempt).collect();
        assert_eq!(nums, vec![4, 3]);
        let cursor = page.next_cursor.clone().unwrap();
        let page2: Page<AttemptView> = t
            .api(
                "GET",
                &format!("/api/v1/deliveries/{id}/attempts?limit=2&cursor={cursor}"),
                &key,
                None,
            )
            .await
            .typed(200)
            .unwrap();
        let data = &page2.data;
        assert_eq!(
            data.iter().map(|e| e.attempt).collect::<Vec<_>>(),
            vec![2, 1]
        );
        assert!(page2.next_cursor.is_none(), "{page2:?}");
        let first = &data[1];
        assert_eq!(first.status_code, Some(500));
        assert_eq!(
            first.response_snippet.as_deref().unwrap().chars().count(),
            500,
            "the first 500 characters of the response"
        );
        assert_eq!(first.trigger, "auto");
        // `duration_ms` reads as a number by the view's type.
        assert!(
            !first.started_at.is_empty() && first.next_retry_at.is_some(),
            "{first:?}"
        );
        assert!(
            first.error.as_deref().unwrap().chars().count() <= 520,
            "the response snippet is capped"
        );
        let newest = &page.data[0];
        assert_eq!(newest.status_code, Some(200));
        assert!(newest.next_retry_at.is_none(), "{newest:?}");

        let a = t
            .api(
                "GET",
                &format!("/api/v1/deliveries/{id}/attempts"),
                &other,
                None,
            )
            .await;
        assert_eq!(a.status, 404);
        let a = t
            .api(
                "GET",
                &format!("/api/v1/deliveries/{id}/attempts?limit=0"),
                &key,
                None,
            )
            .await;
        assert_eq!(a.status, 422);
        let a = t
            .api(
                "GET",
                &format!("/api/v1/deliveries/{id}/attempts?cursor=zz"),
                &key,
                None,
            )
            .await;
        assert_eq!(a.code(), "invalid_cursor");
    }
}

/// An accepted call keeps a short snippet of its answer in the attempt log (its row stays
/// within one write unit); a failed one keeps 500 characters.
#[tokio::test]
async fn a_success_keeps_a_short_snippet_and_a_failure_a_long_one() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let long = "x".repeat(1_000);
    let rx = Receiver::start(
        vec![Reply::status(500).body(&long)],
        Reply::status(200).body(&long),
    )
    .await
    .unwrap();
    let ch = t
        .webhook(&key, &rx.url, json!({"schedule": [100], "max_attempts": 2}))
        .await;
    let d = t
        .deliver_settled(&key, ch.id.as_str(), json!({"n": 1}))
        .await;
    assert_eq!(d.status, "sent", "{d:?}");
    let log = d.log();
    let chars = |e: &AttemptView| e.response_snippet.as_deref().unwrap().chars().count();
    // Newest first: the success, then the failure.
    assert_eq!(
        (chars(&log[0]), chars(&log[1])),
        (converger_core::error::SUCCESS_SNIPPET_CHARS, 500),
        "{d:?}"
    );
}
