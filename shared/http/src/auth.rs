//! The tenant API's authentication: the API key a request carries, resolved to its tenant
//! (the key resolved again each second, the tenant cached for longer, per instance), and the
//! reads of what a tenant names, always scoped to it.

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
    if headers.get(axum::http::header::AUTHORIZATION).is_none() {
        return Err(ApiError::unauthorized(
            "missing `Authorization: Bearer <API key>`",
        ));
    }
    let key = bearer_key(headers)
        .ok_or_else(|| ApiError::unauthorized("expected `Authorization: Bearer <API key>`"))?;
    let hash = hash_api_key(key);
    let actor = Actor {
        kind: ActorKind::TenantApi,
        id: format!("key_{}", &hash[..12]),
    };
    // The key is resolved again after a second at most, so that a rotated or revoked key
    // stops within a second on every instance (one read a second per key and instance, not
    // one per request); the tenant it names is kept longer.
    let id = match state.resolved_key(&hash) {
        Some(id) => id,
        None => match state.pipeline.reads().api_key_tenant(&hash).await? {
            Some(id) => {
                state.resolve_key(hash, id.clone());
                id
            }
            None => return Err(ApiError::unauthorized("invalid API key")),
        },
    };
    if let Some(t) = state.cached_tenant(&id) {
        return Ok(Authed(t, actor));
    }
    match state.pipeline.reads().tenant(&id).await? {
        Some(t) => {
            state.cache_tenant(id, t.clone());
            Ok(Authed(t, actor))
        }
        None => Err(ApiError::unauthorized("invalid API key")),
    }
}

/// The API key of an `Authorization: Bearer <key>` header, if it carries one.
pub(crate) fn bearer_key(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|k| !k.is_empty())
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
        .reads()
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
        .reads()
        .delivery_in(Scope::Tenant(&tenant.id), &id)
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))
}
