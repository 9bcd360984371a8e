//! What providers and clients report back: provider receipts
//! (`POST /api/v1/channels/{id}/status`, authenticated by the provider's own means, not an
//! API key), Meta's subscription check (`GET` on the same path) and acknowledgements of
//! websocket hand-offs (`POST /api/v1/deliveries/{id}/ack`).

use crate::auth::{Authed, owned_delivery};
use crate::error::ApiError;
use crate::error::ErrorCode;
use crate::limits::Vouched;
use crate::{AppState, views};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use converger_core::providers::{Receipt, infobip_receipts, meta_receipts, verify_meta_signature};
use converger_core::secret::constant_time_eq;
use converger_core::{ChannelId, ChannelType};
use converger_ports::Ack;
use converger_ports::Channel;
use serde_json::{Value, json};
use std::collections::HashMap;

/// A channel that takes receipts: whatsapp_meta or whatsapp_infobip. Any other id is 404.
async fn receipt_channel(state: &AppState, id: &str) -> Result<Channel, ApiError> {
    let id = ChannelId::parse(id).map_err(|_| ApiError::not_found("channel"))?;
    match state.pipeline.reads().channel(&id).await? {
        Some(c)
            if matches!(
                c.kind,
                ChannelType::WhatsappMeta | ChannelType::WhatsappInfobip
            ) =>
        {
            Ok(c)
        }
        _ => Err(ApiError::not_found("channel")),
    }
}

fn config_str<'a>(c: &'a Channel, key: &str) -> Option<&'a str> {
    c.config
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `GET /api/v1/channels/{id}/status`: Meta's verification request
/// (`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge`) answered with the challenge
/// when the token is the channel's `verify_token`.
#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/status",
    tag = "receipts",
    summary = "Verify a WhatsApp webhook subscription",
    security(()),
    params(("id" = String, Path, description = "A channel id (`ch_...`)"), crate::schemas::MetaVerify),
    responses((status = 200, description = "The challenge echoed", body = String, content_type = "text/plain"))
)]
pub async fn verify_subscription(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let c = receipt_channel(&state, &id).await?;
    if c.kind != ChannelType::WhatsappMeta {
        return Err(ApiError::not_found("channel"));
    }
    let expected = config_str(&c, "verify_token").ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ReceiptsNotConfigured,
            "the channel has no `verify_token`",
        )
    })?;
    let mode = q.get("hub.mode").map(String::as_str);
    let token = q.get("hub.verify_token").map(String::as_str).unwrap_or("");
    let challenge = q.get("hub.challenge").ok_or_else(|| {
        ApiError::invalid(ErrorCode::InvalidRequest, "`hub.challenge` is missing")
    })?;
    if mode != Some("subscribe") || !constant_time_eq(expected.as_bytes(), token.as_bytes()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::InvalidVerifyToken,
            "hub.mode must be `subscribe` and hub.verify_token the channel's verify_token",
        ));
    }
    Ok((
        StatusCode::OK,
        [("content-type", "text/plain; charset=utf-8")],
        challenge.clone(),
    )
        .into_response())
}

fn unauthorized(code: ErrorCode, message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

/// `POST /api/v1/channels/{id}/status`: a provider's receipts for the channel's messages.
/// Meta's are verified with `X-Hub-Signature-256` and the channel's `app_secret`; Infobip's
/// carry the channel's `receipt_token` as `?token=` or `X-Receipt-Token`. Verified receipts
/// spend the channel's receipt schedule (`RECEIPT_RATE_LIMIT`), and whatever they are
/// answered is not a refusal of their source.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/status",
    tag = "receipts",
    summary = "Receive delivery receipts",
    description = "Meta's notifications (signed with X-Hub-Signature-256) or Infobip's reports (with the channel's receipt_token as `token` or X-Receipt-Token).",
    security(()),
    params(("id" = String, Path, description = "A channel id (`ch_...`)"), crate::schemas::ReceiptToken),
    request_body(content = Object, description = "The provider's notification"),
    responses(
        (status = 200, body = crate::schemas::ReceiptsApplied),
        (status = 404, description = "No delivery of this channel has these provider message ids, or no such channel", body = crate::schemas::UnknownMessages)
    )
)]
pub async fn receive_receipts(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let c = receipt_channel(&state, &id).await?;
    let parsed = |what: &str| -> Result<Value, ApiError> {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(ErrorCode::InvalidBody, format!("{what}: {e}")))
    };
    let receipts = match c.kind {
        ChannelType::WhatsappMeta => {
            let secret = config_str(&c, "app_secret").ok_or_else(|| {
                unauthorized(
                    ErrorCode::ReceiptsNotConfigured,
                    "the channel has no `app_secret` to verify receipts with",
                )
            })?;
            let sig = headers
                .get("x-hub-signature-256")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    unauthorized(
                        ErrorCode::InvalidSignature,
                        "X-Hub-Signature-256 is missing",
                    )
                })?;
            if !verify_meta_signature(secret, &body, sig) {
                return Err(unauthorized(
                    ErrorCode::InvalidSignature,
                    "X-Hub-Signature-256 does not match the body and the channel's app_secret",
                ));
            }
            meta_receipts(&parsed("not a WhatsApp notification")?)
        }
        _ => {
            let expected = config_str(&c, "receipt_token").ok_or_else(|| {
                unauthorized(
                    ErrorCode::ReceiptsNotConfigured,
                    "the channel has no `receipt_token` to check reports with",
                )
            })?;
            let given = q
                .get("token")
                .map(String::as_str)
                .or_else(|| headers.get("x-receipt-token").and_then(|v| v.to_str().ok()))
                .unwrap_or("");
            if !constant_time_eq(expected.as_bytes(), given.as_bytes()) {
                return Err(unauthorized(
                    ErrorCode::InvalidToken,
                    "the report does not carry the channel's receipt_token",
                ));
            }
            infobip_receipts(&parsed("not an Infobip report")?)
        }
    }
    .map_err(|m| ApiError::invalid(ErrorCode::InvalidBody, m))?;
    let mut res = apply_verified(&state, &c, &receipts).await;
    res.extensions_mut().insert(Vouched);
    Ok(res)
}

/// Applies receipts whose check passed, within the channel's receipt schedule.
async fn apply_verified(state: &AppState, c: &Channel, receipts: &[Receipt]) -> Response {
    let limit = state.pipeline.config().receipt_limit;
    if let Err(Some(retry_after_s)) = crate::limits::take(
        state,
        &converger_core::api_limit::receipts_key(c.id.as_str()),
        &limit,
    )
    .await
    {
        return crate::limits::too_many(
            ErrorCode::ReceiptsThrottled,
            format!(
                "this channel's receipts are over their limit of {limit}; \
                 retry after {retry_after_s} s"
            ),
            retry_after_s,
        );
    }
    let summary = match state.pipeline.handoff().apply_receipts(c, receipts).await {
        Ok(s) => s,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let body = json!({
        "received": receipts.len(),
        "applied": summary.applied,
        "ignored": summary.ignored,
        "unknown": summary.unknown,
    });
    if !receipts.is_empty() && summary.unknown.len() == receipts.len() {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({
                "error": {
                    "code": ErrorCode::UnknownMessage,
                    "message": "no delivery of this channel has these provider message ids",
                    "unknown": summary.unknown,
                }
            })),
        )
            .into_response();
    }
    (StatusCode::OK, Json(body)).into_response()
}

/// `POST /api/v1/deliveries/{id}/ack`: a client confirms a handed-off (websocket) delivery.
#[utoipa::path(
    post,
    path = "/api/v1/deliveries/{id}/ack",
    tag = "receipts",
    summary = "Acknowledge a delivery handed to a client",
    params(("id" = String, Path, description = "A delivery id (`dlv_...`)")),
    responses((status = 200, body = crate::views::DeliveryView))
)]
pub async fn acknowledge(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(id): Path<String>,
) -> Result<Json<crate::views::DeliveryView>, ApiError> {
    let d = owned_delivery(&state, &tenant, &id).await?;
    match state.pipeline.handoff().acknowledge(&d).await? {
        Ack::Acked(d) | Ack::Already(d) => Ok(Json(views::delivery(&d))),
        Ack::NotAwaiting(d) => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::NotAwaitingAck,
            format!(
                "delivery {} is {} and not waiting for an acknowledgement",
                d.id, d.status
            ),
        )),
        Ack::Missing => Err(ApiError::not_found("delivery")),
    }
}
