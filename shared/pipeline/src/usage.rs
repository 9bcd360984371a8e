//! Usage: the counts the charts and the usage page show, and the use case that reads them.
//!
//! Every count of a delivery comes from the deliveries table's stream (`changes`). What is no
//! row change, a breaker opening, goes through [`UsageCounts`]: five counters (the channel's
//! minute and hour, the tenant's minute, hour and day), written as it happens (or added up
//! per instance for `USAGE_FLUSH_MS`, when that is set).
//! [`UsageReads`] turns them into series, a tenant's days with the estimate of their cost, and
//! an operator's top tenants by cost.

use converger_core::time::Clock;
use converger_core::usage::{Counts, Estimate, Grain, Range, SeriesTally, Usage};
use converger_core::{ChannelId, TenantId};
use converger_ports::{AccountStore, StoreResult, UsageKey, UsageOf, UsageStore};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counter writes one flush makes at once.
const FLUSH_CONCURRENCY: usize = 16;
/// Counters a failed flush keeps for the next one, at most.
const MAX_RESTORED: usize = 10_000;

/// This instance's usage counts not written yet.
pub struct UsageCounts {
    store: Arc<dyn UsageStore>,
    flush: Duration,
    tally: Mutex<SeriesTally<UsageKey>>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl UsageCounts {
    pub(crate) fn new(store: Arc<dyn UsageStore>, flush: Duration) -> Self {
        Self {
            store,
            flush,
            tally: Mutex::new(SeriesTally::default()),
            clock: Arc::new(converger_core::time::SystemClock),
        }
    }

    /// A channel's breaker opened.
    pub(crate) async fn breaker_opened(&self, tenant: &TenantId, channel: &ChannelId) {
        let opened = Counts {
            breaker_opened: 1,
            ..Counts::default()
        };
        self.add(std::iter::once((tenant, channel, opened))).await;
    }

    async fn add<'a>(&self, counts: impl Iterator<Item = (&'a TenantId, &'a ChannelId, Counts)>) {
        let now = self.clock.now_ms();
        let every = i64::try_from(self.flush.as_millis()).unwrap_or(i64::MAX);
        let due = match self.tally.lock() {
            Ok(mut t) => {
                for (tenant, channel, c) in counts {
                    for k in UsageKey::of_count(tenant, channel, now) {
                        t.add(k, &c, now);
                    }
                }
                t.take_due(now, every)
            }
            Err(_) => return,
        };
        if due.is_empty() {
            return;
        }
        // The period's counters, written side by side (an instance that served many
        // channels and tenants this minute has many), never one after another.
        use futures::StreamExt;
        let mut failed: Vec<(UsageKey, Counts)> = futures::stream::iter(due)
            .map(|(key, c)| async move {
                match self.store.add_usage(&key, &c).await {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::warn!(key = %key.key(), error = %e, "usage counter not written");
                        Some((key, c))
                    }
                }
            })
            .buffer_unordered(FLUSH_CONCURRENCY)
            .filter_map(std::future::ready)
            .collect()
            .await;
        // What could not be written goes with the next flush, up to a bound: a store that
        // keeps refusing costs counts, not memory.
        failed.truncate(MAX_RESTORED);
        if !failed.is_empty()
            && let Ok(mut t) = self.tally.lock()
        {
            t.restore(failed, now);
        }
    }
}

/// One bucket of a series: its first instant (ms) and its counts.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    pub at_ms: i64,
    pub counts: Counts,
}

/// One day of a tenant's usage and its estimated cost.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UsageDay {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    pub usage: Usage,
    pub estimate: Estimate,
}

/// A tenant's usage over days, each day's and the total.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TenantUsage {
    pub tenant_id: TenantId,
    pub days: Vec<UsageDay>,
    pub total: Usage,
    pub estimate: Estimate,
}

/// The read side of usage: series for the charts, a tenant's days and the top tenants.
pub struct UsageReads<'p> {
    pub(crate) store: &'p dyn UsageStore,
    pub(crate) accounts: &'p dyn AccountStore,
    pub(crate) health: &'p dyn converger_ports::HealthStore,
    pub(crate) model: converger_core::usage::CostModel,
    pub(crate) clock: &'p dyn Clock,
}

impl<'p> UsageReads<'p> {
    /// The buckets of `range` up to now for a channel or a tenant, oldest first, with zeros
    /// where nothing happened (one batch read per 100 buckets).
    pub async fn series(&self, of: &UsageOf, range: Range) -> StoreResult<Vec<Point>> {
        let grain = range.grain();
        let buckets: Vec<i64> = range.buckets(self.clock.now_ms()).collect();
        let keys: Vec<UsageKey> = buckets
            .iter()
            .map(|b| UsageKey::new(of.clone(), grain, *b))
            .collect();
        let counts = self.store.read_usage(&keys).await?;
        Ok(buckets
            .into_iter()
            .zip(counts)
            .map(|(b, counts)| Point {
                at_ms: grain.start_ms(b),
                counts,
            })
            .collect())
    }

    /// A channel's health checks within `range`, oldest first (with the one before it, which
    /// gives the status the range starts in): the checks run every five minutes, so one
    /// query of at most `range / 5 min + 1` rows.
    pub async fn health_checks(
        &self,
        channel: &ChannelId,
        range: Range,
    ) -> StoreResult<Vec<converger_ports::HealthCheck>> {
        let buckets = range.buckets(self.clock.now_ms());
        let span_ms = (buckets.end() - buckets.start() + 1) * range.grain().seconds() * 1000;
        let limit = usize::try_from(span_ms / 300_000 + 2).unwrap_or(2);
        let mut checks = self
            .health
            .health_history(channel, limit, self.clock.now())
            .await?;
        checks.reverse();
        Ok(checks)
    }

    /// The queues' depth samples of `range` up to now, oldest first (empty where none was
    /// taken): by minute for the last hour, each hour's highest for a day or a week.
    pub async fn depth_series(
        &self,
        range: Range,
    ) -> StoreResult<Vec<(i64, Vec<converger_ports::QueueDepth>)>> {
        let grain = range.grain();
        let buckets: Vec<i64> = range.buckets(self.clock.now_ms()).collect();
        let samples = self.store.read_depths(grain, &buckets).await?;
        Ok(buckets
            .into_iter()
            .map(|b| grain.start_ms(b))
            .zip(samples)
            .collect())
    }

    /// A tenant's usage on the days `from..=to` (days since the epoch), with the estimate.
    pub async fn tenant_usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> StoreResult<TenantUsage> {
        let all = self
            .tenants_usage(std::slice::from_ref(tenant), from, to)
            .await?;
        Ok(all.into_iter().next().unwrap_or_else(|| TenantUsage {
            tenant_id: tenant.clone(),
            days: Vec::new(),
            total: Usage::default(),
            estimate: Estimate::default(),
        }))
    }

    /// The tenants with the highest estimated cost over the days `from..=to`, highest first,
    /// at most `limit` (every tenant's day counters are read: `tenants × days / 100` batch
    /// reads).
    pub async fn top_tenants(
        &self,
        from: i64,
        to: i64,
        limit: usize,
    ) -> StoreResult<Vec<TenantUsage>> {
        let ids: Vec<TenantId> = self
            .accounts
            .list_tenants()
            .await?
            .into_iter()
            .map(|t| t.id)
            .collect();
        let mut all = self.tenants_usage(&ids, from, to).await?;
        all.sort_by(|a, b| {
            b.estimate
                .total_usd
                .total_cmp(&a.estimate.total_usd)
                .then_with(|| a.tenant_id.cmp(&b.tenant_id))
        });
        all.truncate(limit);
        Ok(all)
    }

    async fn tenants_usage(
        &self,
        tenants: &[TenantId],
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<TenantUsage>> {
        let days: Vec<i64> = (from..=to).collect();
        let keys: Vec<UsageKey> = tenants
            .iter()
            .flat_map(|t| {
                days.iter()
                    .map(|d| UsageKey::new(UsageOf::Tenant(t.clone()), Grain::Day, *d))
            })
            .collect();
        let counts = self.store.read_usage(&keys).await?;
        let per = days.len().max(1);
        Ok(tenants
            .iter()
            .zip(counts.chunks(per))
            .map(|(t, chunk)| {
                let mut total = Counts::default();
                let days = days
                    .iter()
                    .zip(chunk)
                    .map(|(day, c)| {
                        total.add(c);
                        let usage = Usage::of(c);
                        UsageDay {
                            date: converger_core::usage::date_of_day(*day),
                            usage,
                            estimate: self.model.estimate(&usage),
                        }
                    })
                    .collect();
                let usage = Usage::of(&total);
                TenantUsage {
                    tenant_id: t.clone(),
                    days,
                    total: usage,
                    estimate: self.model.estimate(&usage),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use converger_core::time::ManualClock;
    use converger_memory::MemStore;

    fn key(of: UsageOf, g: Grain, now_ms: i64) -> UsageKey {
        UsageKey::new(of, g, g.bucket(now_ms))
    }

    #[tokio::test]
    async fn a_refused_flush_keeps_its_sums_for_the_next() {
        let store = Arc::new(MemStore::new());
        let clock = Arc::new(ManualClock::at(1_800_000_000_000));
        let mut counts = UsageCounts::new(store.clone(), Duration::from_secs(60));
        counts.clock = clock.clone();
        let (tenant, channel) = (TenantId::generate(), ChannelId::generate());
        let start = clock.now_ms();
        let failed = Counts {
            attempts: 1,
            failed_attempts: 1,
            ..Counts::default()
        };
        counts
            .add(std::iter::once((&tenant, &channel, failed)))
            .await;
        clock.advance(Duration::from_secs(61));
        store.set_outage(true);
        counts
            .add(std::iter::once((&tenant, &channel, failed)))
            .await;
        store.set_outage(false);
        let day = key(UsageOf::Tenant(tenant.clone()), Grain::Day, start);
        let read = store.read_usage(std::slice::from_ref(&day)).await.unwrap();
        assert_eq!(read[0], Counts::default(), "nothing written while refused");

        clock.advance(Duration::from_secs(61));
        counts
            .add(std::iter::once((&tenant, &channel, failed)))
            .await;
        let read = store.read_usage(&[day]).await.unwrap();
        assert_eq!(
            read[0].attempts, 3,
            "the refused sums went with the next flush"
        );
        assert_eq!(read[0].failed_attempts, 3);
        let minute = key(UsageOf::Channel(channel), Grain::Minute, start);
        let read = store.read_usage(&[minute]).await.unwrap();
        assert_eq!(read[0].attempts, 1, "each count under its own minute");
    }
}
