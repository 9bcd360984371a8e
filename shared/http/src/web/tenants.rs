//! The tenants page (operators only): create, tier, alert webhook, email sender identities,
//! API key rotation.

use super::layout::layout;
use super::page::{page_error, unavailable};
use super::session::{Posted, Viewer, forbidden};
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::web::Realm;
use converger_core::{TenantId, Tier};
use converger_pipeline::tenants::{TenantChange, TenantError};
use maud::{Markup, html};

pub(super) async fn tenants(State(state): State<AppState>, v: Viewer) -> Response {
    tenants_page(&state, &v, None).await
}

async fn tenants_page(state: &AppState, v: &Viewer, flash: Option<Markup>) -> Response {
    if v.realm != Realm::Admin {
        return forbidden();
    }
    let list = state.pipeline.reads().tenants().await.unwrap_or_default();
    let manage = v.user.role.can_manage_tenants(v.realm);
    let csrf = v.csrf(state);
    let content = html! {
        @if let Some(f) = flash { p.flash id="flash" { (f) } }
        @if manage {
            form id="new-tenant" method="post" action="/admin/tenants" {
                input type="hidden" name="_csrf" value=(csrf);
                fieldset { legend { "New tenant" }
                    label { "Name " input name="name" required; } " "
                    label { "Tier " select name="tier" { @for t in Tier::ALL { option value=(t.as_str()) selected[t == Tier::Default] { (t.as_str()) } } } } " "
                    button type="submit" { "Create" }
                }
            }
        }
        table id="tenants" {
            thead { tr { th { "Name" } th { "Id" } th { "Tier" } th { "Alert webhook" } th { "Email senders, SES tenant" } th { "" } } }
            tbody { @for t in &list { tr.tenant data-id=(t.id) {
                td { (t.name) br; a.usage href={ "/admin/usage?tenant=" (super::layout::urlencode(t.id.as_str())) } { "Usage and charts" } } td { code { (t.id) } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) } {
                        input type="hidden" name="_csrf" value=(csrf);
                        select name="tier" { @for tier in Tier::ALL { option value=(tier.as_str()) selected[tier == t.tier] { (tier.as_str()) } } }
                        button type="submit" { "Set tier" }
                    }
                } @else { (t.tier.as_str()) } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) } {
                        input type="hidden" name="_csrf" value=(csrf);
                        input name="alert_webhook_url" value=(t.alert_webhook_url.clone().unwrap_or_default()) placeholder="https://..." size="30";
                        button type="submit" { "Save" }
                    }
                } @else { (t.alert_webhook_url.clone().unwrap_or_default()) } }
                td { @if manage {
                    form.inline.senders method="post" action={ "/admin/tenants/" (t.id) } {
                        input type="hidden" name="_csrf" value=(csrf);
                        input name="email_senders" value=(t.email_senders.join(", ")) placeholder="acme.com, news@acme.com" size="30" aria-label="SES identities its email channels may send from";
                        input name="ses_tenant" value=(t.ses_tenant.clone().unwrap_or_default()) placeholder="SES tenant" size="12" aria-label="SES tenant its email is sent on behalf of";
                        button type="submit" { "Save" }
                    }
                } @else {
                    (t.email_senders.join(", "))
                    @if let Some(n) = &t.ses_tenant { " (SES tenant " code { (n) } ")" }
                } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) "/rotate-key" } {
                        input type="hidden" name="_csrf" value=(csrf);
                        button type="submit" { "Rotate API key" }
                    }
                } }
            } } }
        }
    };
    layout(state, v, "Tenants", content)
}

fn tenant_failure(e: TenantError) -> Response {
    match e {
        TenantError::Invalid(m)
        | TenantError::InvalidAlertUrl(m)
        | TenantError::InvalidRateLimit(m)
        | TenantError::InvalidShards(m)
        | TenantError::InvalidSenders(m)
        | TenantError::InvalidSesTenant(m) => page_error(StatusCode::UNPROCESSABLE_ENTITY, &m),
        TenantError::Store(e) => unavailable(&e),
    }
}

pub(super) async fn create_tenant(
    State(state): State<AppState>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let name = form.get("name").map(|s| s.trim()).unwrap_or_default();
    let tier: Tier = form
        .get("tier")
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    match state.pipeline.tenants().create_tenant(name, tier).await {
        Ok((tenant, key)) => {
            state.forget_tenants();
            tenants_page(&state, &v, Some(html! {
                "Tenant " strong { (tenant.name) } " created. Its API key (shown only now): " code id="api-key" { (key) }
            }))
            .await
        }
        Err(e) => tenant_failure(e),
    }
}

pub(super) async fn update_tenant(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let Ok(id) = TenantId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such tenant.");
    };
    let tier = match form.get("tier").map(|t| t.parse::<Tier>()).transpose() {
        Ok(t) => t,
        Err(m) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, &m),
    };
    // An empty URL field removes the alert webhook.
    let url = form
        .get("alert_webhook_url")
        .map(|u| Some(u.trim()).filter(|u| !u.is_empty()));
    // Senders: addresses and domains, separated by commas, spaces or lines; empty removes
    // them all.
    let senders: Option<Vec<String>> = form.get("email_senders").map(|s| {
        s.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    });
    // An empty SES tenant field sends as the account again.
    let ses_tenant = form
        .get("ses_tenant")
        .map(|n| Some(n.trim()).filter(|n| !n.is_empty()));
    let change = TenantChange {
        tier,
        alert_webhook_url: url,
        api_rate_limit: None,
        email_senders: senders.as_deref(),
        ses_tenant,
    };
    state.forget_tenants();
    match state.pipeline.tenants().update_tenant(&id, change).await {
        Ok(Some(_)) => Redirect::to("/admin/tenants").into_response(),
        Ok(None) => page_error(StatusCode::NOT_FOUND, "No such tenant."),
        Err(e) => tenant_failure(e),
    }
}

pub(super) async fn rotate_key(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, .. }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let Ok(id) = TenantId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such tenant.");
    };
    match state.pipeline.tenants().rotate_api_key(&id).await {
        Ok(Some(key)) => {
            tracing::info!(tenant_id = %id, actor = %v.actor(), "API key rotated");
            tenants_page(&state, &v, Some(html! {
                "New API key for " code { (id) } " (shown only now; the old one stops working): " code id="api-key" { (key) }
            }))
            .await
        }
        Ok(None) => page_error(StatusCode::NOT_FOUND, "No such tenant."),
        Err(e) => unavailable(&e),
    }
}
