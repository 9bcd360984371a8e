//! Usage counters: what a channel or a tenant did per minute, hour or day
//! ([`converger_core::usage::Counts`]), for the charts and the usage page.

use crate::error::StoreResult;
use async_trait::async_trait;
use converger_core::usage::{Counts, Grain};
use converger_core::{ChannelId, TenantId};

/// Whose counter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UsageOf {
    Channel(ChannelId),
    Tenant(TenantId),
    /// A tenant's rate alone (deliveries created), counted at once for a tenant busy in a
    /// stream batch while its usage waits in the usage log (ADR 0089).
    TenantRate(TenantId),
}

/// One counter: whose, how long a bucket, which bucket (whole grains since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsageKey {
    pub of: UsageOf,
    pub grain: Grain,
    pub bucket: i64,
}

impl UsageKey {
    pub fn new(of: UsageOf, grain: Grain, bucket: i64) -> Self {
        Self { of, grain, bucket }
    }

    /// The five counters one count of `tenant`'s `channel` at `at_ms` adds to: the channel's
    /// minute and hour, the tenant's minute, hour and day.
    pub fn of_count(tenant: &TenantId, channel: &ChannelId, at_ms: i64) -> [UsageKey; 5] {
        let c = |g: Grain| UsageKey::new(UsageOf::Channel(channel.clone()), g, g.bucket(at_ms));
        let t = |g: Grain| UsageKey::new(UsageOf::Tenant(tenant.clone()), g, g.bucket(at_ms));
        [
            c(Grain::Minute),
            c(Grain::Hour),
            t(Grain::Minute),
            t(Grain::Hour),
            t(Grain::Day),
        ]
    }

    /// The counter's key in the usage table (see [`crate::keys::channel_usage_key`]): its
    /// part 0's.
    pub fn key(&self) -> String {
        match &self.of {
            UsageOf::Channel(c) => crate::keys::channel_usage_key(c, self.grain, self.bucket),
            UsageOf::Tenant(t) => crate::keys::tenant_usage_key(t, self.grain, self.bucket),
            UsageOf::TenantRate(t) => {
                format!(
                    "rate#{}",
                    crate::keys::tenant_usage_key(t, self.grain, self.bucket)
                )
            }
        }
    }

    /// The key of its part `part` (of [`converger_core::usage::PARTS`]): part 0's is
    /// [`UsageKey::key`], another's that with `#<part>`.
    pub fn part_key(&self, part: u32) -> String {
        match part {
            0 => self.key(),
            n => format!("{}#{n}", self.key()),
        }
    }

    /// The keys of all its parts, part 0's first.
    pub fn part_keys(&self) -> impl Iterator<Item = String> + '_ {
        (0..converger_core::usage::PARTS).map(|p| self.part_key(p))
    }
}

#[async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Adds `counts` to a counter's part 0 (one conditional-free write that adds each
    /// non-zero count), kept until `key.grain.expires_at(key.bucket)`. The changes function
    /// writes its counts with [`crate::StreamCounters::add_marked`], in its shard's part.
    async fn add_usage(&self, key: &UsageKey, counts: &Counts) -> StoreResult<()>;

    /// The counters of `keys`, in their order, each the sum of its parts; one that was never
    /// written (or has expired) reads as zeros. Batch reads of 100 items.
    async fn read_usage(&self, keys: &[UsageKey]) -> StoreResult<Vec<Counts>>;

    /// Writes the queues' depths sampled for `bucket` of `grain` (in place of any sample
    /// there), kept until `grain.expires_at(bucket)`. One writer: the retry scheduler, once
    /// a minute.
    async fn put_depths(
        &self,
        grain: Grain,
        bucket: i64,
        depths: &[crate::QueueDepth],
    ) -> StoreResult<()>;

    /// The depths sampled for `buckets` of `grain`, in their order (empty where none).
    async fn read_depths(
        &self,
        grain: Grain,
        buckets: &[i64],
    ) -> StoreResult<Vec<Vec<crate::QueueDepth>>>;
}
