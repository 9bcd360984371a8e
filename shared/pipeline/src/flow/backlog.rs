//! Feeding a channel's backlog into freed window slots, with the rows one query found
//! remembered for the next feed.

use super::*;
use crate::Pipeline;
use crate::outcome::AttemptError;
use converger_core::flow::backlog_mark_clearable;
use converger_core::{CircuitState, Tier, time};
use converger_ports::Flow;
use converger_ports::{Channel, DeliveryMessage, Mark, Settle, SlotTake};

impl Pipeline {
    /// Hands free window slots to the oldest due deliveries of the backlog. One backlog
    /// query reads up to [`BACKLOG_PREFETCH`] rows; the ones not fed now are remembered for a
    /// few seconds, so a busy channel's feeds do not query once per delivery. A remembered
    /// row another instance fed meanwhile costs one failed take, nothing more.
    pub(crate) async fn feed(
        &self,
        channel: &Channel,
        tier: Tier,
        flow: Flow,
    ) -> Result<usize, AttemptError> {
        let Some(cap) = self.limits(channel, tier).cap else {
            return Ok(0);
        };
        if flow.circuit_state != CircuitState::Closed {
            return Ok(0);
        }
        let free = flow.free_slots(cap);
        if free == 0 {
            return Ok(0);
        }
        let now = time::now_ms();
        let mut candidates = self.backlog_hints(&channel.id, free);
        if candidates.len() < free {
            let waiting = self
                .store
                .backlog(&channel.id, now, BACKLOG_PREFETCH.max(free))
                .await?;
            if waiting.is_empty() && candidates.is_empty() {
                if let Some(at) = flow
                    .backlog_at
                    .filter(|at| backlog_mark_clearable(*at, now))
                {
                    let f = self
                        .store
                        .mark(&channel.id, Mark::Backlog, None, Some(at))
                        .await?;
                    self.remember_flow(&f);
                }
                return Ok(0);
            }
            let mut fresh: Vec<_> = waiting
                .into_iter()
                .map(|w| w.id)
                .filter(|id| !candidates.contains(id))
                .collect();
            let rest = fresh.split_off((free - candidates.len()).min(fresh.len()));
            candidates.extend(fresh);
            self.keep_backlog_hints(&channel.id, rest);
        }
        let mut msgs = Vec::with_capacity(candidates.len());
        let ask = flow.window.min(cap).max(1);
        for id in candidates {
            match self
                .store
                .take_slot(&channel.id, &id, ask, now, true)
                .await?
            {
                SlotTake::Taken(f) => {
                    self.remember_flow(&f);
                    match self.leave_backlog(&id, now).await? {
                        Some(None) => {}
                        Some(Some(msg)) => msgs.push(msg),
                        None => {
                            // Fed or parked meanwhile: the slot this feeder took goes back.
                            let f = self
                                .store
                                .settle(&channel.id, &Settle::free(id, now))
                                .await?;
                            self.remember_flow(&f);
                        }
                    }
                }
                // Another feeder is handing this row on.
                SlotTake::Held(f) => self.remember_flow(&f),
                SlotTake::Full(f) | SlotTake::NotClosed(f) => {
                    self.remember_flow(&f);
                    break;
                }
            }
        }
        if !msgs.is_empty() {
            self.queue.send_many(&msgs).await?;
        }
        Ok(msgs.len())
    }

    /// Takes a fed row out of the backlog: its message, or `Some(None)` when the running task
    /// (an attempt that just handed its slot on) keeps the row to run itself, leased in the
    /// same write, so that a crash leaves it leased and the reclaim pass takes it back within
    /// a lease slice. `None` when it was no longer waiting.
    async fn leave_backlog(
        &self,
        id: &DeliveryId,
        now: i64,
    ) -> Result<Option<Option<DeliveryMessage>>, AttemptError> {
        let message = |d: &converger_ports::Delivery| {
            DeliveryMessage::new(d.id.clone(), d.tier, None).on(&d.channel_id)
        };
        if !crate::attempt::chain_open() {
            return Ok(self
                .store
                .leave_backlog(id, now)
                .await?
                .map(|d| Some(message(&d))));
        }
        let token = uuid::Uuid::new_v4().simple().to_string();
        let slice = i64::try_from(self.config.lease_slice.as_millis())
            .unwrap_or(converger_core::policy::LEASE_SLICE_MS);
        let Some(d) = self
            .store
            .leave_backlog_leased(id, now, &token, now.saturating_add(slice), true)
            .await?
        else {
            return Ok(None);
        };
        let msg = message(&d);
        match crate::attempt::chain_keep(msg, crate::attempt::Claimed { d, token }) {
            None => Ok(Some(None)),
            Some((msg, claimed)) => {
                self.store.release(&claimed.d, &claimed.token).await?;
                Ok(Some(Some(msg)))
            }
        }
    }

    /// While an attempt's call runs: the next row of its channel's backlog, taken out leased
    /// to this task with its activity read, to run as soon as the call ends (the finishing
    /// attempt hands it its slot in its settle write). Only for a counted window with a
    /// backlog and no failure since its last success, while the task may chain; `None`
    /// otherwise or when there is none.
    pub(crate) async fn prefetch_next(
        &self,
        channel: &Channel,
        tier: Tier,
    ) -> Result<Option<(DeliveryMessage, crate::attempt::Claimed)>, AttemptError> {
        let limits = self.limits(channel, tier);
        let Some(flow) = self.cached_flow(&channel.id) else {
            return Ok(None);
        };
        // Not for a channel that is failing: its call may well end in a timeout, and the row
        // would wait leased for it.
        if !crate::attempt::chain_open()
            || flow.circuit_state != CircuitState::Closed
            || flow.backlog_at.is_none()
            || flow.consecutive_failures > 0
            || !self.counted(&limits, &flow)
        {
            return Ok(None);
        }
        let now = time::now_ms();
        let mut ids = self.backlog_hints(&channel.id, 1);
        if ids.is_empty() {
            // A backlog this instance found empty a moment ago is not queried again on every
            // attempt: the mark outlives the rows by seconds, and the feed still looks.
            if self.flow.backlog_empty.get(&channel.id).is_some() {
                return Ok(None);
            }
            let mut waiting: Vec<_> = self
                .store
                .backlog(&channel.id, now, BACKLOG_PREFETCH)
                .await?
                .into_iter()
                .map(|w| w.id)
                .collect();
            if waiting.is_empty() {
                self.flow.backlog_empty.insert(channel.id.clone(), ());
                return Ok(None);
            }
            let rest = waiting.split_off(1);
            self.keep_backlog_hints(&channel.id, rest);
            ids = waiting;
        }
        let Some(id) = ids.pop() else {
            return Ok(None);
        };
        let token = uuid::Uuid::new_v4().simple().to_string();
        let slice = i64::try_from(self.config.lease_slice.as_millis())
            .unwrap_or(converger_core::policy::LEASE_SLICE_MS);
        let Some(d) = self
            .store
            .leave_backlog_leased(&id, now, &token, now.saturating_add(slice), false)
            .await?
        else {
            return Ok(None);
        };
        // Read now rather than after the call; a failed read is made again by the attempt.
        let activity = self
            .store
            .get_activity(&d.tenant_id, &d.activity_id)
            .await
            .ok()
            .flatten();
        let msg = DeliveryMessage::new(d.id.clone(), d.tier, activity.as_ref()).on(&d.channel_id);
        Ok(Some((msg, crate::attempt::Claimed { d, token })))
    }

    /// Up to `n` remembered backlog rows of a channel, oldest first (forgotten after
    /// [`HINT_TTL`]).
    fn backlog_hints(&self, channel: &ChannelId, n: usize) -> Vec<DeliveryId> {
        self.flow
            .backlog_hints
            .with_mut(channel, |ids| {
                let take = n.min(ids.len());
                ids.drain(..take).collect()
            })
            .unwrap_or_default()
    }

    fn keep_backlog_hints(&self, channel: &ChannelId, ids: Vec<DeliveryId>) {
        if ids.is_empty() {
            self.flow.backlog_hints.remove(channel);
        } else {
            self.flow.backlog_hints.insert(channel.clone(), ids.into());
        }
    }
}
