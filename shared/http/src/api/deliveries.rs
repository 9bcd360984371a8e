//! Deliveries: read, listed, their attempt logs, and the replay of one dead letter.

use super::*;
use crate::error::ErrorCode;

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
    let mut view = views::delivery(&d);
    if let Some(p) = state.pipeline.lanes().position(&d).await? {
        view.lane = Some(views::LaneView::of(&d, &p));
    }
    Ok(Json(view))
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
    let q = params(query)?;
    let limit = page_limit(q.limit)?;
    let before: Option<u32> = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(c.parse().map_err(|_| {
            ApiError::invalid(ErrorCode::InvalidCursor, "cursor is not one this API gave")
        })?),
    };
    let d = owned_delivery(&state, &tenant, &id).await?;
    let (entries, more) = state
        .pipeline
        .attempts()
        .attempt_log(&d, before, limit)
        .await?;
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
    /// `pending`, `sent`, `delivered`, `read`, `failed` or `filtered`.
    #[param(pattern = "^(pending|sent|delivered|read|failed|filtered)$")]
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
    /// Only deliveries of activities of this event type (an exact name).
    #[param(pattern = "^[A-Za-z0-9._:-]{1,100}$")]
    event_type: Option<String>,
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
    let q = params(query)?;
    let bad = |m: String| ApiError::invalid(ErrorCode::InvalidQuery, m);
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
    let KeyBounds {
        from: from_key,
        to: to_key,
    } = KeyBounds::days(q.from.as_deref(), q.to.as_deref()).map_err(|e| bad(e.into()))?;
    let newest_first = newest_first(q.sort.as_deref()).map_err(|e| bad(e.into()))?;
    let limit = page_limit(q.limit)?;
    let Search {
        activity,
        error_contains,
    } = Search::parse(q.q.as_deref());
    let activity = match q.activity_id.as_deref() {
        Some(a) => Some(ActivityId::parse(a).map_err(|e| bad(format!("activity_id: {e}")))?),
        None => activity,
    };
    let event_type = q
        .event_type
        .map(|t| converger_core::channel::check_event_type(&t).map(|()| t))
        .transpose()
        .map_err(|e| bad(format!("event_type: {e}")))?;
    // A cursor pages through the list it was given for: this tenant, these filters.
    let scope = format!(
        "deliveries|{}|{status:?}|{channel:?}|{from_key:?}|{to_key:?}|{error_contains:?}|{activity:?}|{event_type:?}|{newest_first}",
        tenant.id
    );
    let after = cursor(q.cursor.as_deref(), &scope)?;

    let listed = state
        .pipeline
        .reads()
        .list_deliveries(&DeliveryQuery {
            tenant: tenant.id.clone(),
            status,
            channel,
            from_key,
            to_key,
            error_contains,
            event_type,
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
        .replays()
        .replay_one(Some(&tenant.id), &id, &actor)
        .await
        .map(|d| Json(views::delivery(&d)))
        .map_err(|e| replay_error(e, "delivery"))
}
