//! Health checks, auto-disable, platform events and alert webhooks, on the emulator with real
//! receivers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::Timestamp;
use converger_core::health::{HealthStatus, minute};
use converger_core::{ChannelId, TenantId, time};
use converger_http::admin::PatchedTenant;
use converger_http::schemas::{ChannelHealthDoc, DeliveryStateDoc};
use converger_http::views::{
    BulkRetried, ChannelView, CreatedChannel, DeliveryView, Ingested, Page,
};
use converger_local::Backend;
use converger_ports::events::{ChannelDisabled, ChannelHealthChanged, CircuitChanged};
use converger_ports::{HealthCheck, Outcome, Settle};
use converger_tests::{EventTap, Receiver, Reply, TestStack, is_settled, wait_until};
use serde_json::{Value, json};
use std::time::Duration;

/// A platform event's `detail`, read as its type.
fn hook(url: &str, extra: Value) -> Value {
    let mut body = json!({"type": "webhook", "name": "hook", "config": {"url": url}});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

async fn health(t: &TestStack, key: &str, ch: &str) -> ChannelHealthDoc {
    t.api("GET", &format!("/api/v1/channels/{ch}/health"), key, None)
        .await
        .typed(200)
        .unwrap()
}

/// Sets a channel's counters for this minute as if `created` deliveries were made and
/// `failed` of them dead-lettered.
async fn counters(t: &TestStack, ch: &str, created: i64, failed: i64) {
    t.stack
        .store
        .count_deliveries(
            &ChannelId::parse(ch).unwrap(),
            minute(time::now_ms()),
            created,
            failed,
        )
        .await
        .unwrap();
}

fn no_health_runs(o: &mut converger_local::StackOptions) {
    o.health_period = converger_local::Every::Never;
}

/// The tenant's alert webhook receives a health change with the body its receivers were
/// written for (`"event": "channel_health_changed"`); the bus keeps `channel.health_changed`.
#[tokio::test]
async fn a_health_change_reaches_the_alert_webhook_by_its_alert_name() {
    let t = TestStack::with(no_health_runs).await;
    let tap = t.tap_events().await;
    let alerts = Receiver::always(200).await.unwrap();
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let set = t
        .patch_tenant(&tenant, json!({"alert_webhook_url": alerts.url}))
        .await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    let ch = t.channel(&key, hook(&rx.url, json!({}))).await;
    let id = ch.id.as_str().to_owned();
    counters(&t, &id, 1000, 200).await;
    assert!(t.stack.changes_settled().await);
    t.stack
        .functions
        .health
        .health()
        .health_check()
        .await
        .unwrap();
    let got = alerts.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1, "one alert: the health change");
    let body: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(body["event"], "channel_health_changed", "{body}");
    assert_eq!(body["channel_id"], id.as_str());
    assert_eq!(body["new_status"], "degraded");
    let events = tap
        .wait(Duration::from_secs(10), |e| {
            !EventTap::of(e, "channel.health_changed").is_empty()
        })
        .await;
    let on_bus = EventTap::of(&events, "channel.health_changed");
    let on_bus: ChannelHealthChanged = EventTap::detail(&on_bus[0]);
    assert_eq!(on_bus.channel.event, "channel.health_changed");
}

#[tokio::test]
async fn counters_follow_real_deliveries_and_replays() {
    let t = TestStack::with(no_health_runs).await;
    let rx = Receiver::start(
        vec![Reply::status(400), Reply::status(400), Reply::status(400)],
        Reply::status(200),
    )
    .await
    .unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .channel(
            &key,
            hook(&rx.url, json!({"circuit_breaker": {"max_in_flight": 1}})),
        )
        .await;
    let id = ch.id.as_str();
    let ids = t.activities(&key, id, 10, 1).await;
    for d in &ids {
        t.wait_delivery(&key, d, Duration::from_secs(20), is_settled)
            .await;
    }
    // What the check reads follows from the rows' changes: read to here first.
    assert!(t.stack.changes_settled().await);
    t.stack
        .functions
        .health
        .health()
        .health_check()
        .await
        .unwrap();
    let h = health(&t, &key, id).await;
    assert_eq!(h.history[0].total_deliveries, 10, "{h:?}");
    assert_eq!(h.history[0].failed_deliveries, 3, "{h:?}");
    assert_eq!(h.status, "degraded");
    // Replaying the dead letters takes them out of the failed count.
    let a = t
        .api(
            "POST",
            &format!("/api/v1/channels/{id}/deliveries/retry"),
            &key,
            Some(json!({})),
        )
        .await;
    let retried: BulkRetried = a.typed(200).unwrap();
    assert_eq!(retried.retried, 3, "{retried:?}");
    // What the check reads follows from the rows' changes: read to here first.
    assert!(t.stack.changes_settled().await);
    t.stack
        .functions
        .health
        .health()
        .health_check()
        .await
        .unwrap();
    let h = health(&t, &key, id).await;
    assert_eq!(h.history[0].failed_deliveries, 0, "{h:?}");
    assert_eq!(h.status, "healthy");
}

#[tokio::test]
async fn expired_history_rows_are_not_shown() {
    let t = TestStack::with(no_health_runs).await;
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.channel(&key, hook(&rx.url, json!({}))).await;
    let id = ch.id.as_str();
    let now_s = time::now_ms() / 1000;
    for (age_days, status) in [(8, HealthStatus::Unhealthy), (1, HealthStatus::Healthy)] {
        let at = time::now_ms() - age_days * 86_400_000;
        let check = HealthCheck {
            channel_id: ChannelId::parse(id).unwrap(),
            tenant_id: TenantId::parse(&tenant).unwrap(),
            status,
            previous_status: None,
            failure_rate: 0.0,
            total_deliveries: 1,
            failed_deliveries: 0,
            checked_at: converger_core::Timestamp::from_ms(at),
            expires_at: at / 1000 + 7 * 86_400,
        };
        t.stack
            .store
            .record_health(std::slice::from_ref(&check))
            .await
            .unwrap();
    }
    let h = health(&t, &key, id).await;
    let history = &h.history;
    assert_eq!(history.len(), 1, "the 8-day-old row is past its TTL: {h:?}");
    assert_eq!(history[0].status, "healthy");
    assert!(now_s > 0);
}

/// Posts `n` activities to `ch` (one attempt each, to a receiver that fails) and waits for
/// each to be dead-lettered.
async fn fail_n(t: &TestStack, key: &str, ch: &str, n: usize) {
    let ids = t.activities(key, ch, n, 1).await;
    for d in &ids {
        let row = t
            .wait_delivery(key, d, Duration::from_secs(20), is_settled)
            .await;
        assert_eq!(row.status, "failed", "{row:?}");
    }
}

/// The tenant's alert channel is the platform's: the tenant sees it but cannot change, disable,
/// pause or resume it; the operator's tenant settings still can.
#[tokio::test]
async fn the_managed_alert_channel_is_changed_by_operators_only() {
    let t = TestStack::start().await;
    let alerts = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let set_alert = |url: Value| {
        let (t, tenant) = (&t, &tenant);
        async move {
            t.raw(
                "PATCH",
                format!("{}/admin/api/tenants/{tenant}", t.stack.admin_url),
                Some(&t.stack.admin_token),
                Some(json!({"alert_webhook_url": url}).to_string()),
            )
            .await
        }
    };
    let a = set_alert(json!(alerts.url)).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let ch = a
        .typed::<PatchedTenant>(200)
        .unwrap()
        .tenant
        .alert_channel_id
        .unwrap();
    let seen = t
        .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
        .await;
    assert_eq!(seen.status, 200);
    let seen: ChannelView = seen.typed(200).unwrap();
    assert!(seen.managed, "{seen:?}");
    for (method, path, body) in [
        (
            "PATCH",
            format!("/api/v1/channels/{ch}"),
            Some(json!({"active": false})),
        ),
        (
            "PATCH",
            format!("/api/v1/channels/{ch}"),
            Some(json!({"config": {"url": "http://127.0.0.1:9/x"}})),
        ),
        ("POST", format!("/api/v1/channels/{ch}/pause"), None),
        ("POST", format!("/api/v1/channels/{ch}/resume"), None),
    ] {
        let a = t.api(method, &path, &key, body).await;
        assert_eq!(a.status, 403, "{method} {path}: {:?}", a.body);
        assert_eq!(a.code(), "managed_channel");
    }
    // Nor post to it: only the platform's alerts go there, and nothing reached it.
    let posted = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(
                json!({"conversation_id": "c", "channel_ids": [ch], "payload": {"fake": "alert"}}),
            ),
        )
        .await;
    assert_eq!(posted.status, 403, "{:?}", posted.body);
    assert_eq!(posted.code(), "managed_channel");
    // An activity sent by event type goes to the channel subscribed to it, never to the alert
    // channel (which ingest leaves out of every subscriber list).
    let other = Receiver::always(200).await.unwrap();
    let sub = t
        .api(
            "POST",
            "/api/v1/channels",
            &key,
            Some(
                json!({"type": "webhook", "name": "orders", "config": {"url": other.url},
                        "event_types": ["order.created"]}),
            ),
        )
        .await;
    assert_eq!(sub.status, 201, "{:?}", sub.body);
    let sub: CreatedChannel = sub.typed(201).unwrap();
    let by_type = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c", "event_type": "order.created", "payload": {}})),
        )
        .await;
    assert_eq!(by_type.status, 201, "{:?}", by_type.body);
    let by_type: Ingested = by_type.typed(201).unwrap();
    let targets = &by_type.deliveries;
    assert_eq!(targets.len(), 1, "{by_type:?}");
    assert_eq!(targets[0].channel_id, sub.id);
    other.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(
        alerts.count(),
        0,
        "the alert channel received a tenant's activity"
    );
    let after: ChannelView = t
        .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
        .await
        .typed(200)
        .unwrap();
    assert!(after.active, "{after:?}");
    assert_eq!(after.config["url"], alerts.url.as_str());
    // The operator's setting still moves it.
    let moved = Receiver::always(200).await.unwrap();
    assert_eq!(set_alert(json!(moved.url)).await.status, 200);
    let after: ChannelView = t
        .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
        .await
        .typed(200)
        .unwrap();
    assert_eq!(after.config["url"], moved.url.as_str());
}

/// The scenarios that also cover AWS code paths: on the template deployed on the emulator,
/// every request IAM-checked.
mod emulator {
    use super::*;

    #[tokio::test]
    async fn alerts_reach_only_their_tenants_webhook_signed() {
        let t = TestStack::on_emulator().await;
        let dead = Receiver::always(503).await.unwrap();
        let alerts_a = Receiver::always(200).await.unwrap();
        let alerts_b = Receiver::always(200).await.unwrap();
        let (tenant_a, key_a) = t.tenant("default").await;
        let (tenant_b, key_b) = t.tenant("default").await;
        let set_alert = |tenant: String, url: Value| {
            let t = &t;
            async move {
                t.raw(
                    "PATCH",
                    format!("{}/admin/api/tenants/{tenant}", t.stack.admin_url),
                    Some(&t.stack.admin_token),
                    Some(json!({"alert_webhook_url": url}).to_string()),
                )
                .await
            }
        };
        let a = set_alert(tenant_a.clone(), json!(alerts_a.url)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let a: PatchedTenant = a.typed(200).unwrap();
        assert_eq!(
            a.tenant.alert_webhook_url.as_deref(),
            Some(alerts_a.url.as_str())
        );
        let secret = a.alert_signing_secret.clone().unwrap();
        let b = set_alert(tenant_b.clone(), json!(alerts_b.url)).await;
        assert_eq!(b.status, 200, "{:?}", b.body);
        let bad = set_alert(tenant_b.clone(), json!("ftp://nowhere")).await;
        assert_eq!(bad.status, 422, "{:?}", bad.body);
        assert_eq!(bad.code(), "invalid_alert_webhook_url");

        // Tenant B has a healthy channel; tenant A's channel dies and its breaker opens.
        let ok = Receiver::always(200).await.unwrap();
        let b_ch = t.channel(&key_b, hook(&ok.url, json!({}))).await;
        t.activities(&key_b, b_ch.id.as_str(), 2, 2).await;
        let a_ch = t
        .channel(
            &key_a,
            hook(&dead.url, json!({"circuit_breaker": {"failure_threshold": 1, "cooldown_ms": 600000}, "retry_policy": {"max_attempts": 1}})),
        )
        .await;
        let a_id = a_ch.id.as_str();
        t.activities(&key_a, a_id, 1, 1).await;

        let got = alerts_a.wait_for(1, Duration::from_secs(20)).await;
        assert_eq!(got.len(), 1, "one alert: the breaker opened");
        let r = &got[0];
        let wh = standardwebhooks::Webhook::new(&secret).unwrap();
        let mut headers = http::HeaderMap::new();
        for h in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            headers.insert(h, r.headers[h].to_str().unwrap().parse().unwrap());
        }
        wh.verify(&r.body, &headers)
            .expect("the alert's signature verifies");
        let body: CircuitChanged = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body.channel.event, "channel.circuit_opened", "{body:?}");
        assert_eq!(body.channel.channel_id.as_str(), a_id);
        assert_eq!(body.channel.tenant_id.as_str(), tenant_a);
        assert_eq!(body.reason, "failures");
        // The alert went through the pipeline: a delivery of the managed alert channel.
        let alert_channel = a.tenant.alert_channel_id.as_deref().unwrap();
        let listed: Page<DeliveryView> = t
            .api(
                "GET",
                &format!("/api/v1/deliveries?channel_id={alert_channel}"),
                &key_a,
                None,
            )
            .await
            .typed(200)
            .unwrap();
        let id = listed.data[0].id.clone();
        let d = t
            .wait_delivery(&key_a, &id, Duration::from_secs(10), is_settled)
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
        assert_eq!(d.log()[0].status_code, Some(200));

        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            alerts_b.requests().is_empty(),
            "tenant B never hears of tenant A's channels"
        );
        // Removing the URL stops the alerts.
        let off = set_alert(tenant_a.clone(), Value::Null).await;
        assert_eq!(off.status, 200, "{:?}", off.body);
        let off: PatchedTenant = off.typed(200).unwrap();
        assert_eq!(off.tenant.alert_webhook_url, None, "{off:?}");
    }

    #[tokio::test]
    async fn each_status_at_the_edges_of_its_threshold() {
        let t = TestStack::with(|o| {
            no_health_runs(o);
            o.backend = Backend::Emulator;
        })
        .await;
        let tap = t.tap_events().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let cases = [
            (0, 0, "unknown"),
            (1000, 99, "healthy"),
            (1000, 100, "degraded"),
            (1000, 499, "degraded"),
            (1000, 500, "unhealthy"),
        ];
        let mut ids = Vec::new();
        for (created, failed, _) in cases {
            let ch = t
                .channel(
                    &key,
                    hook(&rx.url, json!({"circuit_breaker": {"cooldown_ms": 600000}})),
                )
                .await;
            let id = ch.id.as_str().to_owned();
            counters(&t, &id, created, failed).await;
            ids.push(id);
        }
        // Counters outside the 60-minute window do not count.
        t.stack
            .store
            .count_deliveries(
                &ChannelId::parse(&ids[1]).unwrap(),
                minute(time::now_ms()) - 61,
                0,
                900,
            )
            .await
            .unwrap();
        // What the check reads follows from the rows' changes: read to here first.
        assert!(t.stack.changes_settled().await);
        let report = t
            .stack
            .functions
            .health
            .health()
            .health_check()
            .await
            .unwrap();
        assert_eq!(report.channels, 5, "{report:?}");
        assert_eq!(
            report.batch_reads, 5,
            "per channel, one batch read of its window's counters: {report:?}"
        );
        assert_eq!(
            report.dead_letter_reads, 5,
            "per channel, one query of its dead-letter days: {report:?}"
        );
        for (id, (created, failed, status)) in ids.iter().zip(cases) {
            let h = health(&t, &key, id).await;
            assert_eq!(h.status, status, "{created}/{failed}: {h:?}");
            assert_eq!(h.history[0].total_deliveries, created as u64);
            assert_eq!(h.history[0].failed_deliveries, failed as u64);
        }
        // A change emits channel.health_changed with the reference's body; no traffic is no change.
        let events = tap
            .wait(Duration::from_secs(10), |e| {
                EventTap::of(e, "channel.health_changed").len() >= 4
            })
            .await;
        let changed = EventTap::of(&events, "channel.health_changed");
        assert_eq!(changed.len(), 4, "{changed:?}");
        let d = changed
            .iter()
            .map(EventTap::detail::<ChannelHealthChanged>)
            .find(|d| d.channel.channel_id.as_str() == ids[2])
            .unwrap();
        assert_eq!(d.channel.event, "channel.health_changed");
        assert_eq!(d.previous_status, HealthStatus::Unknown);
        assert_eq!(d.new_status, HealthStatus::Degraded);
        assert_eq!(d.failure_rate, 0.1);
        assert_eq!(d.total_deliveries, 1000);
        assert_eq!(d.failed_deliveries, 100);
        assert_eq!(d.channel.channel_name, "hook");
        // A second run with the same counters changes nothing.
        // What the check reads follows from the rows' changes: read to here first.
        assert!(t.stack.changes_settled().await);
        let again = t
            .stack
            .functions
            .health
            .health()
            .health_check()
            .await
            .unwrap();
        assert_eq!(again.changed, 0, "{again:?}");
        assert_eq!(health(&t, &key, &ids[2]).await.history.len(), 2);
    }

    #[tokio::test]
    async fn only_the_change_to_unhealthy_opens_the_breaker() {
        let t = TestStack::with(|o| {
            no_health_runs(o);
            o.backend = Backend::Emulator;
        })
        .await;
        let tap = t.tap_events().await;
        let rx = Receiver::always(200).await.unwrap();
        let (_, key) = t.tenant("default").await;
        let ch = t
            .channel(
                &key,
                hook(&rx.url, json!({"circuit_breaker": {"cooldown_ms": 600000}})),
            )
            .await;
        let id = ch.id.as_str();
        counters(&t, id, 10, 6).await;
        // What the check reads follows from the rows' changes: read to here first.
        assert!(t.stack.changes_settled().await);
        let report = t
            .stack
            .functions
            .health
            .health()
            .health_check()
            .await
            .unwrap();
        assert_eq!(report.breakers_opened, 1, "{report:?}");
        let state: DeliveryStateDoc = t
            .api(
                "GET",
                &format!("/api/v1/channels/{id}/delivery"),
                &key,
                None,
            )
            .await
            .typed(200)
            .unwrap();
        assert_eq!(state.circuit_state, "open", "{state:?}");
        let events = tap
            .wait(Duration::from_secs(10), |e| {
                !EventTap::of(e, "channel.circuit_opened").is_empty()
            })
            .await;
        let opened: CircuitChanged =
            EventTap::detail(&EventTap::of(&events, "channel.circuit_opened")[0]);
        assert_eq!(opened.reason, "unhealthy");
        // Closed again (here by a resume, as a probe would): the window still holds the old
        // failures, but the status did not change, so the breaker stays closed.
        let a: DeliveryStateDoc = t
            .api("POST", &format!("/api/v1/channels/{id}/resume"), &key, None)
            .await
            .typed(200)
            .unwrap();
        assert_eq!(a.circuit_state, "closed");
        // What the check reads follows from the rows' changes: read to here first.
        assert!(t.stack.changes_settled().await);
        let report = t
            .stack
            .functions
            .health
            .health()
            .health_check()
            .await
            .unwrap();
        assert_eq!(
            (report.changed, report.breakers_opened),
            (0, 0),
            "{report:?}"
        );
        let state: DeliveryStateDoc = t
            .api(
                "GET",
                &format!("/api/v1/channels/{id}/delivery"),
                &key,
                None,
            )
            .await
            .typed(200)
            .unwrap();
        assert_eq!(state.circuit_state, "closed");
    }

    #[tokio::test]
    async fn failed_attempts_disable_a_channel_only_without_a_recent_success() {
        let t = TestStack::with(|o| {
            no_health_runs(o);
            o.backend = Backend::Emulator;
        })
        .await;
        let tap = t.tap_events().await;
        let rx = Receiver::always(500).await.unwrap();
        let (_, key) = t.tenant("default").await;
        // Four failed attempts in a row disable a channel here (the default, twenty, is the
        // use-case test's: `a_success_starts_the_auto_disable_count_again`); what this test
        // adds is the count and the disable on DynamoDB.
        let extra = json!({
            "retry_policy": {"max_attempts": 1},
            "circuit_breaker": {"failure_threshold": 1000, "max_in_flight": null},
            "auto_disable": {"failed_attempts": 4},
        });
        // A success 23 hours ago (in the 24 h window): four failures do not disable it.
        let spared = t.channel(&key, hook(&rx.url, extra.clone())).await;
        let spared_id = spared.id.as_str();
        t.stack
            .store
            .settle(
                &ChannelId::parse(spared_id).unwrap(),
                &Settle {
                    free: None,
                    pass_to: None,
                    outcome: Outcome::Success,
                    failed: false,
                    window: None,
                    now: Timestamp::from_ms(time::now_ms() - 23 * 3_600_000),
                },
            )
            .await
            .unwrap();
        fail_n(&t, &key, spared_id, 4).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c: ChannelView = t
            .api("GET", &format!("/api/v1/channels/{spared_id}"), &key, None)
            .await
            .typed(200)
            .unwrap();
        assert!(c.active, "{c:?}");

        // No success at all: the fourth failure disables it.
        let doomed = t.channel(&key, hook(&rx.url, extra)).await;
        let doomed_id = doomed.id.as_str();
        fail_n(&t, &key, doomed_id, 4).await;
        // The disable follows the fourth dead letter's write.
        let path = format!("/api/v1/channels/{doomed_id}");
        wait_until(Duration::from_secs(5), || async {
            t.api("GET", &path, &key, None)
                .await
                .typed::<ChannelView>(200)
                .is_ok_and(|c| !c.active)
        })
        .await;
        let c: ChannelView = t.api("GET", &path, &key, None).await.typed(200).unwrap();
        assert!(!c.active, "{c:?}");
        assert_eq!(
            c.disabled_reason.as_deref(),
            Some("auto_disabled_failure_threshold")
        );
        assert!(c.disabled_at.is_some(), "{c:?}");
        let events = tap
            .wait(Duration::from_secs(10), |e| {
                !EventTap::of(e, "channel.disabled").is_empty()
            })
            .await;
        let disabled = EventTap::of(&events, "channel.disabled");
        assert_eq!(disabled.len(), 1, "{disabled:?}");
        let disabled: ChannelDisabled = EventTap::detail(&disabled[0]);
        assert_eq!(disabled.channel.channel_id.as_str(), doomed_id);
        // New activities are refused while it is disabled; re-enabling clears the marks.
        let a = t
            .api(
                "POST",
                "/api/v1/activities",
                &key,
                Some(json!({"conversation_id": "c", "channel_ids": [doomed_id], "payload": {}})),
            )
            .await;
        assert_eq!(a.code(), "channel_inactive", "{:?}", a.body);
        let a = t
            .api(
                "PATCH",
                &format!("/api/v1/channels/{doomed_id}"),
                &key,
                Some(json!({"active": true})),
            )
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let a: ChannelView = a.typed(200).unwrap();
        assert!(a.active, "{a:?}");
        assert_eq!(a.disabled_at, None, "{a:?}");
        assert_eq!(a.disabled_reason, None, "{a:?}");
    }
}
