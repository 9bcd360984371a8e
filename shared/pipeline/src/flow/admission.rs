//! Admission: where a new delivery starts (live with a window slot, in the backlog, or
//! parked), and taking a slot.

use super::*;
use crate::Pipeline;
use crate::outcome::AttemptError;
use converger_core::{CircuitState, Tier, time};
use converger_ports::{Channel, Delivery, Mark, SlotTake, StoreResult};

impl Pipeline {
    /// Takes a slot for `d`, asking again once when the window turned out larger than this
    /// instance knew.
    pub(super) async fn take(
        &self,
        channel: &Channel,
        d: &Delivery,
        cap: u32,
    ) -> StoreResult<SlotTake> {
        let now = time::now_ms();
        let mut ask = self.window_cap(channel, cap);
        for _ in 0..2 {
            let r = self
                .store
                .take_slot(&channel.id, &d.id, ask, now, false)
                .await?;
            match &r {
                SlotTake::Taken(f) | SlotTake::NotClosed(f) | SlotTake::Held(f) => {
                    self.remember_flow(f);
                    return Ok(r);
                }
                SlotTake::Full(f) => {
                    self.remember_flow(f);
                    let actual = f.window.min(cap).max(1);
                    if actual <= ask {
                        return Ok(r);
                    }
                    ask = actual;
                }
            }
        }
        Ok(SlotTake::Full(self.flow_state(&channel.id).await?))
    }

    /// Where a new delivery of `channel` goes; sets its row fields accordingly.
    pub(crate) async fn admit_new(
        &self,
        channel: &Channel,
        d: &mut Delivery,
    ) -> StoreResult<Admission> {
        let limits = self.limits(channel, d.tier);
        let Some(cap) = limits.cap else {
            let f = self.flow_state(&channel.id).await?;
            return Ok(if f.circuit_state == CircuitState::Closed {
                Admission::Live
            } else {
                d.status = converger_core::DeliveryStatus::Paused;
                Admission::Parked
            });
        };
        // An endpoint that keeps up (`core::flow::uncounted`) costs no slot write: the delivery
        // goes straight to the queue, up to a window's worth per second from this instance.
        // Beyond that a burst is counted: the window caps it, the backlog takes the rest.
        let f = self.flow_state(&channel.id).await?;
        if f.circuit_state == CircuitState::Closed
            && !self.counted(&limits, &f)
            && self.within_burst(&channel.id, cap)
        {
            return Ok(Admission::Live);
        }
        Ok(match self.take(channel, d, cap).await? {
            SlotTake::Taken(_) | SlotTake::Held(_) => {
                d.slot = true;
                Admission::Live
            }
            SlotTake::Full(_) => {
                d.in_backlog = true;
                Admission::Backlog
            }
            SlotTake::NotClosed(_) => {
                d.status = converger_core::DeliveryStatus::Paused;
                Admission::Parked
            }
        })
    }

    /// After new deliveries were written into a backlog or parked: the marks the sweeper and
    /// the feed look for, and a feed if a slot freed meanwhile.
    pub(crate) async fn after_admission(
        &self,
        channel: &Channel,
        tier: Tier,
        admission: Admission,
    ) -> Result<(), AttemptError> {
        match admission {
            Admission::Live => Ok(()),
            Admission::Parked => {
                let (f, _) = self.ensure_mark(&channel.id, Mark::Parked).await?;
                self.ensure_probe(channel, &f).await
            }
            Admission::Backlog => {
                let (f, fresh) = self.ensure_mark(&channel.id, Mark::Backlog).await?;
                // A slot freed between the full window and the mark finds no backlog flag:
                // feed now so that nothing waits for the sweeper (which also feeds every
                // marked backlog). A view that shows no free slot may be an instance's
                // cached one: the window as it is decides.
                if let Some(cap) = self.limits(channel, tier).cap {
                    let f = if fresh || f.free_slots(cap) > 0 {
                        f
                    } else {
                        let fresh = self.store.get_flow(&channel.id).await?;
                        self.remember_flow(&fresh);
                        fresh
                    };
                    if f.free_slots(cap) > 0 {
                        self.feed(channel, tier, f).await?;
                    }
                }
                Ok(())
            }
        }
    }
}
