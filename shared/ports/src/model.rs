//! Items as they are stored. Index attributes (`ts_pk`, `cs_pk`, `upd_sk`) are derived from
//! the fields they index and written by the store only.

use converger_core::query::{Actor, Cursor};
use converger_core::{
    ActivityId, ChannelId, ChannelType, DeliveryId, DeliveryStatus, TenantId, Tier,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: TenantId,
    pub name: String,
    pub tier: Tier,
    pub created_at: String,
    /// Where the tenant's channel alerts go (set through the admin API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_webhook_url: Option<String>,
    /// The managed webhook channel that delivers those alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_channel_id: Option<ChannelId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    pub id: ChannelId,
    pub tenant_id: TenantId,
    #[serde(rename = "type")]
    pub kind: ChannelType,
    pub name: String,
    /// Adapter configuration (for a webhook: url, method, headers, receive_timeout).
    pub config: Map<String, Value>,
    pub active: bool,
    /// The channel's retry policy override (validated on write).
    #[serde(default)]
    pub retry_policy: Map<String, Value>,
    /// Standard Webhooks signing secret (`whsec_...`).
    pub signing_secret: String,
    /// Breaker and window overrides (`failure_threshold`, `cooldown_ms`, `park_seconds`,
    /// `max_in_flight`, `replay_dead_letters_on_close`, `replay_window_ms`).
    #[serde(default)]
    pub circuit_breaker: Map<String, Value>,
    /// Outbound rate limit (`"80/s"`, `"/m"`, `"/h"`); the adapter's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<String>,
    /// Auto-disable overrides (`failed_attempts`, `success_window_ms`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub auto_disable: Map<String, Value>,
    /// When and why the platform disabled the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Managed by the platform (a tenant's alert channel): its own events are not alerted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
    pub created_at: String,
    pub updated_at: String,
}

impl Channel {
    /// A new active channel with a fresh id and signing secret and default settings.
    pub fn new(
        tenant_id: TenantId,
        kind: ChannelType,
        name: &str,
        config: Map<String, Value>,
        now: &str,
    ) -> Self {
        Self {
            id: ChannelId::generate(),
            tenant_id,
            kind,
            name: name.to_owned(),
            config,
            active: true,
            retry_policy: Map::new(),
            signing_secret: converger_core::secret::new_signing_secret(),
            circuit_breaker: Map::new(),
            rate_limit: None,
            auto_disable: Map::new(),
            disabled_at: None,
            disabled_reason: None,
            managed: false,
            created_at: now.to_owned(),
            updated_at: now.to_owned(),
        }
    }
}

/// The fields a PATCH may change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelPatch {
    pub name: Option<String>,
    pub config: Option<Map<String, Value>>,
    pub active: Option<bool>,
    pub retry_policy: Option<Map<String, Value>>,
    pub circuit_breaker: Option<Map<String, Value>>,
    /// `Some(None)` removes the channel's own limit.
    pub rate_limit: Option<Option<String>>,
    pub auto_disable: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub id: ActivityId,
    pub tenant_id: TenantId,
    pub conversation_id: String,
    pub seq: u64,
    pub payload: Value,
    pub channel_ids: Vec<ChannelId>,
    pub created_at: String,
    /// When the row expires (seconds since the epoch; the table's TTL attribute). Reads treat
    /// an expired row as absent: DynamoDB deletes it up to two days later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

pub use converger_core::Scope;
pub use converger_core::time::expired;

/// One attempt, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEntry {
    pub attempt: u32,
    pub started_at: String,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_snippet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<String>,
    /// `auto`, `manual` or `probe`.
    pub trigger: String,
    /// When the entry stops being shown (seconds since the epoch; also the spilled item's TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// How many attempts the delivery item keeps; older ones are spilled to the attempts table.
pub const RECENT_ATTEMPTS: usize = 20;

/// The attempt log after one more attempt: what stays in the delivery item and what moves out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogUpdate {
    /// The delivery item's new log, newest last.
    pub recent: Vec<AttemptEntry>,
    /// Entries to move to the attempts table.
    pub spill: Vec<AttemptEntry>,
}

impl LogUpdate {
    /// `current` with `entry` appended, keeping at most [`RECENT_ATTEMPTS`] in the item.
    pub fn append(current: &[AttemptEntry], entry: AttemptEntry) -> Self {
        let mut recent: Vec<AttemptEntry> = current.to_vec();
        recent.push(entry);
        let excess = recent.len().saturating_sub(RECENT_ATTEMPTS);
        let spill = recent.drain(..excess).collect();
        Self { recent, spill }
    }
}

/// A pending delivery found overdue by the sweeper.
#[derive(Debug, Clone, PartialEq)]
pub struct Overdue {
    pub id: DeliveryId,
    pub tier: Tier,
    /// Its channel (rows indexed before the index carried it have none).
    pub channel_id: Option<ChannelId>,
    pub lease_until: Option<i64>,
}

/// The two halves of the sweeper's due index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuePart {
    /// Rows waiting for their message, by due time (the sweeper allows a grace period).
    Waiting,
    /// Rows an attempt claimed, by the end of its lease: one found past it is a crashed
    /// attempt's, and the sweeper runs it again at once.
    Leased,
}

/// One page of a query, with the key to continue from.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque continuation; `None` when the query is exhausted.
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: DeliveryId,
    pub tenant_id: TenantId,
    pub channel_id: ChannelId,
    pub activity_id: ActivityId,
    pub conversation_id: String,
    pub tier: Tier,
    pub status: DeliveryStatus,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the next attempt may run, in ms since the epoch.
    pub next_attempt_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<String>,
    /// The lease token of the attempt whose outcome (sent, retry, dead letter) was recorded
    /// last: a recording write that the SDK retried after it had landed finds its own token
    /// here and is recognised as done, not as a lost lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<u16>,
    #[serde(default)]
    pub retry_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// The most recent attempts, newest last.
    #[serde(default)]
    pub attempt_log: Vec<AttemptEntry>,
    /// Waiting in its channel's backlog for a window slot (not on a queue).
    #[serde(default, skip_serializing_if = "is_false")]
    pub in_backlog: bool,
    /// Holds a slot of its channel's window.
    #[serde(default, skip_serializing_if = "is_false")]
    pub slot: bool,
    /// Handed off to a websocket client, waiting for its acknowledgement (pending, never
    /// retried).
    #[serde(default, skip_serializing_if = "is_false")]
    pub handed_off: bool,
    /// When the row expires (seconds since the epoch; the table's TTL attribute): its
    /// activity's expiry. Reads treat an expired row as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Delivery {
    /// A new delivery of `activity` to `channel`, due now.
    pub fn new(activity: &Activity, channel: &Channel, tier: Tier, now_ms: i64, now: &str) -> Self {
        Self {
            id: DeliveryId::for_pair(&activity.id, &channel.id),
            tenant_id: activity.tenant_id.clone(),
            channel_id: channel.id.clone(),
            activity_id: activity.id.clone(),
            conversation_id: activity.conversation_id.clone(),
            tier,
            status: DeliveryStatus::Pending,
            attempts: 0,
            last_error: None,
            next_attempt_at: now_ms,
            lease_until: None,
            lease_token: None,
            settled_by: None,
            sent_at: None,
            provider_message_id: None,
            response_status: None,
            retry_count: 0,
            retried_by: None,
            retried_at: None,
            created_at: now.to_owned(),
            updated_at: now.to_owned(),
            attempt_log: Vec::new(),
            in_backlog: false,
            slot: false,
            handed_off: false,
            expires_at: activity.expires_at,
        }
    }
}

impl Delivery {
    /// The key lists are ordered by: `<updated_at>#<id>` (the indexes' `upd_sk`).
    pub fn sort_key(&self) -> String {
        format!("{}#{}", self.updated_at, self.id)
    }

    /// The cursor that continues a list after this row.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            sort_key: self.sort_key(),
            id: self.id.to_string(),
        }
    }

    /// The row as a replay leaves it: pending and due now, attempts reset so the retry policy
    /// starts over, `retry_count` + 1, `retried_by`/`retried_at` set; `last_error` stays until
    /// the next attempt overwrites it.
    pub fn replayed(&self, actor: &Actor, now_ms: i64, now: &str) -> Delivery {
        let mut row = self.clone();
        row.status = DeliveryStatus::Pending;
        row.attempts = 0;
        row.retry_count += 1;
        row.retried_by = Some(actor.to_string());
        row.retried_at = Some(now.to_owned());
        row.next_attempt_at = now_ms;
        row.updated_at = now.to_owned();
        row.lease_token = None;
        row.lease_until = None;
        row.in_backlog = false;
        row.slot = false;
        row.handed_off = false;
        row
    }
}

/// Shards of the due index a pending delivery is spread over.
pub const DUE_SHARDS: u32 = 16;

/// The due index's shard of a delivery: a stable hash (FNV-1a) of its id.
pub fn due_shard(id: &DeliveryId) -> u32 {
    let h = id.as_str().bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    h % DUE_SHARDS
}

/// The due index's sort key: milliseconds, zero-padded to 15 digits so it sorts as a number.
pub fn due_key(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

/// Most deliveries one replay transaction moves (two items each, the row and its audit entry;
/// DynamoDB takes 100 items per transaction).
pub const REPLAY_BATCH: usize = 50;

/// The arguments every backend's `replay_many` accepts: one audit entry per row, at most
/// [`REPLAY_BATCH`] rows.
pub fn check_replay_batch(
    rows: &[Delivery],
    audits: &[AuditEntry],
) -> Result<(), crate::error::StoreError> {
    if rows.len() != audits.len() || rows.len() > REPLAY_BATCH {
        return Err(crate::error::StoreError::Corrupt(format!(
            "replay_many takes up to {REPLAY_BATCH} rows, one audit entry each"
        )));
    }
    Ok(())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What a queue message says: "look at delivery X now". The activity rides along when it is
/// small, which saves the attempt a read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryMessage {
    pub delivery_id: DeliveryId,
    pub tier: Tier,
    /// The delivery's channel, so that the attempt reads it (or finds it cached) beside its
    /// claim rather than after it (absent in older messages: read after the claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<ChannelId>,
    /// How many times this message came back early because storage was unreachable.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bounces: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<Activity>,
}

/// Largest serialized activity carried inside a queue message.
pub const INLINE_ACTIVITY_MAX_BYTES: usize = 64 * 1024;

impl Activity {
    /// The activity if it is small enough to ride in a queue message. Serializes it once: call
    /// it once per activity, not once per delivery.
    pub fn if_inline(&self) -> Option<&Activity> {
        serde_json::to_vec(self)
            .is_ok_and(|v| v.len() <= INLINE_ACTIVITY_MAX_BYTES)
            .then_some(self)
    }
}

impl DeliveryMessage {
    /// A message for `delivery_id`, carrying `activity` (pass one that
    /// [`Activity::if_inline`] allowed, or `None`).
    pub fn new(delivery_id: DeliveryId, tier: Tier, activity: Option<&Activity>) -> Self {
        Self {
            delivery_id,
            tier,
            channel_id: None,
            bounces: 0,
            activity: activity.cloned(),
        }
    }

    /// The message without the activity it may carry.
    pub fn clone_without_activity(&self) -> Self {
        Self {
            delivery_id: self.delivery_id.clone(),
            tier: self.tier,
            channel_id: self.channel_id.clone(),
            bounces: self.bounces,
            activity: None,
        }
    }

    /// The same message, naming the delivery's channel.
    pub fn on(mut self, channel: &ChannelId) -> Self {
        self.channel_id = Some(channel.clone());
        self
    }
}

/// The outcome recorded by a successful attempt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SentInfo {
    pub provider_message_id: Option<String>,
    pub response_status: Option<u16>,
    /// Handed off to a client that has not confirmed it (websocket): the delivery stays
    /// `pending` with `handed_off`, out of the due index, never retried, until acknowledged.
    pub handed_off: bool,
}

/// Result of trying to claim a delivery for an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The lease is ours; the row as it now is.
    Claimed(Delivery),
    /// Pending but not due yet: the message came early (a hop of a long delay).
    NotDue(Delivery),
    /// Another attempt holds a live lease.
    Busy,
    /// Nothing to do: already accepted, dead-lettered or parked.
    Settled(Delivery),
    /// No such delivery.
    Missing,
}

impl Claim {
    /// Why `row` cannot be claimed at `now_ms`, or `None` when it can: the claim's condition,
    /// which both backends apply (DynamoDB as the update's condition, then this on the old
    /// row it returns; the in-process backend directly).
    pub fn refused(row: Option<&Delivery>, now_ms: i64) -> Option<Claim> {
        match row {
            None => Some(Claim::Missing),
            // Past its retention: gone, whatever the table has not deleted yet.
            Some(d) if expired(d.expires_at, now_ms) => Some(Claim::Missing),
            Some(d) if d.status != DeliveryStatus::Pending || d.handed_off => {
                Some(Claim::Settled(d.clone()))
            }
            Some(d) if d.next_attempt_at > now_ms => Some(Claim::NotDue(d.clone())),
            Some(d) if d.lease_until.is_some_and(|u| u >= now_ms) => Some(Claim::Busy),
            Some(_) => None,
        }
    }
}

/// The sparse index a delivery row belongs to, by its fields: the rule both backends follow
/// (DynamoDB through the attributes it writes, the in-process backend through its sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SparseIndex {
    /// Pending, waiting for a window slot: the channel's backlog, oldest due first.
    Backlog { due_ms: i64 },
    /// Pending with a message on its way: the sweeper's due index, by shard.
    Due { shard: u32, due_ms: i64 },
    /// Pending and claimed by an attempt: the due index's leased part, by the lease's end.
    Leased { shard: u32, until_ms: i64 },
    /// Parked (`paused`): the channel's parked rows (on DynamoDB, the channel-status index's
    /// `<channel>#paused` partition).
    Parked,
    /// Settled: in no sparse index.
    None,
}

impl Delivery {
    pub fn sparse_index(&self) -> SparseIndex {
        match self.status {
            DeliveryStatus::Pending if self.in_backlog => SparseIndex::Backlog {
                due_ms: self.next_attempt_at,
            },
            DeliveryStatus::Pending if self.handed_off => SparseIndex::None,
            DeliveryStatus::Pending => match self.lease_until {
                Some(until_ms) => SparseIndex::Leased {
                    shard: due_shard(&self.id),
                    until_ms,
                },
                None => SparseIndex::Due {
                    shard: due_shard(&self.id),
                    due_ms: self.next_attempt_at,
                },
            },
            DeliveryStatus::Paused => SparseIndex::Parked,
            _ => SparseIndex::None,
        }
    }
}

/// Result of creating an activity with its deliveries.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    New,
    /// The activity id existed already: nothing was written.
    Duplicate,
}

/// One audited action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: String,
    pub tenant_id: TenantId,
    pub actor: Actor,
    /// e.g. `retry`.
    pub action: String,
    /// e.g. `delivery`.
    pub resource_type: String,
    pub resource_id: String,
    pub changes: Value,
    pub at: String,
}

impl AuditEntry {
    pub fn new(
        tenant_id: TenantId,
        actor: Actor,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        changes: Value,
        at: &str,
    ) -> Self {
        Self {
            id: format!("aud_{}", uuid::Uuid::new_v4().simple()),
            tenant_id,
            actor,
            action: action.into(),
            resource_type: resource_type.into(),
            resource_id: resource_id.into(),
            changes,
            at: at.into(),
        }
    }
}

/// A filtered, keyset-paginated list of one tenant's deliveries. The store picks the index.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryQuery {
    pub tenant: TenantId,
    pub status: Option<DeliveryStatus>,
    pub channel: Option<ChannelId>,
    /// Inclusive bounds on `<updated_at>#<id>`.
    pub from_key: Option<String>,
    pub to_key: Option<String>,
    /// A part of `last_error`.
    pub error_contains: Option<String>,
    /// Only this activity's deliveries.
    pub activity: Option<ActivityId>,
    /// Most recently changed first.
    pub newest_first: bool,
    pub limit: usize,
    pub after: Option<Cursor>,
}

impl DeliveryQuery {
    /// Whether `d` passes every filter of the query, the cursor included.
    pub fn matches(&self, d: &Delivery) -> bool {
        let key = d.sort_key();
        d.tenant_id == self.tenant
            && self.status.is_none_or(|st| d.status == st)
            && self.channel.as_ref().is_none_or(|c| &d.channel_id == c)
            && self.activity.as_ref().is_none_or(|a| &d.activity_id == a)
            && self.error_contains.as_ref().is_none_or(|t| {
                d.last_error
                    .as_deref()
                    .is_some_and(|e| e.contains(t.as_str()))
            })
            && self.from_key.as_ref().is_none_or(|lo| key >= *lo)
            && self.to_key.as_ref().is_none_or(|hi| key <= *hi)
            && self.after.as_ref().is_none_or(|c| {
                if self.newest_first {
                    key < c.sort_key
                } else {
                    key > c.sort_key
                }
            })
    }

    /// One page of `rows` read by key rather than through an index: filtered, ordered,
    /// limited, with the cursor of the next page when more remain.
    pub fn page<'a>(&self, rows: impl IntoIterator<Item = &'a Delivery>) -> Listed<Delivery> {
        let mut rows: Vec<(String, &Delivery)> = rows
            .into_iter()
            .filter(|d| self.matches(d))
            .map(|d| (d.sort_key(), d))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        if self.newest_first {
            rows.reverse();
        }
        let limit = self.limit.clamp(1, 1000);
        let more = rows.len() > limit;
        rows.truncate(limit);
        let items: Vec<Delivery> = rows.into_iter().map(|(_, d)| d.clone()).collect();
        let next = if more {
            items.last().map(Delivery::cursor)
        } else {
            None
        };
        Listed { items, next }
    }
}

/// A page of a list, with the cursor of the next page.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub next: Option<Cursor>,
}

/// A bulk replay that runs as a job, one chunk per `replay` queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayJob {
    /// `rpl_...`
    pub id: String,
    pub tenant_id: TenantId,
    pub channel_id: ChannelId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_key: Option<String>,
    /// Upper bound on `upd_sk`: never later than the job's start.
    pub to_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_id: Option<ActivityId>,
    pub limit: usize,
    pub actor: Actor,
    /// `running`, `done` or `failed`.
    pub status: String,
    pub retried: usize,
    pub has_more: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bumped by every progress write (optimistic concurrency).
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    /// When the job record is deleted (seconds since the epoch).
    pub expires_at: i64,
}

/// What a `replay` queue message says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayMessage {
    pub job_id: String,
}

/// What a `probe` queue message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowJobKind {
    /// Probe the channel if its breaker is open and cooled down.
    Probe,
    /// Release the channel's parked deliveries if its breaker is closed.
    Release,
    /// Replay the channel's recent dead letters (a probe closed its breaker and the channel
    /// asks for it).
    ReplayDeadLetters,
}

/// A `probe` queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowJob {
    pub channel_id: ChannelId,
    pub kind: FlowJobKind,
}

/// When a failed attempt's delivery is due again, and whether it keeps its window slot
/// meanwhile (a short backoff does; a long one gives it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAt {
    pub at_ms: i64,
    pub keep_slot: bool,
}

impl RetryAt {
    /// Due at `at_ms`, without a slot.
    pub fn at(at_ms: i64) -> Self {
        Self {
            at_ms,
            keep_slot: false,
        }
    }
}

/// One health check of a channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    pub channel_id: ChannelId,
    pub tenant_id: TenantId,
    pub status: converger_core::health::HealthStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_status: Option<converger_core::health::HealthStatus>,
    pub failure_rate: f64,
    pub total_deliveries: u64,
    pub failed_deliveries: u64,
    pub checked_at: String,
    /// When the row stops being shown and is deleted (seconds since the epoch).
    pub expires_at: i64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use converger_core::{ActivityId, ChannelType};

    fn delivery(due_ms: i64) -> Delivery {
        let tenant = TenantId::generate();
        let channel = Channel::new(tenant.clone(), ChannelType::Webhook, "c", Map::new(), "t");
        let activity = Activity {
            id: ActivityId::generate(),
            tenant_id: tenant,
            conversation_id: "c".into(),
            seq: 1,
            payload: Value::Null,
            channel_ids: vec![channel.id.clone()],
            created_at: "t".into(),
            expires_at: None,
        };
        Delivery::new(&activity, &channel, Tier::Default, due_ms, "t")
    }

    #[test]
    fn a_claim_is_refused_for_each_reason_in_order() {
        let now = 1_000_000;
        assert_eq!(Claim::refused(None, now), Some(Claim::Missing));
        let mut d = delivery(now);
        assert_eq!(Claim::refused(Some(&d), now), None);
        d.lease_until = Some(now - 1);
        assert_eq!(
            Claim::refused(Some(&d), now),
            None,
            "an ended lease is free"
        );
        d.lease_until = Some(now);
        assert_eq!(Claim::refused(Some(&d), now), Some(Claim::Busy));
        d.next_attempt_at = now + 1;
        assert!(matches!(
            Claim::refused(Some(&d), now),
            Some(Claim::NotDue(_))
        ));
        d.handed_off = true;
        assert!(matches!(
            Claim::refused(Some(&d), now),
            Some(Claim::Settled(_))
        ));
        d.handed_off = false;
        d.status = DeliveryStatus::Failed;
        assert!(matches!(
            Claim::refused(Some(&d), now),
            Some(Claim::Settled(_))
        ));
        d.expires_at = Some(now / 1000);
        assert_eq!(Claim::refused(Some(&d), now), Some(Claim::Missing));
    }

    #[test]
    fn each_row_is_in_the_sparse_index_its_fields_call_for() {
        let mut d = delivery(42);
        assert_eq!(
            d.sparse_index(),
            SparseIndex::Due {
                shard: due_shard(&d.id),
                due_ms: 42
            }
        );
        d.lease_until = Some(99);
        assert_eq!(
            d.sparse_index(),
            SparseIndex::Leased {
                shard: due_shard(&d.id),
                until_ms: 99
            },
            "a claimed row waits in the leased part until its lease ends"
        );
        d.handed_off = true;
        assert_eq!(d.sparse_index(), SparseIndex::None);
        d.handed_off = false;
        d.lease_until = None;
        d.in_backlog = true;
        assert_eq!(d.sparse_index(), SparseIndex::Backlog { due_ms: 42 });
        d.status = DeliveryStatus::Paused;
        assert_eq!(d.sparse_index(), SparseIndex::Parked);
        d.status = DeliveryStatus::Sent;
        assert_eq!(d.sparse_index(), SparseIndex::None);
    }
}
