//! The event-type catalog page: each type with its description, whether it is deprecated,
//! and its payload schema.

use super::layout::{layout, short_time};
use super::scope::{TenantQuery, one_tenant};
use super::session::Viewer;
use crate::AppState;
use axum::extract::{Query, State};
use axum::response::Response;
use converger_core::web::Realm;
use maud::html;

/// Most types the page shows.
const SHOWN: usize = 500;

pub(super) async fn event_types(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let (tenants, tenant) = one_tenant(&state, &v, &q).await;
    let (types, more) = match &tenant {
        Some(t) => state
            .pipeline
            .event_types()
            .list(t, None, SHOWN)
            .await
            .unwrap_or_default(),
        None => (Vec::new(), false),
    };
    let content = html! {
        @if v.realm == Realm::Admin {
            form method="get" action="/admin/event-types" {
                label { "Tenant " select name="tenant" {
                    @for t in tenants.iter() { option value=(t.id) selected[tenant.as_ref() == Some(&t.id)] { (t.name) } }
                } } " " button type="submit" { "Show" }
            }
        }
        p.muted { "The kinds of activity this tenant sends. An activity of a type with a schema is refused at ingest when its payload does not fit (422 payload_does_not_match_schema). Changed through the API: /api/v1/event-types." }
        table id="event-types" {
            thead { tr { th { "Name" } th { "Description" } th { "Schema" } th { "Changed (UTC)" } } }
            tbody { @for t in &types { tr.event-type {
                td { code { (t.name) } @if t.deprecated { " " span.badge.deprecated { "deprecated" } } }
                td { (t.description.clone().unwrap_or_default()) }
                td { @match &t.schema {
                    Some(s) => { details { summary { "JSON Schema" } pre { (serde_json::to_string_pretty(s).unwrap_or_default()) } } }
                    None => { span.muted { "none: payloads are not checked" } }
                } }
                td title=(t.updated_at) { (short_time(t.updated_at)) }
            } } }
        }
        @if types.is_empty() { p.muted { "No event types." } }
        @if more { p.muted { "The first " (SHOWN) " types, by name." } }
    };
    layout(&state, &v, "Event types", content)
}
