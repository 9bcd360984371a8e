//! `bench pages [N]`: the web pages on a tenant with N failed deliveries (default 10,000), on
//! the local stack: how long each page takes to answer, signed in as an operator, and how long
//! the CSV export of all N rows takes. One JSON line.

use super::maintenance::{row, seed};
use converger_core::{DeliveryStatus, Tier, time};
use converger_stack::stack::{Stack, StackOptions};
use converger_store::counter::{Counts, RequestCounter};
use converger_store::dynamo::DynamoStore;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Each page is fetched this many times; the figure is the median.
const RUNS: usize = 5;

pub async fn run(deliveries: usize) -> Result<Value, String> {
    let counter = RequestCounter::new();
    let opts = StackOptions {
        run_functions: false,
        counter: Some(counter.clone()),
        ..StackOptions::bench("pages")
    };
    let stack = Stack::start(opts).await?;
    let result = measure(&stack, &counter, deliveries.max(1)).await;
    stack.stop().await;
    result
}

async fn measure(stack: &Stack, counter: &RequestCounter, n: usize) -> Result<Value, String> {
    let p = &stack.pipeline;
    let (tenant, _) = super::tenant(p, Tier::Default).await?;
    let channel = super::webhook(p, &tenant, "http://127.0.0.1:9/", json!({})).await?;
    // A second tenant, so that the unfiltered list merges two tenants' pages.
    let (other, _) = super::tenant(p, Tier::Default).await?;
    let other_channel = super::webhook(p, &other, "http://127.0.0.1:9/", json!({})).await?;
    let store = DynamoStore::new(
        stack.aws()?.clients.dynamodb.clone(),
        stack.aws()?.resources.clone(),
    );
    let start = time::now_ms() - 86_400_000;
    // One row in the middle has an error of its own, for the search.
    let odd = n / 2;
    let seeded = Instant::now();
    seed(&store, n, |i| {
        let at = start + i as i64 * 1000;
        let mut d = row(&tenant.id, &channel, DeliveryStatus::Failed, at);
        d.tier = Tier::Default;
        d.attempts = 5;
        d.updated_at = converger_core::Timestamp::from_ms(at);
        d.last_error = Some(if i == odd {
            "webhook: HTTP 418".into()
        } else {
            "webhook: HTTP 503".into()
        });
        d
    })
    .await?;
    seed(&store, 100, |i| {
        let at = start + i as i64 * 1000;
        let mut d = row(&other.id, &other_channel, DeliveryStatus::Failed, at);
        d.updated_at = converger_core::Timestamp::from_ms(at);
        d
    })
    .await?;
    let seed_s = seeded.elapsed().as_secs_f64();

    let web = Web::sign_in(stack).await?;
    // CPU of this process (the pages' server; the functions do not run) and of the emulator
    // over every fetch below.
    let emulator = stack.emulator_pid().map(|p| p.to_string());
    let cpu = || {
        (
            super::cpu_seconds("self"),
            emulator.as_deref().and_then(super::cpu_seconds),
        )
    };
    let cpu0 = cpu();
    let mut figures = serde_json::Map::new();
    let mut page = |name: &str, ms: f64| {
        figures.insert(name.to_owned(), json!((ms * 10.0).round() / 10.0));
    };
    // The AWS requests one fetch of each page makes: they do not depend on the emulator.
    let mut requests = serde_json::Map::new();
    let t = tenant.id.as_str();
    for (name, path) in [
        (
            "deliveries_first_page",
            format!("/admin/deliveries?tenant={t}"),
        ),
        ("deliveries_all_tenants", "/admin/deliveries".to_owned()),
        (
            "search_error_text",
            format!("/admin/deliveries?tenant={t}&q=HTTP+418"),
        ),
        ("dashboard", "/admin".to_owned()),
        ("channels", format!("/admin/channels?tenant={t}")),
        (
            "export_all",
            format!("/admin/deliveries/export?tenant={t}&status=any"),
        ),
    ] {
        let _ = counter.take();
        web.get(&path).await?;
        requests.insert(name.into(), by_operation(&counter.take()));
    }
    page(
        "deliveries_first_page_ms",
        web.median(&format!("/admin/deliveries?tenant={t}")).await?,
    );
    page(
        "deliveries_all_tenants_ms",
        web.median("/admin/deliveries").await?,
    );
    // Load more, up to ten pages deep: each page costs the same (a keyset bound, not an offset).
    let mut next = format!("/admin/deliveries?tenant={t}");
    let mut deep = Vec::new();
    for _ in 0..10 {
        let (ms, html) = web.get(&next).await?;
        deep.push(ms);
        match load_more(&html) {
            Some(link) => next = link,
            None => break,
        }
    }
    deep.sort_by(f64::total_cmp);
    page("load_more_page_ms", deep[deep.len() / 2]);
    let pages_followed = deep.len();
    // The error-text search: the first answer, and the pages followed until the one row with
    // that error shows (a search reads up to ten 1 MB pages of the index per answer).
    let search = format!("/admin/deliveries?tenant={t}&q=HTTP+418");
    page("search_error_text_ms", web.median(&search).await?);
    let mut next = search;
    let mut search_ms = 0.0;
    let mut search_pages = 0;
    let mut search_found = 0;
    while search_pages < 100 {
        let (ms, html) = web.get(&next).await?;
        search_ms += ms;
        search_pages += 1;
        search_found += html.matches("class=\"delivery\"").count();
        match load_more(&html) {
            Some(link) if search_found == 0 => next = link,
            _ => break,
        }
    }
    page("search_until_found_ms", search_ms);
    let (_, first_page) = web.get(&format!("/admin/deliveries?tenant={t}")).await?;
    let first = first_page
        .split("data-id=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_owned();
    page(
        "delivery_page_ms",
        web.median(&format!("/admin/deliveries/{first}")).await?,
    );
    page("dashboard_ms", web.median("/admin").await?);
    page(
        "channels_ms",
        web.median(&format!("/admin/channels?tenant={t}")).await?,
    );
    let (export_ms, csv) = web
        .get(&format!("/admin/deliveries/export?tenant={t}&status=any"))
        .await?;
    let cpu1 = cpu();
    let used =
        |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| ((b - a) * 100.0).round() / 100.0);
    Ok(super::emit(json!({
        "converger_cpu_s": used(cpu0.0, cpu1.0),
        "emulator_cpu_s": used(cpu0.1, cpu1.1),
        "scenario": "pages",
        "deliveries": n,
        "pages": figures,
        "load_more_pages_followed": pages_followed,
        "search_rows_found": search_found,
        "search_answers_until_found": search_pages,
        "export_ms": (export_ms * 10.0).round() / 10.0,
        "export_rows": csv.lines().count().saturating_sub(1),
        "requests_per_fetch": requests,
        "seed_s": (seed_s * 10.0).round() / 10.0,
        "note": "median of 5 fetches per page, signed in as an operator, on the local stack; each page's time is mostly the emulator's queries",
    })))
}

/// Requests by `service/operation` (a Query's read units depend on the bytes it reads, which
/// the client does not see, so none are given).
fn by_operation(counts: &Counts) -> Value {
    Value::Object(
        counts
            .iter()
            .map(|((service, op), tally)| (format!("{service}/{op}"), json!(tally.requests)))
            .collect(),
    )
}

/// The Load more link of a deliveries page.
fn load_more(html: &str) -> Option<String> {
    let at = html.find("id=\"load-more\" href=\"")? + "id=\"load-more\" href=\"".len();
    let href = &html[at..at + html[at..].find('"')?];
    Some(href.replace("&amp;", "&"))
}

/// A signed-in operator's browser: a cookie jar.
struct Web {
    http: reqwest::Client,
    base: String,
}

impl Web {
    async fn sign_in(stack: &Stack) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| e.to_string())?;
        let web = Self {
            http,
            base: stack.admin_url.clone(),
        };
        let (_, form) = web.get("/admin/login").await?;
        let marker = "name=\"_csrf\" value=\"";
        let at = form.find(marker).ok_or("no CSRF token on the login form")? + marker.len();
        let token = &form[at..at + form[at..].find('"').unwrap_or(0)];
        let r = web
            .http
            .post(format!("{}/admin/login", web.base))
            .form(&[
                ("_csrf", token),
                ("email", stack.admin_email.as_str()),
                ("password", stack.admin_password.as_str()),
            ])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status().as_u16() != 303 {
            return Err(format!("sign-in answered {}", r.status()));
        }
        Ok(web)
    }

    /// Fetches `path`; returns the milliseconds to the whole body, and the body.
    async fn get(&self, path: &str) -> Result<(f64, String), String> {
        let t0 = Instant::now();
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let body = r.text().await.map_err(|e| e.to_string())?;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        if !status.is_success() {
            return Err(format!("GET {path}: {status}"));
        }
        Ok((ms, body))
    }

    async fn median(&self, path: &str) -> Result<f64, String> {
        let mut ms = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            ms.push(self.get(path).await?.0);
        }
        ms.sort_by(f64::total_cmp);
        Ok(ms[RUNS / 2])
    }
}
