//! Channels: create, read, change, list, delete, and their signing secrets.

use super::*;
use crate::error::ErrorCode;
use converger_pipeline::channels::{ChannelChange, ChannelSpec};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewChannel {
    #[serde(rename = "type")]
    #[schema(
        pattern = "^(webhook|echo|whatsapp_meta|whatsapp_infobip|websocket|slack|email|aws_sqs|aws_eventbridge|aws_kinesis|aws_sns|aws_firehose|aws_stepfunctions|aws_s3|rabbitmq)$"
    )]
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
    /// Steps applied to each delivery's copy of the payload, in order (at most 10).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    middleware: Value,
    /// Which activities it wants (`docs/channels/filters.md`): `{"payload": {"kind": "order"}}`. One
    /// it does not want is recorded `filtered` and never sent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    filter: Option<Value>,
    /// Ordered lanes: `{"by": "conversation", "on_dead_letter": "hold" | "skip"}` delivers
    /// each conversation's activities one at a time, in `seq` order. Set at creation only.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    ordering: Option<Value>,
}

fn yes() -> bool {
    true
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
    let kind: ChannelType = req.kind.parse().map_err(|m: converger_core::Invalid| {
        ApiError::invalid(ErrorCode::UnsupportedChannelType, m)
    })?;
    let spec = ChannelSpec {
        kind,
        name: req.name,
        config: req.config,
        active: req.active,
        retry_policy: req.retry_policy,
        circuit_breaker: req.circuit_breaker,
        rate_limit: req.rate_limit,
        auto_disable: req.auto_disable,
        event_types: req.event_types,
        middleware: req.middleware,
        filter: req.filter,
        ordering: req.ordering,
    };
    let channel = state.pipeline.channels().create(&tenant, spec).await?;
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
    /// Replaces the steps (`[]` removes them).
    #[schema(value_type = Option<Vec<Object>>)]
    middleware: Option<Value>,
    /// Replaces the filter (`null` removes it).
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<Object>)]
    filter: Option<Option<Value>>,
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
    let change = ChannelChange {
        name: req.name,
        config: req.config,
        active: req.active,
        retry_policy: req.retry_policy,
        circuit_breaker: req.circuit_breaker,
        rate_limit: req.rate_limit,
        auto_disable: req.auto_disable,
        event_types: req.event_types,
        middleware: req.middleware,
        filter: req.filter,
    };
    let updated = state
        .pipeline
        .channels()
        .change(&tenant, &current, change)
        .await?
        .ok_or_else(|| ApiError::not_found("channel"))?;
    Ok(Json(views::channel(&updated)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelListQuery {
    /// Only channels of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<String>, pattern = "^(webhook|echo|whatsapp_meta|whatsapp_infobip|websocket|slack|email|aws_sqs|aws_eventbridge|aws_kinesis|aws_sns|aws_firehose|aws_stepfunctions|aws_s3|rabbitmq)$")]
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
    let q = params(query)?;
    let kind = q
        .kind
        .as_deref()
        .map(str::parse::<ChannelType>)
        .transpose()
        .map_err(|m| ApiError::invalid(ErrorCode::InvalidQuery, m))?;
    let limit = page_limit(q.limit)?;
    let scope = format!("channels|{}|{kind:?}|{:?}", tenant.id, q.active);
    let after = cursor(q.cursor.as_deref(), &scope)?
        .map(|c| ChannelId::parse(&c.id))
        .transpose()
        .map_err(|_| {
            ApiError::invalid(ErrorCode::InvalidCursor, "cursor is not one this API gave")
        })?;
    let (items, more) = state
        .pipeline
        .reads()
        .channel_page(&converger_ports::ChannelQuery {
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

/// `DELETE /api/v1/channels/{id}`: see `Channels::delete_channel` for what becomes of its
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
    if state.pipeline.channels().delete_channel(&c, &actor).await? {
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
    let bad = |m: String| ApiError::invalid(ErrorCode::InvalidBody, m);
    if let Some(secret) = &req.signing_secret {
        converger_core::signing::check_secret(secret).map_err(|e| bad(e.into()))?;
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
        .channels()
        .rotate_secret(&c, req.signing_secret, grace_ms, &actor)
        .await?
    {
        Rotation::Done(c) => Ok(Json(views::secrets(&c))),
        Rotation::Raced => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            "the signing secret was rotated meanwhile; read it and rotate again if needed",
        )),
        Rotation::Gone => Err(ApiError::not_found("channel")),
    }
}
