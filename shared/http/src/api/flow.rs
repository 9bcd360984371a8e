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
    let operator = state.pipeline.flow().operator();
    let flow = operator.pause(&c, &actor).await?;
    Ok(Json(operator.delivery_state(&c, Some(flow)).await?))
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
    let operator = state.pipeline.flow().operator();
    let flow = operator.resume(&c, &actor).await?;
    Ok(Json(operator.delivery_state(&c, Some(flow)).await?))
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
) -> Result<Json<converger_pipeline::health::ChannelHealth>, ApiError> {
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
    Ok(Json(
        state
            .pipeline
            .flow()
            .operator()
            .delivery_state(&c, None)
            .await?,
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseLane {
    /// The conversation whose lane a dead letter holds.
    conversation_id: String,
}

/// What a release did.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct LaneReleased {
    pub released: bool,
    /// The dead letter the lane no longer waits for (it stays failed; a replay sends it
    /// again after the deliveries that were waiting).
    pub dead_delivery_id: String,
}

/// `POST /api/v1/channels/{id}/lanes/release`: an ordered channel's lane held by a dead
/// letter goes on past it (audited `release_lane`).
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/lanes/release",
    tag = "flow control",
    summary = "Release a held lane",
    params(("id" = String, Path, description = "A channel id (`ch_...`)")),
    request_body = ReleaseLane,
    responses((status = 200, body = LaneReleased))
)]
pub(crate) async fn release_lane(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
    Path(id): Path<String>,
    Body(req): Body<ReleaseLane>,
) -> Result<Json<LaneReleased>, ApiError> {
    let c = owned_channel(&state, &tenant, &id).await?;
    match state
        .pipeline
        .channels()
        .release_lane(&c, &req.conversation_id, &actor)
        .await?
    {
        converger_pipeline::lanes::Released::Past(dead) => Ok(Json(LaneReleased {
            released: true,
            dead_delivery_id: dead.to_string(),
        })),
        converger_pipeline::lanes::Released::NotHeld => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::LaneNotHeld,
            "this conversation's lane is not held by a dead letter",
        )),
    }
}
