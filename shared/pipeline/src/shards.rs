//! Listing shards that follow a tenant's load: the changes function reads each busy tenant's
//! rate from the minute counter it has just added to (the count of the part it wrote comes
//! back with the write, a first look at the whole), and grants more listing shards when the
//! rate of all the counter's parts calls for them (`converger_core::shards`).
//! Nothing is written for a tenant whose own shards carry its rate, and a grant lapses by
//! itself: no operator raises or lowers anything.

use converger_core::TenantId;
use converger_core::cache::TtlCache;
use converger_core::shards::{Grant, minute_rate};
use converger_core::usage::{Grain, PARTS};
use converger_ports::{Tenant, TenantStore, UsageKey, UsageStore};
use std::time::Duration;

/// How long an instance decides from a tenant it read (a grant another instance wrote is
/// seen by then, or when writing ours is refused).
const TENANT_MEMO: Duration = Duration::from_secs(30);

/// How long an instance decides from a minute's count it read whole (every part), adding
/// its own adds since (by the pipeline's clock).
const COUNT_MEMO_MS: i64 = 5_000;

/// The tenants this instance read for their shards, and the minute counts it read whole.
pub(crate) struct ShardMemo {
    tenants: TtlCache<TenantId, Tenant>,
    /// A tenant's minute counter -> (created in all parts as read, plus this instance's adds
    /// since; when read).
    counts: TtlCache<UsageKey, (i64, i64)>,
}

impl Default for ShardMemo {
    fn default() -> Self {
        Self {
            tenants: TtlCache::bounded(TENANT_MEMO, 10_000),
            counts: TtlCache::bounded(Duration::from_secs(60), 10_000),
        }
    }
}

/// A tenant's count of created deliveries in one minute, as one part of its counter holds
/// it now.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteCount {
    pub tenant: TenantId,
    /// The counter (every part of it).
    pub key: UsageKey,
    /// In the part written, after the write.
    pub created: i64,
    /// What the write added.
    pub added: i64,
}

impl MinuteCount {
    /// What a written add says of its tenant's rate: an add to a tenant's minute counter (or
    /// its rate counter) and the counter's created count the write gave back.
    pub fn of(add: &converger_ports::CounterAdd, created: Option<i64>) -> Option<Self> {
        use converger_ports::{CounterAdd, UsageOf};
        let (
            CounterAdd::Usage {
                key:
                    key @ UsageKey {
                        of: UsageOf::Tenant(tenant) | UsageOf::TenantRate(tenant),
                        grain: Grain::Minute,
                        ..
                    },
                counts,
                ..
            },
            Some(created),
        ) = (add, created)
        else {
            return None;
        };
        Some(Self {
            tenant: tenant.clone(),
            key: key.clone(),
            created,
            added: counts.created,
        })
    }
}

/// Grants listing shards to the tenants whose rate calls for them.
#[derive(Clone, Copy)]
pub(crate) struct ShardGrowth<'p> {
    pub(crate) tenants: &'p dyn TenantStore,
    pub(crate) usage: &'p dyn UsageStore,
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) memo: &'p ShardMemo,
    pub(crate) retention_ms: i64,
    /// Deliveries a second a shard takes (`PipelineConfig::listing_shard_rate`).
    pub(crate) per_shard: f64,
}

impl ShardGrowth<'_> {
    /// Looks at each count; returns the grants written. A failure is logged and left to the
    /// next batch (the count comes again with the next write of the minute).
    pub(crate) async fn follow(&self, counts: &[MinuteCount]) -> Vec<(TenantId, Grant)> {
        let now = self.clock.now_ms();
        let mut written = Vec::new();
        for c in counts {
            // A count read whole before this write lacks what it added.
            self.memo.counts.with_mut(&c.key, |(n, _)| *n += c.added);
        }
        for c in counts {
            // A shard's batches add to one part: the parts together hold about this many
            // (more where few shards share the parts, less where many do).
            let estimate = minute_rate(
                u64::try_from(c.created).unwrap_or(0) * u64::from(PARTS),
                Grain::Minute.start_ms(c.key.bucket),
                now,
            );
            tracing::debug!(tenant_id = %c.tenant, created = c.created, estimate, per_shard = self.per_shard, "tenant rate");
            // What one shard carries needs no more: no tenant has fewer, nothing to read.
            if converger_core::shards::wanted(estimate, 1, self.per_shard).is_none() {
                continue;
            }
            match self.follow_one(c, estimate, now).await {
                Ok(Some((g, rate))) => {
                    tracing::info!(tenant_id = %c.tenant, shards = g.shards, until_ms = g.until_ms, rate, "listing shards granted");
                    written.push((c.tenant.clone(), g));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(tenant_id = %c.tenant, error = %e, "listing shards not granted")
                }
            }
        }
        written
    }

    /// The tenant's rate over every part of its minute counter (read at most once per
    /// [`COUNT_MEMO_MS`] per instance).
    async fn whole_rate(&self, c: &MinuteCount) -> Result<f64, converger_ports::StoreError> {
        let now = self.clock.now_ms();
        let created = match self.memo.counts.get(&c.key) {
            Some((n, read_at)) if now - read_at < COUNT_MEMO_MS => n,
            _ => {
                let read = self.usage.read_usage(std::slice::from_ref(&c.key)).await?;
                let n = read.first().map_or(0, |n| n.created);
                self.memo.counts.insert(c.key.clone(), (n, now));
                n
            }
        };
        Ok(minute_rate(
            u64::try_from(created).unwrap_or(0),
            Grain::Minute.start_ms(c.key.bucket),
            now,
        ))
    }

    async fn follow_one(
        &self,
        c: &MinuteCount,
        estimate: f64,
        now: i64,
    ) -> Result<Option<(Grant, f64)>, converger_ports::StoreError> {
        let id = &c.tenant;
        let t = match self.memo.tenants.get(id) {
            Some(t) => t,
            None => {
                let Some(t) = self.tenants.get_tenant(id).await? else {
                    return Ok(None);
                };
                self.memo.tenants.insert(id.clone(), t.clone());
                t
            }
        };
        let latest = t.shard_grants.latest.as_ref();
        // The first look calls for nothing: nothing to read.
        if Grant::next(latest, t.delivery_shards(), estimate, now, self.per_shard).is_none() {
            return Ok(None);
        }
        let rate = self.whole_rate(c).await?;
        let Some(next) = Grant::next(latest, t.delivery_shards(), rate, now, self.per_shard) else {
            return Ok(None);
        };
        let grants = t.shard_grants.with(next, now, self.retention_ms);
        if self.tenants.write_shard_grants(id, &grants).await? {
            let mut t = t;
            t.shard_grants = grants;
            self.memo.tenants.insert(id.clone(), t);
            Ok(Some((next, rate)))
        } else {
            // Another instance's grant came first: read it next time.
            self.memo.tenants.remove(id);
            Ok(None)
        }
    }
}
