//! The operators' dashboard.

use super::channels::delivery_label;
use super::layout::layout;
use super::session::Viewer;
use crate::AppState;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::health::HealthStatus;
use converger_core::web::Realm;
use converger_core::{DeliveryStatus, TenantId};
use converger_ports::Channel;
use maud::html;

/// Counts one status's deliveries of one tenant, up to `cap`.
/// How far the dashboard counts each tenant's deliveries of one status.
const COUNT_CAP: u64 = 10_000;

/// `?live=1`: only the part the page's script refreshes (no chart, no layout).
#[derive(serde::Deserialize, Default)]
pub(super) struct LiveQuery {
    #[serde(default)]
    live: Option<String>,
}

pub(super) async fn dashboard(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<super::usage::ChartQuery>,
    Query(live): Query<LiveQuery>,
) -> Response {
    if v.realm != Realm::Admin {
        return Redirect::to("/portal/deliveries").into_response();
    }
    let Some(range) = q.range() else {
        return super::usage::bad_range();
    };
    let live_only = live.live.as_deref() == Some("1");
    let tenants = state.tenants().await.unwrap_or_default();
    // Every tenant's count of every status, 32 queries at a time, in order.
    let pairs: Vec<(TenantId, DeliveryStatus)> = DeliveryStatus::ALL
        .iter()
        .flat_map(|st| tenants.iter().map(move |t| (t.id.clone(), *st)))
        .collect();
    let counts: Vec<_> = {
        use futures::StreamExt;
        let store = state.pipeline.reads().clone();
        futures::stream::iter(pairs)
            .map(move |(t, st)| {
                let store = store.clone();
                async move { store.count_by_status(&t, st, COUNT_CAP).await }
            })
            .buffered(32)
            .collect()
            .await
    };
    let per_status = tenants.len().max(1);
    let by_status: Vec<(DeliveryStatus, u64, bool)> = DeliveryStatus::ALL
        .iter()
        .zip(counts.chunks(per_status).chain(std::iter::repeat(&[][..])))
        .map(|(st, counts)| {
            let counts: Vec<u64> = counts.iter().map(|c| *c.as_ref().unwrap_or(&0)).collect();
            // A tenant counted to the cap has more: the total is shown as "at least".
            let capped = counts.iter().any(|c| *c >= COUNT_CAP);
            (*st, counts.iter().sum(), capped)
        })
        .collect();
    // A failed read is shown, not hidden behind an empty table.
    let (depths, depth_error) = match state.pipeline.queue_depths().await {
        Ok(d) => (d, false),
        Err(e) => {
            tracing::warn!(error = %e, "queue depths unavailable");
            (Vec::new(), true)
        }
    };
    let mut channels = Vec::new();
    for t in tenants.iter() {
        channels.extend(
            state
                .pipeline
                .reads()
                .channels(&t.id)
                .await
                .unwrap_or_default(),
        );
    }
    let labels =
        futures::future::join_all(channels.iter().map(|c| delivery_label(&state, c))).await;
    let checks = state.pipeline.health();
    let health =
        futures::future::join_all(channels.iter().map(|c| checks.channel_health(c, 1))).await;
    let mut by_health: std::collections::BTreeMap<String, usize> = Default::default();
    for h in &health {
        let s = h
            .as_ref()
            .map_or(HealthStatus::Unknown, |h| h.status)
            .as_str();
        *by_health.entry(s.to_owned()).or_default() += 1;
    }
    let open: Vec<(&Channel, &String)> = channels
        .iter()
        .zip(&labels)
        .filter(|(_, l)| l.as_str() != "Flowing")
        .collect();
    let failed = by_status
        .iter()
        .find(|(s, _, _)| *s == DeliveryStatus::Failed)
        .map_or(0, |(_, n, _)| *n);
    // What the script replaces with the same part read again (`?live=1`).
    let live_part = html! {
        div id="live" data-every=(REFRESH_MS) {
            p { "Failed deliveries: " strong id="failed-count" { (failed) } " · "
                a href="/admin/deliveries?status=failed" { "see them" } }
            h2 { "Deliveries by status" }
            table id="by-status" { tr { @for (s, _, _) in &by_status { th { (s) } } }
                              tr { @for (_, n, capped) in &by_status { td { (n) @if *capped { "+" } } } } }
            h2 { "Queues" }
            @if depth_error { p.error id="queues-error" { "Queue depths are unavailable just now; the log has the detail." } }
            table id="queues" { tr { th { "Queue" } th { "Visible" } th { "Delayed" } th { "In flight" } }
                @for d in &depths { tr { td { (d.queue) } td { (d.visible) } td { (d.delayed) } td { (d.in_flight) } } } }
            h2 { "Channels not flowing" }
            @if open.is_empty() { p.muted { "Every channel is flowing." } }
            ul id="not-flowing" { @for (c, l) in &open { li { (c.name) " (" (c.tenant_id) "): " (l) } } }
            h2 { "Channels by health" }
            table id="by-health" { @for (s, n) in &by_health { tr { th { (s) } td { (n) } } } }
        }
    };
    if live_only {
        return axum::response::Html(live_part.into_string()).into_response();
    }
    let depth_chart = super::usage::depth_charts(&state, range).await;
    let content = html! {
        p.muted { "Counts and queues refresh every " (REFRESH_MS / 1000) " s; last read "
            span id="live-at" { "when the page loaded" } "." }
        (live_part)
        script { (maud::PreEscaped(DASHBOARD_SCRIPT)) }
        (depth_chart)
    };
    layout(&state, &v, "Dashboard", content)
}

/// How often the dashboard reads its counts and queues again.
const REFRESH_MS: u64 = 10_000;

/// The dashboard's live part: while the tab is shown, that part alone is read again every
/// `data-every` ms (`?live=1`: the same rendering, no second format to keep in step, and
/// no chart read again) and put in place of this one; a failed read leaves what is shown.
pub(super) const DASHBOARD_SCRIPT: &str = r#"const live = document.getElementById('live');
const every = Number(live.dataset.every) || 10000;
setInterval(async () => {
  if (document.visibilityState !== 'visible') return;
  try {
    const u = new URL(location.href);
    u.searchParams.set('live', '1');
    const r = await fetch(u, {cache: 'no-store', credentials: 'same-origin'});
    if (!r.ok || r.redirected) return;
    const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
    const next = doc.getElementById('live');
    if (!next) return;
    live.replaceChildren(...Array.from(next.childNodes));
    document.getElementById('live-at').textContent = new Date().toLocaleTimeString();
  } catch (e) {}
}, every);"#;
