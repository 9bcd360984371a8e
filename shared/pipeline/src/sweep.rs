//! The sweeper (the retry-scheduler function): every pending delivery that is overdue by more
//! than the grace period and holds no live lease is enqueued again. This is what makes a crash
//! between a row write and its queue send impossible to lose. A delivery whose attempt
//! claimed it and never recorded an outcome (the worker crashed) is enqueued as soon as its
//! lease has ended, without the grace: the leased part of the due index holds exactly those.
//!
//! It reads the sparse, sharded due index: only pending deliveries are in it, so one sweep
//! costs one query per shard (plus one per extra page of overdue rows), however many settled
//! deliveries the table holds.

use converger_core::{ChannelId, DeliveryId, Timestamp};
use converger_ports::{DeliveryMessage, DuePart, Overdue, QueueError, StoreError};
use futures::StreamExt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long past its end a lease must be before the reclaim pass takes it back: room for a
/// renewal that was on its way when the lease ran out (see `Attempts::keep_lease`).
pub const RECLAIM_GRACE_MS: i64 = 2_000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Index queries made (the sweep's request count, apart from the sends).
    pub queries: u32,
    /// Overdue pending deliveries found.
    pub found: u32,
    /// Of those, enqueued again.
    pub enqueued: u32,
    /// Of those, skipped because an attempt holds a live lease.
    pub leased: u32,
    /// Deliveries whose attempt's lease ended without an outcome (a crashed worker),
    /// enqueued again.
    pub reclaimed: u32,
    /// The per-sweep limit stopped the sweep early.
    pub truncated: bool,
    /// Window slots given back because their delivery no longer held them.
    pub slots_freed: usize,
    /// Backlog deliveries fed into free window slots.
    pub fed: usize,
    /// Parked deliveries of closed channels released after `park_seconds`.
    pub released: usize,
    /// The usage log's fold, when `USAGE_FOLD` is on or a fold ran before (a failure is
    /// logged and left to the next run).
    pub folded: Option<crate::fold::Folded>,
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// The retry scheduler: due deliveries enqueued, crashed attempts reclaimed, flow items reconciled.
#[derive(Clone, Copy)]
pub struct Sweeper<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) listings: &'p dyn converger_ports::DeliveryQueries,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) config: &'p crate::PipelineConfig,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) queue: &'p dyn converger_ports::Queue,
    pub(crate) usage: &'p dyn converger_ports::UsageStore,
    pub(crate) fold: crate::fold::UsageFold<'p>,
}

impl Sweeper<'_> {
    /// What the scheduled function does each minute: one sweep, then the leased part of the
    /// due index again every `reclaim_interval` for `budget`, so that a crashed attempt's
    /// delivery runs again seconds after its lease ends, not at the next minute.
    pub async fn sweep_and_watch(&self, budget: Duration) -> Result<SweepReport, SweepError> {
        let started = Instant::now();
        let fold = async {
            self.fold
                .run_if(self.config.usage_fold)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "usage fold failed");
                    None
                })
        };
        let (report, (), folded) = tokio::join!(self.sweep(), self.sample_depths(), fold);
        let mut report = report?;
        report.folded = folded;
        let interval = self.config.reclaim_interval;
        if interval.is_zero() {
            return Ok(report);
        }
        while started.elapsed() + interval < budget {
            tokio::time::sleep(interval).await;
            match self.reclaim().await {
                Ok((queries, reclaimed)) => {
                    report.queries += queries;
                    report.reclaimed += reclaimed;
                }
                Err(e) => tracing::warn!(error = %e, "reclaim pass failed"),
            }
        }
        Ok(report)
    }

    /// Samples the queues' depths for the dashboard's chart: this minute's sample, and the
    /// hour's highest of each queue (one writer, this function, once a minute: the hour's
    /// sample is read, raised and written back). A failure is logged and costs one point of
    /// the chart, never the sweep.
    pub async fn sample_depths(&self) {
        use converger_core::usage::Grain;
        let now = self.clock.now_ms();
        let sampled = async {
            let depths = self.queue.depths().await.map_err(|e| e.to_string())?;
            let (minute, hour) = (Grain::Minute.bucket(now), Grain::Hour.bucket(now));
            let put_minute = self.usage.put_depths(Grain::Minute, minute, &depths);
            let highest = async {
                let before = self.usage.read_depths(Grain::Hour, &[hour]).await?;
                let merged = converger_ports::QueueDepth::highest(
                    before.into_iter().next().unwrap_or_default(),
                    &depths,
                );
                self.usage.put_depths(Grain::Hour, hour, &merged).await
            };
            tokio::try_join!(put_minute, highest).map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        };
        if let Err(e) = sampled.await {
            tracing::warn!(error = %e, "queue depths not sampled");
        }
    }

    /// The due shards to read at `now_ms`: the deployment's own and any granted ones whose
    /// entries may still come due; the own ones alone when the grants cannot be read (a
    /// granted shard is read again by the next pass).
    async fn due_read_shards(&self, now_ms: i64) -> u32 {
        match self.listings.due_read_shards(now_ms).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "due-shard grants not read; own shards swept");
                self.listings.due_shards()
            }
        }
    }

    /// The leased part of the due index: deliveries whose attempt's lease ended (more than
    /// [`RECLAIM_GRACE_MS`] ago, room for a renewal in flight) without an outcome: their
    /// worker died. Each is taken back with one conditional write (it waits again, due now)
    /// and only then sent a message, so a row is enqueued once however many passes see it
    /// before its message is consumed; at most about `sweep_limit` a pass. The shards are read
    /// [`SHARDS_AT_ONCE`] at a time. Returns (queries, enqueued).
    pub async fn reclaim(&self) -> Result<(u32, u32), SweepError> {
        let now = self.clock.now();
        let before = now.ms().saturating_sub(RECLAIM_GRACE_MS);
        let budget = AtomicUsize::new(self.config.sweep_limit);
        let passes: Vec<Result<Reclaimed, SweepError>> =
            futures::stream::iter(0..self.due_read_shards(now.ms()).await)
                .map(|shard| self.reclaim_shard(shard, before, now, &budget))
                .buffer_unordered(SHARDS_AT_ONCE)
                .collect()
                .await;
        let (mut queries, mut reclaimed) = (0u32, 0u32);
        let mut crashed: BTreeMap<ChannelId, Vec<DeliveryId>> = BTreeMap::new();
        let mut first_error = None;
        for pass in passes {
            match pass {
                Ok(r) => {
                    queries += r.queries;
                    reclaimed += r.reclaimed;
                    for (c, ids) in r.crashed {
                        crashed.entry(c).or_default().extend(ids);
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        // The same crash may have left other slots of those channels behind: deliveries that
        // recorded an outcome but did not hand their slot on, messages that died unclaimed.
        for (channel, requeued) in &crashed {
            if let Err(e) = self
                .flow
                .reconciler()
                .recover_slots(channel, requeued)
                .await
            {
                tracing::warn!(channel_id = %channel, error = %e, "slot recovery failed");
            }
        }
        match first_error {
            // What the other shards took back is enqueued; the failure is reported.
            Some(e) if reclaimed == 0 => Err(e),
            Some(e) => {
                tracing::warn!(error = %e, "a due shard could not be read; the next pass reads it");
                Ok((queries, reclaimed))
            }
            None => Ok((queries, reclaimed)),
        }
    }

    async fn reclaim_shard(
        &self,
        shard: u32,
        before: i64,
        now: Timestamp,
        budget: &AtomicUsize,
    ) -> Result<Reclaimed, SweepError> {
        let mut out = Reclaimed::default();
        let mut from = None;
        loop {
            if budget.load(Ordering::Relaxed) == 0 {
                break;
            }
            let page = self
                .listings
                .overdue(DuePart::Leased, shard, before, 500, from)
                .await?;
            out.queries += 1;
            let mut msgs = Vec::new();
            for row in page.items {
                let Some(until) = row.lease_until else {
                    continue;
                };
                if !self.deliveries.requeue_expired(&row.id, until, now).await? {
                    continue;
                }
                if let Some(c) = &row.channel_id {
                    out.crashed
                        .entry(c.clone())
                        .or_default()
                        .push(row.id.clone());
                }
                msgs.push(message(row));
            }
            if !msgs.is_empty() {
                tracing::warn!(
                    shard,
                    n = msgs.len(),
                    "attempts whose lease ended without an outcome; enqueued again"
                );
                self.queue.send_many(&msgs).await?;
                out.reclaimed += msgs.len() as u32;
                take(budget, msgs.len());
            }
            match page.next {
                Some(n) => from = Some(n),
                None => break,
            }
        }
        Ok(out)
    }

    /// One sweep over every shard of the due index, [`SHARDS_AT_ONCE`] shards at a time.
    pub async fn sweep(&self) -> Result<SweepReport, SweepError> {
        let now = self.clock.now();
        let grace = i64::try_from(self.config.sweep_grace.as_millis()).unwrap_or(i64::MAX);
        let before = now.ms().saturating_sub(grace);
        let mut report = SweepReport::default();
        // Crashed attempts first: their leases have ended, nothing else will run them soon.
        match self.reclaim().await {
            Ok((queries, reclaimed)) => {
                report.queries += queries;
                report.reclaimed += reclaimed;
            }
            Err(e) => tracing::warn!(error = %e, "reclaim pass failed"),
        }
        let room = AtomicUsize::new(self.config.sweep_limit);
        let shards: Vec<Result<SweepReport, SweepError>> =
            futures::stream::iter(0..self.due_read_shards(now.ms()).await)
                .map(|shard| self.sweep_shard(shard, before, now.ms(), &room))
                .buffer_unordered(SHARDS_AT_ONCE)
                .collect()
                .await;
        for shard in shards {
            let r = shard?;
            report.queries += r.queries;
            report.found += r.found;
            report.enqueued += r.enqueued;
            report.leased += r.leased;
            report.truncated |= r.truncated;
        }
        match self.flow.reconciler().sweep_flows().await {
            Ok((freed, fed, released)) => {
                report.slots_freed = freed;
                report.fed = fed;
                report.released = released;
            }
            Err(e) => tracing::warn!(error = %e, "flow sweep failed"),
        }
        if report.enqueued > 0 || report.reclaimed > 0 {
            tracing::warn!(?report, "sweep enqueued overdue deliveries again");
        } else {
            tracing::info!(?report, "sweep done");
        }
        Ok(report)
    }

    /// The waiting part of one due shard: every row due before `before` with no live lease
    /// is enqueued again, while `room` (the sweep's limit, shared by its shards) lasts.
    async fn sweep_shard(
        &self,
        shard: u32,
        before: i64,
        now: i64,
        room: &AtomicUsize,
    ) -> Result<SweepReport, SweepError> {
        let mut report = SweepReport::default();
        let mut from = None;
        loop {
            let left = room.load(Ordering::Relaxed);
            if left == 0 {
                report.truncated = true;
                break;
            }
            let page = self
                .listings
                .overdue(DuePart::Waiting, shard, before, left.min(500), from)
                .await?;
            report.queries += 1;
            take(room, page.items.len());
            let mut msgs = Vec::with_capacity(page.items.len());
            for row in page.items {
                report.found += 1;
                if row.lease_until.is_some_and(|until| until >= now) {
                    report.leased += 1;
                    continue;
                }
                msgs.push(message(row));
            }
            if !msgs.is_empty() {
                self.queue.send_many(&msgs).await?;
                report.enqueued += msgs.len() as u32;
            }
            match page.next {
                Some(n) => from = Some(n),
                None => break,
            }
        }
        Ok(report)
    }
}

/// Due shards read at once by a sweep or a reclaim pass.
pub const SHARDS_AT_ONCE: usize = 16;

/// What a reclaim pass over one shard did.
#[derive(Default)]
struct Reclaimed {
    queries: u32,
    reclaimed: u32,
    crashed: BTreeMap<ChannelId, Vec<DeliveryId>>,
}

/// Takes `n` from a budget shared by concurrent shards (never below zero).
fn take(budget: &AtomicUsize, n: usize) {
    let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
        Some(b.saturating_sub(n))
    });
}

/// The message that runs an overdue row again.
fn message(row: Overdue) -> DeliveryMessage {
    let msg = DeliveryMessage::new(row.id, row.tier, None);
    match &row.channel_id {
        Some(c) => msg.on(c),
        None => msg,
    }
}
