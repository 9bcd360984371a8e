//! What a viewer may see: the tenants in scope, their channels, the tenant selector.

use super::page::PageFail;
use super::session::Viewer;
use crate::AppState;
use converger_core::web::Realm;
use converger_core::{ChannelId, TenantId};
use converger_ports::{Channel, Delivery};
use serde::Deserialize;
use std::collections::HashMap;

/// The tenants an operator's tenant selector offers (none in the portal).
pub(super) async fn tenant_choices(
    state: &AppState,
    v: &Viewer,
) -> std::sync::Arc<Vec<converger_ports::Tenant>> {
    match v.realm {
        Realm::Admin => state.tenants().await.unwrap_or_default(),
        Realm::Portal => Default::default(),
    }
}

/// The tenant a one-tenant page shows, with the operators' choices: a portal user's own,
/// whatever the URL says; for operators the one the URL names, else the first.
pub(super) async fn one_tenant(
    state: &AppState,
    v: &Viewer,
    q: &TenantQuery,
) -> (
    std::sync::Arc<Vec<converger_ports::Tenant>>,
    Option<converger_core::TenantId>,
) {
    let tenants = tenant_choices(state, v).await;
    let tenant = match v.own_tenant() {
        Some(t) => Some(t.clone()),
        None => q
            .tenant
            .as_deref()
            .and_then(|t| converger_core::TenantId::parse(t).ok())
            .or_else(|| tenants.first().map(|t| t.id.clone())),
    };
    (tenants, tenant)
}

/// The tenants a page shows: a portal user's own, whatever the URL says; for operators the
/// one the URL names, else every tenant.
pub(super) async fn tenants_in_scope(
    state: &AppState,
    v: &Viewer,
    asked: Option<&str>,
) -> Result<Vec<TenantId>, PageFail> {
    if let Some(t) = v.own_tenant() {
        return Ok(vec![t.clone()]);
    }
    match asked.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => Ok(vec![TenantId::parse(t).map_err(PageFail::invalid)?]),
        None => Ok(state
            .tenants()
            .await?
            .iter()
            .map(|t| t.id.clone())
            .collect()),
    }
}

pub(super) async fn scoped_channels(
    state: &AppState,
    v: &Viewer,
    tenant: Option<&str>,
) -> Result<Vec<Channel>, PageFail> {
    let mut out = Vec::new();
    for t in tenants_in_scope(state, v, tenant).await? {
        out.extend(state.pipeline.reads().channels(&t).await?);
    }
    Ok(out)
}

/// The names of the channels `rows` went to.
pub(super) async fn channel_names(
    state: &AppState,
    rows: &[Delivery],
) -> HashMap<ChannelId, String> {
    let ids: Vec<&ChannelId> = rows.iter().map(|d| &d.channel_id).collect();
    names_of(state, ids).await
}

/// The names of `channels`, each read once (its id where it cannot be read). The channels
/// are those of rows already read in scope (deliveries, a conversation's activities).
pub(super) async fn names_of(
    state: &AppState,
    channels: Vec<&ChannelId>,
) -> HashMap<ChannelId, String> {
    let mut names = HashMap::new();
    for id in channels {
        if !names.contains_key(id) {
            let name = match state.pipeline.channel_cache().channel(id).await {
                Ok(Some(c)) => c.name.clone(),
                _ => id.to_string(),
            };
            names.insert(id.clone(), name);
        }
    }
    names
}

#[derive(Deserialize, Default)]
pub(super) struct TenantQuery {
    #[serde(default)]
    pub(super) tenant: Option<String>,
}
