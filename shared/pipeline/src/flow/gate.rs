//! The gate before an attempt: park, probe, window and rate limit, decided from the
//! channel's flow item.

use super::admission::Slot;
use super::*;
use crate::outcome::{FlowError, Report};
use converger_core::RateLimit;
use converger_core::flow::{Gate, RateWait, gate};
use converger_ports::Flow;
use converger_ports::{Channel, Delivery, DeliveryMessage, Mark};

impl AttemptGate<'_> {
    /// The gate before an attempt, with the lease held: park, probe, window, rate limit.
    pub(crate) async fn admit_attempt(
        &self,
        d: &Delivery,
        token: &str,
        msg: &DeliveryMessage,
        channel: &Channel,
    ) -> Result<Admit, FlowError> {
        // A deleted channel's deliveries are never parked or paced: the attempt dead-letters
        // them without a call.
        if channel.deleted_at.is_some() {
            return Ok(Admit::Go {
                probe: false,
                slot: None,
            });
        }
        let limits = self.limits(channel, d.tier);
        let now = self.clock.now();
        let mut flow = self.flow_state(&channel.id).await?;
        let mut decision = self.decide(&flow, d, &limits, now.ms());
        if decision != Gate::Proceed && decision != Gate::Probe {
            // Never park or probe on a cached view: read the breaker as it is.
            flow = self.flows.get_flow(&channel.id).await?;
            self.remember_flow(&flow);
            decision = self.decide(&flow, d, &limits, now.ms());
        }
        match decision {
            Gate::Proceed => {}
            Gate::Probe => {
                return Ok(Admit::Go {
                    probe: true,
                    slot: None,
                });
            }
            Gate::ClaimProbe => {
                if self
                    .breaker()
                    .claim_probe(channel, &flow, d.id.as_str(), &limits.breaker, now)
                    .await?
                    .is_some()
                {
                    return Ok(Admit::Go {
                        probe: true,
                        slot: None,
                    });
                }
                return self.park_claimed(d, token, channel).await;
            }
            Gate::Park => return self.park_claimed(d, token, channel).await,
        }
        // The window: a delivery without a slot (a retry, a replay) takes one first, unless
        // the channel's deliveries go uncounted.
        // A row taken out of the backlog by a finishing attempt names the slot item of the
        // slot that attempt hands it (`slot_item`) before the row says it holds one.
        let mut slot = None;
        if let Some(cap) = limits.cap
            && !d.slot
            && d.slot_item == 0
            && !flow.holds(&d.id)
            && self.window().counted(&limits, &flow)
        {
            match self
                .window()
                .take(channel, d.tier, &d.id, cap, false)
                .await?
            {
                Slot::Taken(item) => slot = Some(item),
                Slot::NotClosed => return self.park_claimed(d, token, channel).await,
                Slot::Held | Slot::Full => {
                    if !self.flows.to_backlog(d, token, now.ms(), now).await? {
                        return Ok(Admit::Done(Report::Skipped("lease lost before backlog")));
                    }
                    // The row is in the backlog: a failed mark must not send the message
                    // back to find it there.
                    self.window()
                        .after_admission_or_feed_later(channel, d.tier, Admission::Backlog)
                        .await;
                    return Ok(Admit::Done(Report::Backlogged));
                }
            }
        }
        // The rate limit: the request takes its place in the channel's schedule and waits
        // for it, here when it is a moment away, else in the queue (its message delayed,
        // carrying the place); no attempt is used. A schedule reserved beyond its horizon
        // gives no place: the message comes back when the schedule is there.
        if let Some(rate) = limits.rate {
            let now_us = now.ms().saturating_mul(1000);
            let place = match msg.rate_at.filter(|at| RateWait::place_usable(*at, now_us)) {
                Some(at) => Ok(at),
                None => self.window().rate_place(&channel.id, &rate, now_us).await?,
            };
            let snooze = match place {
                Ok(at) => match RateWait::for_place(at, now_us) {
                    RateWait::Go => None,
                    RateWait::Sleep(us) => {
                        tokio::time::sleep(std::time::Duration::from_micros(
                            u64::try_from(us).unwrap_or(0),
                        ))
                        .await;
                        None
                    }
                    RateWait::Snooze(delay_s) => Some((delay_s, Some(at))),
                },
                Err(retry_at) => Some((RateLimit::snooze_s(retry_at, now_us), None)),
            };
            if let Some((delay_s, rate_at)) = snooze {
                self.deliveries.release(d, token).await?;
                let mut again = msg.clone();
                again.rate_at = rate_at;
                self.queue.send(&again, delay_s).await?;
                return Ok(Admit::Done(Report::Snoozed { delay_s }));
            }
        }
        Ok(Admit::Go { probe: false, slot })
    }

    fn decide(&self, flow: &Flow, d: &Delivery, limits: &Limits, now: i64) -> Gate {
        gate(
            flow.circuit_state,
            flow.circuit_changed_at,
            flow.probe.as_deref(),
            d.id.as_str(),
            limits.breaker.cooldown_ms,
            now,
        )
    }

    /// Parks a claimed delivery: `paused`, no message kept, its slot given back.
    async fn park_claimed(
        &self,
        d: &Delivery,
        token: &str,
        channel: &Channel,
    ) -> Result<Admit, FlowError> {
        let now = self.clock.now();
        if !self.flows.park(d, Some(token), now).await? {
            return Ok(Admit::Done(Report::Skipped("lease lost before parking")));
        }
        self.park_marks(channel, d).await?;
        tracing::info!(delivery_id = %d.id, channel_id = %channel.id, "delivery parked");
        Ok(Admit::Done(Report::Parked))
    }

    /// Parks a delivery no attempt holds (a retry of a channel whose breaker just opened).
    pub(crate) async fn park_waiting(
        &self,
        d: &Delivery,
        channel: &Channel,
    ) -> Result<(), FlowError> {
        if self.flows.park(d, None, self.clock.now()).await? {
            self.park_marks(channel, d).await?;
        }
        Ok(())
    }

    /// After a delivery was parked: its slot back, the parked mark set (its `paused` is
    /// announced from the row's change).
    async fn park_marks(&self, channel: &Channel, d: &Delivery) -> Result<(), FlowError> {
        let (f, _) = self.ensure_mark(&channel.id, Mark::Parked).await?;
        self.breaker().ensure_probe(channel, &f).await?;
        // A parked delivery holds no slot (the view may be a cached one: the row says too).
        if d.slot || f.holds(&d.id) {
            let item = if d.slot { d.slot_item } else { 0 };
            self.window().free_slot(&channel.id, &d.id, item).await?;
        }
        Ok(())
    }
}
