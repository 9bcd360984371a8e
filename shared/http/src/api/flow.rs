//! A channel's flow control: pause, resume, its breaker and window, its health checks.

use super::*;

#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/pause",
    tag = "flow control",
    summary = "Pause deliveries",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::schemas::DeliveryStateDoc))
)]
pub(crate) async fn pause_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    let flow = state.pipeline.flow().pause(&c, &actor).await?;
    Ok(Json(
        state.pipeline.flow().delivery_state(&c, Some(flow)).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/resume",
    tag = "flow control",
    summary = "Resume deliveries",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::schemas::DeliveryStateDoc))
)]
pub(crate) async fn resume_channel(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    not_managed(&c)?;
    let flow = state.pipeline.flow().resume(&c, &actor).await?;
    Ok(Json(
        state.pipeline.flow().delivery_state(&c, Some(flow)).await?,
    ))
}

#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/health",
    tag = "flow control",
    summary = "Read the health checks",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::schemas::ChannelHealthDoc))
)]
pub(crate) async fn channel_health(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(state.pipeline.health().channel_health(&c, 50).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/delivery",
    tag = "flow control",
    summary = "Read the flow state",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    responses((status = 200, body = crate::schemas::DeliveryStateDoc))
)]
pub(crate) async fn channel_delivery(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<DeliveryState>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    Ok(Json(state.pipeline.flow().delivery_state(&c, None).await?))
}
