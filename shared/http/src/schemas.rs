//! The shapes the OpenAPI document names that no handler returns as a type of its own: the
//! health answer, the error body, and documentation stand-ins for answers built as JSON.
//! Handlers name them in their annotations; the document (`openapi.rs`) lists them.

use crate::error::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// `{"status": "ok"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    pub status: String,
}

/// Every refusal: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
}

/// An activity to deliver: to `channel_ids`, or by `event_type` to every active channel of
/// the tenant subscribed to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = NewActivity)]
pub struct NewActivityDoc {
    /// The producer's id: sending it again creates nothing new.
    pub id: Option<String>,
    /// 1 to 256 characters.
    pub conversation_id: String,
    /// Its position in the conversation; the next one when absent.
    pub seq: Option<u64>,
    /// 1 to 50 channels; may be left out with an `event_type`.
    pub channel_ids: Option<Vec<String>>,
    /// 1 to 100 letters, digits, `.`, `_`, `-` or `:`.
    pub event_type: Option<String>,
    /// Any JSON value: up to 10 MiB serialized where the deployment has a payload bucket
    /// (256 KiB without one), and up to what a request carries (5 MiB) inline. Required
    /// unless `payload_upload` is given.
    pub payload: Option<serde_json::Value>,
    /// An upload from `POST /api/v1/payloads` that is the payload (a JSON document of up to
    /// 10 MiB), instead of `payload`.
    pub payload_upload: Option<String>,
    /// A W3C `traceparent` (a batch item's own; a single activity's may come as the
    /// request's `traceparent` header instead): every delivery's request is a span of this
    /// trace. One that does not parse is ignored and a new trace starts.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that goes with it (at most 512 characters), passed on as sent.
    pub tracestate: Option<String>,
}

/// Up to 100 activities, each as `POST /api/v1/activities` takes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = NewActivityBatch)]
pub struct NewActivityBatchDoc {
    /// 1 to 100 activities.
    pub activities: Vec<NewActivityDoc>,
}

/// A channel's flow state: breaker, window and what waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = DeliveryState)]
pub struct DeliveryStateDoc {
    /// `active`, `paused`, `open`, `half_open`, ...
    pub state: String,
    /// `closed`, `open`, `half_open` or `paused`.
    pub circuit_state: String,
    pub circuit_changed_at: Option<String>,
    pub consecutive_failures: u32,
    pub in_flight: u64,
    pub window: Option<u32>,
    pub max_in_flight: Option<u32>,
    pub rate_limit: Option<String>,
    pub parked: u64,
    pub backlog: u64,
}

/// A channel's health checks, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = ChannelHealth)]
pub struct ChannelHealthDoc {
    pub channel_id: String,
    /// `healthy`, `degraded`, `unhealthy` or `unknown`.
    pub status: String,
    pub checked_at: Option<String>,
    pub history: Vec<HealthCheckDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = HealthCheck)]
pub struct HealthCheckDoc {
    pub status: String,
    pub failure_rate: f64,
    pub total_deliveries: u64,
    pub failed_deliveries: u64,
    pub checked_at: String,
}

/// What a receipt notification did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptsApplied {
    pub received: u64,
    pub applied: u64,
    pub ignored: u64,
    /// Provider message ids no delivery of the channel has.
    pub unknown: Vec<String>,
}

/// None of a notification's messages is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UnknownMessages {
    pub error: UnknownDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UnknownDetail {
    pub code: String,
    pub message: String,
    /// The provider message ids no delivery has (when the channel exists).
    pub unknown: Option<Vec<String>>,
}

/// Meta's subscription check.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct MetaVerify {
    /// `subscribe`.
    #[param(rename = "hub.mode")]
    hub_mode: Option<String>,
    /// The channel's `verify_token`.
    #[param(rename = "hub.verify_token")]
    hub_verify_token: Option<String>,
    /// Echoed back.
    #[param(rename = "hub.challenge")]
    hub_challenge: Option<String>,
}

/// Infobip's reports carry the channel's `receipt_token`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ReceiptToken {
    token: Option<String>,
}
