//! Delivery rows: the item, its attempt log, the claim and the sparse indexes it belongs to.

use super::*;

/// How one attempt ended, as the attempt log shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The endpoint took it.
    Delivered,
    /// It failed, and a retry follows at `next_retry_at`.
    Failed,
    /// It failed and the delivery was dead-lettered (attempts used up, a permanent error, or
    /// no request could be made).
    Dead,
    /// Handed to a client, waiting for its acknowledgement.
    Pending,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Dead => "dead",
            Self::Pending => "pending",
        }
    }
}

/// One attempt, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEntry {
    pub attempt: u32,
    pub started_at: Timestamp,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_snippet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<Timestamp>,
    /// `auto`, `manual` or `probe`.
    pub trigger: String,
    /// How it ended (entries written before outcomes were logged have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
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

/// What the sweeper asks of the due index. Every pending delivery that is not in its
/// channel's backlog or handed off is in it, by due time, and stays put while an attempt
/// holds it: a claim, a lease renewal or a release writes nothing to the index (its lease is
/// not projected there), so a first try costs the index one entry added and one removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuePart {
    /// Rows due before the bound, leased or not (the sweeper allows a grace period and skips
    /// live leases).
    Waiting,
    /// Of the rows due before the bound, those an attempt claimed whose lease ended before it:
    /// a crashed attempt's, which the sweeper runs again at once.
    Leased,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: DeliveryId,
    pub tenant_id: TenantId,
    pub channel_id: ChannelId,
    pub activity_id: ActivityId,
    pub conversation_id: String,
    /// Its activity's event type, if it has one (a filter of the listings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
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
    pub sent_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<u16>,
    #[serde(default)]
    pub retry_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The most recent attempts, newest last.
    #[serde(default)]
    pub attempt_log: Vec<AttemptEntry>,
    /// Waiting in its channel's backlog for a window slot (not on a queue).
    #[serde(default, skip_serializing_if = "is_false")]
    pub in_backlog: bool,
    /// Holds a slot of its channel's window.
    #[serde(default, skip_serializing_if = "is_false")]
    pub slot: bool,
    /// The slot item its slot is in (`core::flow::slot_items`; 0, the flow item, for a
    /// window of one item).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slot_item: u32,
    /// Handed off to a websocket client, waiting for its acknowledgement (pending, never
    /// retried).
    #[serde(default, skip_serializing_if = "is_false")]
    pub handed_off: bool,
    /// When the row expires (seconds since the epoch; the table's TTL attribute): its
    /// activity's expiry. Reads treat an expired row as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Its listing shard (a hash of its id modulo its tenant's listing shards when it was
    /// created): the partition of the tenant's listing index it is written to, for good.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shard: u32,
    /// When `shard` is one granted to its tenant for a while: until when, and the shard of
    /// its own it is listed in when it changes after that (see [`Delivery::listing_shard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_lease: Option<ShardLease>,
    /// Not in its tenant's listing yet: a delivery sent to its queue when it was created
    /// joins the listing when its first attempt ends (or at any other transition), so a first
    /// try that succeeds writes one listing entry, not three (`docs/scaling.md`). Read by id,
    /// by its activity and by the sweeper's due index meanwhile.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unlisted: bool,
    /// A retry that rides its messages: its message and a watch copy after it were sent for
    /// its due time in one hop, so it is in no due index while it waits and is attempted
    /// ([`RetryAt::watched`], ADR 0094). Cleared by any transition but such a retry.
    #[serde(default, skip_serializing_if = "is_false")]
    pub watched: bool,
    /// In its channel's lane for its conversation (an ordered channel), at its activity's
    /// `seq`: attempted only as its lane's head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_seq: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Delivery {
    /// A new delivery of `activity` to `channel`, due now; in its lane when the channel is
    /// ordered (ingest then makes it due at its first look at the lane, and the lane makes it
    /// due when it becomes the head).
    pub fn new(activity: &Activity, channel: &Channel, tier: Tier, now: Timestamp) -> Self {
        let lane_seq = channel.ordering.map(|_| activity.seq);
        let next_attempt_at = now.ms();
        Self {
            id: activity.delivery_id(&channel.id),
            tenant_id: activity.tenant_id.clone(),
            channel_id: channel.id.clone(),
            activity_id: activity.id.clone(),
            conversation_id: activity.conversation_id.clone(),
            event_type: activity.event_type.clone(),
            tier,
            status: DeliveryStatus::Pending,
            attempts: 0,
            last_error: None,
            next_attempt_at,
            lease_until: None,
            lease_token: None,
            settled_by: None,
            sent_at: None,
            provider_message_id: None,
            response_status: None,
            retry_count: 0,
            retried_by: None,
            retried_at: None,
            created_at: now,
            updated_at: now,
            attempt_log: Vec::new(),
            in_backlog: false,
            slot: false,
            slot_item: 0,
            handed_off: false,
            expires_at: activity.expires_at,
            shard: 0,
            shard_lease: None,
            unlisted: false,
            watched: false,
            lane_seq,
        }
    }

    /// Its lane's key, when it is in one.
    pub fn lane(&self) -> Option<String> {
        self.lane_seq
            .map(|_| crate::keys::lane_key(&self.channel_id, &self.conversation_id))
    }

    /// The same delivery placed in one of `shards` listing shards (its tenant's).
    pub fn in_shards(mut self, shards: u32) -> Self {
        self.shard = stable_hash(self.id.as_str()) % shards.max(1);
        self.shard_lease = None;
        self
    }

    /// The same delivery placed where `tenant` lists a delivery created at `now_ms`: in one
    /// of the shards granted then, or one of its own.
    pub fn placed(mut self, tenant: &Tenant, now_ms: i64) -> Self {
        let p = tenant.placement(self.id.as_str(), now_ms);
        self.shard = p.shard;
        self.shard_lease = p.lease;
        self
    }

    /// The listing shard an entry of this delivery changed at `updated_at` goes to: its
    /// granted shard while the grant it was placed under holds, its own shard after (a
    /// listing reads a granted shard only over its grants' times, so a change after them
    /// moves back, and the granted shard empties as its rows change or expire).
    pub fn listing_shard(&self, updated_at: Timestamp) -> u32 {
        converger_core::shards::shard_at(self.shard, self.shard_lease, || Some(updated_at.ms()))
    }
}

impl Delivery {
    /// The key lists are ordered by: `<updated_at>#<id>` (the indexes' `upd_sk`).
    pub fn sort_key(&self) -> String {
        crate::keys::listing_sort_key(self.updated_at, &self.id)
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
    pub fn replayed(&self, actor: &Actor, now: Timestamp) -> Delivery {
        let mut row = self.clone();
        row.status = DeliveryStatus::Pending;
        row.attempts = 0;
        row.retry_count += 1;
        row.retried_by = Some(actor.to_string());
        row.retried_at = Some(now);
        row.next_attempt_at = now.ms();
        row.updated_at = now;
        row.lease_token = None;
        row.lease_until = None;
        row.in_backlog = false;
        row.slot = false;
        row.slot_item = 0;
        row.handed_off = false;
        row.unlisted = false;
        row.watched = false;
        row
    }
}

/// Shards of the due index a pending delivery is spread over, unless the deployment sets
/// more (`DUE_SHARDS`) or a grant gives more (`core::shards::due`); each takes about 250
/// retried deliveries a second at half a partition's writes.
pub const DUE_SHARDS: u32 = 16;

/// The most due shards a deployment may set or be granted: a sweep reads each once, and its
/// crash watch every few seconds.
pub const MAX_DUE_SHARDS: u32 = converger_core::shards::due::MAX;

/// Shards of the channel index (a channel's dead letters and parked deliveries), the same for
/// every channel: a dead channel at 2,000 deliveries/s writes a dead letter each, a quarter of
/// one partition's writes per shard.
pub const CHANNEL_SHARDS: u32 = 8;

pub use converger_core::ids::stable_hash;

/// The due index's shard of a delivery in a deployment of [`DUE_SHARDS`] (the default).
pub fn due_shard(id: &DeliveryId) -> u32 {
    due_shard_of(id, DUE_SHARDS)
}

/// The due index's shard of a delivery when the index has `shards`: a stable hash of its id.
/// A due entry is written to the shard this gives at the time and removed by attribute, so a
/// deployment that raises its count finds older entries among the lower shards.
pub fn due_shard_of(id: &DeliveryId, shards: u32) -> u32 {
    stable_hash(id.as_str()) % shards.max(1)
}

// The partition keys of the deliveries table's indexes: one definition for the DynamoDB
// backend that writes them and the capacity model that charges them (`capacity`).

/// Whether a delivery in `status` is in its channel's index: dead letters (replay) and parked
/// deliveries (release) only, so a delivery on its way to `sent` never writes it.
pub fn channel_indexed(status: DeliveryStatus) -> bool {
    matches!(status, DeliveryStatus::Failed | DeliveryStatus::Paused)
}

/// [`channel_indexed`], and a delivery handed off to a websocket client that has not
/// acknowledged it yet (`pending` with `handed_off`, under the channel's `pending` key): a
/// replay reads its channel's waiting deliveries from there, not from the tenant's listing.
pub fn in_channel_index(status: DeliveryStatus, handed_off: bool) -> bool {
    channel_indexed(status) || (status == DeliveryStatus::Pending && handed_off)
}

/// The channel index's shard of a delivery.
pub fn channel_shard(id: &DeliveryId) -> u32 {
    stable_hash(id.as_str()) % CHANNEL_SHARDS
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

/// What an attempt's outcome writes on its delivery row, declared once: the in-process
/// backend applies it to the row ([`RowOutcome::apply`]); the DynamoDB backend turns the same
/// cases into one conditional update, with the index attributes the row's new state calls
/// for. Both clear the lease and record the attempt log and who settled it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowOutcome<'a> {
    /// Sent, or handed off to a client that acknowledges it later.
    Sent(&'a SentInfo),
    /// Failed, to be tried again at `retry`.
    Retry { error: &'a str, retry: RetryAt },
    /// Failed for good: a dead letter.
    Dead { error: &'a str },
}

impl RowOutcome<'_> {
    /// The row's status after it: a hand-off stays pending until it is acknowledged.
    pub fn status(&self) -> DeliveryStatus {
        match self {
            Self::Sent(info) if info.handed_off => DeliveryStatus::Pending,
            Self::Sent(_) => DeliveryStatus::Sent,
            Self::Retry { .. } => DeliveryStatus::Pending,
            Self::Dead { .. } => DeliveryStatus::Failed,
        }
    }

    /// Whether the row leaves the due index and the backlog (all but a retry, which is due
    /// again at its time).
    pub fn leaves_indexes(&self) -> bool {
        !matches!(self, Self::Retry { .. })
    }

    /// The row after it: one more attempt, no window slot, the new status and time, and
    /// what the case records.
    pub fn apply(&self, row: &mut Delivery, now: Timestamp) {
        row.status = self.status();
        row.attempts += 1;
        row.slot = false;
        row.slot_item = 0;
        row.updated_at = now;
        row.watched = false;
        if self.leaves_indexes() {
            row.in_backlog = false;
        }
        match self {
            Self::Sent(info) => {
                row.last_error = None;
                if info.handed_off {
                    row.handed_off = true;
                } else {
                    row.sent_at = Some(now);
                }
                if info.provider_message_id.is_some() {
                    row.provider_message_id = info.provider_message_id.clone();
                }
                if info.response_status.is_some() {
                    row.response_status = info.response_status;
                }
            }
            Self::Retry { error, retry } => {
                row.last_error = Some((*error).to_owned());
                row.next_attempt_at = retry.at_ms;
                row.watched = retry.watched;
            }
            Self::Dead { error } => row.last_error = Some((*error).to_owned()),
        }
    }
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
    /// Why `row` cannot be claimed at `now`, or `None` when it can: the claim's condition,
    /// which both backends apply (DynamoDB as the update's condition, then this on the old
    /// row it returns; the in-process backend directly).
    pub fn refused(row: Option<&Delivery>, now: Timestamp) -> Option<Claim> {
        match row {
            None => Some(Claim::Missing),
            // Past its retention: gone, whatever the table has not deleted yet.
            Some(d) if expired(d.expires_at, now.ms()) => Some(Claim::Missing),
            Some(d) if d.status != DeliveryStatus::Pending || d.handed_off => {
                Some(Claim::Settled(d.clone()))
            }
            Some(d) if d.next_attempt_at > now.ms() => Some(Claim::NotDue(d.clone())),
            Some(d) if d.lease_until.is_some_and(|u| u >= now.ms()) => Some(Claim::Busy),
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
    /// Pending with a message on its way or an attempt running: the sweeper's due index, by
    /// due time in the shard [`due_shard_of`] gives (a claim leaves it where it is).
    Due { due_ms: i64 },
    /// Parked (`paused`): the channel's parked rows (on DynamoDB, the channel index's
    /// `<channel>#paused#<shard>` partitions).
    Parked,
    /// Settled: in no sparse index.
    None,
}

impl Delivery {
    /// The minute (since the epoch) the delivery was created in: where its channel's health
    /// counts it as created, and its dead letter as failed.
    pub fn created_minute(&self) -> i64 {
        converger_core::health::minute(self.created_at.ms())
    }

    /// What the change stream's consumer reads of the row (`core::status::Transition`).
    pub fn facts(&self) -> converger_core::status::RowFacts {
        converger_core::status::RowFacts {
            status: self.status,
            attempts: self.attempts,
            handed_off: self.handed_off,
            retry_count: self.retry_count,
        }
    }

    /// Failed attempts among its `n` newest (a log without outcomes: all of them but a
    /// successful or handed-off delivery's last).
    pub fn failed_among_newest(&self, n: u32) -> i64 {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let newest: Vec<_> = self.attempt_log.iter().rev().take(n).collect();
        if newest.len() == n && newest.iter().all(|e| e.outcome.is_some()) {
            let failed = |e: &&&AttemptEntry| {
                matches!(
                    e.outcome,
                    Some(AttemptOutcome::Failed) | Some(AttemptOutcome::Dead)
                )
            };
            return newest.iter().filter(failed).count() as i64;
        }
        let n = n as i64;
        if self.status.is_accepted() || self.handed_off {
            n - 1
        } else {
            n
        }
    }

    /// Carried by its messages: a first try in flight (written at ingest and sent to its
    /// queue, its first attempt not ended yet: not listed), or a retry sent for its due time
    /// with its watch copy (`watched`); pending, not handed off, not in its channel's backlog.
    /// It is in no sparse index: its message and that message's watch copy carry it (ADR 0076,
    /// ADR 0094).
    pub fn carried_by_messages(&self) -> bool {
        (self.unlisted || self.watched)
            && self.status == DeliveryStatus::Pending
            && !self.handed_off
            && !self.in_backlog
    }

    pub fn sparse_index(&self) -> SparseIndex {
        match self.status {
            DeliveryStatus::Pending if self.in_backlog => SparseIndex::Backlog {
                due_ms: self.next_attempt_at,
            },
            DeliveryStatus::Pending if self.handed_off => SparseIndex::None,
            DeliveryStatus::Pending if self.carried_by_messages() => SparseIndex::None,
            DeliveryStatus::Pending => SparseIndex::Due {
                due_ms: self.next_attempt_at,
            },
            DeliveryStatus::Paused => SparseIndex::Parked,
            _ => SparseIndex::None,
        }
    }
}

impl Delivery {
    /// Whether this row, written over `before`, wrote a due-index entry: added one, or moved
    /// it to another due time (a retry past one hop, a replay, a way out of the backlog).
    /// The load the due shards grow by (ADR 0093).
    pub fn wrote_due_entry(&self, before: Option<&Delivery>) -> bool {
        let due = |d: &Delivery| match d.sparse_index() {
            SparseIndex::Due { due_ms } => Some(due_ms),
            _ => None,
        };
        due(self).is_some() && before.and_then(due) != due(self)
    }
}

/// When a failed attempt's delivery is due again. It holds no window slot meanwhile: a
/// delivery waiting for a retry never holds back its channel's other deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAt {
    pub at_ms: i64,
    /// Its message and watch copy carry it (`core::policy::retry_rides_messages`): no due
    /// index entry.
    pub watched: bool,
}

impl RetryAt {
    /// Due at `at_ms`, found by the due index.
    pub fn at(at_ms: i64) -> Self {
        Self {
            at_ms,
            watched: false,
        }
    }

    /// Due at `at_ms`, carried by its message and the watch copy sent with it.
    pub fn watched(at_ms: i64) -> Self {
        Self {
            at_ms,
            watched: true,
        }
    }
}

/// A pending webhook delivery created at `due_ms`, for the crate's tests.
#[cfg(test)]
pub(crate) fn test_delivery(due_ms: i64) -> Delivery {
    let tenant = TenantId::generate();
    let at = Timestamp::from_ms(due_ms);
    let channel = Channel::new(
        tenant.clone(),
        converger_core::ChannelType::Webhook,
        "c",
        Map::new(),
        at,
    );
    let activity = Activity {
        event_type: None,
        id: converger_core::ActivityId::generate(),
        tenant_id: tenant,
        conversation_id: "c".into(),
        seq: 1,
        payload_ref: None,
        payload: Value::Null,
        channel_ids: vec![channel.id.clone()],
        created_at: at,
        expires_at: None,
        trace: None,
    };
    Delivery::new(&activity, &channel, Tier::Default, at)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_claim_is_refused_for_each_reason_in_order() {
        let now = 1_000_000;
        assert_eq!(
            Claim::refused(None, Timestamp::from_ms(now)),
            Some(Claim::Missing)
        );
        let mut d = test_delivery(now);
        assert_eq!(Claim::refused(Some(&d), Timestamp::from_ms(now)), None);
        d.lease_until = Some(now - 1);
        assert_eq!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            None,
            "an ended lease is free"
        );
        d.lease_until = Some(now);
        assert_eq!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            Some(Claim::Busy)
        );
        d.next_attempt_at = now + 1;
        assert!(matches!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            Some(Claim::NotDue(_))
        ));
        d.handed_off = true;
        assert!(matches!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            Some(Claim::Settled(_))
        ));
        d.handed_off = false;
        d.status = DeliveryStatus::Failed;
        assert!(matches!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            Some(Claim::Settled(_))
        ));
        d.expires_at = Some(now / 1000);
        assert_eq!(
            Claim::refused(Some(&d), Timestamp::from_ms(now)),
            Some(Claim::Missing)
        );
    }

    #[test]
    fn each_row_is_in_the_sparse_index_its_fields_call_for() {
        let mut d = test_delivery(42);
        assert_eq!(d.sparse_index(), SparseIndex::Due { due_ms: 42 });
        d.lease_until = Some(99);
        assert_eq!(
            d.sparse_index(),
            SparseIndex::Due { due_ms: 42 },
            "a claim does not move the row in the index"
        );
        d.handed_off = true;
        assert_eq!(d.sparse_index(), SparseIndex::None);
        d.handed_off = false;
        // A first try in flight is in none: its watch message covers it.
        d.unlisted = true;
        assert_eq!(d.sparse_index(), SparseIndex::None);
        d.unlisted = false;
        d.lease_until = None;
        d.in_backlog = true;
        assert_eq!(d.sparse_index(), SparseIndex::Backlog { due_ms: 42 });
        d.status = DeliveryStatus::Paused;
        assert_eq!(d.sparse_index(), SparseIndex::Parked);
        d.status = DeliveryStatus::Sent;
        assert_eq!(d.sparse_index(), SparseIndex::None);
    }

    /// A replay starts the delivery over but keeps what went wrong last until its next
    /// attempt says otherwise, and holds no lease, slot or hand-off of the failed run.
    #[test]
    fn a_replayed_row_keeps_its_last_error_until_the_next_attempt() {
        let mut d = test_delivery(42);
        d.status = DeliveryStatus::Failed;
        d.attempts = 5;
        d.last_error = Some("webhook: HTTP 503".into());
        d.slot = true;
        d.lease_token = Some("old".into());
        d.handed_off = true;
        let actor = converger_core::query::Actor {
            kind: converger_core::query::ActorKind::Admin,
            id: "ops".into(),
        };
        let r = d.replayed(&actor, Timestamp::from_micros(1_893_456_001_000_000));
        assert_eq!(
            (r.status, r.attempts, r.retry_count),
            (DeliveryStatus::Pending, 0, 1)
        );
        assert_eq!(r.last_error.as_deref(), Some("webhook: HTTP 503"));
        // Due, retried and updated at the one instant it was given.
        assert_eq!(r.next_attempt_at, 1_893_456_001_000);
        assert_eq!(
            r.retried_at.map(Timestamp::rfc3339).as_deref(),
            Some("2030-01-01T00:00:01.000000Z")
        );
        assert_eq!(r.updated_at.rfc3339(), "2030-01-01T00:00:01.000000Z");
        assert_eq!(r.retried_by.as_deref(), Some(actor.to_string().as_str()));
        assert!(!r.slot && !r.handed_off && r.lease_token.is_none());
        assert!(
            Claim::refused(Some(&r), Timestamp::from_ms(1_893_456_001_000)).is_none(),
            "claimable at once"
        );
    }

    #[test]
    fn each_outcome_writes_its_fields_on_the_row() {
        let now = Timestamp::from_ms(5_000);
        let mut row = test_delivery(1_000);
        row.slot = true;
        row.slot_item = 2;
        row.in_backlog = true;
        row.last_error = Some("before".into());
        let info = SentInfo {
            provider_message_id: Some("wamid.1".into()),
            response_status: Some(200),
            handed_off: false,
        };
        let mut sent = row.clone();
        RowOutcome::Sent(&info).apply(&mut sent, now);
        assert_eq!(
            (
                sent.status,
                sent.attempts,
                sent.slot,
                sent.slot_item,
                sent.in_backlog
            ),
            (DeliveryStatus::Sent, 1, false, 0, false)
        );
        assert_eq!(sent.last_error, None);
        assert_eq!(sent.sent_at, Some(now));
        assert_eq!(sent.provider_message_id.as_deref(), Some("wamid.1"));
        let handed = SentInfo {
            handed_off: true,
            ..SentInfo::default()
        };
        let mut waiting = row.clone();
        RowOutcome::Sent(&handed).apply(&mut waiting, now);
        assert_eq!(
            (waiting.status, waiting.handed_off),
            (DeliveryStatus::Pending, true)
        );
        assert_eq!(waiting.sent_at, None);
        let mut retry = row.clone();
        let again = RowOutcome::Retry {
            error: "HTTP 503",
            retry: RetryAt::at(9_000),
        };
        again.apply(&mut retry, now);
        assert_eq!(
            (retry.status, retry.next_attempt_at, retry.in_backlog),
            (DeliveryStatus::Pending, 9_000, true),
            "a retry keeps its backlog mark"
        );
        assert_eq!(retry.last_error.as_deref(), Some("HTTP 503"));
        let mut dead = row.clone();
        RowOutcome::Dead { error: "HTTP 410" }.apply(&mut dead, now);
        assert_eq!(
            (dead.status, dead.in_backlog),
            (DeliveryStatus::Failed, false)
        );
        assert_eq!(dead.updated_at, now);
    }
}
