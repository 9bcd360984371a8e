//! Health checks, auto-disable and alert subscriptions: their port.

use crate::error::StoreResult;
use crate::model::{Channel, HealthCheck, Page, Tenant};
use async_trait::async_trait;
use converger_core::health::HealthStatus;
use converger_core::{ChannelId, TenantId, Timestamp};

/// What a health check reads for one channel: deliveries created in the window, how many of
/// them are dead letters, and the previous check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealthInputs {
    pub created: u64,
    pub failed: u64,
    pub previous: Option<HealthStatus>,
    /// The requests reading them took.
    pub requests: usize,
}

/// The most checks one read of a channel's health history returns (a week of checks every
/// five minutes is 2,016).
pub const MAX_HEALTH_HISTORY: usize = 2_100;

#[async_trait]
pub trait HealthStore: Send + Sync + 'static {
    /// Adds to a channel's per-minute counters (created deliveries and dead letters), kept two
    /// hours. A replayed dead letter subtracts from `failed` of the minute it was created in.
    /// Writing deliveries counts nothing: the pipeline adds up what it writes and calls this
    /// with the sums.
    async fn count_deliveries(
        &self,
        channel: &ChannelId,
        minute: i64,
        created: i64,
        failed: i64,
    ) -> StoreResult<()>;

    /// Adds `delta` to a channel's dead letters among the deliveries created on `day` (days
    /// since the epoch; a replay subtracts): what the `dead_letters` gauge sums over the
    /// retention period. The counter is kept until `expires_at` (seconds), when the deliveries
    /// it counts have expired too. The pipeline adds up its counts and calls this once per
    /// channel and day per flush, never per delivery.
    async fn count_dead_letters(
        &self,
        channel: &ChannelId,
        day: i64,
        delta: i64,
        expires_at: i64,
    ) -> StoreResult<()>;

    /// A channel's dead letters still stored: the sum of its day counters from `from_day` on
    /// that have not expired at `now` (one query of the channel's health partition).
    async fn stored_dead_letters(
        &self,
        channel: &ChannelId,
        from_day: i64,
        now: Timestamp,
    ) -> StoreResult<u64>;

    /// The counts of minutes `from..=to` and the previous status.
    async fn health_inputs(
        &self,
        channel: &ChannelId,
        from_minute: i64,
        to_minute: i64,
    ) -> StoreResult<HealthInputs>;

    /// Writes checks' rows (batch writes of 25). Returns the number of requests made.
    async fn record_health(&self, checks: &[HealthCheck]) -> StoreResult<usize>;

    /// Sets a channel's latest health status (on its flow item), after a change.
    async fn set_health_status(&self, channel: &ChannelId, status: HealthStatus)
    -> StoreResult<()>;

    /// A channel's recent checks, newest first, without expired rows: at most `limit`, and
    /// never more than [`MAX_HEALTH_HISTORY`].
    async fn health_history(
        &self,
        channel: &ChannelId,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<HealthCheck>>;

    /// Active channels of the checked types, a page at a time.
    async fn checked_channels(
        &self,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Channel>>;

    /// Makes an active channel inactive with `disabled_at`/`disabled_reason`; `None` if it was
    /// not active (another writer disabled it first).
    async fn disable_channel(
        &self,
        id: &ChannelId,
        at: Timestamp,
        reason: &str,
    ) -> StoreResult<Option<Channel>>;

    /// Sets (or with `None`, removes) a tenant's alert URL and its managed channel.
    async fn set_tenant_alert(
        &self,
        id: &TenantId,
        url: Option<&str>,
        channel: Option<&ChannelId>,
    ) -> StoreResult<Option<Tenant>>;
}
