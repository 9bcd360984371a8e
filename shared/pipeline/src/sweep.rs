//! The sweeper (the retry-scheduler function): every pending delivery that is overdue by more
//! than the grace period and holds no live lease is enqueued again. This is what makes a crash
//! between a row write and its queue send impossible to lose. A delivery whose attempt
//! claimed it and never recorded an outcome (the worker crashed) is enqueued as soon as its
//! lease has ended, without the grace: the leased part of the due index holds exactly those.
//!
//! It reads the sparse, sharded due index: only pending deliveries are in it, so one sweep
//! costs one query per shard (plus one per extra page of overdue rows), however many settled
//! deliveries the table holds.

use crate::Pipeline;
use converger_core::time;
use converger_core::{ChannelId, DeliveryId};
use converger_ports::DUE_SHARDS;
use converger_ports::{DeliveryMessage, DuePart, Overdue, QueueError, StoreError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long past its end a lease must be before the reclaim pass takes it back: room for a
/// renewal that was on its way when the lease ran out (see `Pipeline::keep_lease`).
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
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl Pipeline {
    /// What the scheduled function does each minute: one sweep, then the leased part of the
    /// due index again every `reclaim_interval` for `budget`, so that a crashed attempt's
    /// delivery runs again seconds after its lease ends, not at the next minute.
    pub async fn sweep_and_watch(&self, budget: Duration) -> Result<SweepReport, SweepError> {
        let started = Instant::now();
        let mut report = self.sweep().await?;
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

    /// The leased part of the due index: deliveries whose attempt's lease ended (more than
    /// [`RECLAIM_GRACE_MS`] ago, room for a renewal in flight) without an outcome: their
    /// worker died. Each is taken back with one conditional write (it waits again, due now)
    /// and only then sent a message, so a row is enqueued once however many passes see it
    /// before its message is consumed; at most `sweep_limit` a pass. Returns (queries,
    /// enqueued).
    pub async fn reclaim(&self) -> Result<(u32, u32), SweepError> {
        let now = time::now_ms();
        let before = now.saturating_sub(RECLAIM_GRACE_MS);
        let (mut queries, mut reclaimed) = (0u32, 0u32);
        let mut crashed: BTreeMap<ChannelId, Vec<DeliveryId>> = BTreeMap::new();
        'shards: for shard in 0..DUE_SHARDS {
            let mut from = None;
            loop {
                let page = self
                    .store
                    .overdue(DuePart::Leased, shard, before, 500, from)
                    .await?;
                queries += 1;
                let mut msgs = Vec::new();
                for row in page.items {
                    let Some(until) = row.lease_until else {
                        continue;
                    };
                    if !self.store.requeue_expired(&row.id, until, now).await? {
                        continue;
                    }
                    if let Some(c) = &row.channel_id {
                        crashed.entry(c.clone()).or_default().push(row.id.clone());
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
                    reclaimed += msgs.len() as u32;
                }
                if reclaimed as usize >= self.config.sweep_limit {
                    break 'shards;
                }
                match page.next {
                    Some(n) => from = Some(n),
                    None => break,
                }
            }
        }
        // The same crash may have left other slots of those channels behind: deliveries that
        // recorded an outcome but did not hand their slot on, messages that died unclaimed.
        for (channel, requeued) in &crashed {
            if let Err(e) = self.recover_slots(channel, requeued).await {
                tracing::warn!(channel_id = %channel, error = %e, "slot recovery failed");
            }
        }
        Ok((queries, reclaimed))
    }

    /// One sweep over every shard of the due index.
    pub async fn sweep(&self) -> Result<SweepReport, SweepError> {
        let now = time::now_ms();
        let grace = i64::try_from(self.config.sweep_grace.as_millis()).unwrap_or(i64::MAX);
        let before = now.saturating_sub(grace);
        let mut report = SweepReport::default();
        // Crashed attempts first: their leases have ended, nothing else will run them soon.
        match self.reclaim().await {
            Ok((queries, reclaimed)) => {
                report.queries += queries;
                report.reclaimed += reclaimed;
            }
            Err(e) => tracing::warn!(error = %e, "reclaim pass failed"),
        }
        'shards: for shard in 0..DUE_SHARDS {
            let mut from = None;
            loop {
                let room = self
                    .config
                    .sweep_limit
                    .saturating_sub(report.found as usize);
                if room == 0 {
                    report.truncated = true;
                    break 'shards;
                }
                let page = self
                    .store
                    .overdue(DuePart::Waiting, shard, before, room.min(500), from)
                    .await?;
                report.queries += 1;
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
        }
        match self.sweep_flows().await {
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
}

/// The message that runs an overdue row again.
fn message(row: Overdue) -> DeliveryMessage {
    let msg = DeliveryMessage::new(row.id, row.tier, None);
    match &row.channel_id {
        Some(c) => msg.on(c),
        None => msg,
    }
}
