//! The tenant API (`/api/v1`), authenticated with `Authorization: Bearer <tenant API key>`.
//! A tenant never sees another tenant's data: such ids answer 404, like unknown ones.

use crate::auth::{Authed, owned_channel, owned_delivery};
use crate::error::ErrorCode;
use crate::error::{ApiError, Body, no_route, wrong_method};
use crate::{AppState, views};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use converger_core::query::{Cursor, KeyBounds, Search, newest_first};
use converger_core::{ActivityId, DeliveryStatus};
use converger_core::{ChannelId, ChannelType, DeliveryId};
use converger_pipeline::channels::Rotation;
use converger_pipeline::flow::DeliveryState;
use converger_pipeline::ingest::NewActivity;
use converger_pipeline::replay::ReplayError;
use converger_ports::{Channel, DeliveryQuery, Scope};
use serde::Deserialize;
use serde_json::{Map, Value};

mod activities;
mod audit;
mod aws;
mod channels;
mod deliveries;
mod event_types;
mod flow;
mod payloads;
mod replays;
mod stream;
mod usage;

// The handlers by name, for the router and the OpenAPI document.
pub(crate) use activities::*;
pub(crate) use audit::*;
pub(crate) use aws::*;
pub(crate) use channels::*;
pub(crate) use deliveries::*;
pub(crate) use event_types::*;
pub(crate) use flow::*;
pub(crate) use payloads::*;
pub(crate) use replays::*;
pub(crate) use stream::*;
pub(crate) use usage::*;

/// `GET /api/health`: the API answers (no authentication).
#[utoipa::path(get, path = "/api/health", tag = "operations", security(()),
    responses((status = 200, description = "The API answers", body = crate::schemas::Status)))]
pub(crate) async fn health() -> Json<crate::schemas::Status> {
    Json(crate::schemas::Status {
        status: "ok".into(),
    })
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/v1/channels", post(create_channel).get(list_channels))
        .route(
            "/api/v1/channels/{id}",
            get(get_channel).patch(patch_channel).delete(delete_channel),
        )
        .route("/api/v1/channels/{id}/secret", get(get_secret))
        .route("/api/v1/channels/{id}/secret/rotate", post(rotate_secret))
        .route(
            "/api/v1/activities",
            post(create_activity)
                .get(list_activities)
                .layer(axum::extract::DefaultBodyLimit::max(
                    crate::error::BATCH_MAX_BODY,
                )),
        )
        .route("/api/v1/payloads", post(create_upload))
        .route(
            "/api/v1/activities/batch",
            post(create_activities).layer(axum::extract::DefaultBodyLimit::max(
                crate::error::BATCH_MAX_BODY,
            )),
        )
        .route("/api/v1/activities/{id}", get(get_activity))
        .route("/api/v1/deliveries", get(list_deliveries))
        .route("/api/v1/deliveries/{id}", get(get_delivery))
        .route("/api/v1/deliveries/{id}/retry", post(retry_delivery))
        .route("/api/v1/audit", get(list_audit))
        .route(
            "/api/v1/event-types",
            post(create_event_type).get(list_event_types),
        )
        .route(
            "/api/v1/event-types/{name}",
            get(get_event_type).patch(patch_event_type),
        )
        .route("/api/v1/stream/tokens", post(create_stream_token))
        .route("/api/v1/aws-identity", get(get_aws_identity))
        .route("/api/v1/usage", get(get_usage))
        .route("/api/v1/aws-identity/rotate", post(rotate_aws_identity))
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
        .route("/api/v1/channels/{id}/lanes/release", post(release_lane))
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

/// A request's query parameters; 422 `invalid_query` saying what does not fit.
fn params<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::invalid(ErrorCode::InvalidQuery, e.body_text()))
}

/// A page size: `limit` from 1 to 500, 50 when absent.
fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(50);
    if (1..=500).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::invalid(
            ErrorCode::InvalidQuery,
            "limit must be from 1 to 500",
        ))
    }
}

/// A list's `cursor` parameter, refused unless this API gave it for the same list (`scope`:
/// the tenant and the filters).
fn cursor(given: Option<&str>, scope: &str) -> Result<Option<Cursor>, ApiError> {
    given
        .map(|c| Cursor::decode(c, scope))
        .transpose()
        .map_err(|m| ApiError::invalid(ErrorCode::InvalidCursor, m))
}

/// The tenant's alert channel is the platform's: the tenant reads it, an operator changes it
/// (`PATCH /admin/api/tenants/{id}` with `alert_webhook_url`).
fn not_managed(c: &Channel) -> Result<(), ApiError> {
    if c.managed {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ManagedChannel,
            "this channel delivers the platform's alerts and is changed by an operator \
             (the tenant's alert_webhook_url), not through the tenant API",
        ));
    }
    Ok(())
}

fn replay_error(e: ReplayError, what: &str) -> ApiError {
    match e {
        ReplayError::NotFound => ApiError::not_found(what),
        ReplayError::ChannelInactive => ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::ChannelInactive,
            "Channel is inactive",
        ),
        e @ ReplayError::NotFailed(_) => {
            ApiError::new(StatusCode::CONFLICT, ErrorCode::NotFailed, e.to_string())
        }
        e @ ReplayError::StillFiltered => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::StillFiltered,
            e.to_string(),
        ),
        ReplayError::Store(e) => e.into(),
    }
}
