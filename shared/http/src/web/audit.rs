//! The audit log page.

use super::layout::{layout, short_time};
use super::scope::{TenantQuery, one_tenant};
use super::session::{Viewer, prefix};
use crate::AppState;
use axum::extract::{Query, State};
use axum::response::Response;
use converger_core::web::Realm;
use maud::html;
use serde_json::Value;

pub(super) async fn audit(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let (tenants, tenant) = one_tenant(&state, &v, &q).await;
    let entries = match &tenant {
        Some(t) => state
            .pipeline
            .reads()
            .audit(t, 200, None)
            .await
            .map(|l| l.items)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let content = html! {
        @if v.realm == Realm::Admin {
            form method="get" action="/admin/audit" {
                label { "Tenant " select name="tenant" {
                    @for t in tenants.iter() { option value=(t.id) selected[tenant.as_ref() == Some(&t.id)] { (t.name) } }
                } } " " button type="submit" { "Show" }
            }
        }
        table id="audit" {
            thead { tr { th { "When (UTC)" } th { "Actor" } th { "Action" } th { "Resource" } th { "Changes" } } }
            tbody { @for e in &entries { tr.entry {
                td title=(e.at) { (short_time(e.at)) } td { (e.actor.to_string()) } td { (e.action) }
                td { (e.resource_type) " "
                    @if e.resource_type == "delivery" {
                        a href={ (prefix(v.realm)) "/deliveries/" (e.resource_id) } { code { (e.resource_id) } }
                    } @else { code { (e.resource_id) } } }
                td.changes { @match e.changes.as_object() {
                    Some(fields) => { @for (k, val) in fields {
                        span.change { span.muted { (k) ": " } (match val { Value::String(s) => s.clone(), other => other.to_string() }) } " "
                    } }
                    None => { code { (e.changes.to_string()) } }
                } }
            } } }
        }
        @if entries.is_empty() { p.muted { "No entries." } }
    };
    layout(&state, &v, "Audit log", content)
}
