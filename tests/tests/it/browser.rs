//! The web pages in a real headless Chromium: what an operator and a tenant do with them,
//! clicked and read as a person would. Screenshots of every page visited are saved under
//! `target/test-output/browser/<test>/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_tests::browser::Browser;
use converger_tests::views::Ingested;
use converger_tests::{Receiver, Reply, TestStack, WEB_PASSWORD};
use serde_json::json;
use std::time::Duration;

/// The export's header: the reference's columns, in its order.
const CSV_HEADER: &str = "id,tenant_id,channel_id,channel_name,activity_id,status,attempts,last_error,retry_count,retried_by,retried_at,inserted_at,updated_at";

#[tokio::test]
async fn an_operator_filters_opens_retries_and_exports_failed_deliveries() {
    let t = TestStack::start().await;
    let rx = Receiver::always(400).await.unwrap();
    let f = t.failing_tenant(&rx, "=HYPERLINK(\"x\")", 3).await;
    // One more, whose payload carries secrets the preview must hide.
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &f.key,
            Some(json!({
                "conversation_id": "conv-secret",
                "channel_ids": [f.channel],
                "payload": {"text": "hello", "api_key": "sk_live_123", "auth": {"password": "hunter2", "refresh_token": "rt_1"}}
            })),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let secret = a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone();
    t.wait_delivery(&f.key, &secret, Duration::from_secs(20), |d| {
        d.status == "failed"
    })
    .await;
    let mut failed = f.deliveries.clone();
    failed.push(secret.clone());
    failed.sort();

    let b = Browser::start(&t.stack.admin_url, "operator").await;
    // Sign in: a wrong password stays on the form with an error; the right one opens the
    // dashboard.
    assert_eq!(
        b.sign_in("admin", &t.stack.admin_email, "not the password")
            .await,
        "/admin/login"
    );
    assert!(!b.text("#login-error").await.is_empty());
    b.shot("login-refused").await;
    assert_eq!(
        b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
            .await,
        "/admin"
    );
    assert_eq!(b.text("#failed-count").await, "4");
    b.shot("dashboard").await;

    // Filter: the tenant and status chosen in the form land in the URL.
    b.goto("/admin/deliveries").await;
    b.select("#filters select[name=tenant]", &f.tenant).await;
    b.select("#filters select[name=status]", "sent").await;
    b.submit("#filters button[type=submit]").await;
    assert!(b.path().await.contains("status=sent"));
    assert!(b.row_ids("tr.delivery").await.is_empty());
    assert_eq!(b.text("#empty").await, "No deliveries match.");
    b.select("#filters select[name=status]", "failed").await;
    b.submit("#filters button[type=submit]").await;
    let path = b.path().await;
    assert!(
        path.contains(&format!("tenant={}", f.tenant)) && path.contains("status=failed"),
        "{path}"
    );
    let mut rows = b.row_ids("tr.delivery").await;
    rows.sort();
    assert_eq!(rows, failed);
    // With one tenant chosen, the channel filter lists its channels by name.
    b.select("#filters select[name=channel]", &f.channel).await;
    b.submit("#filters button[type=submit]").await;
    assert!(b.path().await.contains(&format!("channel={}", f.channel)));
    assert_eq!(b.row_ids("tr.delivery").await.len(), 4);
    b.shot("deliveries-failed").await;
    // Search by part of the error.
    b.fill("#filters input[name=q]", "HTTP 400").await;
    b.submit("#filters button[type=submit]").await;
    assert_eq!(b.row_ids("tr.delivery").await.len(), 4);
    b.fill("#filters input[name=q]", "no such error").await;
    b.submit("#filters button[type=submit]").await;
    assert!(b.row_ids("tr.delivery").await.is_empty());
    b.fill("#filters input[name=q]", "").await;
    b.submit("#filters button[type=submit]").await;

    // Open one: its fields, its attempt log and a redacted preview of the payload.
    let row = format!("tr.delivery[data-id=\"{secret}\"]");
    b.submit(&format!("{row} a.open")).await;
    assert!(
        b.path()
            .await
            .starts_with(&format!("/admin/deliveries/{secret}?"))
    );
    assert_eq!(b.text("#status").await, "failed");
    assert_eq!(b.text("#last-error").await, "webhook: HTTP 400");
    let attempts = b.all("#attempts tr.attempt").await;
    assert_eq!(attempts.len(), 1);
    let first = attempts[0].text().await.unwrap();
    assert!(
        first.starts_with("1 ") && first.contains("400") && first.contains("auto"),
        "{first}"
    );
    let preview = b.text("#payload").await;
    assert!(preview.contains("\"text\": \"hello\""), "{preview}");
    for hidden in ["sk_live_123", "hunter2", "rt_1"] {
        assert!(!preview.contains(hidden), "{hidden} shown: {preview}");
    }
    assert_eq!(preview.matches("[REDACTED]").count(), 3, "{preview}");
    b.shot("delivery-opened").await;

    // Retry it there: the endpoint now accepts; back on the same list, the row is gone.
    rx.set_fallback(Reply::status(200));
    b.submit("button.retry").await;
    let back = b.path().await;
    assert!(
        back.starts_with("/admin/deliveries?")
            && back.contains(&format!("tenant={}", f.tenant))
            && back.contains("status=failed"),
        "back on the list it was opened from: {back}"
    );
    assert!(!b.row_ids("tr.delivery").await.contains(&secret));
    let d = t
        .wait_delivery(&f.key, &secret, Duration::from_secs(20), |d| {
            d.status == "sent"
        })
        .await;
    assert_eq!(d.retried_by.as_deref(), Some("admin:admin@localhost"));
    assert_eq!(b.row_ids("tr.delivery").await.len(), 3);
    b.shot("after-retry").await;

    // Retry all failed: every row goes, and they are sent.
    b.submit("#retry-all").await;
    for id in &f.deliveries {
        let d = t
            .wait_delivery(&f.key, id, Duration::from_secs(20), |d| d.status == "sent")
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    b.client.refresh().await.unwrap();
    assert!(b.row_ids("tr.delivery").await.is_empty());
    b.shot("after-retry-all").await;

    // Any status: retry counts and who retried show on the rows; then the CSV.
    b.select("#filters select[name=status]", "any").await;
    b.submit("#filters button[type=submit]").await;
    assert_eq!(b.row_ids("tr.delivery").await.len(), 4);
    let retries = b
        .text(&format!("{row} td:nth-child(6)"))
        .await
        .replace('\n', " ");
    assert!(
        retries.starts_with('1') && retries.contains("by admin:admin@localhost"),
        "{retries}"
    );
    b.shot("deliveries-any").await;
    let (name, csv) = b.download("#export").await;
    assert_eq!(name, "deliveries.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), CSV_HEADER);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4, "{csv}");
    for r in &rows {
        // The channel's name starts with `=`: quoted, and prefixed with `'`.
        assert!(
            r.contains(",\"'=HYPERLINK(\"\"x\"\")\","),
            "the name is escaped: {r}"
        );
        assert!(!r.contains(",=") && !r.contains(",\"="), "{r}");
        assert!(!r.contains("sk_live_123"), "no payloads: {r}");
    }

    // The operator's other pages.
    b.goto(&format!("/admin/channels?tenant={}", f.tenant))
        .await;
    b.shot("channels").await;
    b.goto("/admin/tenants").await;
    assert!(
        b.exists(&format!("tr.tenant[data-id=\"{}\"]", f.tenant))
            .await
    );
    b.shot("tenants").await;
    b.goto(&format!("/admin/audit?tenant={}", f.tenant)).await;
    b.shot("audit").await;
    b.close().await;
}

#[tokio::test]
async fn viewers_cannot_retry_and_the_portal_keeps_to_its_tenant() {
    let t = TestStack::start().await;
    let rx = Receiver::always(400).await.unwrap();
    let a = t.failing_tenant(&rx, "hook-a", 2).await;
    let other = t.failing_tenant(&rx, "hook-b", 2).await;
    t.web_user("admin", "viewer@ops.example", "viewer", None)
        .await;
    t.web_user("portal", "owner@a.example", "owner", Some(&a.tenant))
        .await;
    t.web_user("portal", "viewer@a.example", "viewer", Some(&a.tenant))
        .await;

    // An operator with the viewer role sees every tenant's failures, and no retry buttons.
    let b = Browser::start(&t.stack.admin_url, "viewer").await;
    assert_eq!(
        b.sign_in("admin", "viewer@ops.example", WEB_PASSWORD).await,
        "/admin"
    );
    b.goto("/admin/deliveries").await;
    assert_eq!(b.row_ids("tr.delivery").await.len(), 4);
    assert!(!b.exists("button.retry").await);
    assert!(!b.exists("#retry-all").await);
    b.shot("viewer-deliveries").await;
    b.goto("/admin/channels").await;
    assert!(!b.exists("button.toggle").await);
    b.goto("/admin/tenants").await;
    assert!(!b.exists("#new-tenant").await);
    // A forged POST from this signed-in browser: refused without the CSRF token, and refused
    // with it, because the role may not retry.
    let target = format!("/admin/deliveries/{}/retry", a.deliveries[0]);
    let statuses = b
        .js_async(
            r#"const [url, done] = arguments;
               const token = document.querySelector('input[name=_csrf]').value;
               const post = body => fetch(url, {method: 'POST', body: new URLSearchParams(body), redirect: 'manual'}).then(r => r.status);
               Promise.all([post({}), post({_csrf: token})]).then(done, e => done(String(e)));"#,
            vec![json!(target)],
        )
        .await;
    assert_eq!(statuses, json!([403, 403]));
    // The same forged form, submitted as a page would: the refusal is shown.
    b.js(
        r#"const f = document.createElement('form');
           f.method = 'post'; f.action = arguments[0];
           document.body.appendChild(f); f.submit();"#,
        vec![json!(target)],
    )
    .await;
    let refusal = b.wait_text("body", |t| t.contains("CSRF")).await;
    assert!(refusal.contains("CSRF"), "{refusal}");
    b.shot("forged-post-refused").await;
    assert_eq!(
        t.delivery(&a.key, &a.deliveries[0]).await.retry_count,
        0,
        "nothing was retried"
    );
    b.close().await;

    // A tenant's owner: the portal lists its tenant only, whatever the URL asks for.
    let p = Browser::start(&t.stack.admin_url, "portal").await;
    assert_eq!(
        p.sign_in("portal", "owner@a.example", WEB_PASSWORD).await,
        "/portal/deliveries"
    );
    let mut mine = p.row_ids("tr.delivery").await;
    mine.sort();
    let mut expected = a.deliveries.clone();
    expected.sort();
    assert_eq!(mine, expected);
    assert!(!p.exists("#filters select[name=tenant]").await);
    assert!(p.exists("button.retry").await);
    p.shot("portal-deliveries").await;
    p.goto(&format!(
        "/portal/deliveries?tenant={}&channel={}&status=any",
        other.tenant, other.channel
    ))
    .await;
    let crafted = p.row_ids("tr.delivery").await;
    assert!(
        crafted.iter().all(|id| !other.deliveries.contains(id)),
        "another tenant's rows: {crafted:?}"
    );
    p.shot("portal-crafted-url").await;
    p.goto(&format!("/portal/deliveries/{}", other.deliveries[0]))
        .await;
    assert_eq!(p.text("#page-error").await, "No such delivery.");
    p.goto(&format!("/portal/deliveries/{}", a.deliveries[0]))
        .await;
    assert_eq!(p.text("#status").await, "failed");
    p.shot("portal-delivery").await;
    p.goto(&format!("/portal/channels?tenant={}", other.tenant))
        .await;
    let channels = p.row_ids("tr.channel").await;
    assert_eq!(channels, vec![a.channel.clone()]);
    p.shot("portal-channels").await;
    // Retrying another tenant's delivery by id is "not found".
    let status = p
        .js_async(
            r#"const [url, done] = arguments;
               const token = document.querySelector('input[name=_csrf]').value;
               fetch(url, {method: 'POST', body: new URLSearchParams({_csrf: token}), redirect: 'manual'})
                 .then(r => done(r.status), e => done(String(e)));"#,
            vec![json!(format!("/portal/deliveries/{}/retry", other.deliveries[0]))],
        )
        .await;
    assert_eq!(status, json!(404));
    // Operators' pages are not the portal's.
    p.goto("/admin/tenants").await;
    assert_eq!(p.path().await, "/admin/login");
    p.close().await;

    // A tenant's viewer: no retry buttons.
    let v = Browser::start(&t.stack.admin_url, "portal-viewer").await;
    v.sign_in("portal", "viewer@a.example", WEB_PASSWORD).await;
    assert_eq!(v.row_ids("tr.delivery").await.len(), 2);
    assert!(!v.exists("button.retry").await);
    v.shot("portal-viewer-deliveries").await;
    v.close().await;
}

#[tokio::test]
async fn pausing_and_resuming_a_channel_changes_its_delivery_column() {
    let t = TestStack::start().await;
    let (tenant, key) = t.tenant("default").await;
    let hook = t.webhook(&key, "http://127.0.0.1:9/x", json!({})).await;
    let ch = hook.id.as_str().to_owned();
    let cell = format!("td.delivery-state[data-channel=\"{ch}\"]");
    let button = format!("tr.channel[data-id=\"{ch}\"] button.toggle");
    // A second channel, whose Health column changes while the page is open.
    let rx = Receiver::always(200).await.unwrap();
    let ok = t
        .webhook(&key, &rx.url, json!({}))
        .await
        .id
        .as_str()
        .to_owned();
    let health = format!("td.health[data-channel=\"{ok}\"]");

    let b = Browser::start(&t.stack.admin_url, "channels").await;
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    b.goto(&format!("/admin/channels?tenant={tenant}")).await;
    assert_eq!(b.text(&cell).await, "Flowing");
    assert_eq!(b.text(&button).await, "Pause deliveries");
    assert_eq!(b.text(&health).await, "unknown");
    b.shot("flowing").await;

    // Pause with the button: back on the same list, the column says Paused.
    b.submit(&button).await;
    assert_eq!(b.path().await, format!("/admin/channels?tenant={tenant}"));
    assert_eq!(b.text(&cell).await, "Paused");
    assert_eq!(b.text(&button).await, "Resume deliveries");
    b.shot("paused").await;

    // Resumed elsewhere (the tenant API): the open page follows without a reload.
    let r = t
        .api("POST", &format!("/api/v1/channels/{ch}/resume"), &key, None)
        .await;
    assert!(r.status < 300, "{r:?}");
    assert_eq!(b.wait_text(&cell, |s| s == "Flowing").await, "Flowing");
    assert_eq!(
        b.wait_text(&button, |s| s == "Pause deliveries").await,
        "Pause deliveries"
    );
    b.shot("resumed-live").await;

    // The button the refresh rewrote pauses again.
    b.submit(&button).await;
    assert_eq!(b.text(&cell).await, "Paused");
    b.submit(&button).await;
    assert_eq!(b.text(&cell).await, "Flowing");

    // A health check after a delivery: the open page's Health column follows.
    let a = t
        .api(
            "POST",
            "/api/v1/activities",
            &key,
            Some(json!({"conversation_id": "c", "channel_ids": [ok], "payload": {}})),
        )
        .await;
    let d = a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone();
    t.settled(&key, &d).await;
    // What the check reads follows from the rows' changes: read to here first.
    assert!(t.stack.changes_settled().await);
    t.stack
        .functions
        .health
        .health()
        .health_check()
        .await
        .unwrap();
    assert_eq!(b.wait_text(&health, |s| s == "healthy").await, "healthy");
    b.shot("health-live").await;

    // Every change is in the audit log.
    b.goto(&format!("/admin/audit?tenant={tenant}")).await;
    let audit = b.text("#audit").await;
    assert_eq!(audit.matches("pause_deliveries").count(), 2, "{audit}");
    assert_eq!(audit.matches("resume_deliveries").count(), 2, "{audit}");
    b.shot("audit").await;
    b.close().await;
}

/// The dashboard's counts follow without a reload: a dead letter made while it is open
/// shows on the page as it is (a mark set on the page survives), with the time it was read.
#[tokio::test]
async fn the_dashboard_counts_follow_without_a_reload() {
    let t = TestStack::start().await;
    let rx = Receiver::always(400).await.unwrap();
    let f = t.failing_tenant(&rx, "live", 1).await;
    let b = Browser::start(&t.stack.admin_url, "dashboard-live").await;
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    assert_eq!(b.text("#failed-count").await, "1");
    assert_eq!(b.text("#live-at").await, "when the page loaded");
    b.js("window.stillThisPage = true;", vec![]).await;
    let more = t.activities(&f.key, &f.channel, 1, 1).await;
    t.wait_delivery(&f.key, &more[0], Duration::from_secs(20), |d| {
        d.status == "failed"
    })
    .await;
    assert_eq!(b.wait_text("#failed-count", |n| n == "2").await, "2");
    assert_eq!(
        b.js("return window.stillThisPage === true;", vec![]).await,
        json!(true),
        "the same page, not a reload"
    );
    assert_ne!(b.text("#live-at").await, "when the page loaded");
    b.shot("dashboard-live").await;
    b.close().await;
}

/// A conversation's page: its activities in `seq` order, a badge per channel delivery (status,
/// attempts, the last error on hover) linked to the delivery, reached from a delivery's page
/// and from the search on the deliveries page; an operator names the tenant, a tenant's user
/// sees only its own conversation where another tenant uses the same id.
#[tokio::test]
async fn a_conversation_shows_its_activities_in_order_with_a_badge_per_delivery() {
    let t = TestStack::start().await;
    let ok = Receiver::always(200).await.unwrap();
    // Refuses the first three requests, then takes them.
    let refusing = Receiver::start(
        vec![Reply::status(400).body("unknown recipient"); 3],
        Reply::status(200),
    )
    .await
    .unwrap();
    let (tenant, key) = t.tenant("default").await;
    let hook = |name: &str, url: &str| {
        json!({"type": "webhook", "name": name, "config": {"url": url},
               "retry_policy": {"max_attempts": 1}})
    };
    let good = t
        .channel(&key, hook("crm", &ok.url))
        .await
        .id
        .as_str()
        .to_owned();
    let bad = t
        .channel(&key, hook("legacy", &refusing.url))
        .await
        .id
        .as_str()
        .to_owned();
    let post = |key: String, channels: Vec<String>, conv: &'static str, n: usize| {
        let t = &t;
        async move {
            let a = t
                .api(
                    "POST",
                    "/api/v1/activities",
                    &key,
                    Some(json!({"conversation_id": conv, "channel_ids": channels,
                                "event_type": "message.created", "payload": {"n": n}})),
                )
                .await;
            assert_eq!(a.status, 201, "{:?}", a.body);
            let a: Ingested = a.typed(201).unwrap();
            let ids: Vec<String> = a.deliveries.iter().map(|d| d.id.clone()).collect();
            for id in &ids {
                t.settled(&key, id).await;
            }
            (a.activity_id, ids)
        }
    };
    let mut activities = Vec::new();
    for n in 0..3 {
        let (a, _) = post(key.clone(), vec![good.clone(), bad.clone()], "conv-42", n).await;
        activities.push(a);
    }
    post(key.clone(), vec![good.clone()], "another", 9).await;
    // Another tenant uses the same conversation id.
    let (other, other_key) = t.tenant("default").await;
    let other_ch = t
        .channel(&other_key, hook("theirs", &ok.url))
        .await
        .id
        .as_str()
        .to_owned();
    let (theirs, _) = post(other_key.clone(), vec![other_ch], "conv-42", 0).await;

    let b = Browser::start(&t.stack.admin_url, "conversation").await;
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    // From a failed delivery's page to its conversation.
    b.goto(&format!("/admin/deliveries?tenant={tenant}")).await;
    let first_failed = b.row_ids("tr.delivery").await;
    assert_eq!(
        first_failed.len(),
        3,
        "the legacy channel's three dead letters"
    );
    b.goto(&format!("/admin/deliveries/{}", first_failed[0]))
        .await;
    b.click("#conversation").await;
    let path = b.path().await;
    assert!(
        path.starts_with("/admin/conversations/conv-42?tenant="),
        "{path}"
    );
    assert_eq!(b.row_ids("tr.activity").await, activities, "in seq order");
    let badges = b.all("tr.activity a.badge").await;
    assert_eq!(badges.len(), 6, "a badge per channel delivery");
    let mut texts = Vec::new();
    for e in &badges {
        texts.push((
            e.text().await.unwrap(),
            e.attr("title").await.unwrap().unwrap_or_default(),
        ));
    }
    for (text, title) in &texts {
        if text.starts_with("legacy") {
            assert_eq!(text, "legacy: failed · 1 attempt");
            assert!(title.contains("unknown recipient"), "{title}");
        } else {
            assert_eq!(text, "crm: sent · 1 attempt");
        }
    }
    assert!(!b.row_ids("tr.activity").await.contains(&theirs));
    b.shot("conversation").await;
    // The page follows the conversation on the live stream: once subscribed it polls only
    // every 60 s, longer than any wait here, so a badge that changes changed on a frame.
    b.find("body[data-live=stream]").await;
    // A replay while the page is open: its badge follows without a reload.
    let r = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{}/retry", first_failed[0]),
            &key,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let badge = format!("a.badge[data-id=\"{}\"]", first_failed[0]);
    assert_eq!(
        b.wait_text(&badge, |s| s == "legacy: sent · 1 attempt")
            .await,
        "legacy: sent · 1 attempt"
    );
    assert!(
        b.exists(&format!("a.badge.sent[data-id=\"{}\"]", first_failed[0]))
            .await
    );
    b.shot("conversation-live").await;
    // A badge opens its delivery.
    b.click("tr.activity a.badge.failed").await;
    assert!(b.path().await.starts_with("/admin/deliveries/"));

    // The search on the deliveries page, with the tenant chosen.
    b.goto(&format!("/admin/deliveries?tenant={tenant}")).await;
    b.fill("#find-conversation input[name=id]", "conv-42").await;
    b.submit("#find-conversation button[type=submit]").await;
    assert_eq!(b.row_ids("tr.activity").await, activities);
    // Without a tenant, the page asks which one's.
    b.goto("/admin/conversations/conv-42").await;
    assert!(b.exists("#choose-tenant").await);
    b.select("#choose-tenant select[name=tenant]", &other).await;
    b.submit("#choose-tenant button[type=submit]").await;
    assert_eq!(b.row_ids("tr.activity").await, vec![theirs.clone()]);
    b.close().await;

    // The tenant's own user: its conversation, whatever the URL says of tenants.
    t.web_user("portal", "owner@conv.example", "owner", Some(&tenant))
        .await;
    let p = Browser::start(&t.stack.admin_url, "conversation-portal").await;
    p.sign_in("portal", "owner@conv.example", WEB_PASSWORD)
        .await;
    p.goto(&format!("/portal/conversations/conv-42?tenant={other}"))
        .await;
    assert_eq!(p.row_ids("tr.activity").await, activities);
    p.shot("portal-conversation").await;
    p.goto("/portal/conversations/nothing-here").await;
    assert!(p.exists("#empty").await);
    p.close().await;
}
