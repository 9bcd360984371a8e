//! What the HTTP surfaces answer, as types: each is serialized as it is and described by
//! the OpenAPI document from the same definition (never a secret unless asked for).

use converger_core::time::ms_to_rfc3339;
use converger_ports::{Activity, AttemptEntry, AuditEntry, Channel, Delivery, ReplayJob, Tenant};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A tenant, as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TenantView {
    pub id: String,
    pub name: String,
    /// `high`, `default` or `bulk`: the delivery queue its deliveries run on.
    #[schema(example = "default")]
    pub tier: String,
    pub created_at: String,
    pub alert_webhook_url: Option<String>,
    pub alert_channel_id: Option<String>,
    /// Each API key's rate limit: the operator's override, else the tier's default.
    pub api_rate_limit: String,
    /// Whether `api_rate_limit` is an override.
    pub api_rate_limit_overridden: bool,
    /// How many partitions its delivery listings are spread over (the tier's default unless
    /// an operator raised it; see docs/scaling.md).
    pub delivery_shards: u32,
    /// The listing shards its load was granted beyond `delivery_shards` (see docs/scaling.md),
    /// while the grant holds: how many, and until when.
    #[serde(default)]
    pub listing_shards_granted: Option<ShardGrantView>,
    /// The SES identities its email channels may send from (set by an operator).
    pub email_senders: Vec<String>,
    /// The SES tenant its email is sent on behalf of (set by an operator), if any.
    pub ses_tenant: Option<String>,
}

/// Listing shards granted to a tenant by its load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ShardGrantView {
    pub shards: u32,
    /// When the grant lapses unless the load renews it (RFC 3339).
    pub until: String,
}

/// `defaults`: each tier's API rate limit (the tenant's unless overridden).
pub fn tenant(t: &Tenant, defaults: &converger_core::api_limit::Defaults) -> TenantView {
    TenantView {
        id: t.id.to_string(),
        name: t.name.clone(),
        tier: t.tier.as_str().to_owned(),
        created_at: t.created_at.rfc3339(),
        alert_webhook_url: t.alert_webhook_url.clone(),
        alert_channel_id: t.alert_channel_id.as_ref().map(ToString::to_string),
        api_rate_limit: t.api_limit(defaults).to_string(),
        api_rate_limit_overridden: t.api_rate_limit.is_some(),
        delivery_shards: t.delivery_shards(),
        listing_shards_granted: t.shard_grant_at(converger_core::time::now_ms()).map(|g| {
            ShardGrantView {
                shards: g.shards,
                until: converger_core::time::ms_to_rfc3339(g.until_ms),
            }
        }),
        email_senders: t.email_senders.clone(),
        ses_tenant: t.ses_tenant.clone(),
    }
}

/// A channel: where deliveries go, and how they are paced and retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ChannelView {
    pub id: String,
    pub tenant_id: String,
    /// `webhook`, `echo`, `whatsapp_meta`, `whatsapp_infobip`, `websocket`, `slack` or `email`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    /// The adapter's settings; secrets in it (tokens, keys, an Authorization header) are
    /// shown as `[REDACTED]`.
    pub config: Map<String, Value>,
    pub active: bool,
    /// The channel's retry policy overrides.
    pub retry_policy: Map<String, Value>,
    /// The effective breaker and window settings.
    pub circuit_breaker: Value,
    pub rate_limit: Option<String>,
    /// The effective auto-disable settings.
    pub auto_disable: Value,
    pub disabled_at: Option<String>,
    pub disabled_reason: Option<String>,
    /// The platform's alert channel of the tenant (changed by an operator only).
    pub managed: bool,
    /// Event types it subscribes to (`*`: every type).
    pub event_types: Vec<String>,
    /// Steps applied to each delivery's copy of the payload before it is sent:
    /// `{"type": "transform", "script"}` or `{"type": "halt", "if", "reason"}`.
    #[schema(value_type = Vec<Object>)]
    pub middleware: Vec<converger_core::middleware::Step>,
    /// Which activities it wants, when it has a filter (`docs/channels/filters.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Value>,
    /// Ordered lanes, when the channel has them: `{"by": "conversation", "on_dead_letter"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub ordering: Option<converger_core::lanes::Ordering>,
    pub created_at: String,
    pub updated_at: String,
}

pub fn channel(c: &Channel) -> ChannelView {
    ChannelView {
        id: c.id.to_string(),
        tenant_id: c.tenant_id.to_string(),
        kind: c.kind.as_str().to_owned(),
        name: c.name.clone(),
        config: match converger_core::web::redact(&Value::Object(c.config.clone())) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        active: c.active,
        retry_policy: c.retry_policy.to_map(),
        circuit_breaker: c.circuit_breaker.effective().to_json(),
        rate_limit: c.rate_limit.map(|r| r.to_string()),
        auto_disable: c.auto_disable.effective().to_json(),
        disabled_at: c.disabled_at.map(|t| t.rfc3339()),
        disabled_reason: c.disabled_reason.clone(),
        managed: c.managed,
        event_types: c.event_types.clone(),
        middleware: c.middleware.clone(),
        filter: c.filter.as_ref().map(|f| f.source().clone()),
        ordering: c.ordering,
        created_at: c.created_at.rfc3339(),
        updated_at: c.updated_at.rfc3339(),
    }
}

/// A channel just created: with its signing secret (also readable later through
/// `GET /api/v1/channels/{id}/secret`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedChannel {
    #[serde(flatten)]
    pub channel: ChannelView,
    pub signing_secret: String,
}

/// A created channel reads as the channel it is.
impl std::ops::Deref for CreatedChannel {
    type Target = ChannelView;
    fn deref(&self) -> &ChannelView {
        &self.channel
    }
}

/// A secret a rotation replaced, still signing beside the new one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RetiringSecretView {
    pub signing_secret: String,
    /// When it stops signing.
    pub signs_until: String,
}

/// What a live stream token is asked for with (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewStreamToken {
    /// The only topics (`conversation:<id>`, `channel_health`) a connection made with the
    /// token may follow, 1 to 20 of them; without it, any of the tenant's.
    #[serde(default)]
    pub topics: Option<Vec<String>>,
}

/// Where to send a large payload (`POST /api/v1/payloads`): `method` to `url` with
/// `headers`, before `expires_at`; then name `upload_id` as an activity's `payload_upload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UploadView {
    pub upload_id: String,
    pub url: String,
    pub method: String,
    pub headers: std::collections::BTreeMap<String, String>,
    /// RFC 3339; fifteen minutes after it was given.
    pub expires_at: String,
    /// The largest payload it takes.
    pub max_bytes: u64,
}

/// A token for the live stream (`docs/stream.md`): connect to the WebSocket API with
/// `?token=<token>` before `expires_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamTokenView {
    pub token: String,
    /// RFC 3339; five minutes after it was given.
    pub expires_at: String,
}

/// What a tenant's AWS account needs so that the platform can deliver into it
/// (`docs/channels/aws.md`): a role that trusts `account_id` with `external_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AwsIdentityView {
    /// The platform's AWS account: the principal the role's trust policy names.
    pub account_id: String,
    /// The tenant's external id: the trust policy's `sts:ExternalId` condition.
    pub external_id: String,
    /// The one action each AWS channel type needs on its target.
    pub send_actions: std::collections::BTreeMap<String, String>,
    /// A CloudFormation template (YAML) that creates such a role for one target.
    pub role_template: String,
}

/// One day of a tenant's usage, or the total of several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageDayView {
    /// `YYYY-MM-DD` (UTC); absent on the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Deliveries created (one per activity and channel).
    pub deliveries: i64,
    /// Requests made to receivers: first tries and retries.
    pub attempts: i64,
    pub dead_letters: i64,
    /// Of the deliveries, those their channel's filter did not want (never attempted).
    pub filtered: i64,
    /// The estimated AWS cost, in US dollars.
    pub estimated_cost_usd: f64,
}

/// A tenant's usage per day over `from..=to`, its total, and the estimate of what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    pub from: String,
    pub to: String,
    pub days: Vec<UsageDayView>,
    pub total: UsageDayView,
    /// The total's estimate by service (`dynamodb`, `sqs`, `eventbridge`, `api_gateway`,
    /// `lambda`, `logs`), in US dollars.
    pub estimated_cost_by_service_usd: std::collections::BTreeMap<String, f64>,
    /// The prices the estimate used, in US dollars per million units.
    pub prices_per_million_usd: std::collections::BTreeMap<String, f64>,
    /// What the estimate is and is not.
    pub note: String,
}

/// What every usage estimate says about itself.
pub const ESTIMATE_NOTE: &str = "An estimate at list prices (or the prices this deployment's operator set), from the resources a delivery, a retry and a dead letter take as measured; not a bill: free tiers, savings plans and the deployment's fixed monthly cost are not in it.";

fn usd(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

impl UsageView {
    pub fn of(
        u: &converger_pipeline::usage::TenantUsage,
        prices: converger_core::usage::Prices,
    ) -> Self {
        let day =
            |date: Option<String>, x: &converger_core::usage::Usage, usd_total: f64| UsageDayView {
                date,
                deliveries: x.deliveries,
                attempts: x.attempts,
                dead_letters: x.dead_letters,
                filtered: x.filtered,
                estimated_cost_usd: usd(usd_total),
            };
        let prices = match serde_json::to_value(prices) {
            Ok(serde_json::Value::Object(m)) => m
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_f64()?)))
                .collect(),
            _ => Default::default(),
        };
        Self {
            from: u.days.first().map(|d| d.date.clone()).unwrap_or_default(),
            to: u.days.last().map(|d| d.date.clone()).unwrap_or_default(),
            days: u
                .days
                .iter()
                .map(|d| day(Some(d.date.clone()), &d.usage, d.estimate.total_usd))
                .collect(),
            total: day(None, &u.total, u.estimate.total_usd),
            estimated_cost_by_service_usd: u
                .estimate
                .by_service_usd
                .iter()
                .map(|(k, v)| (k.clone(), usd(*v)))
                .collect(),
            prices_per_million_usd: prices,
            note: ESTIMATE_NOTE.to_owned(),
        }
    }
}

/// A channel's signing secrets: every request carries one `v1,` signature per secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SecretsView {
    /// The current secret (`whsec_` base64).
    pub signing_secret: String,
    /// Older secrets still signing during their grace.
    pub retiring: Vec<RetiringSecretView>,
}

pub fn secrets(c: &Channel) -> SecretsView {
    let now = converger_core::time::now_ms();
    SecretsView {
        signing_secret: c.signing_secret.clone(),
        retiring: converger_core::signing::still_signing(&c.retiring_secrets, now)
            .map(|r| RetiringSecretView {
                signing_secret: r.secret.clone(),
                signs_until: ms_to_rfc3339(r.until_ms),
            })
            .collect(),
    }
}

/// Where an activity went: one delivery per channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryRef {
    pub id: String,
    pub channel_id: String,
    /// `pending`, `sent`, `delivered`, `read` or `failed`.
    pub status: String,
}

impl From<&Delivery> for DeliveryRef {
    fn from(d: &Delivery) -> Self {
        Self {
            id: d.id.to_string(),
            channel_id: d.channel_id.to_string(),
            status: d.status.to_string(),
        }
    }
}

/// An activity as its producer sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActivityView {
    pub id: String,
    pub conversation_id: String,
    pub seq: u64,
    pub event_type: Option<String>,
    pub channel_ids: Vec<String>,
    /// The payload as sent (any JSON value); `null` in a list when the payload bucket keeps
    /// it, and in a read of one activity when it is over 1 MiB: `payload_url` reads it.
    pub payload: Value,
    /// The payload's size, when the payload bucket keeps it (over 16 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u64>,
    /// A URL that reads the payload for 15 minutes, when the payload bucket keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_url: Option<String>,
    pub created_at: String,
    /// Its W3C trace id: the producer's `traceparent`'s, or one derived from the activity's
    /// id. Every delivery's request carries it in its own `traceparent`.
    pub trace_id: String,
    /// Its deliveries (in a read of one activity, not in a list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<DeliveryRef>>,
}

pub fn activity(a: &Activity, deliveries: Option<&[Delivery]>) -> ActivityView {
    ActivityView {
        id: a.id.to_string(),
        conversation_id: a.conversation_id.clone(),
        seq: a.seq,
        event_type: a.event_type.clone(),
        channel_ids: a.channel_ids.iter().map(ToString::to_string).collect(),
        payload: a.payload.clone(),
        payload_bytes: None,
        payload_url: None,
        created_at: a.created_at.rfc3339(),
        trace_id: a.trace().trace_id.clone(),
        deliveries: deliveries.map(|ds| ds.iter().map(DeliveryRef::from).collect()),
    }
}

/// What an ingest answers (201 for a new activity, 200 for a producer's id seen before).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Ingested {
    pub activity_id: String,
    pub conversation_id: String,
    pub seq: u64,
    pub created_at: String,
    /// Its W3C trace id (the producer's `traceparent`'s, or one derived from its id).
    pub trace_id: String,
    pub deliveries: Vec<DeliveryRef>,
}

/// What a batch of activities answers: one result per item, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchResults {
    pub results: Vec<BatchResult>,
}

/// One item of a batch: taken (`status` 201, or 200 for a producer's id seen before, and
/// the activity) or refused (`status` as the single call would answer, and the error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BatchResult {
    Ingested { status: u16, activity: Ingested },
    Refused { status: u16, error: ItemError },
}

/// An item's refusal: a stable code (as `ErrorCode`) and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ItemError {
    pub code: String,
    pub message: String,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttemptView {
    pub attempt: u32,
    pub started_at: String,
    pub duration_ms: u64,
    pub status_code: Option<u16>,
    pub response_snippet: Option<String>,
    pub error: Option<String>,
    pub next_retry_at: Option<String>,
    /// `auto`, `manual` or `probe`.
    pub trigger: String,
    /// How it ended: `delivered`, `failed` (a retry follows at `next_retry_at`), `dead` (the
    /// delivery was dead-lettered) or `pending` (handed to a client, waiting for its
    /// acknowledgement). Absent on entries written before outcomes were logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

impl From<&AttemptEntry> for AttemptView {
    fn from(e: &AttemptEntry) -> Self {
        Self {
            attempt: e.attempt,
            started_at: e.started_at.rfc3339(),
            duration_ms: e.duration_ms,
            status_code: e.status_code,
            response_snippet: e.response_snippet.clone(),
            error: e.error.clone(),
            next_retry_at: e.next_retry_at.map(|t| t.rfc3339()),
            trigger: e.trigger.clone(),
            outcome: e.outcome.map(|o| o.as_str().to_owned()),
        }
    }
}

/// A delivery: one activity to one channel, and how its attempts went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    pub id: String,
    pub tenant_id: String,
    pub channel_id: String,
    pub activity_id: String,
    pub conversation_id: String,
    /// Its activity's event type (absent when the activity has none, and on deliveries
    /// created before event types were kept on them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// `pending`, `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    pub tier: String,
    /// Pending, waiting for a slot of the channel's window.
    pub waiting_for_slot: bool,
    /// Handed to a client that has not acknowledged it yet.
    pub awaiting_ack: bool,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When a waiting delivery is attempted next.
    pub next_attempt_at: Option<String>,
    pub sent_at: Option<String>,
    pub provider_message_id: Option<String>,
    pub response_status: Option<u16>,
    pub retry_count: u32,
    pub retried_by: Option<String>,
    pub retried_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// The recent attempts, newest first (in a read of one delivery, not in a list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<Vec<AttemptView>>,
    /// Its place in its ordered lane (a delivery of an ordered channel, read by id, while it
    /// is not sent): which delivery holds the lane, and whether a dead letter holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneView>,
}

impl DeliveryView {
    /// Its recent attempts, newest first: none in a list.
    pub fn log(&self) -> &[AttemptView] {
        self.attempt_log.as_deref().unwrap_or_default()
    }
}

/// A delivery's place in its channel's lane for its conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LaneView {
    /// `head` (it is the one attempted), `waiting` (behind `head_delivery_id`), or `out`
    /// (dead-lettered and no longer holding the lane).
    pub position: String,
    /// The delivery that holds the lane, if any.
    pub head_delivery_id: Option<String>,
    /// The head was dead-lettered and the lane waits for its replay or a release
    /// (`POST /api/v1/channels/{id}/lanes/release`).
    pub held: bool,
}

impl LaneView {
    pub fn of(d: &Delivery, p: &converger_pipeline::lanes::LanePosition) -> Self {
        let head = p.head.as_ref();
        let position = if head == Some(&d.id) {
            "head"
        } else if d.status == converger_core::DeliveryStatus::Failed {
            "out"
        } else {
            "waiting"
        };
        Self {
            position: position.into(),
            head_delivery_id: head.map(|h| h.to_string()),
            held: p.held,
        }
    }
}

fn delivery_view(d: &Delivery, with_log: bool) -> DeliveryView {
    // Reads ignore expired entries (their retention ran out).
    let now_s = converger_core::time::now_ms() / 1000;
    DeliveryView {
        id: d.id.to_string(),
        tenant_id: d.tenant_id.to_string(),
        channel_id: d.channel_id.to_string(),
        activity_id: d.activity_id.to_string(),
        conversation_id: d.conversation_id.clone(),
        event_type: d.event_type.clone(),
        status: d.status.to_string(),
        tier: d.tier.as_str().to_owned(),
        waiting_for_slot: d.in_backlog,
        awaiting_ack: d.handed_off,
        attempts: d.attempts,
        last_error: d.last_error.clone(),
        next_attempt_at: d
            .status
            .is_waiting()
            .then(|| ms_to_rfc3339(d.next_attempt_at)),
        sent_at: d.sent_at.map(|t| t.rfc3339()),
        provider_message_id: d.provider_message_id.clone(),
        response_status: d.response_status,
        retry_count: d.retry_count,
        retried_by: d.retried_by.clone(),
        retried_at: d.retried_at.map(|t| t.rfc3339()),
        created_at: d.created_at.rfc3339(),
        updated_at: d.updated_at.rfc3339(),
        attempt_log: with_log.then(|| {
            d.attempt_log
                .iter()
                .rev()
                .filter(|e| e.expires_at.is_none_or(|x| x > now_s))
                .map(AttemptView::from)
                .collect()
        }),
        lane: None,
    }
}

pub fn delivery(d: &Delivery) -> DeliveryView {
    delivery_view(d, true)
}

/// A delivery in a list: everything but the attempt log.
pub fn delivery_row(d: &Delivery) -> DeliveryView {
    delivery_view(d, false)
}

/// A replay job's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayJobView {
    pub id: String,
    pub channel_id: String,
    /// `running`, `done` or `failed`.
    pub status: String,
    pub retried: usize,
    pub has_more: bool,
    pub limit: usize,
    pub activity_id: Option<String>,
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub fn replay_job(j: &ReplayJob) -> ReplayJobView {
    ReplayJobView {
        id: j.id.clone(),
        channel_id: j.channel_id.to_string(),
        status: j.status.clone(),
        retried: j.retried,
        has_more: j.has_more,
        limit: j.limit,
        activity_id: j.activity_id.as_ref().map(ToString::to_string),
        error: j.error.clone(),
        created_at: j.created_at.rfc3339(),
        updated_at: j.updated_at.rfc3339(),
    }
}

/// A page of a list, and the cursor of the next page (`null` on the last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Page<T: ToSchema> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

/// An event type of the tenant's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventTypeView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema (draft 2020-12) its payloads must fit, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    pub deprecated: bool,
    pub created_at: String,
    pub updated_at: String,
}

impl EventTypeView {
    pub fn of(t: &converger_ports::TenantEventType) -> Self {
        Self {
            name: t.name.clone(),
            description: t.description.clone(),
            schema: t.schema.clone(),
            deprecated: t.deprecated,
            created_at: t.created_at.rfc3339(),
            updated_at: t.updated_at.rfc3339(),
        }
    }
}

/// Who did something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActorView {
    /// `admin`, `tenant_api`, `tenant_user` or `system`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditView {
    pub id: String,
    pub tenant_id: String,
    pub actor: ActorView,
    /// What was done (`retry`, `pause_deliveries`, `rotate_signing_secret`, ...).
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    #[schema(value_type = Object)]
    pub changes: Value,
    pub at: String,
}

impl From<&AuditEntry> for AuditView {
    fn from(e: &AuditEntry) -> Self {
        Self {
            id: e.id.clone(),
            tenant_id: e.tenant_id.to_string(),
            actor: ActorView {
                kind: e.actor.kind.as_str().to_owned(),
                id: e.actor.id.clone(),
            },
            action: e.action.clone(),
            resource_type: e.resource_type.clone(),
            resource_id: e.resource_id.clone(),
            changes: e.changes.clone(),
            at: e.at.rfc3339(),
        }
    }
}

/// What a bulk replay did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BulkRetried {
    pub retried: usize,
    /// More dead letters match: call again.
    pub has_more: bool,
    pub cost: BulkCost,
}

/// The requests a bulk replay made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BulkCost {
    pub queries: usize,
    pub transactions: usize,
    pub send_batches: usize,
}
