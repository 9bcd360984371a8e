//! Bulk replay of a channel's dead letters on the emulator: concurrent bulk replays are
//! disjoint, the limit only lowers, only deliveries failed before the call are picked, filters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::{ActivityId, ChannelId, DeliveryStatus, TenantId, Timestamp, time};
use converger_http::schemas::ErrorBody;
use converger_http::views::{AuditView, BulkRetried, Page, ReplayJobView};
use converger_local::Backend;
use converger_ports::prelude::*;
use converger_ports::{Activity, Delivery};
use converger_tests::TestStack;
use serde_json::{Value, json};
use std::collections::HashSet;

/// What a bulk replay answered.
fn retried(a: &converger_tests::Answer) -> BulkRetried {
    a.typed(200)
        .unwrap_or_else(|e| panic!("not a bulk replay's answer: {e:?}"))
}

/// What the audit log keeps of a replay of a bulk one.
#[derive(Debug, serde::Deserialize)]
struct BulkChanges {
    bulk: bool,
}

/// Writes `n` dead letters of `channel`, changed at `at` (RFC 3339) or a minute ago.
async fn seed(
    t: &TestStack,
    tenant: &str,
    channel: &str,
    n: usize,
    at: Option<&str>,
) -> Vec<Delivery> {
    let store = &t.stack.store;
    let channel = store
        .get_channel(&ChannelId::parse(channel).unwrap())
        .await
        .unwrap()
        .unwrap();
    let tenant = TenantId::parse(tenant).unwrap();
    let when = at
        .and_then(Timestamp::parse)
        .unwrap_or_else(|| Timestamp::now().plus_ms(-60_000));
    let rows: Vec<Delivery> = (0..n)
        .map(|_| {
            let a = Activity {
                event_type: None,
                id: ActivityId::generate(),
                tenant_id: tenant.clone(),
                conversation_id: "seed".into(),
                seq: 1,
                payload_ref: None,
                payload: json!({}),
                channel_ids: vec![channel.id.clone()],
                created_at: when,
                expires_at: None,
                trace: None,
            };
            let mut d = Delivery::new(&a, &channel, converger_core::Tier::Default, when);
            d.next_attempt_at = 0;
            d.status = DeliveryStatus::Failed;
            d.attempts = 5;
            d.last_error = Some("webhook: HTTP 503".into());
            d
        })
        .collect();
    t.stack.seed_rows(&[], &rows).await.unwrap();
    rows
}

async fn bulk(
    t: &TestStack,
    key: &str,
    channel: &str,
    body: Option<Value>,
) -> converger_tests::Answer {
    t.api(
        "POST",
        &format!("/api/v1/channels/{channel}/deliveries/retry"),
        key,
        body,
    )
    .await
}

/// Dead letters for the concurrency test. The emulator copies every table a transaction
/// touches, so each replay costs time linear in the table's size there (not on DynamoDB);
/// 300 keeps the test quick while the two replays still contend for every row.
const DEAD_LETTERS: usize = 300;

#[tokio::test]
async fn two_concurrent_bulk_replays_are_disjoint() {
    let t = TestStack::with(|o| o.run_functions = false).await;
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let ch = ch.id.as_str().to_owned();
    let t0 = std::time::Instant::now();
    let rows = seed(&t, &tenant, &ch, DEAD_LETTERS, None).await;
    println!("seeded in {:?}", t0.elapsed());

    let t0 = std::time::Instant::now();
    let (a, b) = tokio::join!(
        bulk(&t, &key, &ch, None),
        bulk(&t, &key, &ch, Some(json!({})))
    );
    println!("bulk replays took {:?}", t0.elapsed());
    assert_eq!(
        (a.status, b.status),
        (200, 200),
        "{:?} {:?}",
        a.body,
        b.body
    );
    let (a, b) = (retried(&a), retried(&b));
    assert_eq!(a.retried + b.retried, DEAD_LETTERS, "{a:?} {b:?}");
    assert!(!a.has_more, "{a:?}");
    assert!(!b.has_more, "{b:?}");

    // Every delivery replayed exactly once.
    let store = &t.stack.store;
    let ids: Vec<_> = rows.iter().map(|d| d.id.clone()).collect();
    let now = store.get_deliveries(&ids).await.unwrap();
    assert_eq!(now.len(), DEAD_LETTERS);
    assert!(
        now.iter()
            .all(|d| d.status == DeliveryStatus::Pending && d.retry_count == 1 && d.attempts == 0)
    );
    let mut audited = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/api/v1/audit?limit=500&cursor={c}"),
            None => "/api/v1/audit?limit=500".into(),
        };
        let page: Page<AuditView> = t.api("GET", &q, &key, None).await.typed(200).unwrap();
        for e in &page.data {
            let changes: BulkChanges = serde_json::from_value(e.changes.clone()).unwrap();
            assert!(changes.bulk, "{e:?}");
            assert!(
                audited.insert(e.resource_id.clone()),
                "one audit entry per replay"
            );
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(audited.len(), DEAD_LETTERS);
}

#[tokio::test]
async fn the_limit_lowers_the_configured_cap_and_never_raises_it() {
    let t = TestStack::with(|o| {
        o.run_functions = false;
        o.config.bulk_retry_limit = 5;
    })
    .await;
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let ch = ch.id.as_str().to_owned();
    let rows = seed(&t, &tenant, &ch, 8, None).await;
    // A dead letter that failed after the call started is not picked.
    let future = time::ms_to_rfc3339(time::now_ms() + 120_000);
    let late = seed(&t, &tenant, &ch, 1, Some(&future)).await;

    let r = retried(&bulk(&t, &key, &ch, Some(json!({"limit": 100}))).await);
    assert_eq!((r.retried, r.has_more), (5, true), "{r:?}");
    let r = retried(&bulk(&t, &key, &ch, Some(json!({"limit": 2}))).await);
    assert_eq!((r.retried, r.has_more), (2, true), "{r:?}");
    let r = retried(&bulk(&t, &key, &ch, None).await);
    assert_eq!((r.retried, r.has_more), (1, false), "{r:?}");
    let store = &t.stack.store;
    assert!(
        store
            .get_deliveries(&rows.iter().map(|d| d.id.clone()).collect::<Vec<_>>())
            .await
            .unwrap()
            .iter()
            .all(|d| d.status == DeliveryStatus::Pending)
    );
    assert_eq!(
        store
            .get_delivery(&late[0].id)
            .await
            .unwrap()
            .unwrap()
            .status,
        DeliveryStatus::Failed
    );

    let a = bulk(&t, &key, &ch, Some(json!({"limit": 0}))).await;
    assert_eq!(a.status, 422);
}

/// The same contention at the scale, on the in-process backend (whose transitions are
/// as atomic as DynamoDB's and whose cost does not grow with the table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_bulk_replays_of_2000_are_disjoint_in_process() {
    use converger_core::query::{Actor, ActorKind};
    use converger_memory::{MemEvents, MemQueue, MemStore};
    use converger_pipeline::replay::BulkFilter;
    use converger_pipeline::{Pipeline, PipelineConfig};
    use std::sync::Arc;

    let store = Arc::new(MemStore::new());
    let queue = Arc::new(MemQueue::new());
    let pipeline = Pipeline::new(
        store.clone(),
        queue.clone(),
        Arc::new(MemEvents::default()),
        converger_adapters::Adapters::standard(converger_core::net::Allowlist::default()).unwrap(),
        PipelineConfig::default(),
    );
    let tenant = TenantId::generate();
    let channel = converger_ports::Channel::new(
        tenant.clone(),
        converger_core::ChannelType::Webhook,
        "c",
        serde_json::Map::new(),
        converger_core::Timestamp::now(),
    );
    store.create_channel(&channel).await.unwrap();
    let when = Timestamp::now().plus_ms(-60_000);
    let rows: Vec<Delivery> = (0..2000)
        .map(|_| {
            let a = Activity {
                event_type: None,
                id: ActivityId::generate(),
                tenant_id: tenant.clone(),
                conversation_id: "seed".into(),
                seq: 1,
                payload_ref: None,
                payload: json!({}),
                channel_ids: vec![channel.id.clone()],
                created_at: when,
                expires_at: None,
                trace: None,
            };
            let mut d = Delivery::new(&a, &channel, converger_core::Tier::Default, when);
            d.next_attempt_at = 0;
            d.status = DeliveryStatus::Failed;
            d
        })
        .collect();
    store.seed_deliveries(&rows).unwrap();
    let actor = Actor {
        kind: ActorKind::TenantApi,
        id: "key_test".into(),
    };
    let replays = pipeline.replays();
    let (a, b) = tokio::join!(
        replays.replay_channel(&tenant, &channel.id, BulkFilter::default(), &actor),
        replays.replay_channel(&tenant, &channel.id, BulkFilter::default(), &actor),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.retried + b.retried, 2000, "{a:?} {b:?}");
    assert!(!a.has_more && !b.has_more);
    let ids: Vec<_> = rows.iter().map(|d| d.id.clone()).collect();
    let now = store.get_deliveries(&ids).await.unwrap();
    assert!(
        now.iter()
            .all(|d| d.status == DeliveryStatus::Pending && d.retry_count == 1)
    );
    assert_eq!(queue.depth(), 2000, "one message per replayed delivery");
}

#[tokio::test]
async fn filters_refusals_and_isolation() {
    let t = TestStack::with(|o| o.run_functions = false).await;
    let (tenant, key) = t.tenant("default").await;
    let (_, other) = t.tenant("default").await;
    let ch = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let ch = ch.id.as_str().to_owned();
    let day1 = seed(&t, &tenant, &ch, 2, Some("2026-01-01T10:00:00.000000Z")).await;
    seed(&t, &tenant, &ch, 3, Some("2026-01-02T10:00:00.000000Z")).await;
    seed(&t, &tenant, &ch, 1, Some("2026-01-03T10:00:00.000000Z")).await;

    let a = bulk(
        &t,
        &key,
        &ch,
        Some(json!({"from": "2026-01-02", "to": "2026-01-02"})),
    )
    .await;
    assert_eq!(retried(&a).retried, 3, "{:?}", a.body);
    // The activity filter reads the activity's deliveries by key: store the activity the
    // seeded row belongs to.
    let activity = Activity {
        event_type: None,
        id: day1[0].activity_id.clone(),
        tenant_id: TenantId::parse(&tenant).unwrap(),
        conversation_id: "seed".into(),
        seq: 1,
        payload_ref: None,
        payload: json!({}),
        channel_ids: vec![ChannelId::parse(&ch).unwrap()],
        created_at: day1[0].created_at,
        expires_at: None,
        trace: None,
    };
    t.stack.store.create_activity(&activity, &[]).await.unwrap();
    let a = bulk(
        &t,
        &key,
        &ch,
        Some(json!({"activity_id": day1[0].activity_id})),
    )
    .await;
    assert_eq!(retried(&a).retried, 1, "{:?}", a.body);
    let a = bulk(&t, &key, &ch, Some(json!({"to": "2026-01-01"}))).await;
    assert_eq!(
        retried(&a).retried,
        1,
        "the other delivery of the first day"
    );
    let r = retried(&bulk(&t, &key, &ch, None).await);
    assert_eq!((r.retried, r.has_more), (1, false), "the third day's");

    // Another tenant's channel is unknown; malformed input is refused; inactive is refused.
    assert_eq!(bulk(&t, &other, &ch, None).await.status, 404);
    let a = t
        .raw(
            "POST",
            format!("{}/api/v1/channels/{ch}/deliveries/retry", t.stack.api_url),
            Some(&key),
            Some("{oops".into()),
        )
        .await;
    assert_eq!(a.status, 400);
    let a = bulk(&t, &key, &ch, Some(json!({"from": "01/02/2026"}))).await;
    assert_eq!(a.status, 422);
    t.api(
        "PATCH",
        &format!("/api/v1/channels/{ch}"),
        &key,
        Some(json!({"active": false})),
    )
    .await;
    let a = bulk(&t, &key, &ch, None).await;
    let message = serde_json::from_value::<ErrorBody>(a.body.clone())
        .ok()
        .map(|e| e.error.message);
    assert_eq!(
        (a.status, message.as_deref()),
        (400, Some("Channel is inactive")),
        "{:?}",
        a.body
    );
}

#[tokio::test]
async fn since_and_until_bound_a_bulk_replay_to_the_instant() {
    let t = TestStack::with(|o| o.run_functions = false).await;
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
    let ch = ch.id.as_str().to_owned();
    for at in [
        "2026-01-05T10:00:00.000000Z",
        "2026-01-05T10:00:05.000000Z",
        "2026-01-05T10:00:10.000000Z",
        "2026-01-06T10:00:00.000000Z",
    ] {
        seed(&t, &tenant, &ch, 1, Some(at)).await;
    }
    // `since` is inclusive, `until` exclusive.
    let a = bulk(
        &t,
        &key,
        &ch,
        Some(json!({"since": "2026-01-05T10:00:05Z", "until": "2026-01-05T10:00:10Z"})),
    )
    .await;
    assert_eq!(retried(&a).retried, 1, "{:?}", a.body);
    // Any offset; with a day filter the narrower bounds apply: 10:00:10 on the 5th only.
    let a = bulk(
        &t,
        &key,
        &ch,
        Some(json!({"since": "2026-01-05T11:00:05+01:00", "to": "2026-01-05"})),
    )
    .await;
    assert_eq!(retried(&a).retried, 1, "{:?}", a.body);
    // A replay job takes the same bounds: what is left before the 6th is 10:00:00 on the 5th.
    let a = t
        .api(
            "POST",
            &format!("/api/v1/channels/{ch}/deliveries/replays"),
            &key,
            Some(json!({"until": "2026-01-06T00:00:00Z"})),
        )
        .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let a = bulk(
        &t,
        &key,
        &ch,
        Some(json!({"since": "2026-01-06T00:00:00Z"})),
    )
    .await;
    assert_eq!(retried(&a).retried, 1, "the 6th's");
    for bad in [json!({"since": "2026-01-05"}), json!({"until": "soon"})] {
        let a = bulk(&t, &key, &ch, Some(bad)).await;
        assert_eq!((a.status, Some(a.code())), (422, Some("invalid_body")));
    }
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
mod emulator {
    use super::*;

    #[tokio::test]
    async fn a_replay_job_runs_chunk_by_chunk_and_reports_progress() {
        // Chunks of 50 instead of 500, so that a few hundred rows make several chunks (the
        // emulator's transactions cost time linear in the table's size).
        let t = TestStack::with(|o| {
            o.backend = Backend::Emulator;
            o.config.replay_chunk = 50;
        })
        .await;
        let (tenant, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let ch = t.webhook(&key, "http://127.0.0.1:9/hook", json!({})).await;
        let ch = ch.id.as_str().to_owned();
        let rows = seed(&t, &tenant, &ch, 130, None).await;

        let a = t
            .api(
                "POST",
                &format!("/api/v1/channels/{ch}/deliveries/replays"),
                &key,
                Some(json!({"limit": 120})),
            )
            .await;
        assert_eq!(a.status, 202, "{:?}", a.body);
        let started: ReplayJobView = a.typed(202).unwrap();
        assert_eq!(started.status, "running", "{started:?}");
        let job = started.id;
        assert_eq!(
            t.api("GET", &format!("/api/v1/replays/{job}"), &other, None)
                .await
                .status,
            404
        );

        // A bound on the wait only: on a loaded two-core machine the emulator took 140 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let read = async || {
            t.api("GET", &format!("/api/v1/replays/{job}"), &key, None)
                .await
                .typed::<ReplayJobView>(200)
                .unwrap()
        };
        let mut view = read().await;
        while view.status == "running" && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            view = read().await;
        }
        assert_eq!(view.status, "done", "{view:?}");
        assert_eq!(view.retried, 120);
        assert!(view.has_more, "10 were left by the limit");
        let store = &t.stack.store;
        let now = store
            .get_deliveries(&rows.iter().map(|d| d.id.clone()).collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(
            now.iter().filter(|d| d.retry_count == 1).count(),
            120,
            "each replayed once"
        );
        assert_eq!(
            t.api("GET", "/api/v1/replays/rpl_nope", &key, None)
                .await
                .status,
            404
        );
    }
}
