//! The web pages over HTTP, as a browser sends its requests: sign-in, sessions, CSRF, roles,
//! the deliveries page (filters, retry, retry all, CSV), the channels page and the portal's
//! tenant fence.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_http::admin::PatchedTenant;
use converger_tests::views::{AuditView, ChannelView, Ingested, Page};
use converger_tests::{FailingTenant, Receiver, TestStack, WEB_PASSWORD};
use serde_json::json;
use std::time::Duration;

/// A browser: a cookie jar, no automatic redirects.
struct Browser {
    http: reqwest::Client,
    base: String,
}

impl Browser {
    fn new(base: &str) -> Self {
        Self::at(base, "127.0.0.1")
    }

    /// A browser whose requests come from `source` (a loopback address: 127.0.0.0/8 all
    /// reach the local stack), as another machine's would.
    fn at(base: &str, source: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .local_address(source.parse::<std::net::IpAddr>().unwrap())
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            base: base.to_owned(),
        }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, String, Option<String>) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                form.iter()
                    .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
                    .collect::<Vec<_>>()
                    .join("&"),
            )
            .send()
            .await
            .unwrap();
        let loc = r
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned());
        (r.status().as_u16(), r.text().await.unwrap(), loc)
    }

    /// The CSRF token of the first form on `path`.
    async fn csrf(&self, path: &str) -> String {
        let (_, html) = self.get(path).await;
        csrf_of(&html)
    }

    async fn sign_in(&self, realm: &str, email: &str, password: &str) -> (u16, Option<String>) {
        let token = self.csrf(&format!("/{realm}/login")).await;
        let (status, _, loc) = self
            .post(
                &format!("/{realm}/login"),
                &[("_csrf", &token), ("email", email), ("password", password)],
            )
            .await;
        (status, loc)
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A channel's Delivery and Health cells as the channels page polls them (built as JSON in
/// the handler; no view type of its own).
#[derive(Debug, serde::Deserialize)]
struct LiveCells {
    delivery: String,
    #[allow(dead_code)] // read for its type: a string
    health: String,
}

async fn delivery_state(b: &Browser, tenant: &str, ch: &str) -> String {
    let (_, body) = b
        .get(&format!("/admin/channels/states?tenant={tenant}"))
        .await;
    let mut v: std::collections::BTreeMap<String, LiveCells> =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let cells = v.remove(ch).unwrap_or_else(|| panic!("no {ch} in {body}"));
    cells.delivery
}

fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"_csrf\" value=\"")
        .expect("a form with a CSRF token");
    let rest = &html[at + "name=\"_csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// The text of every `<tag …>…</tag>` element of `html` (inline scripts and styles).
fn inline(html: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at..];
        let Some(body_at) = after.find('>') else {
            break;
        };
        let Some(end) = after.find(&close) else { break };
        out.push(after[body_at + 1..end].to_owned());
        rest = &after[end + close.len()..];
    }
    out
}

#[tokio::test]
async fn every_page_sends_the_security_headers_and_its_inline_code_is_allowed_by_hash() {
    let t = TestStack::start().await;
    let (tenant, key) = t.tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = t.webhook(&key, &rx.url, json!({})).await;
    let ch = ch.id.as_str().to_owned();
    let ids = t.activities(&key, &ch, 1, 1).await;
    let b = Browser::new(&t.stack.admin_url);
    let check = |path: String, resp: reqwest::Response| async move {
        let h = resp.headers().clone();
        let get = |k: &str| {
            h.get(k)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(get("x-frame-options"), "DENY", "{path}");
        assert_eq!(get("referrer-policy"), "same-origin", "{path}");
        assert_eq!(get("cache-control"), "no-store", "{path}");
        let csp = get("content-security-policy");
        for part in [
            "default-src 'none'",
            "frame-ancestors 'none'",
            "form-action 'self'",
        ] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        // Each inline style and script the page carries is allowed by its hash.
        let html = resp.text().await.unwrap();
        for tag in ["style", "script"] {
            for text in inline(&html, tag) {
                let hash = converger_http::web::source_hash(&text);
                assert!(
                    csp.contains(&hash),
                    "{path}: a {tag} not in the CSP ({hash})"
                );
            }
        }
        html
    };
    let get = |path: &str| {
        let (b, path) = (&b, path.to_owned());
        async move {
            let r = b
                .http
                .get(format!("{}{path}", b.base))
                .send()
                .await
                .unwrap();
            check(path, r).await
        }
    };
    // Before signing in: the sign-in pages and a redirect.
    get("/admin/login").await;
    get("/portal/login").await;
    get("/admin/deliveries").await;
    let (status, _) = b
        .sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    assert_eq!(status, 303);
    let channels = get(&format!("/admin/channels?tenant={tenant}")).await;
    assert!(
        channels.contains("data-states="),
        "the live refresh is on the page"
    );
    for path in [
        "/admin".to_owned(),
        format!("/admin/deliveries?tenant={tenant}"),
        format!("/admin/deliveries/{}", ids[0]),
        format!("/admin/deliveries/export?tenant={tenant}"),
        format!("/admin/channels/states?tenant={tenant}"),
        "/admin/audit".to_owned(),
        "/admin/tenants".to_owned(),
    ] {
        get(&path).await;
    }
}

#[tokio::test]
async fn sign_in_sessions_and_csrf() {
    let t = TestStack::start().await;
    let b = Browser::new(&t.stack.admin_url);
    // Pages need a session.
    let (status, _) = b.get("/admin/deliveries").await;
    assert_eq!(status, 303);
    let (status, loc) = b
        .sign_in("admin", &t.stack.admin_email, "wrong password!!")
        .await;
    assert_eq!(
        (status, loc),
        (200, None),
        "a wrong password stays on the form"
    );
    let (status, loc) = b
        .sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    assert_eq!((status, loc.as_deref()), (303, Some("/admin")));
    let (status, html) = b.get("/admin").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("Dashboard") && html.contains("admin@localhost"),
        "{html}"
    );
    // Queue depths of every tier queue and its dead-letter queue, as deployed.
    assert!(!html.contains("queues-error"), "{html}");
    for q in [
        "deliveries-high-dlq",
        "<td>deliveries-dlq</td>",
        "deliveries-bulk-dlq",
    ] {
        assert!(html.contains(q), "{q} in {html}");
    }

    // A login form posted without this browser's pre-session cookie is refused.
    let other = Browser::new(&t.stack.admin_url);
    let (status, _, _) = other
        .post(
            "/admin/login",
            &[
                ("_csrf", "x"),
                ("email", &t.stack.admin_email),
                ("password", &t.stack.admin_password),
            ],
        )
        .await;
    assert_eq!(status, 403);

    // An admin session does not open the portal; a forged session cookie opens nothing.
    let (status, _) = b.get("/portal/deliveries").await;
    assert_eq!(status, 303);
    let forged = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/admin", t.stack.admin_url))
        .header("cookie", "cvg_admin=eyJyZWFsbSI6ImFkbWluIn0.AAAA")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 303);

    // Sign out needs the CSRF token; afterwards the cookie is gone.
    let (status, _, _) = b.post("/admin/logout", &[("_csrf", "nope")]).await;
    assert_eq!(status, 403);
    let token = b.csrf("/admin").await;
    let (status, _, _) = b.post("/admin/logout", &[("_csrf", &token)]).await;
    assert_eq!(status, 303);
    assert_eq!(b.get("/admin").await.0, 303);
}

#[tokio::test]
async fn roles_and_the_portal_fence() {
    let t = TestStack::start().await;
    let rx = Receiver::always(400).await.unwrap();
    let a = t.failing_tenant(&rx, "hook-a", 1).await;
    let b = t.failing_tenant(&rx, "hook-b", 1).await;
    let (tenant_a, ids_a) = (&a.tenant, &a.deliveries);
    let (tenant_b, ch_b, ids_b) = (&b.tenant, &b.channel, &b.deliveries);
    t.web_user("admin", "viewer@ops.example", "viewer", None)
        .await;
    t.web_user(
        "portal",
        "owner@a.example",
        "owner",
        Some(tenant_a.as_str()),
    )
    .await;
    t.web_user(
        "portal",
        "viewer@a.example",
        "viewer",
        Some(tenant_a.as_str()),
    )
    .await;

    // An admin viewer browses but has no retry buttons, and a POST is refused.
    let viewer = Browser::new(&t.stack.admin_url);
    let (status, _) = viewer
        .sign_in("admin", "viewer@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(status, 303);
    let (_, html) = viewer.get("/admin/deliveries").await;
    assert!(html.contains(ids_a[0].as_str()) && html.contains(ids_b[0].as_str()));
    assert!(
        !html.contains("class=\"retry\""),
        "no retry buttons for viewers"
    );
    assert!(!html.contains("Retry all failed"));
    let token = csrf_of(&html);
    let (status, _, _) = viewer
        .post(
            &format!("/admin/deliveries/{}/retry", ids_a[0]),
            &[("_csrf", &token)],
        )
        .await;
    assert_eq!(status, 403, "a viewer cannot retry");
    let (_, html) = viewer.get("/admin/tenants").await;
    assert!(!html.contains("Rotate API key"));

    // A forged POST (no CSRF token) is refused even for an owner.
    let owner = Browser::new(&t.stack.admin_url);
    let (status, loc) = owner
        .sign_in("portal", "owner@a.example", WEB_PASSWORD)
        .await;
    assert_eq!((status, loc.as_deref()), (303, Some("/portal/deliveries")));
    let (status, _, _) = owner
        .post(&format!("/portal/deliveries/{}/retry", ids_a[0]), &[])
        .await;
    assert_eq!(status, 403);

    // The portal shows its own tenant only, whatever the URL asks for.
    let (_, html) = owner.get("/portal/deliveries").await;
    assert!(html.contains(ids_a[0].as_str()));
    assert!(!html.contains(ids_b[0].as_str()));
    let (_, crafted) = owner
        .get(&format!(
            "/portal/deliveries?tenant={tenant_b}&channel={ch_b}&status=any"
        ))
        .await;
    assert!(!crafted.contains(ids_b[0].as_str()), "another tenant's row");
    let (status, _) = owner.get(&format!("/portal/deliveries/{}", ids_b[0])).await;
    assert_eq!(status, 404, "another tenant's delivery page");
    let (status, _) = owner.get(&format!("/portal/deliveries/{}", ids_a[0])).await;
    assert_eq!(status, 200);
    let (_, csv) = owner
        .get(&format!(
            "/portal/deliveries/export?tenant={tenant_b}&status=any"
        ))
        .await;
    assert!(!csv.contains(ids_b[0].as_str()));
    assert!(csv.contains(ids_a[0].as_str()));
    // Retrying another tenant's delivery is "not found".
    let token = csrf_of(&html);
    let (status, _, _) = owner
        .post(
            &format!("/portal/deliveries/{}/retry", ids_b[0]),
            &[("_csrf", &token)],
        )
        .await;
    assert_eq!(status, 404);
    // Admin pages are not the portal's.
    assert_eq!(owner.get("/admin/tenants").await.0, 303);

    // A portal viewer: no retry.
    let pv = Browser::new(&t.stack.admin_url);
    pv.sign_in("portal", "viewer@a.example", WEB_PASSWORD).await;
    let (_, html) = pv.get("/portal/deliveries").await;
    assert!(!html.contains("class=\"retry\""));
}

trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl<T> Pipe for T {}

#[tokio::test]
async fn the_admin_ip_allowlist_guards_the_pages_and_the_admin_api() {
    use converger_core::net::Allowlist;
    // Loopback is not in the list: the admin pages and API refuse, the portal and the
    // tenant API do not.
    let t = TestStack::with(|o| {
        o.admin_ip_allowlist = Some(Allowlist::parse("10.0.0.0/8, 192.168.0.0/16").unwrap());
    })
    .await;
    let b = Browser::new(&t.stack.admin_url);
    let (status, html) = b.get("/admin/login").await;
    assert_eq!(status, 403);
    assert!(html.contains("not allowed"), "{html}");
    assert_eq!(b.get("/admin/deliveries").await.0, 403);
    let a = t
        .raw(
            "POST",
            format!("{}/admin/api/tenants", t.stack.admin_url),
            Some(&t.stack.admin_token),
            Some(json!({"name": "x"}).to_string()),
        )
        .await;
    assert_eq!(a.status, 403);
    assert_eq!(a.code(), "ip_not_allowed", "{:?}", a.body);
    let health = t
        .raw(
            "GET",
            format!("{}/admin/api/health", t.stack.admin_url),
            None,
            None,
        )
        .await;
    assert_eq!(health.status, 200, "monitors reach the health check");
    assert_eq!(b.get("/portal/login").await.0, 200);

    // Listed: in.
    let t = TestStack::with(|o| {
        o.admin_ip_allowlist = Some(Allowlist::parse("127.0.0.0/8").unwrap());
    })
    .await;
    let b = Browser::new(&t.stack.admin_url);
    assert_eq!(b.get("/admin/login").await.0, 200);
    let (status, loc) = b
        .sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    assert_eq!((status, loc.as_deref()), (303, Some("/admin")));
    let (_tenant, _key) = t.tenant("default").await;
}

/// A portal owner cannot pause the tenant's alert channel (the platform's), though it is on
/// their channels page; an operator can.
#[tokio::test]
async fn the_portal_cannot_pause_the_managed_alert_channel() {
    let t = TestStack::start().await;
    let alerts = Receiver::always(200).await.unwrap();
    let (tenant, _) = t.tenant("default").await;
    let a = t
        .raw(
            "PATCH",
            format!("{}/admin/api/tenants/{tenant}", t.stack.admin_url),
            Some(&t.stack.admin_token),
            Some(json!({"alert_webhook_url": alerts.url}).to_string()),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let ch = a
        .typed::<PatchedTenant>(200)
        .unwrap()
        .tenant
        .alert_channel_id
        .unwrap();
    t.web_user("portal", "owner@alerts.example", "owner", Some(&tenant))
        .await;
    let owner = Browser::new(&t.stack.admin_url);
    owner
        .sign_in("portal", "owner@alerts.example", WEB_PASSWORD)
        .await;
    let token = owner.csrf("/portal/channels").await;
    let (status, html, _) = owner
        .post(
            &format!("/portal/channels/{ch}/pause"),
            &[("_csrf", &token)],
        )
        .await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("an operator changes it"), "{html}");
    let admin = Browser::new(&t.stack.admin_url);
    admin
        .sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let token = admin.csrf("/admin/channels").await;
    let (status, _, _) = admin
        .post(&format!("/admin/channels/{ch}/pause"), &[("_csrf", &token)])
        .await;
    assert_eq!(status, 303, "the operator pauses it");
}

mod catalog;
mod deliveries;
mod sign_in;

mod emulator;

/// A CSV export stops at `EXPORT_LIMIT` rows, the newest first, whatever more the filters
/// select.
#[tokio::test]
async fn an_export_stops_at_its_row_limit() {
    let t = TestStack::with(|o| o.export_limit = Some(3)).await;
    let rx = Receiver::always(500).await.unwrap();
    let failing = t.failing_tenant(&rx, "hook", 5).await;
    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (status, csv) = b
        .get(&format!(
            "/admin/deliveries/export?tenant={}&status=any",
            failing.tenant
        ))
        .await;
    assert_eq!(status, 200, "{csv}");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    // The three newest of the five: the list's own first page, in its order.
    let (_, page) = b
        .get(&format!(
            "/admin/deliveries?tenant={}&status=any",
            failing.tenant
        ))
        .await;
    let mut listed: Vec<(usize, &String)> = failing
        .deliveries
        .iter()
        .map(|id| (page.find(id.as_str()).unwrap(), id))
        .collect();
    listed.sort();
    for (row, (_, id)) in rows.iter().zip(&listed) {
        assert!(row.starts_with(id.as_str()), "{row} is not {id}: {csv}");
    }
}

/// "Retry all failed" over every tenant retries at most `BULK_RETRY_LIMIT` dead letters in
/// all, not that many per tenant, and the page says how many it retried and whether more are
/// left.
#[tokio::test]
async fn retry_all_over_every_tenant_keeps_to_one_limit_and_says_what_it_did() {
    let t = TestStack::with(|o| o.config.bulk_retry_limit = 4).await;
    // Six failures (one attempt each), then every request succeeds.
    let rx = Receiver::start(
        vec![converger_local::receiver::Reply::status(500); 6],
        converger_local::receiver::Reply::status(200),
    )
    .await
    .unwrap();
    let a = t.failing_tenant(&rx, "hook-a", 3).await;
    let b = t.failing_tenant(&rx, "hook-b", 3).await;
    let web = Browser::new(&t.stack.admin_url);
    web.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let sent = || async {
        let mut n = 0;
        for f in [&a, &b] {
            for id in &f.deliveries {
                if t.delivery(&f.key, id).await.status == "sent" {
                    n += 1;
                }
            }
        }
        n
    };
    let retry_all = || async {
        let token = web.csrf("/admin/deliveries").await;
        let (status, _, loc) = web
            .post("/admin/deliveries/retry-all", &[("_csrf", &token)])
            .await;
        assert_eq!(status, 303);
        loc.unwrap()
    };

    let loc = retry_all().await;
    assert!(loc.ends_with("retried=4&has_more=true"), "{loc}");
    let (_, html) = web.get(&loc).await;
    assert!(html.contains("Retried 4 failed deliveries."), "{html}");
    assert!(html.contains("More are left"), "{html}");
    assert!(
        converger_tests::wait_until(Duration::from_secs(20), || async { sent().await == 4 }).await,
        "four sent again"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sent().await,
        4,
        "no more than the limit across both tenants"
    );

    // The rest on the next click, and nothing left after it.
    let loc = retry_all().await;
    assert!(loc.ends_with("retried=2&has_more=false"), "{loc}");
    let (_, html) = web.get(&loc).await;
    assert!(html.contains("Retried 2 failed deliveries."), "{html}");
    assert!(!html.contains("More are left"), "{html}");
    assert!(
        converger_tests::wait_until(Duration::from_secs(20), || async { sent().await == 6 }).await,
        "every one sent"
    );
}

/// An auto-disabled channel shows why and since when on the channels page, with a Re-enable
/// button for those who may act: it turns the channel on again, clears the marks and is
/// audited. A viewer sees the marks but no button.
#[tokio::test]
async fn an_auto_disabled_channel_shows_why_and_is_re_enabled_from_the_page() {
    let t = TestStack::start().await;
    let rx = Receiver::always(500).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t
        .channel(
            &key,
            json!({"type": "webhook", "name": "flaky", "config": {"url": rx.url},
                   "retry_policy": {"max_attempts": 1},
                   "circuit_breaker": {"failure_threshold": 1000},
                   "auto_disable": {"failed_attempts": 2}}),
        )
        .await
        .id
        .as_str()
        .to_owned();
    for id in t.activities(&key, &ch, 2, 1).await {
        t.settled(&key, &id).await;
    }
    let path = format!("/api/v1/channels/{ch}");
    assert!(
        converger_tests::wait_until(Duration::from_secs(10), || async {
            t.api("GET", &path, &key, None)
                .await
                .typed::<ChannelView>(200)
                .is_ok_and(|c| !c.active)
        })
        .await,
        "disabled after two failed attempts"
    );

    let web = Browser::new(&t.stack.admin_url);
    web.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let page = format!("/admin/channels?tenant={tenant}");
    let (_, html) = web.get(&page).await;
    assert!(html.contains("disabled after repeated failures"), "{html}");
    assert!(html.contains("class=\"muted disabled-at\""), "{html}");
    assert!(html.contains("Re-enable"), "{html}");

    // A portal viewer of the tenant sees why, not the button.
    t.web_user("portal", "viewer@flaky.example", "viewer", Some(&tenant))
        .await;
    let viewer = Browser::new(&t.stack.admin_url);
    viewer
        .sign_in("portal", "viewer@flaky.example", WEB_PASSWORD)
        .await;
    let (_, html) = viewer.get("/portal/channels").await;
    assert!(html.contains("disabled after repeated failures"), "{html}");
    assert!(!html.contains("Re-enable"), "{html}");
    let token = csrf_of(&html);
    let (status, _, _) = viewer
        .post(
            &format!("/portal/channels/{ch}/enable"),
            &[("_csrf", &token)],
        )
        .await;
    assert_eq!(status, 403, "a viewer cannot re-enable");

    let token = web.csrf(&page).await;
    let (status, _, loc) = web
        .post(
            &format!("/admin/channels/{ch}/enable"),
            &[("_csrf", &token), ("tenant", &tenant)],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(loc.as_deref(), Some(page.as_str()));
    let c: ChannelView = t.api("GET", &path, &key, None).await.typed(200).unwrap();
    assert!(c.active, "{c:?}");
    assert_eq!(c.disabled_at, None, "{c:?}");
    assert_eq!(c.disabled_reason, None, "{c:?}");
    let (_, html) = web.get(&page).await;
    assert!(!html.contains("Re-enable"), "{html}");
    assert!(!html.contains("disabled after repeated failures"), "{html}");
    let audit: Page<AuditView> = t
        .api("GET", "/api/v1/audit", &key, None)
        .await
        .typed(200)
        .unwrap();
    let entry = audit
        .data
        .iter()
        .find(|e| e.action == "enable_channel")
        .unwrap_or_else(|| panic!("no enable_channel entry: {audit:?}"));
    assert_eq!(entry.resource_id, ch);
    assert_eq!(entry.actor.kind, "admin");
}
