//! Uploads of payloads larger than an API request carries (ADR 0090): the producer asks for
//! a URL, sends the payload's JSON there, and names the upload in the activity.

use super::*;
use converger_core::payload::{MAX_BYTES, UPLOAD_URL_TTL_S};

#[utoipa::path(
    post,
    path = "/api/v1/payloads",
    tag = "activities",
    summary = "Upload a large payload",
    description = "A URL that takes one payload of up to 10 MiB (JSON, sent with the method and headers given) for 15 minutes. An activity then names it as `payload_upload` instead of carrying `payload`; an upload is kept a day. Only a deployment with a payload bucket has uploads (501 `no_payload_bucket` otherwise).",
    responses((status = 201, body = views::UploadView), (status = 501, description = "The deployment keeps no payload bucket"))
)]
pub(crate) async fn create_upload(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
) -> Result<(StatusCode, Json<views::UploadView>), ApiError> {
    let Some(store) = state.pipeline.payloads().store() else {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            ErrorCode::NoPayloadBucket,
            "this deployment keeps no payload bucket: payloads are at most 262144 bytes, sent inline",
        ));
    };
    let upload_id = converger_core::payload::new_upload_id();
    let url = store
        .upload_url(&tenant.id, &upload_id, UPLOAD_URL_TTL_S)
        .await?;
    let ttl_ms = i64::try_from(UPLOAD_URL_TTL_S * 1000).unwrap_or(i64::MAX);
    Ok((
        StatusCode::CREATED,
        Json(views::UploadView {
            upload_id,
            url: url.url,
            method: url.method,
            headers: url.headers.into_iter().collect(),
            expires_at: converger_core::time::ms_to_rfc3339(
                state.pipeline.clock().now_ms().saturating_add(ttl_ms),
            ),
            max_bytes: MAX_BYTES as u64,
        }),
    ))
}

/// `view` with where its payload is when the payload bucket keeps it: its size and a URL
/// that reads it; the payload itself too when `inline_up_to` bytes allow (read from the
/// bucket). A payload that cannot be read is left out, not an error.
pub(crate) async fn with_kept_payload(
    state: &AppState,
    a: &converger_ports::Activity,
    mut view: views::ActivityView,
    inline_up_to: u64,
) -> views::ActivityView {
    let (Some(r), Some(store)) = (&a.payload_ref, state.pipeline.payloads().store()) else {
        return view;
    };
    view.payload_bytes = Some(r.bytes);
    match store
        .download_url(r, converger_core::payload::DOWNLOAD_URL_TTL_S)
        .await
    {
        Ok(url) => view.payload_url = Some(url),
        Err(e) => tracing::warn!(error = %e, key = %r.key, "no download URL for a kept payload"),
    }
    if r.bytes <= inline_up_to && view.payload.is_null() {
        let mut read = a.clone();
        match state.pipeline.payloads().read(&mut read).await {
            Ok(_) => view.payload = read.payload,
            Err(e) => tracing::warn!(error = %e, key = %r.key, "a kept payload was not read"),
        }
    }
    view
}
