//! `Idempotency-Key` on the tenant API's POSTs (the rules are `core::idempotency`'s): a
//! retried POST with the same key and body gets the first answer again, with
//! `Idempotent-Replayed: true`, and nothing is done twice; the same key with another request
//! is refused (422 `idempotency_key_reused`); a duplicate that arrives while the first runs
//! waits for its answer (409 `idempotency_key_in_use` if it does not come in time).

use crate::AppState;
use crate::auth::{Authed, authenticate};
use crate::error::ApiError;
use crate::error::ErrorCode;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converger_core::idempotency::{self as rules, Seen};
use converger_core::{TenantId, time};
use converger_ports::KeyRecord;
use std::time::{Duration, Instant};

pub const HEADER: &str = "idempotency-key";

/// The request's `Idempotency-Key`, for the handler (a request extension).
#[derive(Debug, Clone)]
pub struct Key(pub String);
/// Largest request body the layer reads (the API's own limits are this or lower: a batch of
/// activities takes the most).
const MAX_BODY: usize = crate::error::BATCH_MAX_BODY;

/// The layer: a POST with the header runs at most once per key and body.
pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(key) = req.headers().get(HEADER) else {
        return next.run(req).await;
    };
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    // Unauthenticated requests go on to be refused as they would be without the key.
    // The rate limit's layer authenticated the request already.
    let known = req.extensions().get::<Authed>().cloned();
    let authed = match known {
        Some(a) => Ok(a),
        None => authenticate(req.headers(), &state).await,
    };
    let Ok(Authed(tenant, _)) = authed else {
        return next.run(req).await;
    };
    let key = match key.to_str().map_err(|e| e.to_string()).and_then(|k| {
        rules::check_key(k)?;
        Ok(k.to_owned())
    }) {
        Ok(k) => k,
        Err(m) => return ApiError::invalid(ErrorCode::InvalidIdempotencyKey, m).into_response(),
    };
    let (mut parts, body) = req.into_parts();
    // The handler may name what it creates after the key (an activity's id), so that work a
    // server error interrupted after it was done is not done twice by the retry.
    parts.extensions.insert(Key(key.clone()));
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::BodyTooLarge,
                "the body is larger than the API accepts",
            )
            .into_response();
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let fingerprint = rules::fingerprint(parts.method.as_str(), &path, &body);
    // The answer is kept sealed under the request's API key (`core::idempotency::seal`).
    let api_key = crate::auth::bearer_key(&parts.headers)
        .unwrap_or_default()
        .to_owned();
    let once = Once {
        state: &state,
        tenant: &tenant.id,
        key: &key,
        fingerprint: &fingerprint,
        api_key: &api_key,
    };
    match once.hold().await {
        Ok(Held::Mine) => {
            let res = next.run(Request::from_parts(parts, Body::from(body))).await;
            once.answer(res).await
        }
        Ok(Held::Answered(status, body)) => replay(status, body),
        Err(e) => e.into_response(),
    }
}

struct Once<'a> {
    state: &'a AppState,
    tenant: &'a TenantId,
    key: &'a str,
    fingerprint: &'a str,
    /// The API key the request carries: what its kept answer is sealed under.
    api_key: &'a str,
}

enum Held {
    /// This request holds the key: it does the work.
    Mine,
    /// The same request was answered before.
    Answered(u16, String),
}

impl Once<'_> {
    /// Takes the key, or finds the answer to give, waiting while the same request runs
    /// elsewhere (a take-over when its holder's lock ends without an answer).
    async fn hold(&self) -> Result<Held, ApiError> {
        let store = &self.state.idempotency_keys;
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        let mut take = true;
        loop {
            let now = self.state.pipeline.clock().now();
            let held = if take {
                let record = KeyRecord {
                    fingerprint: self.fingerprint.to_owned(),
                    locked_until: now.ms() + rules::LOCK_MS,
                    status: None,
                    body: None,
                    expires_at: now.secs() + rules::KEY_TTL_S,
                };
                match store.take_key(self.tenant, self.key, &record, now).await? {
                    None => return Ok(Held::Mine),
                    Some(h) => h,
                }
            } else {
                match store.get_key(self.tenant, self.key).await? {
                    // Freed (its request failed): take it.
                    None => {
                        take = true;
                        continue;
                    }
                    Some(h) => h,
                }
            };
            match rules::seen(&held.fingerprint, self.fingerprint, held.answer()) {
                Seen::Replay { status, body } => {
                    return match rules::open(self.api_key, body) {
                        Some(body) => Ok(Held::Answered(status, body)),
                        // Sealed under another of the tenant's keys (it was rotated since).
                        None => Err(ApiError::invalid(
                            ErrorCode::IdempotencyKeyReused,
                            "this Idempotency-Key was answered to another API key of the \
                             tenant (rotated since); use a new key for a new request",
                        )),
                    };
                }
                Seen::Mismatch => {
                    return Err(ApiError::invalid(
                        ErrorCode::IdempotencyKeyReused,
                        "this Idempotency-Key was used with another request (method, path or \
                         body) in the last 24 hours; use a new key for a new request",
                    ));
                }
                Seen::Running => {}
            }
            if started.elapsed() >= Duration::from_millis(rules::WAIT_MS) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    ErrorCode::IdempotencyKeyInUse,
                    "a request with this Idempotency-Key is still running; retry shortly",
                ));
            }
            // Read until it is answered; take it over only once its holder's lock has ended.
            take = held.locked_until < time::now_ms();
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(400));
        }
    }

    /// Keeps the answer for the key (or frees the key after a server error) and gives it.
    async fn answer(&self, res: Response) -> Response {
        let store = &self.state.idempotency_keys;
        let status = res.status().as_u16();
        if !rules::keeps(status) {
            if let Err(e) = store
                .free_key(self.tenant, self.key, self.fingerprint)
                .await
            {
                tracing::warn!(error = %e, "idempotency key not freed; it frees itself when its lock ends");
            }
            return res;
        }
        let (parts, body) = res.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(b) => b,
            Err(e) => return ApiError::internal(e).into_response(),
        };
        let text = String::from_utf8_lossy(&bytes);
        let sealed = rules::seal_fresh(self.api_key, &text);
        if let Err(e) = store
            .answer_key(self.tenant, self.key, self.fingerprint, status, &sealed)
            .await
        {
            // The work is done and its answer is given; a retry with the key waits until
            // the lock ends, then runs again (as if the answer had been lost in transit).
            tracing::warn!(error = %e, "idempotency answer not kept");
        }
        Response::from_parts(parts, Body::from(bytes))
    }
}

/// The first answer again.
fn replay(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut res = (status, body).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    res
}
