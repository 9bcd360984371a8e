//! The tenant API's authentication: the API key a request carries, resolved to its tenant
//! (the key read on every request, the tenant cached briefly per instance), and the reads of
//! what a tenant names, always scoped to it.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use converger_core::query::{Actor, ActorKind};
use converger_core::secret::hash_api_key;
use converger_core::{ChannelId, DeliveryId};
use converger_ports::{Channel, Delivery, Scope, Tenant};

/// The tenant whose API key the request carries, and the key as an actor
/// (`tenant_api:key_<first 12 hex digits of its hash>`).
#[derive(Clone)]
pub struct Authed(pub Tenant, pub Actor);

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // The rate limit's layer authenticated the request already.
        if let Some(a) = parts.extensions.get::<Authed>() {
            return Ok(a.clone());
        }
        authenticate(&parts.headers, state).await
    }
}

/// The tenant whose API key `headers` carry.
pub(crate) async fn authenticate(
    headers: &axum::http::HeaderMap,
    state: &AppState,
) -> Result<Authed, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing `Authorization: Bearer <API key>`"))?;
    let key = header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("expected `Authorization: Bearer <API key>`"))?;
    let hash = hash_api_key(key);
    let actor = Actor {
        kind: ActorKind::TenantApi,
        id: format!("key_{}", &hash[..12]),
    };
    // The key itself is read on every request, so that a rotated or revoked key stops at
    // once on every instance; the tenant it names is cached briefly.
    let Some(id) = state.pipeline.store.api_key_tenant(&hash).await? else {
        return Err(ApiError::unauthorized("invalid API key"));
    };
    if let Some(t) = state.cached_tenant(&id) {
        return Ok(Authed(t, actor));
    }
    match state.pipeline.store.get_tenant(&id).await? {
        Some(t) => {
            state.cache_tenant(id, t.clone());
            Ok(Authed(t, actor))
        }
        None => Err(ApiError::unauthorized("invalid API key")),
    }
}

/// A channel of `tenant` by the id the request names: another tenant's reads exactly like
/// a missing one (404).
pub(crate) async fn owned_channel(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
) -> Result<Channel, ApiError> {
    let id = ChannelId::parse(id).map_err(|_| ApiError::not_found("channel"))?;
    state
        .pipeline
        .store
        .channel_in(Scope::Tenant(&tenant.id), &id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel"))
}

/// A delivery of `tenant` by the id the request names (404 for another tenant's).
pub(crate) async fn owned_delivery(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
) -> Result<Delivery, ApiError> {
    let id = DeliveryId::parse(id).map_err(|_| ApiError::not_found("delivery"))?;
    state
        .pipeline
        .store
        .delivery_in(Scope::Tenant(&tenant.id), &id)
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))
}
