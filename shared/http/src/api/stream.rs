//! The live stream's tokens: a browser cannot set `Authorization` on a WebSocket upgrade, so
//! the tenant's server asks for a short-lived token and hands it to the page, which connects
//! with `?token=` (`docs/stream.md`).

use super::*;

/// `POST /api/v1/stream/tokens`: a token that admits one tenant's live stream client for
/// five minutes (connect to the WebSocket API with `?token=`). Only its hash is kept.
#[utoipa::path(
    post,
    path = "/api/v1/stream/tokens",
    tag = "stream",
    summary = "A token for the live stream",
    request_body(content = Option<views::NewStreamToken>, description = "Optional: the topics a connection made with the token may follow"),
    responses((status = 201, body = views::StreamTokenView))
)]
pub(crate) async fn create_stream_token(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<views::StreamTokenView>), ApiError> {
    // No body: a token for every topic of the tenant.
    let req: views::NewStreamToken = if body.iter().all(u8::is_ascii_whitespace) {
        views::NewStreamToken::default()
    } else {
        crate::error::parse_json(&body)?
    };
    let topics = req
        .topics
        .as_deref()
        .map(converger_core::stream::Topic::parse_limit)
        .transpose()
        .map_err(|m| ApiError::invalid(ErrorCode::InvalidRequest, m))?;
    if !state.pipeline.streams().enabled() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::StreamDisabled,
            "this stack has no live stream (its `LiveStream` parameter is `disabled`)",
        ));
    }
    // The token admits while the key it was asked for with is the tenant's.
    let key = crate::auth::bearer_key(&headers).map(converger_core::secret::hash_api_key);
    let t = state
        .pipeline
        .streams()
        .issue_token(&tenant.id, key.as_deref(), topics.as_deref())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(views::StreamTokenView {
            token: t.token,
            expires_at: t.expires_at,
        }),
    ))
}
