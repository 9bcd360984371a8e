//! The deliveries list, one delivery's page, and their Retry buttons.

use super::conversations::conversation_href;
use super::filters::{Filters, status_choices};
use super::layout::{layout, nonempty, short_time};
use super::page::{page_error, unavailable};
use super::scope::{channel_names, scoped_channels, tenant_choices};
use super::session::{Posted, Viewer, forbidden, prefix};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::web::{Realm, redact};
use converger_core::{DeliveryId, DeliveryStatus, TenantId};
use converger_pipeline::replay::ReplayError;
use converger_ports::Scope;
use maud::html;
use std::collections::HashMap;

const PAGE_ROWS: usize = 50;

/// What the last "Retry all failed" did, carried back in the URL it redirects to.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RetriedNotice {
    retried: Option<usize>,
    #[serde(default)]
    has_more: bool,
}

pub(super) async fn deliveries(
    State(state): State<AppState>,
    v: Viewer,
    Query(f): Query<Filters>,
    Query(notice): Query<RetriedNotice>,
) -> Response {
    let p = prefix(v.realm);
    let (rows, next) = match f.page(&state, &v, PAGE_ROWS).await {
        Ok(x) => x,
        Err(e) => return e.page(),
    };
    let names = channel_names(&state, &rows).await;
    let tenants = tenant_choices(&state, &v).await;
    let tenant_names: HashMap<&TenantId, &str> =
        tenants.iter().map(|t| (&t.id, t.name.as_str())).collect();
    // One tenant in scope (the portal's, or the one an operator chose): its channels by name.
    let channel_choices = if v.own_tenant().is_some() || nonempty(&f.tenant).is_some() {
        scoped_channels(&state, &v, nonempty(&f.tenant)).await.ok()
    } else {
        None
    };
    let csrf = v.csrf(&state);
    let back = f.query(None);
    let content = html! {
        @if let Some(n) = notice.retried {
            p id="retried" role="status" {
                "Retried " (n) " failed " (if n == 1 { "delivery" } else { "deliveries" }) "."
                @if notice.has_more {
                    " More are left: the limit of one retry is "
                    (state.pipeline.config().bulk_retry_limit) "; retry again for the rest."
                }
            }
        }
        form id="filters" method="get" action={ (p) "/deliveries" } {
            fieldset {
                @if v.realm == Realm::Admin {
                    label { "Tenant " select name="tenant" {
                        option value="" { "All tenants" }
                        @for t in tenants.iter() {
                            option value=(t.id) selected[nonempty(&f.tenant) == Some(t.id.as_str())] { (t.name) }
                        }
                    } } " "
                }
                @if let Some(choices) = &channel_choices {
                    label { "Channel " select name="channel" {
                        option value="" { "All channels" }
                        @for c in choices {
                            option value=(c.id) selected[nonempty(&f.channel) == Some(c.id.as_str())] { (c.name) }
                        }
                    } } " "
                } @else {
                    label { "Channel id " input name="channel" value=(nonempty(&f.channel).unwrap_or("")) size="36"; } " "
                }
                label { "Status " select name="status" {
                    @for s in status_choices() {
                        option value=(s) selected[f.status_choice() == s] { (s) }
                    }
                } } " "
                label { "From (UTC) " input type="date" name="from" value=(nonempty(&f.from).unwrap_or("")); } " "
                label { "To " input type="date" name="to" value=(nonempty(&f.to).unwrap_or("")); } " "
                label { "Search " input name="q" placeholder="activity id or error text" value=(nonempty(&f.q).unwrap_or("")); } " "
                label { "Event type " input name="event_type" size="16" value=(nonempty(&f.event_type).unwrap_or("")); } " "
                label { "Sort " select name="sort" {
                    option value="newest" selected[f.newest_first()] { "newest first" }
                    option value="oldest" selected[!f.newest_first()] { "oldest first" }
                } } " "
                button type="submit" { "Apply" }
            }
        }
        form id="find-conversation" method="get" action={ (p) "/conversations" } {
            @if v.realm == Realm::Admin {
                @if let Some(t) = nonempty(&f.tenant) { input type="hidden" name="tenant" value=(t); }
            }
            label { "Conversation " input name="id" placeholder="conversation id" size="24"; } " "
            button type="submit" { "Open" }
            @if v.realm == Realm::Admin && nonempty(&f.tenant).is_none() {
                " " span.muted { "(choose a tenant, or the page will ask)" }
            }
        }
        div.actions {
            a id="export" href={ (p) "/deliveries/export?" (f.query(None)) } { "Export CSV" }
            @if v.can_act() && f.dead_letters_only() {
                " "
                form.inline method="post" action={ (p) "/deliveries/retry-all" } {
                    input type="hidden" name="_csrf" value=(csrf);
                    input type="hidden" name="back" value=(back);
                    @for (k, val) in [("tenant", &f.tenant), ("channel", &f.channel), ("from", &f.from), ("to", &f.to), ("q", &f.q), ("event_type", &f.event_type)] {
                        @if let Some(val) = nonempty(val) { input type="hidden" name=(k) value=(val); }
                    }
                    button id="retry-all" type="submit" { "Retry all failed" }
                }
            }
        }
        table id="deliveries" {
            thead { tr {
                @if v.realm == Realm::Admin { th { "Tenant" } }
                th { "Channel" } th { "Activity" } th { "Status" } th { "Attempts" }
                th { "Retries" } th { "Last error" } th { "Changed (UTC)" } th { "" }
            } }
            tbody {
                @for d in &rows {
                    tr.delivery data-id=(d.id) data-status=(d.status) {
                        @if v.realm == Realm::Admin {
                            td title=(d.tenant_id) { (tenant_names.get(&d.tenant_id).copied().unwrap_or(d.tenant_id.as_str())) }
                        }
                        td { (names.get(&d.channel_id).cloned().unwrap_or_default()) }
                        td { a.open href={ (p) "/deliveries/" (d.id) "?" (back) } { code { (d.activity_id) } }
                            br; a.conversation.muted href=(conversation_href(v.realm, &d.tenant_id, &d.conversation_id)) { "conversation " (d.conversation_id) } }
                        td { span class={ "badge " (d.status) } { (d.status) } }
                        td { (d.attempts) }
                        td { (d.retry_count)
                            @if let Some(by) = &d.retried_by { br; span.muted { "by " (by) } }
                            @if let Some(at) = &d.retried_at { br; span.muted title=(at) { (short_time(*at)) } } }
                        td.error { (d.last_error.clone().unwrap_or_default()) }
                        td { span.muted title=(d.updated_at) { (short_time(d.updated_at)) } }
                        td {
                            @if v.can_act() && matches!(d.status, DeliveryStatus::Failed | DeliveryStatus::Filtered) {
                                form.inline method="post" action={ (p) "/deliveries/" (d.id) "/retry" } {
                                    input type="hidden" name="_csrf" value=(csrf);
                                    input type="hidden" name="back" value=(back);
                                    button.retry type="submit" { "Retry" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @match (&next, rows.is_empty()) {
            (None, true) => { p.muted id="empty" { "No deliveries match." } }
            (Some(n), true) => {
                p.muted id="searched" { "No matches among the rows read so far." }
                p { a id="load-more" href={ (p) "/deliveries?" (f.query(Some(n))) } { "Search further" } }
            }
            (Some(n), false) => {
                p { a id="load-more" href={ (p) "/deliveries?" (f.query(Some(n))) } { "Load more" } }
            }
            (None, false) => {}
        }
    };
    layout(&state, &v, "Deliveries", content)
}

/// The attempts one delivery page shows (the API pages through all of them).
const PAGE_ATTEMPTS: usize = 100;

/// One delivery: its fields, its attempt log, a redacted preview of its activity's payload
/// and, for a failed one, the Retry button. The query string is the list's filters, kept for
/// the way back.
pub(super) async fn delivery_page(
    State(state): State<AppState>,
    v: Viewer,
    Path(id): Path<String>,
    axum::extract::RawQuery(back): axum::extract::RawQuery,
) -> Response {
    let p = prefix(v.realm);
    let back = back.unwrap_or_default();
    let found = match DeliveryId::parse(&id) {
        Ok(id) => {
            state
                .pipeline
                .reads()
                .delivery_in(Scope::of(v.own_tenant()), &id)
                .await
        }
        Err(_) => Ok(None),
    };
    let d = match found {
        Ok(Some(d)) => d,
        Ok(_) => return page_error(StatusCode::NOT_FOUND, "No such delivery."),
        Err(e) => return unavailable(&e),
    };
    let (attempts, more) = match state
        .pipeline
        .attempts()
        .attempt_log(&d, None, PAGE_ATTEMPTS)
        .await
    {
        Ok(x) => x,
        Err(e) => return unavailable(&e),
    };
    let channel = state
        .pipeline
        .channel_cache()
        .channel(&d.channel_id)
        .await
        .ok()
        .flatten();
    let payload = match state
        .pipeline
        .reads()
        .activity(&d.tenant_id, &d.activity_id)
        .await
    {
        Ok(Some(mut a)) => match a.payload_ref.clone() {
            // A payload the bucket keeps is shown up to a preview's size.
            Some(r) if r.bytes > converger_core::payload::PREVIEW_BYTES => {
                format!(
                    "(a payload of {} bytes, kept in the payload bucket)",
                    r.bytes
                )
            }
            _ => match state.pipeline.payloads().read(&mut a).await {
                Ok(_) => serde_json::to_string_pretty(&redact(&a.payload)).unwrap_or_default(),
                Err(e) => {
                    tracing::error!(error = %e, "payload preview: the payload bucket");
                    "(the payload could not be read just now)".to_owned()
                }
            },
        },
        Ok(None) => "(the activity is no longer stored)".to_owned(),
        Err(e) => {
            tracing::error!(error = %e, "payload preview: storage unavailable");
            "(the activity could not be read just now)".to_owned()
        }
    };
    let tenant_name = match v.realm {
        Realm::Admin => state
            .pipeline
            .reads()
            .tenant(&d.tenant_id)
            .await
            .ok()
            .flatten()
            .map(|t| t.name),
        Realm::Portal => None,
    };
    // Its place in its ordered lane (an ordered channel's delivery that is not sent).
    let lane = match state.pipeline.lanes().position(&d).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "lane not read for the delivery page");
            None
        }
    };
    let csrf = v.csrf(&state);
    let content = html! {
        p { a id="back" href={ (p) "/deliveries?" (back) } { "← Back to the list" } }
        table.fields id="delivery" data-id=(d.id) {
            tr { th { "Delivery" } td { code { (d.id) } } }
            tr { th { "Status" } td { span id="status" class={ "badge " (d.status) } { (d.status) }
                @if d.handed_off { " " span.muted { "(handed off, waiting for the client's acknowledgement)" } } } }
            @if v.realm == Realm::Admin {
                tr { th { "Tenant" } td { (tenant_name.unwrap_or_default()) " " code.muted { (d.tenant_id) } } }
            }
            tr { th { "Channel" } td {
                (channel.as_ref().map(|c| c.name.as_str()).unwrap_or("(deleted)")) " "
                code.muted { (d.channel_id) }
                @if let Some(c) = &channel { " " span.muted { (c.kind) } }
            } }
            tr { th { "Activity" } td { code { (d.activity_id) } " in conversation "
                a id="conversation" href=(conversation_href(v.realm, &d.tenant_id, &d.conversation_id)) { code { (d.conversation_id) } } } }
            @if let Some(t) = &d.event_type {
                tr { th { "Event type" } td { code { (t) } } }
            }
            @if let Some(l) = &lane {
                tr { th { "Ordered lane" } td id="lane" {
                    @match &l.head {
                        Some(h) if *h == d.id => { "the head of its conversation's lane" }
                        Some(h) => { "waiting behind "
                            a href={ (p) "/deliveries/" (h) } { code { (h) } } }
                        None => { "its lane has no head now" }
                    }
                    @if l.held { " " span.badge.failed { "held by a dead letter" } }
                } }
            }
            tr { th { "Attempts" } td id="attempt-count" { (d.attempts) } }
            tr { th { "Retries" } td { (d.retry_count)
                @if let Some(by) = &d.retried_by { ", last by " (by) }
                @if let Some(at) = &d.retried_at { " at " (short_time(*at)) } } }
            tr { th { "Last error" } td.error id="last-error" { (d.last_error.clone().unwrap_or_default()) } }
            @if let Some(m) = &d.provider_message_id {
                tr { th { "Provider message id" } td { code { (m) } } }
            }
            @if d.status == DeliveryStatus::Pending && !d.handed_off {
                tr { th { "Next attempt" } td { (short_time(converger_core::Timestamp::from_ms(d.next_attempt_at))) } }
            }
            tr { th { "Created" } td { (short_time(d.created_at)) } }
            tr { th { "Last change" } td { (short_time(d.updated_at)) } }
        }
        @if v.can_act() && matches!(d.status, DeliveryStatus::Failed | DeliveryStatus::Filtered) {
            form method="post" action={ (p) "/deliveries/" (d.id) "/retry" } {
                input type="hidden" name="_csrf" value=(csrf);
                input type="hidden" name="back" value=(back);
                button.retry type="submit" { "Retry" }
            }
        }
        h2 { "Attempts" }
        table id="attempts" {
            thead { tr { th { "#" } th { "Outcome" } th { "Started (UTC)" } th { "Duration" } th { "HTTP status" }
                         th { "Error" } th { "Response" } th { "Trigger" } th { "Next retry" } } }
            tbody { @for e in &attempts {
                tr.attempt {
                    td { (e.attempt) } td.outcome { (e.outcome.map(|o| o.as_str()).unwrap_or("")) }
                    td { (short_time(e.started_at)) } td { (e.duration_ms) " ms" }
                    td { (e.status_code.map(|s| s.to_string()).unwrap_or_default()) }
                    td.error { (e.error.clone().unwrap_or_default()) }
                    td { @if let Some(r) = &e.response_snippet { code { (r) } } }
                    td { (e.trigger) }
                    td { (e.next_retry_at.map(short_time).unwrap_or_default()) }
                }
            } }
        }
        @if attempts.is_empty() { p.muted { "No attempts yet." } }
        @if more { p.muted { "Older attempts: GET /api/v1/deliveries/" (d.id) "/attempts." } }
        h2 { "Payload preview" }
        p.muted { "Keys that look secret are shown as [REDACTED]." }
        pre.payload id="payload" { (payload) }
    };
    layout(&state, &v, "Delivery", content)
}

pub(super) async fn retry_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let Ok(id) = DeliveryId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such delivery.");
    };
    if let Err(e) = state
        .pipeline
        .replays()
        .replay_one(v.own_tenant(), &id, &v.actor())
        .await
    {
        return replay_failure(e);
    }
    let back = form.get("back").cloned().unwrap_or_default();
    Redirect::to(&format!("{}/deliveries?{back}", prefix(v.realm))).into_response()
}

fn replay_failure(e: ReplayError) -> Response {
    match e {
        ReplayError::NotFound => page_error(StatusCode::NOT_FOUND, "No such delivery or channel."),
        ReplayError::ChannelInactive => page_error(
            StatusCode::BAD_REQUEST,
            "Channel is inactive: enable it before retrying its deliveries.",
        ),
        e @ (ReplayError::NotFailed(_) | ReplayError::StillFiltered) => {
            page_error(StatusCode::CONFLICT, &e.to_string())
        }
        ReplayError::Store(e) => unavailable(&e),
    }
}

pub(super) async fn retry_all(
    State(state): State<AppState>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let f = Filters {
        tenant: form.get("tenant").cloned(),
        channel: form.get("channel").cloned(),
        status: Some("failed".into()),
        from: form.get("from").cloned(),
        to: form.get("to").cloned(),
        q: form.get("q").cloned(),
        event_type: form.get("event_type").cloned(),
        sort: Some("oldest".into()),
        after: None,
    };
    let queries = match f.queries(&state, &v, 500).await {
        Ok(q) => q,
        Err(e) => return e.page(),
    };
    // One `BULK_RETRY_LIMIT` for every tenant the filters cover.
    let r = match state
        .pipeline
        .replays()
        .replay_matching(queries, &v.actor())
        .await
    {
        Ok(r) => r,
        Err(e) => return replay_failure(e),
    };
    tracing::info!(retried = r.retried, has_more = r.has_more, actor = %v.actor(), "retry all failed");
    let back = form.get("back").cloned().unwrap_or_default();
    let sep = if back.is_empty() { "" } else { "&" };
    Redirect::to(&format!(
        "{}/deliveries?{back}{sep}retried={}&has_more={}",
        prefix(v.realm),
        r.retried,
        r.has_more
    ))
    .into_response()
}
