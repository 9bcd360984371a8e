//! Activities and the queue messages that carry them to an attempt.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub id: ActivityId,
    pub tenant_id: TenantId,
    pub conversation_id: String,
    pub seq: u64,
    /// The event type it was sent as (`message.created`); routes it to the tenant's
    /// subscribed channels when it names no channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The payload; `null` in a row whose payload is kept in the payload bucket
    /// ([`Activity::payload_ref`]) until it is read from there.
    pub payload: Value,
    /// Where the payload is kept when its row does not hold it (over
    /// `core::payload::KEPT_IN_ROW_BYTES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_ref: Option<crate::PayloadRef>,
    pub channel_ids: Vec<ChannelId>,
    pub created_at: Timestamp,
    /// The producer's W3C trace (`core::trace`), when it sent one; see [`Activity::trace`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<converger_core::trace::TraceContext>,
    /// When the row expires (seconds since the epoch; the table's TTL attribute). Reads treat
    /// an expired row as absent: DynamoDB deletes it up to two days later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

pub use converger_core::Scope;
pub use converger_core::time::expired;

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
    /// Sent beside the write of its delivery's row rather than after it: until this time (ms)
    /// a message that finds no row waits for it instead of being dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_by: Option<i64>,
    /// The delivery's tenant: the message's group on the tier's queue (an SQS fair queue), so
    /// that one tenant's backlog or slow endpoints cannot take its neighbours' share of the
    /// tier (absent: grouped by channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<TenantId>,
    /// The place (µs) this delivery reserved in its channel's rate schedule before its
    /// message was handed back to wait for it: the attempt goes then without another
    /// reservation (`core::flow::RateWait`). Only a snoozed message carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_at: Option<i64>,
    /// The watch copy of a first try's message, sent beside it and delayed
    /// `core::policy::WATCH_DELAY_S`: it attempts the delivery only while its first try is
    /// still in flight and unclaimed (the attempt that took it died).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watch: bool,
    /// How long a batch send holds it back (SQS `DelaySeconds`): a watch copy's delay. Not
    /// part of the message's body.
    #[serde(skip)]
    pub send_delay_s: u32,
}

/// Largest serialized activity carried inside a queue message.
pub const INLINE_ACTIVITY_MAX_BYTES: usize = 64 * 1024;

impl Activity {
    /// Its trace: the producer's, or one derived from its id (stored nowhere). Every attempt
    /// is a span of it.
    pub fn trace(&self) -> std::borrow::Cow<'_, converger_core::trace::TraceContext> {
        match &self.trace {
            Some(t) => std::borrow::Cow::Borrowed(t),
            None => std::borrow::Cow::Owned(converger_core::trace::TraceContext::derived(
                self.id.as_str(),
            )),
        }
    }

    /// Whether its payload is kept in the payload bucket and not read yet.
    pub fn payload_unread(&self) -> bool {
        self.payload_ref.is_some() && self.payload.is_null()
    }

    /// The activity as its row keeps it: without the payload when the payload bucket has it.
    pub fn row(&self) -> std::borrow::Cow<'_, Activity> {
        if self.payload_ref.is_none() || self.payload.is_null() {
            return std::borrow::Cow::Borrowed(self);
        }
        std::borrow::Cow::Owned(Activity {
            id: self.id.clone(),
            tenant_id: self.tenant_id.clone(),
            conversation_id: self.conversation_id.clone(),
            seq: self.seq,
            event_type: self.event_type.clone(),
            payload: Value::Null,
            payload_ref: self.payload_ref.clone(),
            channel_ids: self.channel_ids.clone(),
            created_at: self.created_at,
            trace: self.trace.clone(),
            expires_at: self.expires_at,
        })
    }

    /// Its delivery to `channel` (whether or not it targets it): one id per activity and
    /// channel, so the same activity never makes two deliveries to one channel.
    pub fn delivery_id(&self, channel: &ChannelId) -> DeliveryId {
        DeliveryId::for_pair(&self.id, channel)
    }

    /// Its deliveries, one per channel it targets, in the order of `channel_ids`.
    pub fn delivery_ids(&self) -> impl Iterator<Item = DeliveryId> + '_ {
        self.channel_ids.iter().map(|c| self.delivery_id(c))
    }

    /// The activity if it is small enough to ride in a queue message. Serializes it once: call
    /// it once per activity, not once per delivery.
    pub fn if_inline(&self) -> Option<&Activity> {
        if self
            .payload_ref
            .as_ref()
            .is_some_and(|r| r.bytes > INLINE_ACTIVITY_MAX_BYTES as u64)
        {
            return None;
        }
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
            row_by: None,
            tenant_id: None,
            rate_at: None,
            watch: false,
            send_delay_s: 0,
        }
    }

    /// It and, when `watched`, its watch copy `watch_s` after it (ADR 0076, ADR 0094): what
    /// is sent for a delivery its messages carry, in one batch.
    pub fn with_watch(self, watched: bool, watch_s: u32) -> Vec<Self> {
        let watch = watched.then(|| self.watch_copy(self.send_delay_s.saturating_add(watch_s)));
        std::iter::once(self).chain(watch).collect()
    }

    /// Its watch copy, sent `delay_s` later: the same delivery, without the activity (read if
    /// it is attempted).
    pub fn watch_copy(&self, delay_s: u32) -> Self {
        Self {
            delivery_id: self.delivery_id.clone(),
            tier: self.tier,
            channel_id: self.channel_id.clone(),
            bounces: 0,
            activity: None,
            row_by: None,
            tenant_id: self.tenant_id.clone(),
            rate_at: None,
            watch: true,
            send_delay_s: delay_s,
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
            row_by: self.row_by,
            tenant_id: self.tenant_id.clone(),
            // A place in the rate schedule is used once, by the message it was reserved for.
            rate_at: None,
            watch: self.watch,
            send_delay_s: self.send_delay_s,
        }
    }

    /// The same message, sent while its row is being written (written by `by_ms`).
    pub fn beside_row(mut self, by_ms: i64) -> Self {
        self.row_by = Some(by_ms);
        self
    }

    /// The same message, naming the delivery's channel.
    pub fn on(mut self, channel: &ChannelId) -> Self {
        self.channel_id = Some(channel.clone());
        self
    }

    /// The same message, naming the delivery's channel and tenant.
    pub fn of(self, d: &Delivery) -> Self {
        let mut m = self.on(&d.channel_id);
        m.tenant_id = Some(d.tenant_id.clone());
        m
    }

    /// Its group on a fair queue: the tenant, else the channel.
    pub fn group(&self) -> Option<&str> {
        self.tenant_id
            .as_ref()
            .map(TenantId::as_str)
            .or(self.channel_id.as_ref().map(ChannelId::as_str))
    }
}

/// Result of creating an activity with its deliveries.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    New,
    /// The activity id existed already: nothing was written.
    Duplicate,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
