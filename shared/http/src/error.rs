//! Every error leaves as `{"error": {"code": ..., "message": ...}}` with a stable code
//! ([`ErrorCode`]).

pub use crate::codes::ErrorCode;
use axum::Json;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use converger_pipeline::channels::{ChannelRefused, ChannelWriteError};
use converger_pipeline::ingest::IngestError;
use converger_ports::StoreError;
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("{what} not found"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    /// A refusal with the code's usual status.
    pub fn of(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(code.status(), code, message)
    }

    pub fn invalid(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "request failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            "the service could not complete the request; it is safe to retry",
        )
    }
}

impl ApiError {
    /// The answer's body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        Self::internal(e)
    }
}

impl From<converger_pipeline::outcome::FlowError> for ApiError {
    fn from(e: converger_pipeline::outcome::FlowError) -> Self {
        Self::internal(e)
    }
}

impl From<ChannelWriteError> for ApiError {
    fn from(e: ChannelWriteError) -> Self {
        let r = match e {
            ChannelWriteError::Store(e) => return Self::internal(e),
            ChannelWriteError::Refused(r) => r,
        };
        let code = match &r {
            ChannelRefused::UnsupportedType(_) => ErrorCode::UnsupportedChannelType,
            ChannelRefused::Name(_) => ErrorCode::InvalidName,
            ChannelRefused::Config(_) => ErrorCode::InvalidConfig,
            ChannelRefused::RoleInPlatformAccount(_) => ErrorCode::RoleInPlatformAccount,
            ChannelRefused::EmailSender(_) => {
                return Self::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::EmailSenderNotAllowed,
                    r.to_string(),
                );
            }
            ChannelRefused::RetryPolicy(_) => ErrorCode::InvalidRetryPolicy,
            ChannelRefused::CircuitBreaker(_) => ErrorCode::InvalidCircuitBreaker,
            ChannelRefused::RateLimit(_) => ErrorCode::InvalidRateLimit,
            ChannelRefused::AutoDisable(_) => ErrorCode::InvalidAutoDisable,
            ChannelRefused::EventTypes(_) => ErrorCode::InvalidEventTypes,
            ChannelRefused::Middleware(_) => ErrorCode::InvalidMiddleware,
            ChannelRefused::Filter(_) => ErrorCode::InvalidFilter,
            ChannelRefused::Ordering(_) => ErrorCode::InvalidOrdering,
            ChannelRefused::TooMany(_) => {
                return Self::new(
                    StatusCode::CONFLICT,
                    ErrorCode::TooManyChannels,
                    r.to_string(),
                );
            }
        };
        Self::invalid(code, r.to_string())
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Invalid(m) => Self::invalid(ErrorCode::InvalidActivity, m),
            IngestError::Payload(m) => Self::invalid(ErrorCode::InvalidPayload, m),
            IngestError::TooLarge(m) => {
                Self::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge, m)
            }
            IngestError::Schema { .. } => {
                Self::invalid(ErrorCode::PayloadDoesNotMatchSchema, e.to_string())
            }
            IngestError::UnknownChannel(_) => {
                Self::invalid(ErrorCode::UnknownChannel, e.to_string())
            }
            IngestError::InactiveChannel(_) => {
                Self::invalid(ErrorCode::ChannelInactive, e.to_string())
            }
            IngestError::UnsupportedChannel(..) => {
                Self::invalid(ErrorCode::UnsupportedChannelType, e.to_string())
            }
            IngestError::ManagedChannel(_) => Self::new(
                StatusCode::FORBIDDEN,
                ErrorCode::ManagedChannel,
                e.to_string(),
            ),
            IngestError::Conflict(_) => {
                Self::new(StatusCode::CONFLICT, ErrorCode::Conflict, e.to_string())
            }
            IngestError::Store(e) => Self::internal(e),
            IngestError::Queue(e) => Self::internal(e),
        }
    }
}

/// Largest body of a batch of activities, and so of any request: under the 6 MB a
/// synchronous Lambda invocation takes, with room for the request's envelope.
pub const BATCH_MAX_BODY: usize = 5 * 1024 * 1024;

/// A JSON body whose rejections are [`ApiError`]s: 415 for another media type, 400 for text
/// that is not JSON, 422 for JSON of the wrong shape.
pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let v = v.to_ascii_lowercase();
                v.starts_with("application/json") || v.contains("+json")
            });
        if json_type == Some(false) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with `content-type: application/json`",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    return ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        ErrorCode::BodyTooLarge,
                        "the body is larger than this endpoint accepts",
                    );
                }
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidBody,
                    e.body_text(),
                )
            })?;
        parse_json(&bytes).map(Body)
    }
}

/// Parses a JSON body: 400 `malformed_json` for text that is not JSON, 422 `invalid_body` for
/// JSON of the wrong shape.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::MalformedJson,
            format!("the body is not valid JSON: {e}"),
        )
    })?;
    serde_json::from_value(value).map_err(|e| {
        ApiError::invalid(
            ErrorCode::InvalidBody,
            format!("the body does not fit: {e}"),
        )
    })
}

/// Parses a body that may be left out (empty or blank reads as the type's default), as
/// [`parse_json`] otherwise.
pub fn parse_optional_json<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse_json(bytes)
    }
}

/// Every API answer (the tenant API's and the admin API's, refusals included): no content
/// sniffing, so that a browser never reads a JSON answer holding a tenant's text as a page.
pub async fn api_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut resp = next.run(req).await;
    resp.headers_mut().insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Answers for unknown routes and methods.
pub async fn no_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NoRoute,
        "no such endpoint",
    )
}

pub async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "this endpoint does not accept that method",
    )
}

/// For `#[serde(default, deserialize_with = "present")]`: tells an absent field (`None`) from
/// an explicit `null` (`Some(None)`), as PATCH bodies need.
pub fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}
