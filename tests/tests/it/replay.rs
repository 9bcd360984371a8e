//! Finding and replaying dead letters through the tenant API, on the emulator with real
//! receivers: listing with filters and keyset pagination, single replays (concurrent ones
//! included), the audit log, and tenant isolation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::schemas::ErrorBody;
use converger_http::views::{AuditView, DeliveryView, Page};
use converger_tests::{Answer, Receiver, Reply, TestStack, is_settled};
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;

fn ids(page: &Page<DeliveryView>) -> Vec<String> {
    page.data.iter().map(|d| d.id.clone()).collect()
}

/// The message of an error answer.
fn message(a: &Answer) -> String {
    let e: ErrorBody = serde_json::from_value(a.body.clone())
        .unwrap_or_else(|e| panic!("not an error body ({e}): {:?}", a.body));
    e.error.message
}

/// What the audit log keeps of a single replay.
#[derive(Debug, serde::Deserialize)]
struct RetryChanges {
    previous_status: String,
    previous_attempts: u32,
    retry_count: u32,
    previous_last_error: Option<String>,
}

/// The tenant's audit log (its first page).
async fn audit(t: &TestStack, key: &str) -> Page<AuditView> {
    let a = t.api("GET", "/api/v1/audit", key, None).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.typed(200).unwrap()
}

/// Posts an activity and waits until every delivery of it is settled; returns delivery ids.
async fn send(t: &TestStack, key: &str, channels: &[&str]) -> Vec<String> {
    let act = t.activity(key, channels).await;
    let mut out = Vec::new();
    for d in act.deliveries {
        let id = d.id.as_str().to_owned();
        let row = t
            .wait_delivery(key, &id, Duration::from_secs(15), is_settled)
            .await;
        assert!(is_settled(&row), "{row:?}");
        out.push(id);
    }
    out
}

#[tokio::test]
async fn replay_refusals_and_tenant_isolation() {
    let t = TestStack::start().await;
    let bad = Receiver::always(400).await.unwrap();
    let good = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let (_, other) = t.tenant("default").await;
    let dead_ch = t.webhook(&key, &bad.url, json!({})).await;
    let ok_ch = t.webhook(&key, &good.url, json!({})).await;
    let dead = send(&t, &key, &[dead_ch.id.as_str()]).await.remove(0);
    let sent = send(&t, &key, &[ok_ch.id.as_str()]).await.remove(0);

    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{sent}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(
        (a.status, Some(a.code())),
        (409, Some("not_failed")),
        "{:?}",
        a.body
    );
    let a = t
        .api("POST", "/api/v1/deliveries/dlv_nope/retry", &key, None)
        .await;
    assert_eq!(a.status, 404);

    // Tenant B can neither list, read, nor replay tenant A's deliveries.
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{dead}/retry"),
            &other,
            None,
        )
        .await;
    assert_eq!(a.status, 404);
    let a = t
        .api("GET", &format!("/api/v1/deliveries/{dead}"), &other, None)
        .await;
    assert_eq!(a.status, 404);
    for q in [
        String::new(),
        "?status=failed".into(),
        format!("?channel_id={}", dead_ch.id.as_str()),
        format!("?channel_id={}&status=failed", dead_ch.id.as_str()),
    ] {
        let a = t
            .api("GET", &format!("/api/v1/deliveries{q}"), &other, None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let page: Page<DeliveryView> = a.typed(200).unwrap();
        assert!(page.data.is_empty(), "tenant B sees nothing with `{q}`");
    }
    let act = t
        .delivery(&key, &dead)
        .await
        .activity_id
        .as_str()
        .to_owned();
    let a = t
        .api(
            "GET",
            &format!("/api/v1/deliveries?activity_id={act}"),
            &other,
            None,
        )
        .await;
    let page: Page<DeliveryView> = a.typed(200).unwrap();
    assert!(page.data.is_empty(), "{page:?}");
    let log = audit(&t, &other).await;
    assert!(log.data.is_empty(), "{log:?}");

    // An inactive channel is refused, and the delivery stays failed.
    let path = format!("/api/v1/channels/{}", dead_ch.id.as_str());
    assert_eq!(
        t.api("PATCH", &path, &key, Some(json!({"active": false})))
            .await
            .status,
        200
    );
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{dead}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(message(&a), "Channel is inactive");
    assert_eq!(t.delivery(&key, &dead).await.status, "failed");
}

#[tokio::test]
async fn a_replay_after_the_receiver_is_fixed_is_sent() {
    let t = TestStack::start().await;
    let broken = Receiver::always(500).await.unwrap();
    let fixed = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .webhook(&key, &broken.url, json!({"max_attempts": 1}))
        .await;
    let id = send(&t, &key, &[ch.id.as_str()]).await.remove(0);
    assert_eq!(t.delivery(&key, &id).await.status, "failed");
    // Fix the cause first (the URL), then replay.
    let path = format!("/api/v1/channels/{}", ch.id.as_str());
    let a = t
        .api(
            "PATCH",
            &path,
            &key,
            Some(json!({"config": {"url": fixed.url}})),
        )
        .await;
    assert_eq!(a.status, 200);
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{id}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), |d| d.status == "sent")
        .await;
    assert_eq!(d.status, "sent");
    assert_eq!(d.retry_count, 1);
    assert_eq!(fixed.requests().len(), 1);
}

/// A replay goes to its tenant's tier now, not the one its delivery was created at: the row
/// takes it (so its retries and the sweeper use it too), single and bulk alike.
async fn a_replay_goes_to_the_tenants_tier_now(t: &TestStack) {
    let bad = Receiver::always(400).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &bad.url, json!({})).await;
    let ch = ch.id.as_str();
    let one = send(t, &key, &[ch]).await.remove(0);
    let two = send(t, &key, &[ch]).await.remove(0);
    assert_eq!(t.delivery(&key, &one).await.tier, "default");
    let a = t.patch_tenant(&tenant, json!({"tier": "high"})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{one}/retry"),
            &key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let replayed: DeliveryView = a.typed(200).unwrap();
    assert_eq!(replayed.tier, "high", "{replayed:?}");
    let d = t
        .wait_delivery(&key, &one, Duration::from_secs(20), |d| {
            d.status == "failed" && d.retry_count == 1
        })
        .await;
    assert_eq!(d.tier, "high", "{d:?}");
    let a = t
        .api(
            "POST",
            &format!("/api/v1/channels/{ch}/deliveries/retry"),
            &key,
            Some(json!({})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let d = t
        .wait_delivery(&key, &two, Duration::from_secs(20), |d| d.retry_count == 1)
        .await;
    assert_eq!(d.tier, "high", "{d:?}");
}

#[tokio::test]
async fn a_replay_goes_to_the_tenants_tier_now_in_process() {
    let t = TestStack::start().await;
    a_replay_goes_to_the_tenants_tier_now(&t).await;
}

/// In process; the store suite holds `replay_many` to one winner on both backends.
#[tokio::test]
async fn fifty_concurrent_replays_replay_once() {
    let t = TestStack::start().await;
    let rx = Receiver::start(
        vec![Reply::status(400).body("bad recipient")],
        Reply::status(200),
    )
    .await
    .unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let id = send(&t, &key, &[ch.id.as_str()]).await.remove(0);
    let before = t.delivery(&key, &id).await;
    assert_eq!(before.status, "failed");

    let path = format!("/api/v1/deliveries/{id}/retry");
    let calls = (0..50).map(|_| t.api("POST", &path, &key, None));
    let answers = futures::future::join_all(calls).await;
    let ok: Vec<_> = answers.iter().filter(|a| a.status == 200).collect();
    assert_eq!(ok.len(), 1, "exactly one replay wins");
    assert!(
        answers.iter().all(|a| a.status == 200 || a.status == 409),
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    let won: DeliveryView = ok[0].typed(200).unwrap();
    assert_eq!(won.status, "pending");
    assert_eq!(won.attempts, 0, "attempts reset");
    assert_eq!(won.retry_count, 1);
    assert!(
        won.retried_by
            .as_deref()
            .unwrap()
            .starts_with("tenant_api:key_"),
        "{won:?}"
    );
    assert!(won.retried_at.is_some(), "{won:?}");
    assert!(
        won.last_error.as_deref().unwrap().contains("bad recipient"),
        "last_error stays until the next attempt"
    );

    let after = t
        .wait_delivery(&key, &id, Duration::from_secs(15), |d| d.status == "sent")
        .await;
    assert_eq!(after.status, "sent", "{after:?}");
    assert_eq!(after.attempts, 1);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        rx.requests().len(),
        2,
        "one request for the first attempt, one for the replay"
    );

    let log = audit(&t, &key).await;
    assert_eq!(log.data.len(), 1, "{log:?}");
    let e = &log.data[0];
    assert_eq!(e.action, "retry");
    assert_eq!(e.resource_type, "delivery");
    assert_eq!(e.resource_id, id);
    assert_eq!(e.actor.kind, "tenant_api");
    let changes: RetryChanges = serde_json::from_value(e.changes.clone()).unwrap();
    assert_eq!(changes.previous_status, "failed");
    assert_eq!(changes.previous_attempts, 1);
    assert_eq!(changes.retry_count, 1);
    assert!(
        changes
            .previous_last_error
            .as_deref()
            .unwrap()
            .contains("400"),
        "{changes:?}"
    );
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
mod emulator {
    use super::*;

    #[tokio::test]
    async fn a_replay_goes_to_the_tenants_tier_now() {
        let t = TestStack::on_emulator().await;
        super::a_replay_goes_to_the_tenants_tier_now(&t).await;
    }

    #[tokio::test]
    async fn listing_filters_and_pages_every_row_exactly_once() {
        let t = TestStack::on_emulator().await;
        let bad = Receiver::start(vec![], Reply::status(422).body("invalid phone number"))
            .await
            .unwrap();
        let (_, key) = t.tenant("default").await;
        let echo = t
            .channel(
                &key,
                json!({"type": "echo", "name": "echo", "config": {"reply_to": "none"}}),
            )
            .await;
        let echo_id = echo.id.clone();
        let hook = t.webhook(&key, &bad.url, json!({})).await;
        let hook_id = hook.id.as_str().to_owned();

        let mut failed = Vec::new();
        let mut sent = Vec::new();
        let mut first_activity = String::new();
        for i in 0..5 {
            let act = t.activity(&key, &[&echo_id, &hook_id]).await;
            if i == 0 {
                first_activity = act.activity_id.as_str().to_owned();
            }
            for d in act.deliveries {
                let id = d.id.as_str().to_owned();
                let row = t
                    .wait_delivery(&key, &id, Duration::from_secs(15), is_settled)
                    .await;
                if row.status == "failed" {
                    failed.push(id)
                } else {
                    sent.push(id)
                }
            }
        }
        assert_eq!((failed.len(), sent.len()), (5, 5));

        // Filters.
        let get = |q: String| {
            let t = &t;
            let key = key.clone();
            async move {
                let a = t
                    .api("GET", &format!("/api/v1/deliveries{q}"), &key, None)
                    .await;
                assert_eq!(a.status, 200, "{q}: {:?}", a.body);
                a.typed::<Page<DeliveryView>>(200).unwrap()
            }
        };
        let all: HashSet<String> = ids(&get("?status=failed&limit=500".into()).await)
            .into_iter()
            .collect();
        assert_eq!(all, failed.iter().cloned().collect());
        let by_channel = ids(&get(format!("?channel_id={echo_id}")).await);
        assert_eq!(
            by_channel.iter().cloned().collect::<HashSet<_>>(),
            sent.iter().cloned().collect()
        );
        assert_eq!(
            ids(&get(format!("?channel_id={echo_id}&status=failed")).await).len(),
            0
        );
        assert_eq!(
            ids(&get("?q=phone%20number".into()).await).len(),
            5,
            "search in last_error"
        );
        assert_eq!(
            ids(&get(format!("?q={first_activity}")).await).len(),
            2,
            "search by exact activity id"
        );
        assert_eq!(
            ids(&get(format!("?activity_id={first_activity}&status=sent")).await).len(),
            1
        );
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        assert_eq!(
            ids(&get(format!("?from={today}&to={today}&limit=500")).await).len(),
            10
        );
        assert_eq!(ids(&get("?to=2000-01-01".into()).await).len(), 0);
        let newest = get("?status=failed".into()).await;
        let oldest = get("?status=failed&sort=oldest".into()).await;
        let mut reversed = ids(&oldest);
        reversed.reverse();
        assert_eq!(ids(&newest), reversed);
        let times: Vec<&str> = newest.data.iter().map(|d| d.updated_at.as_str()).collect();
        assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
        for (q, code) in [
            ("?status=done", "invalid_query"),
            ("?limit=0", "invalid_query"),
            ("?sort=up", "invalid_query"),
            ("?from=yesterday", "invalid_query"),
            ("?cursor=%21%21", "invalid_cursor"),
            ("?colour=red", "invalid_query"),
        ] {
            let a = t
                .api("GET", &format!("/api/v1/deliveries{q}"), &key, None)
                .await;
            assert_eq!((a.status, Some(a.code())), (422, Some(code)), "{q}");
        }

        // Pages of 3 over all ten rows, while one failed row is replayed in the middle: the rows
        // that did not change come exactly once, and no row comes twice.
        let mut seen: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let q = match &cursor {
                Some(c) => format!("?limit=3&cursor={c}"),
                None => "?limit=3".into(),
            };
            let page = get(q).await;
            seen.extend(ids(&page));
            pages += 1;
            if pages == 2 {
                let a = t
                    .api(
                        "POST",
                        &format!("/api/v1/deliveries/{}/retry", failed[0]),
                        &key,
                        None,
                    )
                    .await;
                assert_eq!(a.status, 200);
            }
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
            assert!(pages < 10, "pagination terminates");
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "no row twice: {seen:?}");
        for id in failed.iter().skip(1).chain(sent.iter()) {
            assert!(unique.contains(id), "{id} listed");
        }
        // The retry made midway is in the tenant's audit log.
        let log = audit(&t, &key).await;
        assert_eq!(log.data.len(), 1, "{log:?}");
        assert_eq!(log.data[0].action, "retry");
        assert_eq!(log.data[0].resource_id, failed[0]);
    }
}
