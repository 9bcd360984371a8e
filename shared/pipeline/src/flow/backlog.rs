//! Feeding a channel's backlog into freed window slots, with the rows one query found
//! remembered for the next feed.

use super::admission::Slot;
use super::*;
use crate::outcome::FlowError;
use converger_core::flow::{backlog_mark_clearable, takes_next_ahead};
use converger_core::{CircuitState, Tier};
use converger_ports::Flow;
use converger_ports::{Channel, DeliveryMessage, Mark};
use std::collections::VecDeque;

/// How long remembered backlog rows are trusted.
const HINT_TTL: Duration = Duration::from_secs(5);

/// How long a backlog the next-row lookup found empty is not looked at again by it.
const EMPTY_TTL: Duration = Duration::from_secs(1);

/// What this instance remembers of backlogs, reached from this file only.
pub(super) struct BacklogCaches {
    /// The rows one feed found and did not feed yet (trusted for [`HINT_TTL`]).
    hints: TtlCache<ChannelId, VecDeque<DeliveryId>>,
    /// Backlogs the next-row lookup found empty (trusted for [`EMPTY_TTL`]).
    empty: TtlCache<ChannelId, ()>,
}

impl BacklogCaches {
    pub(super) fn new() -> Self {
        Self {
            hints: TtlCache::new(HINT_TTL),
            empty: TtlCache::new(EMPTY_TTL),
        }
    }
}

impl Backlog<'_> {
    /// Hands free window slots (at most `most`) to the oldest due deliveries of the backlog. One backlog
    /// query reads up to [`BACKLOG_PREFETCH`] rows; the ones not fed now are remembered for a
    /// few seconds, so a busy channel's feeds do not query once per delivery. A remembered
    /// row another instance fed meanwhile costs one failed take, nothing more.
    pub(crate) async fn feed(
        &self,
        channel: &Channel,
        tier: Tier,
        flow: Flow,
        most: usize,
    ) -> Result<usize, FlowError> {
        let Some(cap) = self.limits(channel, tier).cap else {
            return Ok(0);
        };
        if flow.circuit_state != CircuitState::Closed {
            return Ok(0);
        }
        // At most one query's worth at a time: a window of several slot items cannot say how
        // many are free, so its takes decide.
        let free = flow.free_slots(cap).min(BACKLOG_PREFETCH).min(most);
        if free == 0 {
            return Ok(0);
        }
        let now = self.clock.now();
        let Some(candidates) = self
            .backlog_rows(&channel.id, free, now.ms(), false)
            .await?
        else {
            if let Some(at) = flow
                .backlog_at
                .filter(|at| backlog_mark_clearable(*at, now.ms()))
            {
                let f = self
                    .flows
                    .mark(&channel.id, Mark::Backlog, None, Some(at))
                    .await?;
                self.remember_flow(&f);
                if f.backlog_at.is_none() {
                    self.share().idle(channel).await;
                }
            }
            return Ok(0);
        };
        let mut msgs = Vec::with_capacity(candidates.len());
        let mut full_left = converger_core::flow::full_takes_past(cap);
        for id in candidates {
            match self.window().take(channel, tier, &id, cap, true).await? {
                Slot::Taken(item) => match self.flows.leave_backlog(&id, now, item).await? {
                    Some(d) => msgs.push(DeliveryMessage::new(d.id.clone(), d.tier, None).of(&d)),
                    // Fed or parked meanwhile: the slot this feeder took goes back.
                    None => self.window().free_slot(&channel.id, &id, item).await?,
                },
                // Another feeder is handing this row on.
                Slot::Held => {}
                Slot::Full if full_left > 0 => full_left -= 1,
                Slot::Full | Slot::NotClosed => break,
            }
        }
        if !msgs.is_empty() {
            self.queue.send_many(&msgs).await?;
        }
        Ok(msgs.len())
    }

    /// Up to `n` of the channel's oldest due backlog rows: remembered ones first, then one
    /// query for up to [`BACKLOG_PREFETCH`] (the rows beyond `n` are remembered). `None` when
    /// the backlog is empty: found so by the query, or, with `trust_empty`, by one this
    /// instance made within [`EMPTY_TTL`].
    async fn backlog_rows(
        &self,
        channel: &ChannelId,
        n: usize,
        now: i64,
        trust_empty: bool,
    ) -> Result<Option<Vec<DeliveryId>>, FlowError> {
        let mut rows = self.backlog_hints(channel, n);
        if rows.len() >= n {
            return Ok(Some(rows));
        }
        if rows.is_empty() && trust_empty && self.caches.backlog.empty.get(channel).is_some() {
            return Ok(None);
        }
        let waiting = self
            .flows
            .backlog(channel, now, BACKLOG_PREFETCH.max(n))
            .await?;
        if waiting.is_empty() && rows.is_empty() {
            self.caches.backlog.empty.insert(channel.clone(), ());
            return Ok(None);
        }
        self.caches.backlog.empty.remove(channel);
        let mut fresh: Vec<_> = waiting
            .into_iter()
            .map(|w| w.id)
            .filter(|id| !rows.contains(id))
            .collect();
        let rest = fresh.split_off((n - rows.len()).min(fresh.len()));
        rows.extend(fresh);
        self.keep_backlog_hints(channel, rest);
        Ok(Some(rows))
    }

    /// While an attempt's call runs: the next row of its channel's backlog, taken out leased
    /// under `token` (`core::flow::takes_next_ahead` says when) with its message (its activity
    /// read), for the caller to run as soon as its call ends; the finishing attempt hands it
    /// its slot in its settle write. `None` when none was taken.
    pub(crate) async fn take_next_ahead(
        &self,
        channel: &Channel,
        running: &converger_ports::Delivery,
        token: &str,
    ) -> Result<Option<(DeliveryMessage, converger_ports::Delivery)>, FlowError> {
        let limits = self.limits(channel, running.tier);
        let Some(flow) = self.cached_flow(&channel.id) else {
            return Ok(None);
        };
        if !takes_next_ahead(
            flow.circuit_state,
            flow.backlog_at.is_some(),
            flow.consecutive_failures,
            self.window().counted(&limits, &flow),
        ) {
            return Ok(None);
        }
        // A window over the tenant's share for it gives its slot back rather than on.
        if let Some(cap) = limits.cap
            && self.share().most(channel, running.tier, cap).await < flow.window.min(cap)
        {
            return Ok(None);
        }
        let now = self.clock.now();
        let Some(id) = self
            .backlog_rows(&channel.id, 1, now.ms(), true)
            .await?
            .and_then(|mut rows| rows.pop())
        else {
            return Ok(None);
        };
        let until = now.ms().saturating_add(self.lease_slice_ms());
        let Some(d) = self
            .flows
            .leave_backlog_leased(&id, now, token, until, running.slot_item)
            .await?
        else {
            return Ok(None);
        };
        // Read now rather than after the call; a failed read is made again by the attempt.
        let activity = self
            .activities
            .get_activity(&d.tenant_id, &d.activity_id)
            .await
            .ok()
            .flatten();
        let carried = activity
            .as_ref()
            .and_then(converger_ports::Activity::if_inline);
        let msg = DeliveryMessage::new(d.id.clone(), d.tier, carried).of(&d);
        Ok(Some((msg, d)))
    }

    /// Up to `n` remembered backlog rows of a channel, oldest first (forgotten after
    /// [`HINT_TTL`]).
    fn backlog_hints(&self, channel: &ChannelId, n: usize) -> Vec<DeliveryId> {
        self.caches
            .backlog
            .hints
            .with_mut(channel, |ids| {
                let take = n.min(ids.len());
                ids.drain(..take).collect()
            })
            .unwrap_or_default()
    }

    fn keep_backlog_hints(&self, channel: &ChannelId, ids: Vec<DeliveryId>) {
        if ids.is_empty() {
            self.caches.backlog.hints.remove(channel);
        } else {
            self.caches
                .backlog
                .hints
                .insert(channel.clone(), ids.into());
        }
    }
}
