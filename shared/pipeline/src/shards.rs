//! Listing shards that follow a tenant's load: the changes function reads each busy tenant's
//! rate from the minute counter it has just added to (the count comes back with the write),
//! and grants more listing shards when the rate calls for them (`converger_core::shards`).
//! Nothing is written for a tenant whose own shards carry its rate, and a grant lapses by
//! itself: no operator raises or lowers anything.

use converger_core::TenantId;
use converger_core::cache::TtlCache;
use converger_core::shards::{Grant, minute_rate};
use converger_core::usage::Grain;
use converger_ports::{Tenant, TenantStore};
use std::time::Duration;

/// How long an instance decides from a tenant it read (a grant another instance wrote is
/// seen by then, or when writing ours is refused).
const TENANT_MEMO: Duration = Duration::from_secs(30);

/// The tenants this instance read for their shards.
pub(crate) struct ShardMemo(TtlCache<TenantId, Tenant>);

impl Default for ShardMemo {
    fn default() -> Self {
        Self(TtlCache::bounded(TENANT_MEMO, 10_000))
    }
}

/// A tenant's count of created deliveries in one minute, as its counter holds it now.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteCount {
    pub tenant: TenantId,
    pub bucket: i64,
    pub created: i64,
}

/// Grants listing shards to the tenants whose rate calls for them.
pub(crate) struct ShardGrowth<'p> {
    pub(crate) tenants: &'p dyn TenantStore,
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
            let rate = minute_rate(
                u64::try_from(c.created).unwrap_or(0),
                Grain::Minute.start_ms(c.bucket),
                now,
            );
            tracing::debug!(tenant_id = %c.tenant, created = c.created, rate, per_shard = self.per_shard, "tenant rate");
            // What one shard carries needs no more: no tenant has fewer, nothing to read.
            if converger_core::shards::wanted(rate, 1, self.per_shard).is_none() {
                continue;
            }
            match self.follow_one(&c.tenant, rate, now).await {
                Ok(Some(g)) => {
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

    async fn follow_one(
        &self,
        id: &TenantId,
        rate: f64,
        now: i64,
    ) -> Result<Option<Grant>, converger_ports::StoreError> {
        let t = match self.memo.0.get(id) {
            Some(t) => t,
            None => {
                let Some(t) = self.tenants.get_tenant(id).await? else {
                    return Ok(None);
                };
                self.memo.0.insert(id.clone(), t.clone());
                t
            }
        };
        let Some(next) = Grant::next(
            t.shard_grants.latest.as_ref(),
            t.delivery_shards(),
            rate,
            now,
            self.per_shard,
        ) else {
            return Ok(None);
        };
        let grants = t.shard_grants.with(next, now, self.retention_ms);
        if self.tenants.write_shard_grants(id, &grants).await? {
            let mut t = t;
            t.shard_grants = grants;
            self.memo.0.insert(id.clone(), t);
            Ok(Some(next))
        } else {
            // Another instance's grant came first: read it next time.
            self.memo.0.remove(id);
            Ok(None)
        }
    }
}
