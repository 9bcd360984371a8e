//! The tenant API (`/api/v1`), authenticated with `Authorization: Bearer <tenant API key>`.
//! A tenant never sees another tenant's data: such ids answer 404, like unknown ones.

use crate::auth::{Authed, owned_channel, owned_delivery};
use crate::error::{ApiError, Body, no_route, wrong_method};
use crate::{AppState, views};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use converger_core::query::{
    Cursor, Search, day_end, day_start, instant_key, newest_first, tighter,
};
use converger_core::{ActivityId, DeliveryStatus};
use converger_core::{ChannelId, ChannelType, DeliveryId, RetryPolicy, time};
use converger_pipeline::channels::Rotation;
use converger_pipeline::flow::DeliveryState;
use converger_pipeline::ingest::NewActivity;
use converger_pipeline::replay::ReplayError;
use converger_ports::{Channel, ChannelPatch, DeliveryQuery, Scope};
use serde::Deserialize;
use serde_json::{Map, Value};

/// `GET /api/health`: the API answers (no authentication).
#[utoipa::path(get, path = "/api/health", tag = "operations", security(()),
    responses((status = 200, description = "The API answers", body = crate::openapi::Status)))]
pub(crate) async fn health() -> Json<crate::openapi::Status> {
    Json(crate::openapi::Status {
        status: "ok".into(),
    })
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/v1/openapi.json", get(crate::openapi::serve))
        .route("/api/v1/channels", post(create_channel).get(list_channels))
        .route(
            "/api/v1/channels/{id}",
            get(get_channel).patch(patch_channel).delete(delete_channel),
        )
        .route("/api/v1/channels/{id}/secret", get(get_secret))
        .route("/api/v1/channels/{id}/secret/rotate", post(rotate_secret))
        .route(
            "/api/v1/activities",
            post(create_activity).get(list_activities),
        )
        .route("/api/v1/activities/{id}", get(get_activity))
        .route("/api/v1/deliveries", get(list_deliveries))
        .route("/api/v1/deliveries/{id}", get(get_delivery))
        .route("/api/v1/deliveries/{id}/retry", post(retry_delivery))
        .route("/api/v1/audit", get(list_audit))
        .route(
            "/api/v1/channels/{id}/deliveries/retry",
            post(retry_channel),
        )
        .route("/api/v1/deliveries/{id}/attempts", get(list_attempts))
        .route(
            "/api/v1/channels/{id}/deliveries/replays",
            post(start_replay),
        )
        .route("/api/v1/replays/{id}", get(get_replay))
        .route("/api/v1/channels/{id}/pause", post(pause_channel))
        .route("/api/v1/channels/{id}/resume", post(resume_channel))
        .route("/api/v1/channels/{id}/delivery", get(channel_delivery))
        .route("/api/v1/channels/{id}/health", get(channel_health))
        .route(
            "/api/v1/channels/{id}/status",
            get(crate::receipts::verify_subscription).post(crate::receipts::receive_receipts),
        )
        .route(
            "/api/v1/deliveries/{id}/ack",
            post(crate::receipts::acknowledge),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::idempotency::layer,
        ))
        // Outermost: a call over its key's rate limit is refused before anything else.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::layer,
        ))
        .with_state(state)
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
    converger_core::channel::check_name(name).map_err(|m| ApiError::invalid("invalid_name", m))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewChannel {
    #[serde(rename = "type")]
    #[schema(pattern = "^(webhook|echo|whatsapp_meta|whatsapp_infobip|websocket)$")]
    kind: String,
    /// 1 to 200 characters, no control characters.
    #[schema(min_length = 1, max_length = 200)]
    name: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    config: Map<String, Value>,
    #[serde(default = "yes")]
    active: bool,
    #[serde(default)]
    #[schema(value_type = Object)]
    retry_policy: Map<String, Value>,
    #[serde(default)]
    #[schema(value_type = Object)]
    circuit_breaker: Map<String, Value>,
    #[serde(default)]
    rate_limit: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    auto_disable: Map<String, Value>,
    #[serde(default)]
    event_types: Vec<String>,
}

fn yes() -> bool {
    true
}

fn validate_event_types(types: &[String]) -> Result<(), ApiError> {
    converger_core::channel::check_event_types(types)
        .map_err(|m| ApiError::invalid("invalid_event_types", m))
}

fn validate_auto_disable(settings: Option<&Map<String, Value>>) -> Result<(), ApiError> {
    if let Some(s) = settings {
        converger_core::health::AutoDisable::from_overrides(s)
            .map_err(|m| ApiError::invalid("invalid_auto_disable", m))?;
    }
    Ok(())
}

fn validate_flow(breaker: Option<&Map<String, Value>>, rate: Option<&str>) -> Result<(), ApiError> {
    if let Some(b) = breaker {
        converger_core::BreakerConfig::validate(b)
            .map_err(|m| ApiError::invalid("invalid_circuit_breaker", m))?;
    }
    if let Some(r) = rate {
        r.parse::<converger_core::RateLimit>()
            .map_err(|m| ApiError::invalid("invalid_rate_limit", m))?;
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/api/v1/channels",
    tag = "channels",
    summary = "Create a channel",
    request_body = NewChannel,
    responses((status = 201, description = "Created, with its signing secret", body = views::CreatedChannel))
)]
pub(crate) async fn create_channel(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Body(req): Body<NewChannel>,
) -> Result<impl IntoResponse, ApiError> {
    let kind: ChannelType = req
        .kind
        .parse()
        .map_err(|m: String| ApiError::invalid("unsupported_channel_type", m))?;
    validate_name(&req.name)?;
    validate_config(&state, kind, &req.config)?;
    validate_policy(&req.retry_policy)?;
    validate_flow(Some(&req.circuit_breaker), req.rate_limit.as_deref())?;
    validate_auto_disable(Some(&req.auto_disable))?;
    validate_event_types(&req.event_types)?;
    let now = time::now_rfc3339();
    let channel = {
        let mut c = Channel::new(tenant.id, kind, &req.name, req.config, &now);
        c.active = req.active;
        c.retry_policy = req.retry_policy;
        c.circuit_breaker = req.circuit_breaker;
        c.rate_limit = req.rate_limit;
        c.auto_disable = req.auto_disable;
        c.event_types = req.event_types;
        c
    };
    state.pipeline.store.create_channel(&channel).await?;
    state.pipeline.forget_tenant_channels(&channel.tenant_id);
    let body = views::CreatedChannel {
        channel: views::channel(&channel),
        signing_secret: channel.signing_secret.clone(),
    };
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    summary = "Read a channel",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = views::ChannelView))
)]
pub(crate) async fn get_channel(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::ChannelView>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(views::channel(&c)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchChannel {
    name: Option<String>,
    #[schema(value_type = Option<Object>)]
    config: Option<Map<String, Value>>,
    active: Option<bool>,
    #[schema(value_type = Option<Object>)]
    retry_policy: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    circuit_breaker: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    rate_limit: Option<Option<String>>,
    #[schema(value_type = Option<Object>)]
    auto_disable: Option<Map<String, Value>>,
    event_types: Option<Vec<String>>,
}

#[utoipa::path(
    patch,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    summary = "Change a channel",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    request_body = PatchChannel,
    responses((status = 200, body = views::ChannelView))
)]
pub(crate) async fn patch_channel(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
    Body(req): Body<PatchChannel>,
) -> Result<Json<views::ChannelView>, ApiError> {
    let current = owned_channel(&state, &tenant, &id).await?;
    not_managed(&current)?;
    if let Some(n) = &req.name {
        validate_name(n)?;
    }
    if let Some(c) = &req.config {
        validate_config(&state, current.kind, c)?;
    }
    if let Some(p) = &req.retry_policy {
        validate_policy(p)?;
    }
    validate_flow(
        req.circuit_breaker.as_ref(),
        req.rate_limit.as_ref().and_then(|r| r.as_deref()),
    )?;
    validate_auto_disable(req.auto_disable.as_ref())?;
    if let Some(t) = &req.event_types {
        validate_event_types(t)?;
    }
    let patch = ChannelPatch {
        name: req.name,
        config: req.config,
        active: req.active,
        retry_policy: req.retry_policy,
        circuit_breaker: req.circuit_breaker,
        rate_limit: req.rate_limit,
        auto_disable: req.auto_disable,
        event_types: req.event_types,
    };
    let updated = state
        .pipeline
        .store
        .update_channel(&tenant.id, &current.id, &patch, &time::now_rfc3339())
        .await?
        .ok_or_else(|| ApiError::not_found("channel"))?;
    state.pipeline.forget_channel(&current.id);
    state.pipeline.forget_tenant_channels(&tenant.id);
    Ok(Json(views::channel(&updated)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelListQuery {
    /// Only channels of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<String>, pattern = "^(webhook|echo|whatsapp_meta|whatsapp_infobip|websocket)$")]
    kind: Option<String>,
    active: Option<bool>,
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/channels`: the tenant's channels in id order, of one `type` or `active`
/// state when asked, `limit` (default 50, at most 500) per page.
#[utoipa::path(
    get,
    path = "/api/v1/channels",
    tag = "channels",
    summary = "List channels",
    params(ChannelListQuery),
    responses((status = 200, description = "A page of channels, by id", body = views::Page<views::ChannelView>))
)]
pub(crate) async fn list_channels(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<ChannelListQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::ChannelView>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let kind = q
        .kind
        .as_deref()
        .map(str::parse::<ChannelType>)
        .transpose()
        .map_err(|m| ApiError::invalid("invalid_query", m))?;
    let limit = page_limit(q.limit)?;
    let scope = format!("channels|{}|{kind:?}|{:?}", tenant.id, q.active);
    let after = cursor(q.cursor.as_deref(), &scope)?
        .map(|c| ChannelId::parse(&c.id))
        .transpose()
        .map_err(|_| ApiError::invalid("invalid_cursor", "cursor is not one this API gave"))?;
    let (items, more) = state
        .pipeline
        .store
        .list_channel_page(&converger_ports::ChannelQuery {
            tenant: tenant.id.clone(),
            kind,
            active: q.active,
            limit,
            after,
        })
        .await?;
    let next = more.then(|| items.last()).flatten().map(|c| {
        Cursor {
            sort_key: c.id.to_string(),
            id: c.id.to_string(),
        }
        .encode(&scope)
    });
    Ok(Json(views::Page {
        data: items.iter().map(views::channel).collect(),
        next_cursor: next,
    }))
}

/// A page size: `limit` from 1 to 500, 50 when absent.
fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(50);
    if (1..=500).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::invalid(
            "invalid_query",
            "limit must be from 1 to 500",
        ))
    }
}

/// `DELETE /api/v1/channels/{id}`: see `Pipeline::delete_channel` for what becomes of its
/// deliveries. 204, or 404 when it does not exist (or was deleted already).
#[utoipa::path(
    delete,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    summary = "Delete a channel",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 204, description = "Deleted: gone from reads and lists; its pending deliveries are dead-lettered with `channel deleted`"))
)]
pub(crate) async fn delete_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    if state.pipeline.delete_channel(&c, &actor).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("channel"))
    }
}

/// `GET /api/v1/channels/{id}/secret`: the signing secret, and those still retiring.
#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/secret",
    tag = "channels",
    summary = "Read the signing secrets",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = views::SecretsView))
)]
pub(crate) async fn get_secret(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::SecretsView>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(views::secrets(&c)))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rotate {
    /// The new secret (`whsec_` base64 of 24 to 64 bytes); a random one when absent.
    signing_secret: Option<String>,
    /// How long the old secret keeps signing beside the new one (default 24 h, at most 7 days).
    grace_seconds: Option<i64>,
}

/// `POST /api/v1/channels/{id}/secret/rotate`: a new signing secret; the old one keeps
/// signing beside it for `grace_seconds`, so receivers roll over without dropping a message.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/secret/rotate",
    tag = "channels",
    summary = "Rotate the signing secret",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    request_body = Option<Rotate>,
    responses((status = 200, description = "The new secret, and the old one signing beside it until its grace ends", body = views::SecretsView))
)]
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<views::SecretsView>, ApiError> {
    let req: Rotate = crate::error::parse_optional_json(&body)?;
    let bad = |m: String| ApiError::invalid("invalid_body", m);
    if let Some(secret) = &req.signing_secret {
        converger_core::signing::check_secret(secret).map_err(bad)?;
    }
    let max_s = converger_core::signing::MAX_GRACE_MS / 1000;
    let grace_ms = match req.grace_seconds {
        None => converger_core::signing::DEFAULT_GRACE_MS,
        Some(g) if (0..=max_s).contains(&g) => g * 1000,
        Some(_) => return Err(bad(format!("grace_seconds must be from 0 to {max_s}"))),
    };
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    match state
        .pipeline
        .rotate_secret(&c, req.signing_secret, grace_ms, &actor)
        .await?
    {
        Rotation::Done(c) => Ok(Json(views::secrets(&c))),
        Rotation::Raced => Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "the signing secret was rotated meanwhile; read it and rotate again if needed",
        )),
        Rotation::Gone => Err(ApiError::not_found("channel")),
    }
}

/// A list's `cursor` parameter, refused unless this API gave it for the same list (`scope`:
/// the tenant and the filters).
fn cursor(given: Option<&str>, scope: &str) -> Result<Option<Cursor>, ApiError> {
    given
        .map(|c| Cursor::decode(c, scope))
        .transpose()
        .map_err(|m| ApiError::invalid("invalid_cursor", m))
}

/// The tenant's alert channel is the platform's: the tenant reads it, an operator changes it
/// (`PATCH /admin/api/tenants/{id}` with `alert_webhook_url`).
fn not_managed(c: &Channel) -> Result<(), ApiError> {
    if c.managed {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "managed_channel",
            "this channel delivers the platform's alerts and is changed by an operator \
             (the tenant's alert_webhook_url), not through the tenant API",
        ));
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/pause",
    tag = "flow control",
    summary = "Pause deliveries",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::openapi::DeliveryStateDoc))
)]
pub(crate) async fn pause_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    let flow = state.pipeline.pause(&c, &actor).await?;
    Ok(Json(state.pipeline.delivery_state(&c, Some(flow)).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/resume",
    tag = "flow control",
    summary = "Resume deliveries",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::openapi::DeliveryStateDoc))
)]
pub(crate) async fn resume_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    let flow = state.pipeline.resume(&c, &actor).await?;
    Ok(Json(state.pipeline.delivery_state(&c, Some(flow)).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/health",
    tag = "flow control",
    summary = "Read the health checks",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::openapi::ChannelHealthDoc))
)]
pub(crate) async fn channel_health(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(state.pipeline.channel_health(&c, 50).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/delivery",
    tag = "flow control",
    summary = "Read the flow state",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::openapi::DeliveryStateDoc))
)]
pub(crate) async fn channel_delivery(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(state.pipeline.delivery_state(&c, None).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/activities",
    tag = "activities",
    summary = "Send an activity",
    request_body = crate::openapi::NewActivityDoc,
    responses((status = 201, description = "Stored, its deliveries enqueued", body = views::Ingested), (status = 200, description = "A producer id sent before: what was stored then", body = views::Ingested))
)]
pub(crate) async fn create_activity(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    key: Option<axum::Extension<crate::idempotency::Key>>,
    Body(mut req): Body<NewActivity>,
) -> Result<impl IntoResponse, ApiError> {
    // With an Idempotency-Key and no id of its own, the activity is named after the key: a
    // retry after a server error that came once its rows were written finds them.
    if let (None, Some(axum::Extension(crate::idempotency::Key(k)))) = (&req.id, key) {
        req.id = Some(ActivityId::for_idempotency_key(&tenant.id, &k));
    }
    let done = state.pipeline.ingest(&tenant, req).await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(views::Ingested {
            activity_id: done.activity.id.to_string(),
            conversation_id: done.activity.conversation_id.clone(),
            seq: done.activity.seq,
            created_at: done.activity.created_at.clone(),
            deliveries: done
                .deliveries
                .iter()
                .map(views::DeliveryRef::from)
                .collect(),
        }),
    ))
}

#[utoipa::path(
    get,
    path = "/api/v1/activities/{id}",
    tag = "activities",
    summary = "Read an activity",
    params(("id" = String, Path, description = "An activity id")),
    responses((status = 200, body = views::ActivityView))
)]
pub(crate) async fn get_activity(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::ActivityView>, ApiError> {
    let id = ActivityId::parse(&id).map_err(|_| ApiError::not_found("activity"))?;
    let a = state
        .pipeline
        .store
        .get_activity(&tenant.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("activity"))?;
    let ids: Vec<DeliveryId> = a
        .channel_ids
        .iter()
        .map(|c| DeliveryId::for_pair(&a.id, c))
        .collect();
    let mut deliveries = state.pipeline.store.get_deliveries(&ids).await?;
    deliveries.sort_by(|x, y| x.channel_id.cmp(&y.channel_id));
    Ok(Json(views::activity(&a, Some(&deliveries))))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActivityListQuery {
    /// The conversation, 1 to 256 characters.
    #[param(min_length = 1, max_length = 256)]
    conversation_id: String,
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/activities?conversation_id=`: a conversation's activities in `seq` order.
#[utoipa::path(
    get,
    path = "/api/v1/activities",
    tag = "activities",
    summary = "List a conversation's activities",
    params(ActivityListQuery),
    responses((status = 200, description = "A page, in seq order", body = views::Page<views::ActivityView>))
)]
pub(crate) async fn list_activities(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<ActivityListQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::ActivityView>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let conversation = Some(q.conversation_id)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::invalid("invalid_query", "conversation_id must not be empty"))?;
    let limit = page_limit(q.limit)?;
    let scope = format!("activities|{}|{conversation}", tenant.id);
    let after = cursor(q.cursor.as_deref(), &scope)?
        .map(|c| {
            Ok::<_, ()>((
                c.sort_key.parse::<u64>().map_err(drop)?,
                ActivityId::parse(&c.id).map_err(drop)?,
            ))
        })
        .transpose()
        .map_err(|_| ApiError::invalid("invalid_cursor", "cursor is not one this API gave"))?;
    let (items, more) = state
        .pipeline
        .store
        .conversation_activities(&tenant.id, &conversation, after.as_ref(), limit)
        .await?;
    let next = more.then(|| items.last()).flatten().map(|a| {
        Cursor {
            sort_key: a.seq.to_string(),
            id: a.id.to_string(),
        }
        .encode(&scope)
    });
    Ok(Json(views::Page {
        data: items.iter().map(|a| views::activity(a, None)).collect(),
        next_cursor: next,
    }))
}

#[utoipa::path(
    get,
    path = "/api/v1/deliveries/{id}",
    tag = "deliveries",
    summary = "Read a delivery",
    params(("id" = String, Path, description = "A delivery id (`dlv_...`)")),
    responses((status = 200, body = views::DeliveryView))
)]
pub(crate) async fn get_delivery(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::DeliveryView>, ApiError> {
    let d = owned_delivery(&state, &tenant, &id).await?;
    Ok(Json(views::delivery(&d)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AttemptsQuery {
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// The delivery's attempt log, newest first, `limit` (default 50, at most 500) per page; the
/// `next_cursor` of a page continues below it.
#[utoipa::path(
    get,
    path = "/api/v1/deliveries/{id}/attempts",
    tag = "deliveries",
    summary = "List a delivery's attempts",
    params(("id" = String, Path, description = "A delivery id (`dlv_...`)"), AttemptsQuery),
    responses((status = 200, description = "Newest first", body = views::Page<views::AttemptView>))
)]
pub(crate) async fn list_attempts(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
    query: Result<Query<AttemptsQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::AttemptView>>, ApiError> {
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
    let (entries, more) = state.pipeline.attempt_log(&d, before, limit).await?;
    let next_cursor = if more {
        entries.last().map(|e| e.attempt.to_string())
    } else {
        None
    };
    Ok(Json(views::Page {
        data: entries.iter().map(views::AttemptView::from).collect(),
        next_cursor,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// `pending`, `sent`, `delivered`, `read` or `failed`.
    #[param(pattern = "^(pending|sent|delivered|read|failed)$")]
    status: Option<String>,
    channel_id: Option<String>,
    activity_id: Option<String>,
    /// A UTC day (`2026-12-01`): changed on or after it.
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    from: Option<String>,
    /// A UTC day: changed on or before it.
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    to: Option<String>,
    /// An exact activity id, or a part of `last_error`.
    q: Option<String>,
    /// `newest` (the default) or `oldest` first.
    #[param(pattern = "^(newest|oldest)$")]
    sort: Option<String>,
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/deliveries`: the tenant's deliveries, most recently changed first (or oldest
/// first), filtered by status, channel, activity, UTC days on `updated_at` and a search (an
/// exact activity id or a part of `last_error`), keyset-paginated.
#[utoipa::path(
    get,
    path = "/api/v1/deliveries",
    tag = "deliveries",
    summary = "List deliveries",
    params(ListQuery),
    responses((status = 200, body = views::Page<views::DeliveryView>))
)]
pub(crate) async fn list_deliveries(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::DeliveryView>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let bad = |m: String| ApiError::invalid("invalid_query", m);
    let status = q
        .status
        .as_deref()
        .map(str::parse::<DeliveryStatus>)
        .transpose()
        .map_err(|e| bad(e.to_string()))?;
    let channel = q
        .channel_id
        .as_deref()
        .map(ChannelId::parse)
        .transpose()
        .map_err(|e| bad(format!("channel_id: {e}")))?;
    let from_key = q.from.as_deref().map(day_start).transpose().map_err(bad)?;
    let to_key = q.to.as_deref().map(day_end).transpose().map_err(bad)?;
    let newest_first = newest_first(q.sort.as_deref()).map_err(bad)?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(bad("limit must be from 1 to 500".into()));
    }
    let Search {
        activity,
        error_contains,
    } = Search::parse(q.q.as_deref());
    let activity = match q.activity_id.as_deref() {
        Some(a) => Some(ActivityId::parse(a).map_err(|e| bad(format!("activity_id: {e}")))?),
        None => activity,
    };
    // A cursor pages through the list it was given for: this tenant, these filters.
    let scope = format!(
        "deliveries|{}|{status:?}|{channel:?}|{from_key:?}|{to_key:?}|{error_contains:?}|{activity:?}|{newest_first}",
        tenant.id
    );
    let after = cursor(q.cursor.as_deref(), &scope)?;

    let listed = state
        .pipeline
        .store
        .list_deliveries(&DeliveryQuery {
            tenant: tenant.id.clone(),
            status,
            channel,
            from_key,
            to_key,
            error_contains,
            activity,
            newest_first,
            limit,
            after,
        })
        .await?;
    let (items, next) = (listed.items, listed.next);
    Ok(Json(views::Page {
        data: items.iter().map(views::delivery_row).collect(),
        next_cursor: next.map(|c| c.encode(&scope)),
    }))
}

/// `POST /api/v1/deliveries/{id}/retry`: replays one dead letter.
#[utoipa::path(
    post,
    path = "/api/v1/deliveries/{id}/retry",
    tag = "deliveries",
    summary = "Replay a dead letter",
    params(("id" = String, Path, description = "A delivery id (`dlv_...`)")),
    responses((status = 200, body = views::DeliveryView))
)]
pub(crate) async fn retry_delivery(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::DeliveryView>, ApiError> {
    let id = DeliveryId::parse(&id).map_err(|_| ApiError::not_found("delivery"))?;
    state
        .pipeline
        .replay_one(Some(&tenant.id), &id, &actor)
        .await
        .map(|d| Json(views::delivery(&d)))
        .map_err(|e| replay_error(e, "delivery"))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/audit`: the tenant's audit log, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    summary = "List the audit log",
    params(AuditQuery),
    responses((status = 200, description = "Newest first", body = views::Page<views::AuditView>))
)]
pub(crate) async fn list_audit(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::AuditView>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid(
            "invalid_query",
            "limit must be from 1 to 500",
        ));
    }
    let scope = format!("audit|{}", tenant.id);
    let after = cursor(q.cursor.as_deref(), &scope)?;
    let listed = state
        .pipeline
        .store
        .list_audit(&tenant.id, limit, after.as_ref())
        .await?;
    Ok(Json(views::Page {
        data: listed.items.iter().map(views::AuditView::from).collect(),
        next_cursor: listed.next.map(|c| c.encode(&scope)),
    }))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkRetry {
    from: Option<String>,
    to: Option<String>,
    /// RFC 3339 instants: dead letters that failed at or after `since` and before `until`
    /// (with `from`/`to`, the narrower bounds apply).
    since: Option<String>,
    until: Option<String>,
    #[schema(value_type = Option<String>)]
    activity_id: Option<ActivityId>,
    limit: Option<usize>,
}

/// The channel and filter of a bulk replay request; the body is optional (no body replays
/// every dead letter of the channel).
fn bulk_request(
    id: &str,
    body: &[u8],
) -> Result<(ChannelId, converger_pipeline::replay::BulkFilter), ApiError> {
    let req: BulkRetry = crate::error::parse_optional_json(body)?;
    let channel = ChannelId::parse(id).map_err(|_| ApiError::not_found("channel"))?;
    let bad = |m: String| ApiError::invalid("invalid_body", m);
    if req.limit == Some(0) {
        return Err(bad("limit must be positive".into()));
    }
    let day_from = req
        .from
        .as_deref()
        .map(day_start)
        .transpose()
        .map_err(bad)?;
    let day_to = req.to.as_deref().map(day_end).transpose().map_err(bad)?;
    let since = req
        .since
        .as_deref()
        .map(instant_key)
        .transpose()
        .map_err(bad)?;
    let until = req
        .until
        .as_deref()
        .map(instant_key)
        .transpose()
        .map_err(bad)?;
    let filter = converger_pipeline::replay::BulkFilter {
        from_key: tighter(day_from, since, true),
        to_key: tighter(day_to, until, false),
        activity: req.activity_id,
        limit: req.limit,
    };
    Ok((channel, filter))
}

fn replay_error(e: ReplayError, what: &str) -> ApiError {
    match e {
        ReplayError::NotFound => ApiError::not_found(what),
        ReplayError::ChannelInactive => ApiError::new(
            StatusCode::BAD_REQUEST,
            "channel_inactive",
            "Channel is inactive",
        ),
        e @ ReplayError::NotFailed(_) => {
            ApiError::new(StatusCode::CONFLICT, "not_failed", e.to_string())
        }
        ReplayError::Store(e) => e.into(),
    }
}

/// `POST /api/v1/channels/{id}/deliveries/retry`: replays the channel's dead letters.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/deliveries/retry",
    tag = "deliveries",
    summary = "Replay a channel's dead letters",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    request_body = Option<BulkRetry>,
    responses((status = 200, body = views::BulkRetried))
)]
pub(crate) async fn retry_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<views::BulkRetried>, ApiError> {
    let (channel, filter) = bulk_request(&id, &body)?;
    let r = state
        .pipeline
        .replay_channel(&tenant.id, &channel, filter, &actor)
        .await
        .map_err(|e| replay_error(e, "channel"))?;
    Ok(Json(views::BulkRetried {
        retried: r.retried,
        has_more: r.has_more,
        cost: views::BulkCost {
            queries: r.stats.queries,
            transactions: r.stats.transactions,
            send_batches: r.stats.send_batches,
        },
    }))
}

/// `POST /api/v1/channels/{id}/deliveries/replays`: the same bulk replay, run as a job by
/// the `replay` function; answers 202 with the job.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/deliveries/replays",
    tag = "deliveries",
    summary = "Start a replay job",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    request_body = Option<BulkRetry>,
    responses((status = 202, body = views::ReplayJobView))
)]
pub(crate) async fn start_replay(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let (channel, filter) = bulk_request(&id, &body)?;
    let job = state
        .pipeline
        .start_replay_job(&tenant.id, &channel, filter, &actor)
        .await
        .map_err(|e| replay_error(e, "channel"))?;
    Ok((StatusCode::ACCEPTED, Json(views::replay_job(&job))))
}

/// `GET /api/v1/replays/{id}`: a replay job's progress.
#[utoipa::path(
    get,
    path = "/api/v1/replays/{id}",
    tag = "deliveries",
    summary = "Read a replay job",
    params(("id" = String, Path, description = "A replay job id")),
    responses((status = 200, body = views::ReplayJobView))
)]
pub(crate) async fn get_replay(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<views::ReplayJobView>, ApiError> {
    match state
        .pipeline
        .store
        .replay_job_in(Scope::Tenant(&tenant.id), &id)
        .await?
    {
        Some(job) => Ok(Json(views::replay_job(&job))),
        None => Err(ApiError::not_found("replay")),
    }
}
