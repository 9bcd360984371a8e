//! The channels page, its live Delivery and Health columns, Pause/Resume and Re-enable.

use super::layout::{layout, urlencode};
use super::page::{page_error, unavailable};
use super::scope::{TenantQuery, scoped_channels};
use super::session::{Posted, Viewer, forbidden, prefix};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::ChannelId;
use converger_core::web::Realm;
use converger_ports::{Channel, Scope};
use maud::{PreEscaped, html};
use serde_json::Value;

/// A channel's Delivery column: its flow item's breaker state is all it takes.
pub(super) async fn delivery_label(state: &AppState, c: &Channel) -> String {
    live_cells(state, c).await.delivery
}

/// The columns the channels page refreshes: Delivery (the breaker's state) and Health (the
/// latest health check's status), both from the channel's flow item, one read.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct LiveCells {
    delivery: String,
    health: String,
}

async fn live_cells(state: &AppState, c: &Channel) -> LiveCells {
    match state.pipeline.reads().flow(&c.id).await {
        Ok(f) => LiveCells {
            delivery: f.circuit_state.delivery_column().to_owned(),
            health: f.health_status.map_or("unknown", |h| h.as_str()).to_owned(),
        },
        Err(_) => LiveCells {
            delivery: "unknown".to_owned(),
            health: "unknown".to_owned(),
        },
    }
}

pub(super) async fn channels(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let p = prefix(v.realm);
    let list = match scoped_channels(&state, &v, q.tenant.as_deref()).await {
        Ok(l) => l,
        Err(e) => return e.page(),
    };
    let cells = futures::future::join_all(list.iter().map(|c| live_cells(&state, c))).await;
    let csrf = v.csrf(&state);
    let content = html! {
        table id="channels" {
            thead { tr { th { "Name" } th { "Type" } @if v.realm == Realm::Admin { th { "Tenant" } } th { "Active" } th { "Health" } th { "Delivery" } th { "" } } }
            tbody { @for (c, cells) in list.iter().zip(&cells) {
                @let label = &cells.delivery;
                tr.channel data-id=(c.id) {
                    td { (c.name) br; code.muted { (c.id) } br; a.charts href={ (p) "/channels/" (c.id) "/charts" } { "Charts" } }
                    td { (c.kind) }
                    @if v.realm == Realm::Admin { td { (c.tenant_id) } }
                    td.active {
                        @if c.active { "yes" } @else {
                            "no"
                            @if let Some(reason) = &c.disabled_reason {
                                br; span.muted.disabled-reason { (disabled_label(reason)) }
                            }
                            @if let Some(at) = &c.disabled_at {
                                br; span.muted.disabled-at { "since " (crate::web::layout::short_time(*at)) }
                            }
                            @if v.can_act() && !(c.managed && v.own_tenant().is_some()) {
                                form.inline.enable method="post" action={ (p) "/channels/" (c.id) "/enable" } {
                                    input type="hidden" name="_csrf" value=(csrf);
                                    @if let Some(t) = q.tenant.as_deref().filter(|t| !t.is_empty()) { input type="hidden" name="tenant" value=(t); }
                                    button.enable type="submit" { "Re-enable" }
                                }
                            }
                        }
                    }
                    td.health data-channel=(c.id) { (cells.health) }
                    td.delivery-state data-channel=(c.id) { (label) }
                    td { @if v.can_act() {
                        @let paused = label == "Paused";
                        form.inline.toggle method="post" action={ (p) "/channels/" (c.id) (if paused { "/resume" } else { "/pause" }) } {
                            input type="hidden" name="_csrf" value=(csrf);
                            @if let Some(t) = q.tenant.as_deref().filter(|t| !t.is_empty()) { input type="hidden" name="tenant" value=(t); }
                            button.toggle type="submit" { (if paused { "Resume deliveries" } else { "Pause deliveries" }) }
                        }
                    } }
                }
            } }
        }
        @if list.is_empty() { p.muted { "No channels." } }
        // The script is the same on every page (its hash is in the pages' CSP); where it
        // reads from is an attribute.
        script data-states=(format!(
            "{p}/channels/states{}",
            q.tenant.as_deref().filter(|t| !t.is_empty()).map(|t| format!("?tenant={}", urlencode(t))).unwrap_or_default()
        )) { (PreEscaped(CHANNELS_SCRIPT)) }
    };
    layout(&state, &v, "Channels", content)
}

/// The channels page's live refresh: every 2 s it reads the Delivery and Health columns'
/// values and updates each row's cells and its Pause/Resume button.
pub(super) const CHANNELS_SCRIPT: &str = r#"const statesUrl = document.currentScript.dataset.states;
setInterval(async () => {
  try {
    const r = await fetch(statesUrl);
    if (!r.ok) return;
    const states = await r.json();
    for (const row of document.querySelectorAll('tr.channel')) {
      const v = states[row.dataset.id];
      if (!v) continue;
      row.querySelector('td.delivery-state').textContent = v.delivery;
      row.querySelector('td.health').textContent = v.health;
      const form = row.querySelector('form.toggle');
      if (!form) continue;
      const paused = v.delivery === 'Paused';
      form.action = form.action.replace(/\/(pause|resume)$/, paused ? '/resume' : '/pause');
      form.querySelector('button').textContent = paused ? 'Resume deliveries' : 'Pause deliveries';
    }
  } catch (e) {}
}, 2000);"#;

/// The Delivery and Health columns' values by channel id, polled by the channels page.
pub(super) async fn channel_states(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let list = match scoped_channels(&state, &v, q.tenant.as_deref()).await {
        Ok(l) => l,
        Err(e) => return e.json(),
    };
    let cells = futures::future::join_all(list.iter().map(|c| live_cells(&state, c))).await;
    let map: serde_json::Map<String, Value> = list
        .iter()
        .zip(cells)
        .map(|(c, l)| (c.id.to_string(), serde_json::json!(l)))
        .collect();
    axum::Json(Value::Object(map)).into_response()
}

/// The channel `id` (from a page's path) as `v` may see it: `None` for an id that does not
/// parse, another tenant's channel, or one the store could not read.
pub(super) async fn visible_channel(state: &AppState, v: &Viewer, id: &str) -> Option<Channel> {
    let id = ChannelId::parse(id).ok()?;
    state
        .pipeline
        .reads()
        .channel_in(Scope::of(v.own_tenant()), &id)
        .await
        .ok()
        .flatten()
}

/// Why a channel is disabled, in words.
fn disabled_label(reason: &str) -> String {
    match reason {
        "auto_disabled_failure_threshold" => "disabled after repeated failures".into(),
        other => format!("disabled: {other}"),
    }
}

pub(super) async fn pause_or_resume(
    State(state): State<AppState>,
    Path((id, action)): Path<(String, String)>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let Some(channel) = visible_channel(&state, &v, &id).await else {
        return page_error(StatusCode::NOT_FOUND, "No such channel.");
    };
    if channel.managed && v.own_tenant().is_some() {
        return page_error(
            StatusCode::FORBIDDEN,
            "This channel delivers the platform's alerts; an operator changes it.",
        );
    }
    let r: Result<(), converger_pipeline::outcome::FlowError> = match action.as_str() {
        "pause" => state
            .pipeline
            .flow()
            .operator()
            .pause(&channel, &v.actor())
            .await
            .map(drop),
        "resume" => state
            .pipeline
            .flow()
            .operator()
            .resume(&channel, &v.actor())
            .await
            .map(drop),
        "enable" => state
            .pipeline
            .channels()
            .enable(&channel, &v.actor())
            .await
            .map(drop)
            .map_err(Into::into),
        _ => return page_error(StatusCode::NOT_FOUND, "No such action."),
    };
    if let Err(e) = r {
        return unavailable(&e);
    }
    // Back to the list the button was on (an admin's tenant filter kept).
    let back = match form.get("tenant").filter(|t| !t.is_empty()) {
        Some(t) if v.realm == Realm::Admin => format!("?tenant={}", urlencode(t)),
        _ => String::new(),
    };
    Redirect::to(&format!("{}/channels{back}", prefix(v.realm))).into_response()
}
