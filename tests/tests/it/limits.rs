//! The tenant API's rate limits: per API key, shared by every API instance, 429 with
//! `Retry-After` over the limit, an operator's override per tenant; refused requests throttled by
//! their source, and a channel's receipts by the channel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::admin::PatchedTenant;
use converger_http::views::{DeliveryView, Page, TenantView};
use converger_tests::{Answer, Receiver, TestStack, is_settled};
use serde_json::json;
use std::time::{Duration, Instant};

/// A second API instance over the same stack: its own caches and leases, the same store.
async fn second_instance(t: &TestStack) -> String {
    let state = converger_http::AppState::new(t.stack.pipeline.clone(), None);
    let router = converger_http::app::tenant_api(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

async fn list(t: &TestStack, base: &str, key: &str) -> Answer {
    let r = t
        .http
        .get(format!("{base}/api/v1/channels"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    Answer::read(r).await
}

/// A tenant as an operator's change left it.
fn patched(a: &Answer) -> TenantView {
    a.typed::<PatchedTenant>(200).unwrap().tenant
}

mod emulator {
    use super::*;

    #[tokio::test]
    async fn a_key_over_its_limit_gets_429_on_every_instance_and_another_key_does_not() {
        let t = TestStack::on_emulator().await;
        let (limited, key) = t.tenant("default").await;
        let (_, other) = t.tenant("default").await;
        let admin = |body| {
            t.raw(
                "PATCH",
                format!("{}/admin/api/tenants/{limited}", t.stack.admin_url),
                Some(&t.stack.admin_token),
                Some(serde_json::Value::to_string(&body)),
            )
        };
        let a = admin(json!({"api_rate_limit": "every second"})).await;
        assert_eq!(
            (a.status, Some(a.code())),
            (422, Some("invalid_api_rate_limit"))
        );
        // Ten an hour: the rate adds nothing while the calls run (one call every 6 minutes),
        // so what passes is the burst and the lease slack, however slowly the emulator answers.
        let a = admin(json!({"api_rate_limit": "10/h"})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let tenant = patched(&a);
        assert_eq!(
            (
                tenant.api_rate_limit.as_str(),
                tenant.api_rate_limit_overridden
            ),
            ("10/h", true),
            "{tenant:?}"
        );

        // Two instances, one schedule: 40 calls at once, half on each.
        let apis = [t.stack.api_url.clone(), second_instance(&t).await];
        let answers =
            futures::future::join_all((0..40).map(|i| list(&t, &apis[i % 2], &key))).await;
        let ok = answers.iter().filter(|a| a.status == 200).count();
        let refused: Vec<_> = answers.iter().filter(|a| a.status == 429).collect();
        assert_eq!(ok + refused.len(), 40, "{answers:?}");
        // The burst (10) and one request of slack per instance (a lease rounds up to one).
        assert!((1..=12).contains(&ok), "{ok} calls passed: {answers:?}");
        for a in &refused {
            assert_eq!(a.code(), "rate_limited", "{:?}", a.body);
            assert!(
                a.retry_after
                    .as_deref()
                    .is_some_and(|s| s.parse::<u64>().unwrap() >= 1)
            );
        }
        // Both instances refused: the limit is the key's, not the instance's.
        let per_instance: Vec<usize> = (0..2)
            .map(|k| {
                answers
                    .iter()
                    .enumerate()
                    .filter(|(i, a)| i % 2 == k && a.status == 429)
                    .count()
            })
            .collect();
        assert!(per_instance.iter().all(|n| *n > 0), "{per_instance:?}");

        // Another tenant's key is not held back, on either instance.
        let answers =
            futures::future::join_all((0..20).map(|i| list(&t, &apis[i % 2], &other))).await;
        assert!(answers.iter().all(|a| a.status == 200), "{answers:?}");

        // An operator lifts the override: the new limit has a schedule of its own, so the
        // key is served on both instances once they see the change (their view of a tenant
        // lasts `TENANT_CACHE_TTL_MS`: a second here), not after the hour the old schedule
        // still holds.
        let a = admin(json!({"api_rate_limit": null})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        for api in &apis {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let status = list(&t, api, &key).await.status;
                if status == 200 {
                    break;
                }
                assert_eq!(status, 429);
                assert!(Instant::now() < deadline, "still refused after 60 s");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        // Back to the tier's default (the stack's, which the test kit sets).
        let tier_default = t.stack.pipeline.config().api_limits.default.to_string();
        let tenant = patched(&a);
        assert_eq!(
            (
                tenant.api_rate_limit.as_str(),
                tenant.api_rate_limit_overridden
            ),
            (tier_default.as_str(), false),
            "{tenant:?}"
        );
    }

    /// An operator spreads a busy tenant's listings over more shards: only growth is taken
    /// (fewer would hide the rows in the others), and the deliveries written before and after
    /// list together, each once.
    #[tokio::test]
    async fn a_tenants_listing_shards_only_grow_and_every_delivery_stays_listed() {
        let t = TestStack::on_emulator().await;
        let (tenant, key) = t.tenant("default").await;
        let admin = |body: serde_json::Value| {
            t.raw(
                "PATCH",
                format!("{}/admin/api/tenants/{tenant}", t.stack.admin_url),
                Some(&t.stack.admin_token),
                Some(body.to_string()),
            )
        };
        let fast = Receiver::always(200).await.unwrap();
        let ch = t
            .channel(
                &key,
                json!({"type": "webhook", "name": "w", "config": {"url": fast.url}}),
            )
            .await;
        let ch_id = ch.id.as_str().to_owned();
        let mut ids = t.activities(&key, &ch_id, 6, 6).await;
        // No load, no grant; a grant the load made is shown while it holds.
        let seen: TenantView = t
            .admin_get(&format!("/admin/api/tenants/{tenant}"))
            .await
            .typed(200)
            .unwrap();
        assert_eq!(seen.listing_shards_granted, None, "{seen:?}");
        let now = converger_core::time::now_ms();
        let grant = converger_core::shards::Grant {
            shards: 32,
            from_ms: now,
            until_ms: now + 60_000,
        };
        let tid = converger_core::TenantId::parse(&tenant).unwrap();
        assert!(
            t.stack
                .store
                .write_shard_grants(
                    &tid,
                    &converger_ports::ShardGrants::default().with(grant, now, 86_400_000)
                )
                .await
                .unwrap()
        );
        let seen: TenantView = t
            .admin_get(&format!("/admin/api/tenants/{tenant}"))
            .await
            .typed(200)
            .unwrap();
        assert_eq!(
            seen.listing_shards_granted.as_ref().map(|g| g.shards),
            Some(32),
            "{seen:?}"
        );
        let a = admin(json!({"delivery_shards": 16})).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(patched(&a).delivery_shards, 16, "{:?}", a.body);
        let a = admin(json!({"delivery_shards": 4})).await;
        assert_eq!(
            (a.status, Some(a.code())),
            (422, Some("invalid_delivery_shards")),
            "{:?}",
            a.body
        );
        let a = admin(json!({"delivery_shards": 100000})).await;
        assert_eq!(a.status, 422, "{:?}", a.body);
        // A tier whose default is smaller keeps the shards the tenant has.
        let a = admin(json!({"tier": "high"})).await;
        assert_eq!(patched(&a).delivery_shards, 16, "{:?}", a.body);
        ids.extend(t.activities(&key, &ch_id, 6, 6).await);
        for id in &ids {
            t.wait_delivery(&key, id, Duration::from_secs(30), is_settled)
                .await;
        }
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..20 {
            let url = match &cursor {
                Some(c) => format!("{}/api/v1/deliveries?limit=5&cursor={c}", t.stack.api_url),
                None => format!("{}/api/v1/deliveries?limit=5", t.stack.api_url),
            };
            let r = t.raw("GET", url, Some(&key), None).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            let page: Page<DeliveryView> = r.typed(200).unwrap();
            listed.extend(page.data.into_iter().map(|d| d.id));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut want: Vec<String> = ids.clone();
        want.sort();
        let mut got = listed.clone();
        got.sort();
        assert_eq!(got, want, "each delivery listed once: {listed:?}");
    }
}

/// A client of the tenant API whose requests come from `source` (a loopback address).
fn client_at(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Requests nobody vouches for are throttled by their source: past 60 refusals in a minute
/// (bad API keys, receipts that fail their check) an address is answered 429
/// `source_throttled` with `Retry-After`, before its key or receipt is looked at. Its calls
/// with a good key, and other addresses' bad ones, are not held back.
#[tokio::test]
async fn an_address_that_keeps_being_refused_is_throttled_and_no_one_else_is() {
    let t = TestStack::start().await;
    let rx = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .webhook(&key, &rx.url, json!({}))
        .await
        .id
        .as_str()
        .to_owned();
    let guesser = client_at("127.0.0.6");
    let channels = format!("{}/api/v1/channels", t.stack.api_url);
    let mut statuses = Vec::new();
    for n in 0..100 {
        let r = guesser
            .get(&channels)
            .bearer_auth(format!("cvg_not_a_key_{n}"))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status == 429 {
            assert!(r.headers().contains_key("retry-after"));
            let a = Answer::read(r).await;
            assert_eq!(a.code(), "source_throttled", "{:?}", a.body);
        }
        statuses.push(status);
    }
    assert!(statuses[..60].iter().all(|s| *s == 401), "{statuses:?}");
    let first = statuses.iter().position(|s| *s == 429).expect("throttled");
    assert!(statuses[first..].iter().all(|s| *s == 429), "{statuses:?}");

    // The same address with a good key is served; another address's bad key is refused as
    // ever, not throttled.
    let r = guesser
        .get(&channels)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let other = client_at("127.0.0.7");
    let r = other
        .get(&channels)
        .bearer_auth("cvg_bad")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Receipts that fail their check count the same way, by their source.
    let receipts = format!("{}/api/v1/channels/{ch}/status", t.stack.api_url);
    let forger = client_at("127.0.0.8");
    let mut statuses = Vec::new();
    for _ in 0..100 {
        let r = forger
            .post(&receipts)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    assert!(
        statuses[..60].iter().all(|s| *s != 429 && *s >= 400),
        "{statuses:?}"
    );
    let first = statuses.iter().position(|s| *s == 429).expect("throttled");
    assert!(statuses[first..].iter().all(|s| *s == 429), "{statuses:?}");
}

/// A channel's verified receipts spend the channel's own schedule (`RECEIPT_RATE_LIMIT`):
/// past it they are answered 429 `receipts_throttled` with `Retry-After`, while another
/// channel's are served. Receipts that fail their check do not spend it (their source
/// does), and a verified receipt is never its source's refusal, even when none of its
/// messages is known: more of them than the source's limit are all answered 404.
#[tokio::test]
async fn a_channels_receipts_over_its_limit_get_429_and_another_channels_do_not() {
    const LIMIT: usize = 65;
    let t = TestStack::with(|o| {
        o.config.receipt_limit = converger_core::RateLimit {
            count: LIMIT as u32,
            per_ms: 3_600_000,
        }
    })
    .await;
    let fake = converger_tests::fakes::infobip("ib-key-0123", vec![]).await;
    let (_, key) = t.tenant("default").await;
    let mut channels = Vec::new();
    for name in ["a", "b"] {
        let c = t
            .channel(
                &key,
                json!({"type": "whatsapp_infobip", "name": name, "config": {
                    "base_url": fake.url, "api_key": "ib-key-0123", "sender": "447860099299",
                    "receipt_token": "ib-receipts-0123"}}),
            )
            .await;
        channels.push(c.id.as_str().to_owned());
    }
    let report = async |ch: &str, token: &str| {
        let a = t
            .infobip_reports(ch, token, &[("unknown-msg", "DELIVERED")])
            .await;
        (a.status, a.retry_after.is_some(), a.code().to_owned())
    };
    for _ in 0..10 {
        assert_eq!(report(&channels[0], "wrong").await.0, 401);
    }
    let mut answers = Vec::new();
    for _ in 0..LIMIT + 5 {
        answers.push(report(&channels[0], "ib-receipts-0123").await);
    }
    assert!(
        answers[..LIMIT]
            .iter()
            .all(|(s, _, code)| *s == 404 && code == "unknown_message"),
        "the limit's receipts are applied, not refused by their source: {answers:?}"
    );
    assert!(
        answers[LIMIT..]
            .iter()
            .all(|(s, retry, code)| *s == 429 && *retry && code == "receipts_throttled"),
        "{answers:?}"
    );
    let (status, _, code) = report(&channels[1], "ib-receipts-0123").await;
    assert_eq!((status, code.as_str()), (404, "unknown_message"));
}

/// Each HTTP and WebSocket entry point has a concurrency of its own, a cap and a reserve, so
/// that no door takes the others' (a tenant flooding one API cannot starve the deliver
/// functions, nor they the API). AWS refuses a reservation that leaves fewer than 100
/// unreserved, which the emulator does not check: at the defaults, in an account of 1,000,
/// what is reserved leaves the deliver mappings' maximum and that minimum.
#[test]
fn every_entry_point_has_its_own_concurrency_within_an_accounts_quota() {
    use serde_yaml::Value;
    let t = crate::infra::template();
    let default = |p: &str| -> u64 {
        let d = &t["Parameters"][p]["Default"];
        d.as_u64()
            .or_else(|| d.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or_else(|| panic!("{p} has no number default"))
    };
    let mut reserved = 0;
    for (f, p) in [
        ("ApiFunction", "ApiReservedConcurrency"),
        ("AdminFunction", "AdminReservedConcurrency"),
        ("WebsocketFunction", "WebsocketReservedConcurrency"),
    ] {
        let r = &t["Resources"][f]["Properties"]["ReservedConcurrentExecutions"];
        let Value::Tagged(tag) = r else {
            panic!("{f}: no reserved concurrency")
        };
        assert!(tag.tag == "If", "{f}: {r:?}");
        let args = tag.value.as_sequence().unwrap();
        assert!(
            matches!(&args[1], Value::Tagged(x) if x.tag == "Ref" && x.value.as_str() == Some(p)),
            "{f}: {r:?}"
        );
        assert!(default(p) > 0, "{p} reserves nothing by default");
        reserved += default(p);
    }
    reserved += 1; // the retry scheduler's
    let deliver: u64 = [
        "DeliverConcurrencyHigh",
        "DeliverConcurrencyDefault",
        "DeliverConcurrencyBulk",
    ]
    .iter()
    .map(|p| default(p))
    .sum();
    assert!(
        reserved + deliver + 100 <= 1000,
        "{reserved} reserved and {deliver} deliver batches leave fewer than 100 of 1,000"
    );
}
