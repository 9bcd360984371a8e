//! The tenant API's rate limits (the rules are `core::api_limit`'s): every call with an API
//! key spends one request of that key's schedule, shared by every API instance. And the
//! requests nobody vouches for: a source address whose requests keep being refused (no or a
//! bad API key, a receipt that fails its check) spends a schedule of its own, shared the same
//! way, and past it is answered 429 before anything is looked up. A channel's verified
//! receipts spend a schedule of the channel's (`receipts_throttled` past it). An instance
//! takes a tenth of a second's worth of the rate at once and spends it locally, so a call
//! costs a fraction of one store write. Over the limit: 429 `rate_limited` with
//! `Retry-After`.

use crate::AppState;
use crate::auth::{Authed, authenticate};
use crate::error::ApiError;
use crate::error::ErrorCode;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converger_core::api_limit::{self, Lease};
use converger_core::time;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many times this process took from a shared schedule (the `requests` benchmark
/// reports the limit's own cost with it).
pub static SHARED_TAKES: AtomicU64 = AtomicU64::new(0);

/// Whether a path is a tenant API call the limit applies to (not the receipts, which
/// providers call without a key, nor the health check or the document).
fn limited(path: &str) -> bool {
    path.starts_with("/api/v1/") && !path.ends_with("/status") && !path.ends_with("openapi.json")
}

/// Whether a path is a provider's receipt (or its verification): called without a key.
fn receipt(path: &str) -> bool {
    path.starts_with("/api/v1/channels/") && path.ends_with("/status")
}

/// Marks an answer to a request without an API key whose own check passed (a receipt with
/// the channel's signature or token): however it is answered, it is not a refusal.
#[derive(Debug, Clone, Copy)]
pub struct Vouched;

/// 429 with `code`, `message` and `Retry-After`.
pub(crate) fn too_many(code: ErrorCode, message: String, retry_after_s: u64) -> Response {
    let mut res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message).into_response();
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    res
}

pub fn source_throttled(retry_after_s: u64) -> Response {
    too_many(
        ErrorCode::SourceThrottled,
        source_throttled_message(retry_after_s),
        retry_after_s,
    )
}

/// What a throttled source is told, wherever it called.
pub fn source_throttled_message(retry_after_s: u64) -> String {
    format!(
        "too many refused requests from this address (at most {}); retry after {retry_after_s} s",
        api_limit::REFUSALS_PER_SOURCE
    )
}

/// Runs a request nobody vouches for (yet): refused at once while its source is throttled;
/// its refusal, if it is refused, spent from the source's schedule (`pipeline::sources`).
async fn unvouched(state: &AppState, req: Request, next: Next, is_receipt: bool) -> Response {
    let source = converger_core::net::client_source(
        req.extensions().get::<crate::web::SourceIp>().map(|s| s.0),
    );
    if let Some(wait_s) = state.pipeline.sources().throttled(&source) {
        return source_throttled(wait_s);
    }
    let res = next.run(req).await;
    if api_limit::refused(res.status().as_u16(), is_receipt)
        && res.extensions().get::<Vouched>().is_none()
    {
        state.pipeline.sources().refused(&source).await;
    }
    res
}

pub async fn layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if receipt(path) {
        return unvouched(&state, req, next, true).await;
    }
    if !limited(path) {
        return next.run(req).await;
    }
    // Unauthenticated requests go on to be refused by the handler (and counted against their
    // source); an authenticated one carries its tenant on, so no later layer or handler
    // resolves the key again.
    let Ok(authed) = authenticate(req.headers(), &state).await else {
        return unvouched(&state, req, next, false).await;
    };
    req.extensions_mut().insert(authed.clone());
    let Authed(tenant, actor) = authed;
    let limit = tenant.api_limit(&state.pipeline.config().api_limits);
    match take(&state, &actor.id, &limit).await {
        Ok(()) => next.run(req).await,
        Err(Some(retry_after_s)) => too_many(
            ErrorCode::RateLimited,
            format!(
                "this API key is over its rate limit of {limit}; retry after {retry_after_s} s"
            ),
            retry_after_s,
        ),
        // The schedule could not be read: the call goes on (the store it needs is likely
        // unavailable too, and answers for itself).
        Err(None) => next.run(req).await,
    }
}

/// Spends one request of `key`'s limit: from this instance's lease, else from a batch (or,
/// near the limit, a single request) taken from the shared schedule. The calls of this
/// instance that find the lease empty wait for one of them to take the batch, rather than each
/// taking one (which would run the shared schedule ahead of what the instance spends).
/// `Err(Some(seconds))` over the limit, `Err(None)` when the schedule could not be read.
pub(crate) async fn take(
    state: &AppState,
    key: &str,
    limit: &converger_core::RateLimit,
) -> Result<(), Option<u64>> {
    let schedule = api_limit::schedule_key(key, limit);
    let slot = state.api_leases.get_or_insert_with(schedule.clone(), || {
        Arc::new(tokio::sync::Mutex::new(Lease::taken(
            *limit,
            0,
            time::now_ms(),
        )))
    });
    let mut lease = slot.lock().await;
    let now = time::now_ms();
    if lease.spend(limit, now) {
        return Ok(());
    }
    let batch = api_limit::batch(limit);
    let mut retry_at = None;
    for n in [batch, 1].into_iter().take(if batch > 1 { 2 } else { 1 }) {
        SHARED_TAKES.fetch_add(1, Ordering::Relaxed);
        match state
            .pipeline
            .take_api_rate(&schedule, limit, n, now.saturating_mul(1000))
            .await
        {
            Ok(Ok(())) => {
                *lease = Lease::taken(*limit, n - 1, now);
                return Ok(());
            }
            Ok(Err(at)) => retry_at = Some(at),
            Err(e) => {
                tracing::warn!(error = %e, "API rate schedule unreadable; the call goes on");
                return Err(None);
            }
        }
    }
    Err(Some(u64::from(converger_core::RateLimit::snooze_s(
        retry_at.unwrap_or(0),
        now.saturating_mul(1000),
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_calls_are_limited_and_receipts_the_health_check_and_the_document_are_not() {
        assert!(limited("/api/v1/activities"));
        assert!(limited("/api/v1/channels/ch_1/secret/rotate"));
        assert!(!limited("/api/v1/channels/ch_1/status"));
        assert!(!limited("/api/v1/openapi.json"));
        assert!(!limited("/api/health"));
        assert!(receipt("/api/v1/channels/ch_1/status"));
        assert!(!receipt("/api/v1/channels/ch_1"));
    }
}
