//! Activities: sent, read back by id and by conversation.

use super::*;
use crate::error::ErrorCode;

#[utoipa::path(
    post,
    path = "/api/v1/activities",
    tag = "activities",
    summary = "Send an activity",
    request_body = crate::schemas::NewActivityDoc,
    responses((status = 201, description = "Stored, its deliveries enqueued", body = views::Ingested), (status = 200, description = "A producer id sent before: what was stored then", body = views::Ingested))
)]
pub(crate) async fn create_activity(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    key: Option<axum::Extension<crate::idempotency::Key>>,
    headers: axum::http::HeaderMap,
    Body(mut req): Body<NewActivity>,
) -> Result<impl IntoResponse, ApiError> {
    with_trace_headers(&mut req, &headers);
    // With an Idempotency-Key and no id of its own, the activity is named after the key: a
    // retry after a server error that came once its rows were written finds them.
    if let (None, Some(axum::Extension(crate::idempotency::Key(k)))) = (&req.id, key) {
        req.id = Some(ActivityId::for_idempotency_key(&tenant.id, &k));
    }
    let done = state.pipeline.intake().ingest(&tenant, req).await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(ingested(&done))))
}

/// The request's W3C trace headers, for an activity that carries no `traceparent` of its own
/// (a batch's items may each carry theirs).
fn with_trace_headers(item: &mut NewActivity, headers: &axum::http::HeaderMap) {
    if item.traceparent.is_some() {
        return;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    item.traceparent = header("traceparent");
    item.tracestate = header("tracestate");
}

/// `POST /api/v1/activities/batch`: items are read one by one, so one that does not fit
/// refuses itself only.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    activities: Vec<serde_json::Value>,
}

#[utoipa::path(
    post,
    path = "/api/v1/activities/batch",
    tag = "activities",
    summary = "Send up to 100 activities",
    description = "Each item is taken as `POST /api/v1/activities` takes one (its own `id` for idempotency, its own checks) and answered in order: the activity with its deliveries, or the item's own error. More than 100 items, or a body over 5 MiB, refuses the whole request and writes nothing. With an `Idempotency-Key`, an item without an `id` is named after the key and its position. A batch counts as one request against the API key's rate limit.",
    request_body = crate::schemas::NewActivityBatchDoc,
    responses((status = 200, description = "One result per item, in order", body = views::BatchResults), (status = 413, description = "The body is over 5 MiB"), (status = 422, description = "Not a batch of 1 to 100 items"))
)]
pub(crate) async fn create_activities(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    key: Option<axum::Extension<crate::idempotency::Key>>,
    headers: axum::http::HeaderMap,
    Body(batch): Body<BatchBody>,
) -> Result<Json<views::BatchResults>, ApiError> {
    use converger_pipeline::ingest::{IngestError, MAX_BATCH};
    let n = batch.activities.len();
    if n == 0 || n > MAX_BATCH {
        return Err(ApiError::invalid(
            ErrorCode::InvalidBatch,
            format!("a batch holds 1 to {MAX_BATCH} activities; this one holds {n}"),
        ));
    }
    let key = key.map(|axum::Extension(crate::idempotency::Key(k))| k);
    let items: Vec<Result<NewActivity, IngestError>> = batch
        .activities
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let mut item: NewActivity = serde_json::from_value(v)
                .map_err(|e| IngestError::Invalid(format!("activities[{i}] does not fit: {e}")))?;
            with_trace_headers(&mut item, &headers);
            if let (None, Some(k)) = (&item.id, &key) {
                item.id = Some(ActivityId::for_idempotency_key(
                    &tenant.id,
                    &format!("{k}#{i}"),
                ));
            }
            Ok(item)
        })
        .collect();
    let done = state.pipeline.intake().ingest_batch(&tenant, items).await;
    Ok(Json(views::BatchResults {
        results: done
            .into_iter()
            .map(|r| match r {
                Ok(done) => views::BatchResult::Ingested {
                    status: if done.created { 201 } else { 200 },
                    activity: ingested(&done),
                },
                Err(e) => {
                    let e = ApiError::from(e);
                    views::BatchResult::Refused {
                        status: e.status.as_u16(),
                        error: views::ItemError {
                            code: e.code.as_str().to_owned(),
                            message: e.message,
                        },
                    }
                }
            })
            .collect(),
    }))
}

/// What an ingest answers, for the API.
fn ingested(done: &converger_pipeline::ingest::Ingested) -> views::Ingested {
    views::Ingested {
        activity_id: done.activity.id.to_string(),
        conversation_id: done.activity.conversation_id.clone(),
        seq: done.activity.seq,
        created_at: done.activity.created_at.rfc3339(),
        trace_id: done.activity.trace().trace_id.clone(),
        deliveries: done
            .deliveries
            .iter()
            .map(views::DeliveryRef::from)
            .collect(),
    }
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
        .reads()
        .activity(&tenant.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("activity"))?;
    let ids: Vec<DeliveryId> = a.delivery_ids().collect();
    let mut deliveries = state.pipeline.reads().deliveries(&ids).await?;
    deliveries.sort_by(|x, y| x.channel_id.cmp(&y.channel_id));
    let view = views::activity(&a, Some(&deliveries));
    Ok(Json(
        with_kept_payload(&state, &a, view, converger_core::payload::READ_INLINE_BYTES).await,
    ))
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
    let q = params(query)?;
    let conversation = Some(q.conversation_id)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(ErrorCode::InvalidQuery, "conversation_id must not be empty")
        })?;
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
        .map_err(|_| {
            ApiError::invalid(ErrorCode::InvalidCursor, "cursor is not one this API gave")
        })?;
    let (items, more) = state
        .pipeline
        .reads()
        .conversation_activities(&tenant.id, &conversation, after.as_ref(), limit)
        .await?;
    let next = more.then(|| items.last()).flatten().map(|a| {
        Cursor {
            sort_key: a.seq.to_string(),
            id: a.id.to_string(),
        }
        .encode(&scope)
    });
    let data = futures::future::join_all(
        items
            .iter()
            .map(|a| with_kept_payload(&state, a, views::activity(a, None), 0)),
    )
    .await;
    Ok(Json(views::Page {
        data,
        next_cursor: next,
    }))
}
