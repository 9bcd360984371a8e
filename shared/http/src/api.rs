//! The tenant API (`/api/v1`), authenticated with `Authorization: Bearer <tenant API key>`.
//! A tenant never sees another tenant's data: such ids answer 404, like unknown ones.

use crate::error::{ApiError, Body, no_route, wrong_method};
use crate::{AppState, views};
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use converger_core::secret::{hash_api_key, new_signing_secret};
use converger_core::{ChannelId, ChannelType, DeliveryId, RetryPolicy, time};
use converger_pipeline::ingest::NewActivity;
use converger_store::{AttemptEntry, Channel, ChannelPatch, Delivery, Tenant};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/api/health",
            get(|| async { Json(json!({"status": "ok"})) }),
        )
        .route("/api/v1/channels", post(create_channel))
        .route(
            "/api/v1/channels/{id}",
            get(get_channel).patch(patch_channel),
        )
        .route("/api/v1/activities", post(create_activity))
        .route("/api/v1/deliveries/{id}", get(get_delivery))
        .route("/api/v1/deliveries/{id}/attempts", get(list_attempts))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(state)
}

/// The tenant whose API key the request carries.
pub struct Authed(pub Tenant);

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
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
        if let Some(t) = state.cached_tenant(&hash) {
            return Ok(Authed(t));
        }
        match state.pipeline.store.tenant_by_api_key_hash(&hash).await? {
            Some(t) => {
                state.cache_tenant(hash, t.clone());
                Ok(Authed(t))
            }
            None => Err(ApiError::unauthorized("invalid API key")),
        }
    }
}

fn validate_policy(policy: &Map<String, Value>) -> Result<(), ApiError> {
    RetryPolicy::validate(policy).map_err(|errs| {
        let msg: Vec<String> = errs.iter().map(ToString::to_string).collect();
        ApiError::invalid("invalid_retry_policy", msg.join("; "))
    })
}

fn validate_config(
    state: &AppState,
    kind: ChannelType,
    config: &Map<String, Value>,
) -> Result<(), ApiError> {
    let adapter = state.pipeline.adapters.get(kind).ok_or_else(|| {
        ApiError::invalid(
            "unsupported_channel_type",
            format!("channel type `{kind}` is not supported by this deployment"),
        )
    })?;
    adapter
        .validate_config(config)
        .map_err(|m| ApiError::invalid("invalid_config", m))
}

fn validate_name(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() || name.len() > 200 {
        return Err(ApiError::invalid(
            "invalid_name",
            "name must be 1 to 200 characters",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewChannel {
    #[serde(rename = "type")]
    kind: String,
    name: String,
    #[serde(default)]
    config: Map<String, Value>,
    #[serde(default = "yes")]
    active: bool,
    #[serde(default)]
    retry_policy: Map<String, Value>,
}

fn yes() -> bool {
    true
}

async fn create_channel(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Body(req): Body<NewChannel>,
) -> Result<impl IntoResponse, ApiError> {
    let kind: ChannelType = req
        .kind
        .parse()
        .map_err(|m: String| ApiError::invalid("unsupported_channel_type", m))?;
    validate_name(&req.name)?;
    validate_config(&state, kind, &req.config)?;
    validate_policy(&req.retry_policy)?;
    let now = time::now_rfc3339();
    let channel = Channel {
        id: ChannelId::generate(),
        tenant_id: tenant.id,
        kind,
        name: req.name,
        config: req.config,
        active: req.active,
        retry_policy: req.retry_policy,
        signing_secret: new_signing_secret(),
        created_at: now.clone(),
        updated_at: now,
    };
    state.pipeline.store.create_channel(&channel).await?;
    let mut body = views::channel(&channel);
    body["signing_secret"] = Value::from(channel.signing_secret.clone());
    Ok((StatusCode::CREATED, Json(body)))
}

async fn owned_channel(state: &AppState, tenant: &Tenant, id: &str) -> Result<Channel, ApiError> {
    let id = ChannelId::parse(id).map_err(|_| ApiError::not_found("channel"))?;
    match state.pipeline.store.get_channel(&id).await? {
        Some(c) if c.tenant_id == tenant.id => Ok(c),
        _ => Err(ApiError::not_found("channel")),
    }
}

async fn get_channel(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(views::channel(&c)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchChannel {
    name: Option<String>,
    config: Option<Map<String, Value>>,
    active: Option<bool>,
    retry_policy: Option<Map<String, Value>>,
}

async fn patch_channel(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Path(id): Path<String>,
    Body(req): Body<PatchChannel>,
) -> Result<Json<Value>, ApiError> {
    let current = owned_channel(&state, &tenant, &id).await?;
    if let Some(n) = &req.name {
        validate_name(n)?;
    }
    if let Some(c) = &req.config {
        validate_config(&state, current.kind, c)?;
    }
    if let Some(p) = &req.retry_policy {
        validate_policy(p)?;
    }
    let patch = ChannelPatch {
        name: req.name,
        config: req.config,
        active: req.active,
        retry_policy: req.retry_policy,
    };
    let updated = state
        .pipeline
        .store
        .update_channel(&tenant.id, &current.id, &patch, &time::now_rfc3339())
        .await?
        .ok_or_else(|| ApiError::not_found("channel"))?;
    state.pipeline.forget_channel(&current.id);
    Ok(Json(views::channel(&updated)))
}

async fn create_activity(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Body(req): Body<NewActivity>,
) -> Result<impl IntoResponse, ApiError> {
    let done = state.pipeline.ingest(&tenant, req).await?;
    let deliveries: Vec<Value> = done
        .deliveries
        .iter()
        .map(|d| json!({"id": d.id, "channel_id": d.channel_id, "status": d.status}))
        .collect();
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "activity_id": done.activity.id,
            "conversation_id": done.activity.conversation_id,
            "seq": done.activity.seq,
            "created_at": done.activity.created_at,
            "deliveries": deliveries,
        })),
    ))
}

async fn owned_delivery(state: &AppState, tenant: &Tenant, id: &str) -> Result<Delivery, ApiError> {
    let id = DeliveryId::parse(id).map_err(|_| ApiError::not_found("delivery"))?;
    match state.pipeline.store.get_delivery(&id).await? {
        Some(d) if d.tenant_id == tenant.id => Ok(d),
        _ => Err(ApiError::not_found("delivery")),
    }
}

async fn get_delivery(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let d = owned_delivery(&state, &tenant, &id).await?;
    Ok(Json(views::delivery(&d)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttemptsQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// The delivery's attempt log, newest first, `limit` (default 50, at most 500) per page; the
/// `next_cursor` of a page continues below it.
async fn list_attempts(
    State(state): State<AppState>,
    Authed(tenant): Authed,
    Path(id): Path<String>,
    query: Result<Query<AttemptsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid(
            "invalid_query",
            "limit must be from 1 to 500",
        ));
    }
    let before: Option<u32> =
        match q.cursor.as_deref() {
            None => None,
            Some(c) => Some(c.parse().map_err(|_| {
                ApiError::invalid("invalid_cursor", "cursor is not one this API gave")
            })?),
        };
    let d = owned_delivery(&state, &tenant, &id).await?;
    let below = |a: u32| before.is_none_or(|b| a < b);
    let mut entries: Vec<AttemptEntry> = d
        .attempt_log
        .iter()
        .rev()
        .filter(|e| below(e.attempt))
        .cloned()
        .collect();
    let oldest_kept = d.attempt_log.first().map_or(u32::MAX, |e| e.attempt);
    if entries.len() <= limit && oldest_kept > 1 && !d.attempt_log.is_empty() {
        let from = before.map_or(oldest_kept, |b| b.min(oldest_kept));
        let older = state
            .pipeline
            .store
            .older_attempts(&d.id, Some(from), limit + 1 - entries.len())
            .await?;
        entries.extend(older);
    }
    let now_s = time::now_ms() / 1000;
    entries.retain(|e| e.expires_at.is_none_or(|x| x > now_s));
    entries.dedup_by_key(|e| e.attempt);
    let has_more = entries.len() > limit;
    entries.truncate(limit);
    let next_cursor = if has_more {
        entries.last().map(|e| e.attempt.to_string())
    } else {
        None
    };
    Ok(Json(json!({"data": entries, "next_cursor": next_cursor})))
}
