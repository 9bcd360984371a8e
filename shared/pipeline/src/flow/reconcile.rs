//! The sweeper's reconciliation of flow items: slots leaked by lost attempts freed, a
//! stalled backlog fed, a missed probe scheduled again; and the same for one channel, at once,
//! when a crash or a storage failure is seen to have left slots behind.

use super::Reconciler;
use crate::outcome::FlowError;
use converger_core::flow::{slot_is_the_rows, slot_item_bound};
use converger_core::{ChannelId, CircuitState, DeliveryId, DeliveryStatus};
use converger_ports::{Channel, Delivery, DeliveryMessage, Flow, HeldSlot, Transition};
use converger_ports::{FlowJobKind, Mark};

impl Reconciler<'_> {
    /// A message found its delivery settled: if the delivery still holds a window slot (its
    /// attempt recorded the outcome and then died, or lost storage, before handing the slot
    /// on), the slot goes back and the backlog is fed. One read of the flow item (not the
    /// cached one: the leak is what the cache may not know), only on this rare path.
    pub(crate) async fn free_settled_slot(&self, d: &Delivery) -> Result<(), FlowError> {
        let flow = self.flows.get_flow(&d.channel_id).await?;
        let Some(at) = flow.slots.get(d.id.as_str()).copied() else {
            return Ok(());
        };
        let freed = self
            .flows
            .free_slots(
                &d.channel_id,
                &[HeldSlot {
                    item: 0,
                    delivery: d.id.to_string(),
                    taken_at: at,
                }],
            )
            .await?;
        if freed > 0 {
            tracing::warn!(delivery_id = %d.id, channel_id = %d.channel_id, "a settled delivery's slot given back");
            if let Some(channel) = self.channels.get_channel(&d.channel_id).await? {
                self.feed_now(&channel).await?;
            }
        }
        Ok(())
    }

    /// A crash was seen on `channel` (an attempt's lease ended without an outcome): its slots
    /// older than a lease slice are reconciled now rather than at the sweeper's
    /// `SLOT_GRACE_SECONDS`, and the backlog fed if any came back. `requeued` are the crashed
    /// attempts' own deliveries, already sent a message. Returns (slots freed, messages sent).
    pub(crate) async fn recover_slots(
        &self,
        channel: &ChannelId,
        requeued: &[DeliveryId],
    ) -> Result<(usize, usize), FlowError> {
        let flow = self.flows.get_flow(channel).await?;
        let ch = self.channels.get_channel(channel).await?;
        let items = ch
            .as_ref()
            .map_or(1, |c| slot_bound(c, self.config.tier_concurrency));
        let (freed, resent) = self
            .reconcile_slots(&flow, items, self.config.lease_slice, requeued)
            .await?;
        if freed > 0
            && let Some(ch) = ch
        {
            self.feed_now(&ch).await?;
        }
        Ok((freed, resent))
    }

    /// The slots of `flow` held longer than `older_than`, checked against their deliveries:
    /// a slot whose delivery is settled, missing or back in the backlog is freed; a delivery
    /// that holds one, is due by more than `older_than` and was not claimed since (its
    /// message may have died with a worker) gets a new message, unless it is in `requeued`
    /// (a duplicate costs one refused claim). Returns (slots freed, messages sent).
    async fn reconcile_slots(
        &self,
        flow: &Flow,
        items: u32,
        older_than: std::time::Duration,
        requeued: &[DeliveryId],
    ) -> Result<(usize, usize), FlowError> {
        let now = self.clock.now();
        let older_than = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
        let mut held: Vec<HeldSlot> = flow
            .slots
            .iter()
            .map(|(d, at)| HeldSlot {
                item: 0,
                delivery: d.clone(),
                taken_at: *at,
            })
            .collect();
        if items > 1 {
            held.extend(self.flows.held_slots(&flow.channel_id, items).await?);
        }
        let old: Vec<HeldSlot> = held
            .into_iter()
            .filter(|h| now.ms() - h.taken_at > older_than)
            .collect();
        if old.is_empty() {
            return Ok((0, 0));
        }
        let mut ids: Vec<DeliveryId> = old
            .iter()
            .filter_map(|h| DeliveryId::parse(&h.delivery).ok())
            .collect();
        ids.sort();
        ids.dedup();
        let rows = self.deliveries.get_deliveries(&ids).await?;
        let holds = |r: &Delivery| r.status == DeliveryStatus::Pending && !r.in_backlog;
        let stale: Vec<HeldSlot> = old
            .into_iter()
            .filter(|h| {
                !rows.iter().any(|r| {
                    r.id.as_str() == h.delivery
                        && slot_is_the_rows(holds(r), r.slot, r.slot_item, h.item)
                })
            })
            .collect();
        let lost: Vec<DeliveryMessage> = rows
            .iter()
            .filter(|r| {
                holds(r)
                    && !requeued.contains(&r.id)
                    && !r.handed_off
                    && r.lease_until.is_none()
                    && r.next_attempt_at < now.ms() - older_than
            })
            .map(|r| DeliveryMessage::new(r.id.clone(), r.tier, None).of(r))
            .collect();
        if !lost.is_empty() {
            self.queue.send_many(&lost).await?;
        }
        let freed = if stale.is_empty() {
            0
        } else {
            self.flows.free_slots(&flow.channel_id, &stale).await?
        };
        if freed > 0 || !lost.is_empty() {
            tracing::warn!(channel_id = %flow.channel_id, freed, resent = lost.len(), "window slots reconciled");
        }
        Ok((freed, lost.len()))
    }

    /// Feeds `channel`'s backlog from its flow item as it is now.
    async fn feed_now(&self, channel: &Channel) -> Result<usize, FlowError> {
        let tier = self.tenant_tier(channel).await?;
        let current = self.flows.get_flow(&channel.id).await?;
        self.backlog()
            .feed(channel, tier, current, super::BACKLOG_PREFETCH)
            .await
    }

    /// The sweeper's flow pass: frees slots whose delivery no longer holds them, feeds
    /// backlogs, releases parked deliveries of closed channels after `park_seconds`, and
    /// restarts probe loops whose message was lost. Returns (slots freed, fed, released).
    pub async fn sweep_flows(&self) -> Result<(usize, usize, usize), FlowError> {
        let mut totals = (0, 0, 0);
        let mut from = None;
        loop {
            let page = self.flows.scan_flows(100, from.take()).await?;
            for f in page.items {
                match self.sweep_flow(f).await {
                    Ok((a, b, c)) => {
                        totals.0 += a;
                        totals.1 += b;
                        totals.2 += c;
                    }
                    Err(e) => tracing::warn!(error = %e, "flow sweep of a channel failed"),
                }
            }
            match page.next {
                Some(n) => from = Some(n),
                None => return Ok(totals),
            }
        }
    }

    async fn sweep_flow(&self, f: Flow) -> Result<(usize, usize, usize), FlowError> {
        let now = self.clock.now();
        let Some(channel) = self.channels.get_channel(&f.channel_id).await? else {
            return Ok((0, 0, 0));
        };
        let breaker = channel.circuit_breaker.effective();
        let (freed, _) = self
            .reconcile_slots(
                &f,
                slot_bound(&channel, self.config.tier_concurrency),
                self.config.slot_grace,
                &[],
            )
            .await?;
        if channel.deleted_at.is_some() {
            // A deleted channel holds nothing back (a pause or breaker that raced the delete):
            // its waiting deliveries go to an attempt, which dead-letters them.
            if f.circuit_state != CircuitState::Closed {
                self.let_go(&channel).await?;
            }
            let released = if f.parked_at.is_some() {
                self.jobs().release(&channel, &f).await?
            } else {
                0
            };
            let fed = if f.backlog_at.is_some() || freed > 0 {
                self.feed_now(&channel).await?
            } else {
                0
            };
            return Ok((freed, fed, released));
        }
        let mut fed = 0;
        let mut released = 0;
        match f.circuit_state {
            CircuitState::Closed => {
                let parked_long = f.parked_at.is_some_and(|p| {
                    now.ms() - p > i64::try_from(breaker.park_seconds * 1000).unwrap_or(i64::MAX)
                });
                if parked_long {
                    released = self.jobs().release(&channel, &f).await?;
                }
                if f.backlog_at.is_some() || freed > 0 {
                    fed = self.feed_now(&channel).await?;
                }
            }
            CircuitState::Open | CircuitState::HalfOpen => {
                if f.probe_due.is_none_or(|due| due + 60_000 < now.ms()) {
                    self.breaker()
                        .send_flow_job(&channel.id, FlowJobKind::Probe, 0)
                        .await?;
                    self.flows
                        .mark(&channel.id, Mark::ProbeDue, Some(now.ms()), None)
                        .await?;
                }
            }
            CircuitState::Paused => {}
        }
        Ok((freed, fed, released))
    }

    /// Lets a deleted channel's waiting deliveries reach an attempt, which dead-letters them:
    /// its breaker closed and its parked deliveries released.
    pub(crate) async fn let_go(&self, channel: &Channel) -> Result<(), FlowError> {
        use CircuitState::*;
        let t = Transition::new(&[Open, HalfOpen, Paused], Closed, self.clock.now()).reset();
        if let Some(f) = self.flows.transition(&channel.id, &t).await? {
            self.remember_flow(&f);
        }
        self.breaker()
            .send_flow_job(&channel.id, FlowJobKind::Release, 0)
            .await?;
        Ok(())
    }
}

/// The most slot items `channel`'s window may span (`core::flow::slot_item_bound`).
fn slot_bound(channel: &Channel, consumers: converger_core::TierConcurrency) -> u32 {
    slot_item_bound(channel.circuit_breaker.effective().max_in_flight, consumers)
}
