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
                    match self.store.leave_backlog(&id, now).await? {
                        Some(d) => {
                            msgs.push(DeliveryMessage::new(d.id, d.tier, None).on(&d.channel_id))
                        }
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
