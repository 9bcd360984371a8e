//! The charts pages: a channel's deliveries, latency and health over the last hour, day or
//! week; a tenant's, with its usage per day and the estimate of its cost; and an operator's
//! top tenants by cost. Drawn by [`super::chart`] from the usage counters.

use super::chart::{self, Axis, Look, Series};
use super::layout::{layout, urlencode};
use super::page::{page_error, unavailable};
use super::session::{Viewer, prefix};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use converger_core::TenantId;
use converger_core::usage::{Range, usage_days};
use converger_pipeline::usage::{Point, TenantUsage};
use converger_ports::UsageOf;
use maud::{Markup, html};
use serde::Deserialize;

#[derive(Deserialize, Default)]
pub(super) struct ChartQuery {
    #[serde(default)]
    range: Option<String>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
}

impl ChartQuery {
    /// The range asked for (24 hours when none); `None` when it is not one.
    pub(super) fn range(&self) -> Option<Range> {
        match self
            .range
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            None => Some(Range::default()),
            Some(r) => Range::parse(r),
        }
    }
}

/// The answer to a range that is not one.
pub(super) fn bad_range() -> Response {
    page_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "The range is one of 1h, 24h and 7d.",
    )
}

fn range_links(base: &str, now: Range) -> Markup {
    let sep = if base.contains('?') { '&' } else { '?' };
    html! {
        p.ranges { "Show the last: "
            @for r in Range::ALL {
                @if r == now { strong { (r.label()) } } @else { a href={ (base) (sep) "range=" (r.label()) } { (r.label()) } }
                " "
            }
        }
    }
}

fn axis(points: &[Point], range: Range) -> Axis {
    Axis {
        starts: points.iter().map(|p| p.at_ms).collect(),
        step_ms: range.grain().seconds() * 1000,
    }
}

/// The deliveries chart and the latency chart of a series.
fn delivery_charts(id: &str, points: &[Point], range: Range) -> Markup {
    let a = axis(points, range);
    let per = match range {
        Range::Hour => "per minute",
        Range::Day | Range::Week => "per hour",
    };
    let values = |f: fn(&converger_core::usage::Counts) -> i64| {
        points
            .iter()
            .map(|p| Some(f(&p.counts) as f64))
            .collect::<Vec<_>>()
    };
    let deliveries = chart::bars(
        &format!("{id}-deliveries"),
        &format!("Deliveries {per}"),
        per,
        &a,
        &[
            Series {
                name: "sent",
                look: Look::Solid,
                values: values(|c| c.sent),
            },
            Series {
                name: "failed attempts",
                look: Look::Hatched,
                values: values(|c| c.failed_attempts),
            },
            Series {
                name: "dead letters",
                look: Look::Dotted,
                values: values(|c| c.dead_letters),
            },
        ],
    );
    let quantile = |q: f64| {
        points
            .iter()
            .map(|p| p.counts.latency_quantile_ms(q).map(|ms| ms as f64))
            .collect::<Vec<_>>()
    };
    let latency = chart::lines(
        &format!("{id}-latency"),
        "Ingest to sent (ms, at most)",
        "ms",
        &a,
        &[
            Series {
                name: "p50",
                look: Look::Solid,
                values: quantile(0.5),
            },
            Series {
                name: "p95",
                look: Look::Hatched,
                values: quantile(0.95),
            },
        ],
    );
    html! {
        (deliveries)
        (latency)
        p.muted { "Latency is read from a histogram: each point is the upper bound of the bucket its percentile falls in." }
    }
}

/// `…/channels/{id}/charts`: a channel's deliveries, latency and health.
pub(super) async fn channel_charts(
    State(state): State<AppState>,
    v: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ChartQuery>,
) -> Response {
    let Some(range) = q.range() else {
        return bad_range();
    };
    let Some(channel) = super::channels::visible_channel(&state, &v, &id).await else {
        return page_error(StatusCode::NOT_FOUND, "No such channel.");
    };
    let usage = state.pipeline.usage();
    let of = UsageOf::Channel(channel.id.clone());
    let (points, checks) = match tokio::try_join!(
        usage.series(&of, range),
        usage.health_checks(&channel.id, range)
    ) {
        Ok(r) => r,
        Err(e) => return unavailable(&e),
    };
    let a = axis(&points, range);
    let changes: Vec<(i64, &'static str)> = checks
        .iter()
        .map(|c| (c.checked_at.ms(), c.status.as_str()))
        .collect();
    let step = range.grain().seconds() * 1000;
    let marks: Vec<(i64, &str)> = points
        .iter()
        .filter(|p| p.counts.breaker_opened > 0)
        .map(|p| (p.at_ms + step / 2, "breaker opened"))
        .collect();
    let health = chart::timeline(
        "health",
        "Health",
        &a,
        &changes,
        &[
            ("healthy", Look::Solid),
            ("degraded", Look::Hatched),
            ("unhealthy", Look::Dotted),
            ("unknown", Look::Crossed),
        ],
        &marks,
    );
    let p = prefix(v.realm);
    let base = format!("{p}/channels/{}/charts", channel.id);
    let content = html! {
        p { code { (channel.id) } " · " (channel.kind) " · tenant " code { (channel.tenant_id) } }
        (range_links(&base, range))
        (delivery_charts("channel", &points, range))
        (health)
        p.muted { "Health is checked every five minutes over the last hour's deliveries; a triangle marks a breaker opening." }
        p { a href={ (p) "/deliveries?channel=" (channel.id) } { "This channel's deliveries" } }
    };
    layout(&state, &v, &format!("Charts: {}", channel.name), content)
}

/// `…/usage`: a tenant's charts, usage per day and estimated cost; for an operator who
/// names no tenant, the tenants with the highest estimated cost.
pub(super) async fn usage_page(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<ChartQuery>,
) -> Response {
    let Some(range) = q.range() else {
        return bad_range();
    };
    let now = state.pipeline.clock().now_ms();
    let (from, to) = match usage_days(q.from.as_deref(), q.to.as_deref(), now) {
        Ok(d) => d,
        Err(m) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, m.message()),
    };
    let asked = q.tenant.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let tenant = match (v.own_tenant(), asked) {
        (Some(own), _) => Some(own.clone()),
        (None, Some(t)) => match TenantId::parse(t) {
            Ok(t) => Some(t),
            Err(_) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, "No such tenant."),
        },
        (None, None) => None,
    };
    let usage = state.pipeline.usage();
    let p = prefix(v.realm);
    let Some(tenant) = tenant else {
        if to - from + 1 > converger_core::usage::MAX_TOP_DAYS {
            return page_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "The top tenants cover at most 31 days.",
            );
        }
        let top = match usage.top_tenants(from, to, 20).await {
            Ok(t) => t,
            Err(e) => return unavailable(&e),
        };
        let content = html! {
            p { "The tenants with the highest estimated cost from " (date(from)) " to " (date(to)) " (UTC)." }
            (top_table(p, &top))
            p.muted.note { (crate::views::ESTIMATE_NOTE) }
        };
        return layout(&state, &v, "Usage: top tenants by cost", content);
    };
    let of = UsageOf::Tenant(tenant.clone());
    let (points, days) = match tokio::try_join!(
        usage.series(&of, range),
        usage.tenant_usage(&tenant, from, to)
    ) {
        Ok(r) => r,
        Err(e) => return unavailable(&e),
    };
    let base = match v.own_tenant() {
        Some(_) => format!("{p}/usage"),
        None => format!("{p}/usage?tenant={}", urlencode(tenant.as_str())),
    };
    let content = html! {
        p { "Tenant " code { (tenant) } }
        (range_links(&base, range))
        (delivery_charts("tenant", &points, range))
        h2 { "Usage and estimated cost, " (date(from)) " to " (date(to)) }
        (days_table(&days))
        p.muted.note { (crate::views::ESTIMATE_NOTE) }
    };
    layout(&state, &v, "Usage", content)
}

fn date(day: i64) -> String {
    converger_core::usage::date_of_day(day)
}

fn usd(v: f64) -> String {
    if v > 0.0 && v < 0.01 {
        format!("${v:.6}")
    } else {
        format!("${v:.2}")
    }
}

fn days_table(u: &TenantUsage) -> Markup {
    html! {
        table id="usage" {
            thead { tr { th { "Day" } th { "Deliveries" } th { "Attempts" } th { "Dead letters" } th { "Estimated cost" } } }
            tbody {
                @for d in u.days.iter().rev().filter(|d| d.usage.deliveries != 0 || d.usage.attempts != 0 || d.usage.dead_letters != 0) {
                    tr.day { td { (d.date) } td { (d.usage.deliveries) } td { (d.usage.attempts) } td { (d.usage.dead_letters) } td { (usd(d.estimate.total_usd)) } }
                }
            }
            tfoot { tr.total { th { "Total" } td { (u.total.deliveries) } td { (u.total.attempts) } td { (u.total.dead_letters) } td { strong { (usd(u.estimate.total_usd)) } } } }
        }
        p.muted { "By service: "
            @for (k, v) in &u.estimate.by_service_usd { (k) " " (usd(*v)) "; " }
        }
    }
}

fn top_table(p: &str, top: &[TenantUsage]) -> Markup {
    html! {
        table id="top-tenants" {
            thead { tr { th { "Tenant" } th { "Deliveries" } th { "Attempts" } th { "Dead letters" } th { "Estimated cost" } } }
            tbody { @for t in top {
                tr.tenant data-id=(t.tenant_id) {
                    td { a href={ (p) "/usage?tenant=" (urlencode(t.tenant_id.as_str())) } { code { (t.tenant_id) } } }
                    td { (t.total.deliveries) } td { (t.total.attempts) } td { (t.total.dead_letters) }
                    td { (usd(t.estimate.total_usd)) }
                }
            } }
        }
        @if top.is_empty() { p.muted { "No tenants." } }
    }
}

/// The dashboard's queue charts: each tier queue's and each dead-letter queue's messages
/// (visible, delayed and in flight) as sampled once a minute by the retry scheduler; each
/// hour's highest sample for a day or a week.
pub(super) async fn depth_charts(state: &AppState, range: Range) -> Markup {
    let samples = match state.pipeline.usage().depth_series(range).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "queue depth samples unavailable");
            return html! { p.error id="depths-error" { "The queues' history is unavailable just now." } };
        }
    };
    let a = Axis {
        starts: samples.iter().map(|(at, _)| *at).collect(),
        step_ms: range.grain().seconds() * 1000,
    };
    let series = |queue: String| {
        samples
            .iter()
            .map(|(_, depths)| {
                depths
                    .iter()
                    .find(|d| d.queue == queue)
                    .map(|d| d.total() as f64)
            })
            .collect::<Vec<_>>()
    };
    let looks = [Look::Solid, Look::Hatched, Look::Dotted];
    let tiers: Vec<(String, String)> = converger_core::Tier::ALL
        .iter()
        .map(|t| (t.queue_name().to_owned(), format!("{}-dlq", t.queue_name())))
        .collect();
    let of = |dlq: bool| -> Vec<Series<'_>> {
        tiers
            .iter()
            .zip(looks)
            .map(|((q, d), look)| {
                let name = if dlq { d } else { q };
                Series {
                    name,
                    look,
                    values: series(name.clone()),
                }
            })
            .collect()
    };
    let how = match range {
        Range::Hour => "each minute",
        Range::Day | Range::Week => "each hour's highest",
    };
    html! {
        (range_links("/admin", range))
        (chart::lines("queues", &format!("Tier queues: messages ({how})"), "messages", &a, &of(false)))
        (chart::lines("dlqs", &format!("Dead-letter queues: messages ({how})"), "messages", &a, &of(true)))
        p.muted { "Sampled once a minute by the retry scheduler: visible, delayed and in flight together." }
    }
}
