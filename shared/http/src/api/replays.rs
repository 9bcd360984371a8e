//! Bulk replays of a channel's dead letters: at once, or as a job.

use super::*;
use crate::error::ErrorCode;

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
    let bad = |m: String| ApiError::invalid(ErrorCode::InvalidBody, m);
    if req.limit == Some(0) {
        return Err(bad("limit must be positive".into()));
    }
    let bounds = KeyBounds::parse(
        req.from.as_deref(),
        req.to.as_deref(),
        req.since.as_deref(),
        req.until.as_deref(),
    )
    .map_err(|e| bad(e.into()))?;
    let filter = converger_pipeline::replay::BulkFilter {
        from_key: bounds.from,
        to_key: bounds.to,
        activity: req.activity_id,
        limit: req.limit,
    };
    Ok((channel, filter))
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
        .replays()
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
        .replays()
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
        .reads()
        .replay_job_in(Scope::Tenant(&tenant.id), &id)
        .await?
    {
        Some(job) => Ok(Json(views::replay_job(&job))),
        None => Err(ApiError::not_found("replay")),
    }
}
