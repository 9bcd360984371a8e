//! The usage log's fold (ADR 0089): once a minute the retry scheduler reads each closed
//! period's log entries from every part, sums them per counter and writes each counter once,
//! marked with the period, then moves the fold's cursor past the period. A run that crashed
//! is run again harmlessly: a counter that has the period's mark refuses it.

use crate::shards::{MinuteCount, ShardGrowth};
use converger_core::usage::fold::{LOG_PARTS, foldable_to, next_periods, period_key};
use converger_ports::{
    CounterAdd, Marked, StoreError, StreamCounters, StreamMark, UsageLog, UsageRow,
};
use std::collections::BTreeMap;

/// The shard name of the fold's marks on the counters.
pub const FOLD_MARK: &str = "fold";

/// Reads and counter writes of one period in flight at once.
const WRITES_AT_ONCE: usize = 16;

/// What one fold run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Folded {
    /// Periods folded.
    pub periods: usize,
    /// Rows read from the log.
    pub rows: usize,
    /// Counter writes made.
    pub counter_writes: usize,
    /// Counter writes refused as already folded (a run again).
    pub repeats: usize,
    /// Listing shards granted to tenants whose folded rate called for them.
    pub grants: usize,
    /// Due-shard grants written for the deployment (new, larger or renewed).
    pub due_grants: usize,
}

#[derive(Clone, Copy)]
pub struct UsageFold<'p> {
    pub(crate) log: &'p dyn UsageLog,
    pub(crate) counters: &'p dyn StreamCounters,
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) shards: ShardGrowth<'p>,
    /// Where the deployment's due-shard grants are kept.
    pub(crate) due: &'p dyn converger_ports::DeliveryQueries,
}

impl UsageFold<'_> {
    /// Folds the closed periods not yet folded (at most
    /// [`converger_core::usage::fold::PERIODS_PER_RUN`]).
    pub async fn run(&self) -> Result<Folded, StoreError> {
        self.run_to(foldable_to(self.clock.now_ms())).await
    }

    /// What the scheduler runs: [`Self::run`] where `USAGE_FOLD` is `on`, and where it is
    /// off but a fold ran before (the cursor says so), so that turning it off loses no
    /// count; `None` where neither.
    pub async fn run_if(&self, on: bool) -> Result<Option<Folded>, StoreError> {
        let folded_to = self.log.usage_folded_to().await?;
        if !on && folded_to.is_none() {
            return Ok(None);
        }
        self.fold_from(folded_to, foldable_to(self.clock.now_ms()))
            .await
            .map(Some)
    }

    /// Folds every period up to `last`, closed or not: for a stack at rest (tests and
    /// benchmarks), since an entry logged later in a folded period is never read.
    pub async fn run_to(&self, last: i64) -> Result<Folded, StoreError> {
        let folded_to = self.log.usage_folded_to().await?;
        self.fold_from(folded_to, last).await
    }

    async fn fold_from(&self, mut folded_to: Option<i64>, last: i64) -> Result<Folded, StoreError> {
        let mut out = Folded::default();
        loop {
            let periods = next_periods(folded_to, last);
            if periods.is_empty() {
                return Ok(out);
            }
            for period in periods {
                self.fold_one(period, &mut out).await?;
                self.log.set_usage_folded_to(period).await?;
                folded_to = Some(period);
                out.periods += 1;
            }
        }
    }

    async fn fold_one(&self, period: i64, out: &mut Folded) -> Result<(), StoreError> {
        use futures::StreamExt;
        let parts: Vec<Result<Vec<UsageRow>, StoreError>> =
            futures::stream::iter((0..LOG_PARTS).map(|part| self.log.logged_usage(period, part)))
                .buffer_unordered(WRITES_AT_ONCE)
                .collect()
                .await;
        let mut rows: Vec<UsageRow> = Vec::new();
        for p in parts {
            rows.extend(p?);
        }
        out.rows += rows.len();
        let due_writes: i64 = rows.iter().map(|r| r.due_writes).sum();
        let mut per: BTreeMap<String, CounterAdd> = BTreeMap::new();
        for row in &rows {
            for add in row.adds() {
                match per.get_mut(&add.counter_key()) {
                    Some(have) => have.add(&add),
                    None => {
                        per.insert(add.counter_key(), add);
                    }
                }
            }
        }
        let mark = StreamMark {
            shard: FOLD_MARK.to_owned(),
            first: period_key(period),
            last: period_key(period),
        };
        let writes: Vec<_> = per
            .into_values()
            .filter(|a| !a.is_zero())
            .map(|a| {
                let mark = &mark;
                async move {
                    let r = self.counters.add_marked(&a, mark).await;
                    (a, r)
                }
            })
            .collect();
        let done: Vec<_> = futures::stream::iter(writes)
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        let mut minutes = Vec::new();
        let mut failed = None;
        for (a, r) in done {
            match r {
                Ok(Marked::Applied { created }) => {
                    out.counter_writes += 1;
                    minutes.extend(MinuteCount::of(&a, created));
                }
                Ok(Marked::Behind { .. }) => out.repeats += 1,
                Err(e) => failed = Some(e),
            }
        }
        out.grants += self.shards.follow(&minutes).await.len();
        let per_s = due_writes as f64 * 1000.0 / converger_core::usage::fold::PERIOD_MS as f64;
        match self.grow_due_shards(per_s).await {
            Ok(granted) => out.due_grants += usize::from(granted),
            Err(e) => tracing::warn!(error = %e, "due-shard grant not written"),
        }
        failed.map_or(Ok(()), Err)
    }

    /// Grants the deployment more due shards (or renews its grant) when a period's writes to
    /// the due index, `rate` a second, call for them (`core::shards::due`); whether it wrote one. Two runs
    /// at once write one grant.
    async fn grow_due_shards(&self, rate: f64) -> Result<bool, StoreError> {
        use converger_core::shards::due;
        let own = self.due.due_shards();
        if !due::may_call_for(rate, own) {
            return Ok(false);
        }
        let now = self.clock.now_ms();
        let seen = self.due.due_grants().await?;
        match due::next(seen.latest.as_ref(), own, rate, now) {
            Some(next) => {
                self.due
                    .grant_due_shards(&seen.with(next, now, due::LINGER_MS))
                    .await
            }
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use converger_core::time::Clock;
    use converger_core::usage::{Counts, Grain};
    use converger_core::{ChannelId, TenantId};
    use converger_memory::MemStore;
    use converger_ports::{UsageKey, UsageOf};
    use converger_ports::{UsageLogEntry, UsageStore, seq_key};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The in-process log, whose fold cursor write fails once: a fold that crashed after its
    /// counter writes.
    struct Crashing {
        inner: MemStore,
        crash: AtomicBool,
    }

    #[async_trait::async_trait]
    impl UsageLog for Crashing {
        async fn log_usage(&self, e: &UsageLogEntry) -> converger_ports::StoreResult<Marked> {
            self.inner.log_usage(e).await
        }
        async fn logged_usage(
            &self,
            p: i64,
            part: u32,
        ) -> converger_ports::StoreResult<Vec<UsageRow>> {
            self.inner.logged_usage(p, part).await
        }
        async fn usage_folded_to(&self) -> converger_ports::StoreResult<Option<i64>> {
            self.inner.usage_folded_to().await
        }
        async fn set_usage_folded_to(&self, p: i64) -> converger_ports::StoreResult<()> {
            if self.crash.swap(false, Ordering::SeqCst) {
                return Err(StoreError::Unavailable("the run stopped".into()));
            }
            self.inner.set_usage_folded_to(p).await
        }
    }

    #[tokio::test]
    async fn a_fold_run_again_after_a_crash_adds_each_period_once() {
        let log = Crashing {
            inner: MemStore::new(),
            crash: AtomicBool::new(true),
        };
        let clock = converger_core::time::SystemClock;
        let memo = crate::shards::ShardMemo::default();
        let fold = UsageFold {
            log: &log,
            counters: &log.inner,
            clock: &clock,
            shards: ShardGrowth {
                tenants: &log.inner,
                usage: &log.inner,
                clock: &clock,
                memo: &memo,
                retention_ms: 86_400_000,
                per_shard: converger_core::shards::SHARD_RATE,
            },
            due: &log.inner,
        };
        let (tenant, channel) = (TenantId::generate(), ChannelId::generate());
        let period = converger_core::usage::fold::period_of(clock.now_ms());
        // Two shards (in two parts, most likely) log the same counters' rows.
        for (shard, created) in [("shard-a", 2), ("shard-b", 3), ("shard-c", 4)] {
            let entry = UsageLogEntry {
                shard: shard.into(),
                first: seq_key("1"),
                last: seq_key("9"),
                period,
                rows: vec![UsageRow::usage(
                    tenant.clone(),
                    channel.clone(),
                    period,
                    Counts {
                        created,
                        ..Counts::default()
                    },
                )],
            };
            log.log_usage(&entry).await.unwrap();
        }
        log.inner.set_usage_folded_to(period - 1).await.unwrap();
        assert!(fold.run_to(period).await.is_err(), "the run stops");
        let again = fold.run_to(period).await.unwrap();
        assert_eq!((again.counter_writes, again.repeats), (0, 5), "{again:?}");
        let key = UsageKey::new(UsageOf::Tenant(tenant), Grain::Minute, period);
        let read = log.inner.read_usage(&[key]).await.unwrap();
        assert_eq!(read[0].created, 9);
        assert_eq!(log.inner.usage_folded_to().await.unwrap(), Some(period));
    }

    #[tokio::test]
    async fn a_minute_of_many_due_writes_grants_the_deployment_more_due_shards() {
        use converger_ports::DeliveryQueries;
        let store = MemStore::new();
        let clock = converger_core::time::SystemClock;
        let memo = crate::shards::ShardMemo::default();
        let fold = UsageFold {
            log: &store,
            counters: &store,
            clock: &clock,
            shards: ShardGrowth {
                tenants: &store,
                usage: &store,
                clock: &clock,
                memo: &memo,
                retention_ms: 86_400_000,
                per_shard: converger_core::shards::SHARD_RATE,
            },
            due: &store,
        };
        let period = converger_core::usage::fold::period_of(clock.now_ms());
        store.set_usage_folded_to(period - 3).await.unwrap();
        // Due-index writes a second, per period: under what the own 16 shards take, then past
        // it. Failed attempts alone (retries that ride their messages) call for nothing.
        for (p, due_writes) in [(period - 2, 180_000), (period - 1, 300_000)] {
            let entry = UsageLogEntry {
                shard: "shard-a".into(),
                first: seq_key(&format!("{p}1")),
                last: seq_key(&format!("{p}9")),
                period: p,
                rows: vec![
                    UsageRow::usage(
                        TenantId::generate(),
                        ChannelId::generate(),
                        p,
                        Counts {
                            failed_attempts: 900_000,
                            ..Counts::default()
                        },
                    ),
                    UsageRow::due_writes(
                        TenantId::generate(),
                        ChannelId::generate(),
                        p,
                        due_writes,
                    ),
                ],
            };
            store.log_usage(&entry).await.unwrap();
        }
        let folded = fold.run_to(period - 2).await.unwrap();
        assert_eq!(
            folded.due_grants, 0,
            "3,000 a second: the own shards carry it"
        );
        assert_eq!(store.due_grants().await.unwrap().latest, None);
        let folded = fold.run_to(period - 1).await.unwrap();
        assert_eq!(folded.due_grants, 1, "5,000 a second");
        let g = store.due_grants().await.unwrap().latest.unwrap();
        assert_eq!(g.shards, 32);
        assert_eq!(
            store.due_read_shards(clock.now_ms()).await.unwrap(),
            32,
            "the sweep reads the granted shards"
        );
    }
}
