//! What the tenant API takes and answers, as `docs/openapi.json` names them (a test checks
//! every field here against the document). Unknown fields in an answer are ignored, so a
//! newer API does not break an older client.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A channel to create (`NewChannel`). `kind` is sent as `type`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewChannel {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub config: Map<String, Value>,
    /// Any other setting (`retry_policy`, `circuit_breaker`, `rate_limit`, `event_types`,
    /// `middleware`, `ordering`, `active`...), sent as given.
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

/// A channel (`ChannelView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    pub id: String,
    pub tenant_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub config: Map<String, Value>,
    pub active: bool,
    /// The channel's own layer of the retry policy.
    pub retry_policy: Value,
    /// Its breaker settings, every one shown (defaults included).
    pub circuit_breaker: Value,
    pub auto_disable: Value,
    pub middleware: Value,
    /// Which activities it wants (`docs/channels/filters.md`), when it has a filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    #[serde(default)]
    pub ordering: Option<Value>,
    #[serde(default)]
    pub rate_limit: Option<String>,
    #[serde(default)]
    pub event_types: Vec<String>,
    #[serde(default)]
    pub disabled_at: Option<String>,
    #[serde(default)]
    pub disabled_reason: Option<String>,
    pub managed: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// A channel just created, with its signing secret (`CreatedChannel`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreatedChannel {
    #[serde(flatten)]
    pub channel: Channel,
    pub signing_secret: String,
}

/// An activity to post (`NewActivity`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewActivity {
    /// The producer's own id: posting it again answers the same activity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub conversation_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Its channels; or none, and an `event_type` its subscribers take.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub channel_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    pub payload: Value,
    /// A W3C `traceparent`: every delivery's request is a span of its trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

/// Where to send a large payload (`Upload`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Upload {
    pub upload_id: String,
    pub url: String,
    pub method: String,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    pub expires_at: String,
    pub max_bytes: u64,
}

/// One delivery an activity made (`DeliveryRef`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRef {
    pub id: String,
    pub channel_id: String,
    pub status: String,
}

/// An activity taken (`Ingested`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ingested {
    pub activity_id: String,
    pub conversation_id: String,
    pub seq: u64,
    pub created_at: String,
    /// Its W3C trace id (the producer's, or one derived from the activity's id).
    #[serde(default)]
    pub trace_id: String,
    pub deliveries: Vec<DeliveryRef>,
}

/// What a batch of activities answers (`BatchResults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchResults {
    pub results: Vec<BatchResult>,
}

/// One item of a batch (`BatchResult`): taken, or refused on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchResult {
    /// `status` 201, or 200 for a producer's id posted before.
    Ingested { status: u16, activity: Ingested },
    /// `status` as a single post would answer, with the error's code and message.
    Refused { status: u16, error: ItemError },
}

/// A batch item's refusal (`ItemError`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemError {
    pub code: String,
    pub message: String,
}

/// One delivery (`DeliveryView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: String,
    pub tenant_id: String,
    pub channel_id: String,
    pub activity_id: String,
    pub conversation_id: String,
    #[serde(default)]
    pub event_type: Option<String>,
    /// `pending`, `sent`, `delivered`, `read`, `failed` or `paused`.
    pub status: String,
    pub tier: String,
    pub waiting_for_slot: bool,
    pub awaiting_ack: bool,
    pub attempts: u32,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub next_attempt_at: Option<String>,
    #[serde(default)]
    pub sent_at: Option<String>,
    #[serde(default)]
    pub response_status: Option<u16>,
    pub retry_count: u32,
    pub created_at: String,
    pub updated_at: String,
}

impl Delivery {
    /// Whether it has an outcome: neither waiting nor paused.
    pub fn is_settled(&self) -> bool {
        self.status != "pending" && self.status != "paused"
    }
}

/// One attempt of a delivery (`AttemptView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub started_at: String,
    pub duration_ms: u64,
    #[serde(default)]
    pub status_code: Option<u16>,
    #[serde(default)]
    pub response_snippet: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub next_retry_at: Option<String>,
    pub trigger: String,
    #[serde(default)]
    pub outcome: Option<String>,
}

/// A page of a list, and the cursor of the next page (`None` on the last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Which deliveries to list (`GET /api/v1/deliveries`); `None` leaves a filter out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeliveryQuery {
    pub status: Option<String>,
    pub channel_id: Option<String>,
    pub activity_id: Option<String>,
    pub event_type: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// A channel's delivery state (`DeliveryStateView`): whether it flows, and why not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeliveryState {
    /// `flowing`, `breaker_open`, `probing` or `paused`.
    pub state: String,
    pub circuit_state: String,
    pub consecutive_failures: u32,
    pub in_flight: u64,
    pub parked: u64,
    pub backlog: u64,
}

/// What a role in the tenant's AWS account must trust (`AwsIdentityView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AwsIdentity {
    pub account_id: String,
    pub external_id: String,
    pub send_actions: Map<String, Value>,
    pub role_template: String,
}

/// One day of usage, or the total (`UsageDayView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageDay {
    /// `YYYY-MM-DD`; `None` on the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    pub deliveries: i64,
    pub attempts: i64,
    pub dead_letters: i64,
    /// Of the deliveries, those their channel's filter did not want.
    #[serde(default)]
    pub filtered: i64,
    pub estimated_cost_usd: f64,
}

/// The tenant's usage and its estimated cost (`UsageView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub from: String,
    pub to: String,
    pub days: Vec<UsageDay>,
    pub total: UsageDay,
    pub estimated_cost_by_service_usd: Map<String, Value>,
    pub prices_per_million_usd: Map<String, Value>,
    pub note: String,
}

/// An event type to add to the catalog (`NewEventType`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewEventType {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema (draft 2020-12) every payload of the type must fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    #[serde(default)]
    pub deprecated: bool,
}

/// An event type of the catalog (`EventTypeView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventType {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub schema: Option<Value>,
    pub deprecated: bool,
    pub created_at: String,
    pub updated_at: String,
}
