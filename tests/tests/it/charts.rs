//! Charts and usage: the tenant API's usage against a scenario's counted deliveries, and the
//! pages' charts drawn from a seeded history, read in a real headless Chromium (screenshots
//! under `target/test-output/browser/<test>/`).

use converger_core::health::HealthStatus;
use converger_core::usage::{Counts, Grain};
use converger_core::{ChannelId, TenantId, time};
use converger_http::views::UsageView;
use converger_ports::{HealthCheck, UsageKey, UsageOf};
use converger_tests::browser::Browser;
use converger_tests::{Receiver, TestStack, WEB_PASSWORD, is_settled};
use serde_json::json;
use std::time::Duration;

/// Twenty-four hours of a channel's (and its tenant's) history before now, written as the
/// counters would be: sent, failed attempts and dead letters each hour, a breaker opening five
/// hours ago; health checks healthy, then degraded, then unhealthy.
async fn seed_history(t: &TestStack, tenant: &str, channel: &str) {
    let store = &t.stack.store;
    let (tenant, channel) = (
        TenantId::parse(tenant).unwrap(),
        ChannelId::parse(channel).unwrap(),
    );
    let now = time::now_ms();
    let hour = Grain::Hour.bucket(now);
    for ago in 1..24 {
        let mut c = Counts::default();
        for i in 0..(10 + ago) {
            c.add(&Counts::sent_after(200 * (i % 7)));
        }
        c.attempts = c.sent + ago % 4;
        c.failed_attempts = ago % 4;
        c.dead_letters = i64::from(ago % 6 == 0);
        c.breaker_opened = i64::from(ago == 5);
        for of in [
            UsageOf::Channel(channel.clone()),
            UsageOf::Tenant(tenant.clone()),
        ] {
            store
                .add_usage(&UsageKey::new(of, Grain::Hour, hour - ago), &c)
                .await
                .unwrap();
        }
    }
    // The queues' hourly highest: the default queue's backlog growing, then drained; a few
    // dead letters.
    let depth = |queue: &str, visible: u64| converger_ports::QueueDepth {
        queue: queue.into(),
        visible,
        delayed: 0,
        in_flight: 0,
    };
    for ago in 0..24u64 {
        let backlog = if ago < 6 { 0 } else { 400 - 10 * ago };
        let samples = [
            depth("deliveries-high", ago % 3),
            depth("deliveries-high-dlq", 0),
            depth("deliveries", backlog),
            depth("deliveries-dlq", 2),
            depth("deliveries-bulk", 50),
            depth("deliveries-bulk-dlq", 0),
        ];
        store
            .put_depths(Grain::Hour, hour - ago as i64, &samples)
            .await
            .unwrap();
    }
    let check = |hours_ago: i64, status: HealthStatus| HealthCheck {
        channel_id: channel.clone(),
        tenant_id: tenant.clone(),
        status,
        previous_status: None,
        failure_rate: 0.0,
        total_deliveries: 10,
        failed_deliveries: 0,
        checked_at: converger_core::Timestamp::from_ms(now - hours_ago * 3_600_000),
        expires_at: now / 1000 + 86_400,
    };
    store
        .record_health(&[
            check(20, HealthStatus::Healthy),
            check(10, HealthStatus::Degraded),
            check(5, HealthStatus::Unhealthy),
        ])
        .await
        .unwrap();
}

/// The text of the first element `css` matches, hidden or not (an SVG's title).
async fn content(b: &Browser, css: &str) -> String {
    b.js(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
        vec![json!(css)],
    )
    .await
    .as_str()
    .unwrap_or_else(|| panic!("no `{css}`"))
    .to_owned()
}

async fn count(b: &Browser, css: &str) -> u64 {
    b.js(
        "return document.querySelectorAll(arguments[0]).length;",
        vec![json!(css)],
    )
    .await
    .as_u64()
    .unwrap()
}

#[tokio::test]
async fn usage_and_charts_show_a_scenario_and_a_seeded_history() {
    let t = TestStack::start().await;
    let bad = Receiver::always(503).await.unwrap();
    let f = t.failing_tenant(&bad, "dead end", 3).await;
    let ok = Receiver::always(200).await.unwrap();
    let good = t
        .channel(
            &f.key,
            json!({"type": "webhook", "name": "receiver", "config": {"url": ok.url}}),
        )
        .await
        .id
        .as_str()
        .to_owned();
    for id in t.activities(&f.key, &good, 4, 2).await {
        let d = t
            .wait_delivery(&f.key, &id, Duration::from_secs(20), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }

    // The tenant API's usage: today's counts are the scenario's (counted from the rows'
    // changes: read to here first).
    assert!(t.stack.changes_settled().await);
    let u = t.api("GET", "/api/v1/usage", &f.key, None).await;
    assert_eq!(u.status, 200, "{:?}", u.body);
    let u: UsageView = u.typed(200).unwrap();
    let total = &u.total;
    assert_eq!(
        (total.deliveries, total.attempts, total.dead_letters),
        (7, 7, 3),
        "3 dead letters at their one attempt, 4 sent at the first: {u:?}"
    );
    assert_eq!(u.days.len(), 30);
    assert!(total.estimated_cost_usd > 0.0, "{u:?}");
    assert!(u.note.contains("estimate"), "{u:?}");
    assert_eq!(u.prices_per_million_usd.get("sqs_request"), Some(&0.4));
    let bad_range = t
        .api("GET", "/api/v1/usage?from=2026-02-30", &f.key, None)
        .await;
    assert_eq!((bad_range.status, bad_range.code()), (422, "invalid_query"));

    seed_history(&t, &f.tenant, &f.channel).await;

    // An operator: the top tenants by cost, then the tenant's charts and usage.
    let b = Browser::start(&t.stack.admin_url, "charts-operator").await;
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    // The dashboard's queues over the day.
    b.goto("/admin?range=24h").await;
    assert_eq!(
        content(&b, "#queues svg > title").await,
        "Tier queues: messages (each hour's highest)"
    );
    let queues = content(&b, "#queues svg > desc").await;
    assert!(
        queues.contains("deliveries: highest 340 messages")
            && queues.contains("deliveries-bulk: highest 50"),
        "{queues}"
    );
    assert!(
        content(&b, "#dlqs svg > desc")
            .await
            .contains("deliveries-dlq: highest 2")
    );
    b.shot("dashboard-queues-24h").await;
    b.goto("/admin/usage").await;
    let top = b.row_ids("#top-tenants tbody tr.tenant").await;
    assert!(top.contains(&f.tenant), "{top:?}");
    assert!(b.text(".note").await.contains("list prices"));
    b.shot("usage-top-tenants").await;
    // The tenant's usage, reached from its row on the tenants page.
    b.goto("/admin/tenants").await;
    b.click(&format!("tr.tenant[data-id='{}'] a.usage", f.tenant))
        .await;
    b.find("table#usage").await;
    assert_eq!(b.path().await, format!("/admin/usage?tenant={}", f.tenant));
    assert_eq!(
        content(&b, "#tenant-deliveries title").await,
        "Deliveries per hour"
    );
    assert_eq!(b.text("#usage tfoot td:nth-child(2)").await, "7");
    assert_eq!(b.text("#usage tfoot td:nth-child(4)").await, "3");
    b.shot("usage-tenant-24h").await;

    // The channel's charts over the week: each chart labelled, the series told apart by a
    // pattern, the health timeline with its three states and the breaker's opening.
    b.goto(&format!("/admin/channels/{}/charts?range=7d", f.channel))
        .await;
    for (id, title) in [
        ("channel-deliveries", "Deliveries per hour"),
        ("channel-latency", "Ingest to sent (ms, at most)"),
        ("health", "Health"),
    ] {
        assert_eq!(content(&b, &format!("#{id} svg > title")).await, title);
        assert!(
            !content(&b, &format!("#{id} svg > desc")).await.is_empty(),
            "{id} is described in words"
        );
    }
    let desc = content(&b, "#channel-deliveries svg > desc").await;
    assert!(
        desc.contains("failed attempts: 39 in all; dead letters: 6 in all"),
        "the seeded 36 and 3, and the scenario's 3 and 3: {desc}"
    );
    assert!(count(&b, "#channel-deliveries rect.bar.hatched").await >= 10);
    let legend = b.text("#channel-deliveries figcaption").await;
    for name in ["sent", "failed attempts", "dead letters"] {
        assert!(legend.contains(name), "{legend}");
    }
    let health = content(&b, "#health svg > desc").await;
    for s in [
        "healthy from",
        "degraded from",
        "unhealthy from",
        "breaker opened at",
    ] {
        assert!(health.contains(s), "{health}");
    }
    assert_eq!(count(&b, "#health path.mark").await, 1);
    b.shot("channel-charts-7d").await;
    b.goto(&format!("/admin/channels/{}/charts?range=1h", f.channel))
        .await;
    assert_eq!(
        content(&b, "#channel-deliveries svg > title").await,
        "Deliveries per minute"
    );
    assert_eq!(
        count(&b, "#channel-deliveries rect.bar.dotted").await,
        1,
        "this hour's 3 dead letters, in one minute"
    );
    b.shot("channel-charts-1h").await;
    b.goto(&format!("/admin/channels/{}/charts?range=2w", f.channel))
        .await;
    assert!(b.text("#page-error").await.contains("1h, 24h and 7d"));
    b.close().await;

    // The tenant's owner in the portal: its own usage and charts, not another tenant's.
    t.web_user("portal", "owner@charts.example", "owner", Some(&f.tenant))
        .await;
    let other = t.failing_tenant(&bad, "elsewhere", 1).await;
    let p = Browser::start(&t.stack.admin_url, "charts-portal").await;
    p.sign_in("portal", "owner@charts.example", WEB_PASSWORD)
        .await;
    p.goto(&format!("/portal/usage?tenant={}", other.tenant))
        .await;
    assert!(
        p.text("main").await.contains(&f.tenant),
        "its own, whatever the URL says"
    );
    assert_eq!(p.text("#usage tfoot td:nth-child(2)").await, "7");
    p.shot("portal-usage").await;
    p.goto(&format!("/portal/channels/{}/charts", f.channel))
        .await;
    assert_eq!(
        content(&p, "#channel-deliveries svg > title").await,
        "Deliveries per hour"
    );
    p.shot("portal-channel-charts").await;
    p.goto(&format!("/portal/channels/{}/charts", other.channel))
        .await;
    assert!(p.text("#page-error").await.contains("No such channel"));
    p.close().await;
}

/// The retry scheduler samples every tier queue and dead-letter queue through the deployed
/// function's IAM, into this minute's sample and the hour's; the tenant API reads usage
/// through its own.
#[tokio::test]
async fn the_retry_scheduler_samples_the_queues_on_the_emulator() {
    let t = TestStack::with(|o| {
        o.backend = converger_local::Backend::Emulator;
        o.sweep_period = converger_local::Every::Never;
    })
    .await;
    let now = time::now_ms();
    t.stack
        .functions
        .retry_scheduler
        .sweeper()
        .sample_depths()
        .await;
    let store = &t.stack.store;
    let minute = store
        .read_depths(Grain::Minute, &[Grain::Minute.bucket(now)])
        .await
        .unwrap();
    let hour = store
        .read_depths(Grain::Hour, &[Grain::Hour.bucket(now)])
        .await
        .unwrap();
    let names: Vec<&str> = minute[0].iter().map(|d| d.queue.as_str()).collect();
    assert_eq!(
        names,
        [
            "deliveries-high",
            "deliveries-high-dlq",
            "deliveries",
            "deliveries-dlq",
            "deliveries-bulk",
            "deliveries-bulk-dlq"
        ]
    );
    assert_eq!(hour[0].len(), 6);
    // The tenant API reads its usage through its own IAM too.
    let (_, key) = t.tenant("default").await;
    let u = t
        .api(
            "GET",
            "/api/v1/usage?from=2026-01-01&to=2026-01-31",
            &key,
            None,
        )
        .await;
    assert_eq!(u.status, 200, "{:?}", u.body);
    assert_eq!(u.typed::<UsageView>(200).unwrap().days.len(), 31);
    assert!(
        t.stack.iam_violations().is_empty(),
        "{:?}",
        t.stack.iam_violations()
    );
}
