//! The ports the use cases and the HTTP surfaces use: the store (one trait per table group),
//! the queues and the bus. `converger-store` implements them on AWS, `converger-memory` in
//! process; one conformance suite holds both to the same behaviour.

use crate::model::*;
use async_trait::async_trait;
use converger_core::Timestamp;
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};

pub use crate::error::{StoreError, StoreResult};

/// Everything the use cases store: one trait per table group, each implemented by both
/// backends in a module of its own.
pub trait Store:
    TenantStore
    + ChannelStore
    + ActivityStore
    + DeliveryStore
    + DeliveryQueries
    + ReplayStore
    + AuditStore
    + crate::flow::FlowStore
    + crate::health::HealthStore
    + crate::handoff::HandoffStore
    + crate::accounts::AccountStore
    + crate::idempotency::IdempotencyStore
    + crate::stream::StreamStore
    + crate::lanes::LaneStore
    + crate::usage::UsageStore
    + crate::changes::StreamCounters
    + crate::fold::UsageLog
    + crate::event_types::EventTypeStore
{
}

impl<T> Store for T where
    T: TenantStore
        + ChannelStore
        + ActivityStore
        + DeliveryStore
        + DeliveryQueries
        + ReplayStore
        + AuditStore
        + crate::flow::FlowStore
        + crate::health::HealthStore
        + crate::handoff::HandoffStore
        + crate::accounts::AccountStore
        + crate::idempotency::IdempotencyStore
        + crate::stream::StreamStore
        + crate::lanes::LaneStore
        + crate::usage::UsageStore
        + crate::changes::StreamCounters
        + crate::fold::UsageLog
        + crate::event_types::EventTypeStore
{
}

/// Tenants and their API keys.
#[async_trait]
pub trait TenantStore: Send + Sync + 'static {
    async fn create_tenant(&self, tenant: &Tenant, api_key_hash: &str) -> StoreResult<()>;
    async fn get_tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>>;
    async fn tenant_by_api_key_hash(&self, hash: &str) -> StoreResult<Option<Tenant>>;
    /// The tenant an API key (by its hash) belongs to, read strongly consistent from the key
    /// item alone (the tenant API resolves each key this way once a second per instance).
    async fn api_key_tenant(&self, hash: &str) -> StoreResult<Option<TenantId>>;
    /// Sets a tenant's tier; `None` if the tenant does not exist.
    async fn set_tenant_tier(
        &self,
        id: &TenantId,
        tier: converger_core::Tier,
    ) -> StoreResult<Option<Tenant>>;
    /// Sets (or, with `None`, removes) a tenant's API rate limit override; `None` if the
    /// tenant does not exist.
    async fn set_tenant_api_rate_limit(
        &self,
        id: &TenantId,
        limit: Option<&str>,
    ) -> StoreResult<Option<Tenant>>;
    /// Sets a tenant's email sender identities (an empty list removes them); `None` if the
    /// tenant does not exist.
    async fn set_tenant_email_senders(
        &self,
        id: &TenantId,
        senders: &[String],
    ) -> StoreResult<Option<Tenant>>;
    /// Sets (or, with `None`, removes) the SES tenant a tenant's email is sent on behalf of;
    /// `None` if the tenant does not exist.
    async fn set_tenant_ses_tenant(
        &self,
        id: &TenantId,
        name: Option<&str>,
    ) -> StoreResult<Option<Tenant>>;
    /// Gives a tenant `external_id` unless it has one already (`SET ... if_not_exists`);
    /// the tenant as it is now, `None` if it does not exist.
    async fn ensure_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>>;
    /// Replaces a tenant's external id (a rotation); the tenant as it is now.
    async fn set_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>>;
    /// Marks a tenant's activities as checked against payload schemas
    /// ([`Tenant::typed_events`]); the tenant as it is now.
    async fn mark_typed_events(&self, id: &TenantId) -> StoreResult<Option<Tenant>>;
    /// Sets a tenant's listing shards to `n` unless it has more already (they only grow: a
    /// listing reads every shard a delivery may be in); `None` if the tenant does not exist.
    async fn grow_tenant_delivery_shards(
        &self,
        id: &TenantId,
        n: u32,
    ) -> StoreResult<Option<Tenant>>;
    /// Writes a tenant's shard grants if they are still at version `grants.v - 1` (another
    /// writer's grant is never overwritten: its rows must stay listed); whether they were
    /// written (`false`: the tenant is gone or its grants moved on).
    async fn write_shard_grants(
        &self,
        id: &TenantId,
        grants: &crate::ShardGrants,
    ) -> StoreResult<bool>;
}

/// Channels.
#[async_trait]
pub trait ChannelStore: Send + Sync + 'static {
    async fn create_channel(&self, channel: &Channel) -> StoreResult<()>;
    async fn get_channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>>;
    /// A channel `scope` may see (anything a tenant names is read this way).
    async fn channel_in(&self, scope: Scope<'_>, id: &ChannelId) -> StoreResult<Option<Channel>> {
        Ok(self.get_channel(id).await?.filter(|c| c.visible_to(scope)))
    }
    /// Updates the given fields of a channel of `tenant`; `None` if it does not exist there
    /// (or was deleted).
    async fn update_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        patch: &ChannelPatch,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>>;
    /// One page of a tenant's channels in id order, and whether more follow.
    async fn list_channel_page(&self, q: &ChannelQuery) -> StoreResult<(Vec<Channel>, bool)>;
    /// Replaces the signing secret of a channel of `tenant`; `None` if it does not exist
    /// there, was deleted, or its secret is no longer `rotation.replaces` (a rotation raced
    /// this one).
    async fn rotate_secret(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        rotation: &SecretRotation,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>>;
    /// Deletes a channel of `tenant`: marks it deleted and inactive, to expire at
    /// `expires_at` (seconds); `None` if it does not exist there or was deleted already.
    async fn delete_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        now: Timestamp,
        expires_at: i64,
    ) -> StoreResult<Option<Channel>>;
}

/// Activities, written with their deliveries, and per-conversation sequence numbers.
#[async_trait]
pub trait ActivityStore: Send + Sync + 'static {
    /// `count` consecutive sequence numbers of a conversation in one write (a batch's
    /// activities of one conversation): the first of them.
    async fn reserve_seqs(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        count: u64,
    ) -> StoreResult<u64>;
    /// The next sequence number of a conversation.
    async fn next_seq(&self, tenant: &TenantId, conversation_id: &str) -> StoreResult<u64> {
        self.reserve_seqs(tenant, conversation_id, 1).await
    }
    /// Writes the activity and its deliveries together, or nothing if the activity exists.
    /// Each delivery written counts as created for its channel's health checks.
    async fn create_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<Created>;
    /// Writes activities whose ids were generated here, so that no row of theirs can exist
    /// yet: no condition is needed, and a backend may write every row without a transaction
    /// (on DynamoDB: shared batch writes, one write unit per row instead of a transaction's
    /// two). An error leaves any of the rows written or not, as a crash would: rows a crash
    /// leaves are never delivered (an activity without its deliveries, or a first try without
    /// its message), and the producer, which got no answer, sends it again.
    async fn create_fresh_activities(&self, fresh: &[(&Activity, &[Delivery])]) -> StoreResult<()>;
    /// [`Self::create_fresh_activities`] for one activity.
    async fn create_fresh_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<()> {
        self.create_fresh_activities(&[(activity, deliveries)])
            .await
    }
    /// One tenant's activity. Activity ids are chosen by producers and scoped to their
    /// tenant: the same id under another tenant is another activity, so there is no read by
    /// id alone.
    async fn get_activity(
        &self,
        tenant: &TenantId,
        id: &ActivityId,
    ) -> StoreResult<Option<Activity>>;
    /// One page of a conversation's activities in `(seq, id)` order (a producer may give two
    /// the same seq), after `after` when given, and whether more follow. Expired ones are
    /// left out.
    async fn conversation_activities(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        after: Option<&(u64, ActivityId)>,
        limit: usize,
    ) -> StoreResult<(Vec<Activity>, bool)>;
}

/// Delivery rows and the attempt lifecycle: claim (a lease), release, and the three outcomes.
#[async_trait]
pub trait DeliveryStore: Send + Sync + 'static {
    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>>;
    /// A delivery `scope` may see.
    async fn delivery_in(
        &self,
        scope: Scope<'_>,
        id: &DeliveryId,
    ) -> StoreResult<Option<Delivery>> {
        Ok(self
            .get_delivery(id)
            .await?
            .filter(|d| scope.sees(&d.tenant_id)))
    }
    async fn get_deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>>;
    /// Takes the lease of a pending, due delivery for `lease_ms`.
    async fn claim(
        &self,
        id: &DeliveryId,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> StoreResult<Claim>;
    /// Gives a lease back without recording an attempt (the attempt could not start), so a
    /// redelivered message can claim again at once.
    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool>;
    /// Gives a lease back and makes the delivery due at `at_ms` (a delivery waiting in its
    /// lane looks again then); with no `token`, the same for a row no attempt holds (a lane's
    /// new head made due now). `false` when the lease was lost, or the row is leased or no
    /// longer pending.
    async fn reschedule(&self, d: &Delivery, token: Option<&str>, at_ms: i64) -> StoreResult<bool>;
    /// Renews the lease `token` holds on `d` until `until_ms` (a long call keeps its
    /// delivery); `false` when the lease was lost.
    async fn extend_lease(&self, d: &Delivery, token: &str, until_ms: i64) -> StoreResult<bool>;
    /// Takes back the lease that ended at `until_ms` without an outcome (its attempt died):
    /// the row leaves the leased part and waits, due now. `false` when the row changed since
    /// it was read (another pass took it back, or an attempt renewed or settled it).
    async fn requeue_expired(
        &self,
        id: &DeliveryId,
        until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Records an attempt's outcome on its row ([`crate::RowOutcome`]) as the holder of the
    /// lease `token`. `false` if the lease was lost (unless this attempt's own outcome was
    /// recorded already: a retried write).
    async fn record_outcome(
        &self,
        d: &Delivery,
        token: &str,
        outcome: &crate::RowOutcome<'_>,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Records a successful attempt. `false` if the lease was lost.
    async fn mark_sent(
        &self,
        d: &Delivery,
        token: &str,
        info: &SentInfo,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let outcome = crate::RowOutcome::Sent(info);
        self.record_outcome(d, token, &outcome, log, now).await
    }
    /// Records a failed attempt with retries left. `false` if the lease was lost.
    async fn mark_attempt_failed(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        retry: RetryAt,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let outcome = crate::RowOutcome::Retry { error, retry };
        self.record_outcome(d, token, &outcome, log, now).await
    }
    /// Dead-letters the delivery. `false` if the lease was lost.
    async fn mark_dead(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let outcome = crate::RowOutcome::Dead { error };
        self.record_outcome(d, token, &outcome, log, now).await
    }
}

/// Reading deliveries back: listings and counts by status, older attempts, and the sweeper's overdue rows.
#[async_trait]
pub trait DeliveryQueries: Send + Sync + 'static {
    /// Attempts of a delivery moved out of its item, newest first, below `before` (an attempt
    /// number) when given.
    async fn older_attempts(
        &self,
        id: &DeliveryId,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<Vec<AttemptEntry>>;
    /// A tenant's deliveries, filtered and keyset-paginated.
    async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>>;
    /// A channel's deliveries handed off to its websocket clients and not acknowledged yet,
    /// oldest first, `limit` a page after `after`: read from the channel's index, whatever
    /// else the tenant has pending.
    async fn handed_off_deliveries(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        limit: usize,
        after: Option<converger_core::query::Cursor>,
    ) -> StoreResult<Listed<Delivery>>;
    /// How many of a tenant's deliveries have `status`, counted up to `cap` (the answer is
    /// `cap` or a little more when there are more). Counts through the status index without
    /// reading the rows out.
    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64>;
    /// Pending deliveries of one due-index shard: in the waiting part, those whose
    /// `next_attempt_at` is before `before_ms`; in the leased part, those whose lease ended
    /// before it.
    async fn overdue(
        &self,
        part: DuePart,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>>;
    /// How many shards the due index has: a due entry goes to
    /// `due_shard_of(id, due_shards())`, and the sweeper reads each shard.
    fn due_shards(&self) -> u32 {
        crate::DUE_SHARDS
    }
    /// The deployment's grants of more due shards (`core::shards::due`), read strongly.
    /// (The same record as a tenant's listing grants.)
    async fn due_grants(&self) -> StoreResult<crate::ShardGrants>;
    /// Writes `grants` over the version they follow (`v - 1`), never over another writer's
    /// (of two writers one wins); whether it did.
    async fn grant_due_shards(&self, grants: &crate::ShardGrants) -> StoreResult<bool>;
    /// How many shards the sweep reads at `now_ms`: the own ones, and granted ones until
    /// every entry placed there can have come due.
    async fn due_read_shards(&self, now_ms: i64) -> StoreResult<u32> {
        let grants = self.due_grants().await?;
        Ok(converger_core::shards::due::read_count(
            self.due_shards(),
            grants.span.as_ref(),
            now_ms,
        ))
    }
}

/// Replays: moving dead letters back to pending, and replay jobs.
#[async_trait]
pub trait ReplayStore: Send + Sync + 'static {
    /// Replays dead letters: each moves from failed to pending (attempts 0, retry_count + 1,
    /// retried_by/at, due now) together with its audit entry (`audits[i]` for `rows[i]`), in
    /// transactions of up to 50 deliveries. A delivery that is no longer failed is skipped.
    /// Returns the replayed rows as they now are. At most 50 rows per call.
    async fn replay_many(
        &self,
        rows: &[Delivery],
        actor: &converger_core::query::Actor,
        now: Timestamp,
        audits: &[AuditEntry],
    ) -> StoreResult<Vec<Delivery>>;
    async fn create_replay_job(&self, job: &ReplayJob) -> StoreResult<()>;
    async fn get_replay_job(&self, id: &str) -> StoreResult<Option<ReplayJob>>;
    /// A replay job `scope` may see.
    async fn replay_job_in(&self, scope: Scope<'_>, id: &str) -> StoreResult<Option<ReplayJob>> {
        Ok(self
            .get_replay_job(id)
            .await?
            .filter(|j| scope.sees(&j.tenant_id)))
    }
    /// Writes a job's progress if its version is still `job.version - 1`.
    async fn save_replay_job(&self, job: &ReplayJob) -> StoreResult<bool>;
}

/// The audit log of operators' and tenants' actions.
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Appends one audit entry.
    async fn add_audit(&self, entry: &AuditEntry) -> StoreResult<()>;
    /// A tenant's audit log, newest first.
    async fn list_audit(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&converger_core::query::Cursor>,
    ) -> StoreResult<Listed<AuditEntry>>;
}

#[derive(Debug, thiserror::Error)]
#[error("queue unavailable: {message}")]
pub struct QueueError {
    pub message: String,
    /// The queue service's error, when it answered with one.
    #[source]
    pub source: Option<crate::error::Source>,
}

impl QueueError {
    /// A failure the queue describes itself.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A request the queue service failed: its full context as the message, itself as the
    /// source.
    pub fn service(message: String, source: crate::error::Source) -> Self {
        Self {
            message,
            source: Some(source),
        }
    }
}

#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Enqueues a delivery on its tier's queue after `delay_s` seconds (at most 900).
    async fn send(&self, msg: &DeliveryMessage, delay_s: u32) -> Result<(), QueueError>;
    /// Enqueues many deliveries now (batched by queue).
    async fn send_many(&self, msgs: &[DeliveryMessage]) -> Result<(), QueueError>;
    /// Asks the replay function to run the next chunk of a job.
    async fn send_replay(&self, msg: &ReplayMessage) -> Result<(), QueueError>;
    /// Schedules a flow job (probe, release) for the probe function after `delay_s` seconds.
    async fn send_flow(&self, msg: &FlowJob, delay_s: u32) -> Result<(), QueueError>;
    /// The depth of each tier queue and of its dead-letter queue (the dashboard), in
    /// `Tier::ALL` order, each queue followed by its `-dlq`.
    async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError>;
}

/// How many messages a queue holds, by state (SQS's approximate counts).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueueDepth {
    pub queue: String,
    pub visible: u64,
    pub delayed: u64,
    pub in_flight: u64,
}

impl QueueDepth {
    /// Each queue's highest count of each state in `before` and `now` (the queues of `now`,
    /// in its order): an hour's sample raised by a minute's.
    pub fn highest(before: Vec<QueueDepth>, now: &[QueueDepth]) -> Vec<QueueDepth> {
        now.iter()
            .map(|n| match before.iter().find(|b| b.queue == n.queue) {
                Some(b) => QueueDepth {
                    queue: n.queue.clone(),
                    visible: n.visible.max(b.visible),
                    delayed: n.delayed.max(b.delayed),
                    in_flight: n.in_flight.max(b.in_flight),
                },
                None => n.clone(),
            })
            .collect()
    }

    /// Every message the queue holds, whatever its state.
    pub fn total(&self) -> u64 {
        self.visible + self.delayed + self.in_flight
    }
}

#[cfg(test)]
mod depth_tests {
    use super::QueueDepth;

    #[test]
    fn an_hours_sample_keeps_each_queues_highest_counts() {
        let d = |q: &str, v, dl, f| QueueDepth {
            queue: q.into(),
            visible: v,
            delayed: dl,
            in_flight: f,
        };
        let merged = QueueDepth::highest(
            vec![d("high", 5, 0, 1), d("gone", 9, 9, 9)],
            &[d("high", 2, 3, 1), d("default", 1, 0, 0)],
        );
        assert_eq!(merged, vec![d("high", 5, 3, 1), d("default", 1, 0, 0)]);
        assert_eq!(merged[0].total(), 9);
    }
}

/// The platform's events, one EventBridge `detail-type` each (their details are described in
/// `docs/operations.md`, whose table a test keeps to this list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A delivery's status changed (sent, failed, pending again, ...).
    DeliveryStatusChanged,
    /// A delivery failed for good.
    DeliveryDeadLettered,
    /// Deliveries were sent again (a single or bulk replay).
    DeliveryRetried,
    /// A channel's breaker opened.
    ChannelCircuitOpened,
    /// A channel's breaker went half-open: one probe is in flight.
    ChannelCircuitHalfOpen,
    /// A channel's breaker closed after a successful probe.
    ChannelCircuitClosed,
    /// A tenant or an operator paused a channel's deliveries.
    ChannelPaused,
    /// A tenant or an operator resumed them (the breaker closed by hand).
    ChannelResumed,
    /// A channel's health status changed.
    ChannelHealthChanged,
    /// A channel was disabled after failing too long.
    ChannelDisabled,
}

impl EventType {
    pub const ALL: [EventType; 10] = [
        Self::DeliveryStatusChanged,
        Self::DeliveryDeadLettered,
        Self::DeliveryRetried,
        Self::ChannelCircuitOpened,
        Self::ChannelCircuitHalfOpen,
        Self::ChannelCircuitClosed,
        Self::ChannelPaused,
        Self::ChannelResumed,
        Self::ChannelHealthChanged,
        Self::ChannelDisabled,
    ];

    /// The `detail-type` it is published with.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DeliveryStatusChanged => "delivery.status_changed",
            Self::DeliveryDeadLettered => "delivery.dead_lettered",
            Self::DeliveryRetried => "delivery.retried",
            Self::ChannelCircuitOpened => "channel.circuit_opened",
            Self::ChannelCircuitHalfOpen => "channel.circuit_half_open",
            Self::ChannelCircuitClosed => "channel.circuit_closed",
            Self::ChannelPaused => "channel.paused",
            Self::ChannelResumed => "channel.resumed",
            Self::ChannelHealthChanged => "channel.health_changed",
            Self::ChannelDisabled => "channel.disabled",
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A platform event for the bus.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformEvent {
    pub detail_type: EventType,
    pub detail: serde_json::Value,
}

#[async_trait]
pub trait Events: Send + Sync + 'static {
    /// Publishes events; failures are logged, never raised (events are not on the delivery's
    /// critical path).
    async fn publish(&self, events: Vec<PlatformEvent>);
    /// Publishes events now, in order, and says whether the bus took them all: the change
    /// stream's consumer, which hands a record back to its stream when an event of it was
    /// not taken. `Err(i)`: the events from `i` on may not have been taken.
    async fn try_publish(&self, events: Vec<PlatformEvent>) -> Result<(), usize> {
        self.publish(events).await;
        Ok(())
    }
}
