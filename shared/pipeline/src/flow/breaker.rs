//! After an attempt: the slot given back, the window's growth or shrink, the breaker's
//! counters, a probe's outcome (close or open again) and the backlog fed into freed slots.
//! What the breaker's announcements and auto-disable need is the attempt's (`attempt::after`).

use super::*;
use crate::outcome::FlowError;
use converger_core::flow::{Signal, should_open, window_after};
use converger_core::time::Timestamp;
use converger_core::{BreakerConfig, CircuitState};
use converger_ports::{Channel, Delivery, FlowJob, FlowJobKind, Mark, Outcome, Settle, Transition};

/// How an attempt's call ended, as the breaker reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallEnd<'a> {
    outcome: Outcome,
    /// The failure says the endpoint is overloaded (a timeout, a 429, a `Retry-After`).
    congestion: bool,
    /// The backlog row that gets this attempt's slot, in the same write.
    hand_on: Option<&'a converger_core::DeliveryId>,
}

impl<'a> CallEnd<'a> {
    pub(crate) fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            congestion: false,
            hand_on: None,
        }
    }

    /// The end of a call that reached the endpoint, as its one classification says: a
    /// failure a retry may heal counts against the breaker, one that cannot does not, and
    /// either shrinks the window when the endpoint said it is overloaded.
    pub(crate) fn of(verdict: converger_core::Verdict) -> Self {
        match verdict {
            converger_core::Verdict::Success => Self::new(Outcome::Success),
            converger_core::Verdict::Failed(f) => Self {
                outcome: if f.retryable {
                    Outcome::Transient
                } else {
                    Outcome::Neutral
                },
                congestion: f.congested,
                hand_on: None,
            },
        }
    }

    pub(crate) fn handing_on(self, hand_on: Option<&'a converger_core::DeliveryId>) -> Self {
        Self { hand_on, ..self }
    }

    pub(crate) fn outcome(&self) -> Outcome {
        self.outcome
    }
}

/// A channel's flow after an attempt's end was written: what the attempt decides on next.
pub(crate) struct CallSettled {
    /// The flow item as written (as known, when nothing needed writing).
    pub(crate) flow: Flow,
    /// The limits the attempt ran under.
    pub(crate) limits: Limits,
    /// The instant the end was written at.
    pub(crate) now: Timestamp,
    outcome: Outcome,
    /// The slots the write grew the window by.
    grew: u32,
    /// The slot went straight to a backlog row in the same write.
    handed_on: bool,
}

impl CallSettled {
    /// Whether this end opens a closed breaker (its consecutive failures reached the
    /// threshold).
    pub(crate) fn opens_breaker(&self) -> bool {
        self.outcome == Outcome::Transient
            && should_open(
                self.flow.circuit_state,
                self.flow.consecutive_failures,
                self.limits.breaker.failure_threshold,
            )
    }
}

/// A probe's end: whether the breaker is closed now, and the alert the tenant gets for it.
pub(crate) struct ProbeEnd {
    pub(crate) closed: bool,
    /// The alert body (`channel.circuit_closed`), when this probe closed the breaker.
    pub(crate) alert: Option<serde_json::Value>,
}

impl Breaker<'_> {
    /// Writes an attempt's end of `d` (as it is now) to its channel's flow: the slot back (or
    /// handed on), the window grown or shrunk, the breaker's counters. One conditional write,
    /// or none when nothing changed.
    pub(crate) async fn settle_call(
        &self,
        d: &Delivery,
        channel: &Channel,
        CallEnd {
            outcome,
            congestion,
            hand_on,
        }: CallEnd<'_>,
    ) -> Result<CallSettled, FlowError> {
        let limits = self.limits(channel, d.tier);
        let now = self.clock.now();
        let known = self.flow_state(&channel.id).await?;
        let signal = match outcome {
            Outcome::Success => Signal::Success,
            Outcome::Transient if congestion => Signal::Congestion,
            Outcome::Transient => Signal::Failure,
            Outcome::Neutral | Outcome::HandedOff | Outcome::Halted => Signal::Neutral,
        };
        let failures = match outcome {
            Outcome::Transient => known.consecutive_failures.saturating_add(1),
            _ => 0,
        };
        // A counted window is bounded by the tenant's share as well (`share.rs`).
        let bound = if known.backlog_at.is_some() || self.window().counted(&limits, &known) {
            self.share().bound(channel, d.tier).await
        } else {
            u32::MAX
        };
        let most = limits.cap.map(|cap| cap.min(bound));
        let mut window = most.and_then(|most| {
            let w = window_after(known.window, most, signal, failures);
            (w != known.window).then_some(w)
        });
        // Every attempt gives its slot back, a failed one too: its retry takes one again when
        // it is due, so a delivery waiting for a retry never holds back the channel's others.
        let mut free = (d.slot || known.holds(&d.id) || self.window().counted(&limits, &known))
            .then(|| d.id.clone());
        // A slot in a slot item of its own is given back there (with the hand-on), and the
        // flow item is written only if something else changed.
        if free.is_some() && d.slot_item != 0 {
            self.flows
                .free_item_slot(&channel.id, d.slot_item, &d.id, hand_on, now)
                .await?;
            free = None;
        }
        let failed = outcome.is_failure();
        // A grown window is written with the successes since this instance last wrote one
        // (a shrink, on congestion, at once).
        if let (Some(w), Some(most)) = (window, most)
            && w > known.window
        {
            let writes = free.is_some() || failed || known.consecutive_failures > 0;
            window = self
                .window()
                .grown_window(&channel.id, known.window, most, now.ms(), writes);
        }
        let grew = window.map_or(0, |w| w.saturating_sub(known.window));
        // A success is written when there is something to reset, or to keep `last_success_at`
        // (auto-disable's "no success within 24 h") within ten minutes of the truth.
        let success_stale = known
            .last_success_at
            .is_none_or(|t| now.ms() - t > SUCCESS_MARK_MS);
        let needs_write = free.is_some()
            || window.is_some()
            || failed
            || (outcome == Outcome::Success
                && (known.consecutive_failures > 0 || known.failed_attempts > 0 || success_stale));
        let flow = if needs_write {
            let f = self
                .flows
                .settle(
                    &channel.id,
                    &Settle {
                        pass_to: hand_on.filter(|_| free.is_some()).cloned(),
                        free,
                        outcome,
                        failed,
                        window,
                        now,
                    },
                )
                .await?;
            self.remember_flow(&f);
            f
        } else {
            known
        };
        // A busy channel's entry follows its window.
        if let Some(most) = most
            && flow.backlog_at.is_some()
        {
            self.share()
                .busy(channel, flow.window.min(most).max(1))
                .await;
        }
        Ok(CallSettled {
            flow,
            limits,
            now,
            outcome,
            grew,
            handed_on: hand_on.is_some(),
        })
    }

    /// After an attempt that neither probed nor opened the breaker: with the breaker closed,
    /// feeds the backlog into the slots this end freed or grew. Returns whether the breaker is
    /// closed (a retry of a channel whose breaker is not is parked instead of enqueued).
    pub(crate) async fn feed_after_call(
        &self,
        channel: &Channel,
        tier: converger_core::Tier,
        settled: CallSettled,
    ) -> Result<bool, FlowError> {
        let CallSettled {
            flow,
            limits,
            grew,
            handed_on,
            ..
        } = settled;
        if flow.circuit_state != CircuitState::Closed {
            return Ok(false);
        }
        if flow.backlog_at.is_some() {
            let most = limits
                .cap
                .and_then(|cap| {
                    converger_core::flow::rows_to_feed_after_attempt(cap, handed_on, grew)
                })
                .unwrap_or(BACKLOG_PREFETCH);
            self.backlog().feed(channel, tier, flow, most).await?;
        }
        Ok(true)
    }

    /// A probe's outcome: a success closes the breaker and releases the parked backlog; a
    /// failure re-opens it for another cooldown.
    pub(crate) async fn probe_ended(
        &self,
        d: &Delivery,
        channel: &Channel,
        settled: &CallSettled,
    ) -> Result<ProbeEnd, FlowError> {
        let (limits, now) = (&settled.limits, settled.now);
        // A probe handed off to a client went through: the endpoint is back. A probe the
        // middleware halted reached nothing: inconclusive, like a failure it re-opens for
        // another cooldown (without counting).
        if matches!(settled.outcome, Outcome::Success | Outcome::HandedOff) {
            let t = Transition::new(&[CircuitState::HalfOpen], CircuitState::Closed, now)
                .probed_by(d.id.as_str())
                .reset();
            if let Some(f) = self.flows.transition(&channel.id, &t).await? {
                self.remember_flow(&f);
                tracing::info!(channel_id = %channel.id, "breaker closed: probe succeeded");
                crate::metrics::count(crate::metrics::CIRCUIT_CLOSED, channel.kind, None, 1);
                let event = circuit_event(
                    channel,
                    converger_ports::EventType::ChannelCircuitClosed,
                    "probe_succeeded",
                    now.ms(),
                );
                let alert = event.detail.clone();
                self.events.publish(vec![event]).await;
                // Release everything parked now, and once more in 5 s for deliveries parked
                // by instances that had not seen the close yet.
                self.send_flow_job(&channel.id, FlowJobKind::Release, 0)
                    .await?;
                self.send_flow_job(&channel.id, FlowJobKind::Release, 5)
                    .await?;
                if limits.breaker.replay_dead_letters_on_close {
                    self.send_flow_job(&channel.id, FlowJobKind::ReplayDeadLetters, 0)
                        .await?;
                }
                return Ok(ProbeEnd {
                    closed: true,
                    alert: Some(alert),
                });
            }
            let closed = self.flow_state(&channel.id).await?.circuit_state == CircuitState::Closed;
            return Ok(ProbeEnd {
                closed,
                alert: None,
            });
        }
        // Failed (or inconclusive): open again for another cooldown. The bus hears of it
        // (`reason` `probe_failed`); the tenant's alert webhook does not: it was told when the
        // breaker first opened, and a probe failing every cooldown would flood it.
        let t = Transition::new(&[CircuitState::HalfOpen], CircuitState::Open, now)
            .probed_by(d.id.as_str());
        if let Some(f) = self.flows.transition(&channel.id, &t).await? {
            self.remember_flow(&f);
            tracing::info!(channel_id = %channel.id, "probe failed: breaker open again");
            let event = circuit_event(
                channel,
                converger_ports::EventType::ChannelCircuitOpened,
                "probe_failed",
                now.ms(),
            );
            self.events.publish(vec![event]).await;
            self.schedule_probe(&channel.id, &limits.breaker).await?;
        }
        Ok(ProbeEnd {
            closed: false,
            alert: None,
        })
    }

    /// Opens a closed breaker `seen` as it was (single winner): the winner gets the flow item
    /// as opened, and a probe is scheduled one cooldown on. The announcements are the caller's.
    pub(crate) async fn open_breaker(
        &self,
        channel: &converger_core::ChannelId,
        breaker: &BreakerConfig,
        seen: &Flow,
        now: Timestamp,
    ) -> Result<Option<Flow>, FlowError> {
        let t = Transition::new(&[CircuitState::Closed], CircuitState::Open, now)
            .seen(seen.circuit_changed_at);
        let Some(f) = self.flows.transition(channel, &t).await? else {
            return Ok(None);
        };
        self.remember_flow(&f);
        self.schedule_probe(channel, breaker).await?;
        Ok(Some(f))
    }
}

impl Breaker<'_> {
    /// A delivery was just parked behind an open breaker: make sure a probe is coming. The
    /// probe loop stops when nothing waits, so the first delivery parked after that starts it
    /// again (at the end of the cooldown) instead of waiting for the sweeper.
    pub(super) async fn ensure_probe(
        &self,
        channel: &Channel,
        flow: &converger_ports::Flow,
    ) -> Result<(), FlowError> {
        if flow.circuit_state != CircuitState::Open || flow.probe_due.is_some() {
            return Ok(());
        }
        let breaker = channel.circuit_breaker.effective();
        let now = self.clock.now();
        let left = converger_core::flow::cooldown_left_ms(
            flow.circuit_changed_at,
            breaker.cooldown_ms,
            now.ms(),
        );
        self.probe_in(&channel.id, left).await
    }

    /// Claims the probe for delivery `probe` of a channel whose breaker was seen as `seen`:
    /// half-open, single winner. The winner announces it (every transition goes to the bus
    /// and the `channel_health` topic; the tenant's alert webhook hears of the opening and
    /// the close only) and schedules the next check a cooldown on, whatever happens to this
    /// probe. The flow item as it now is, or `None` when another claim won.
    pub(crate) async fn claim_probe(
        &self,
        channel: &Channel,
        seen: &Flow,
        probe: &str,
        breaker: &BreakerConfig,
        now: converger_core::Timestamp,
    ) -> Result<Option<Flow>, FlowError> {
        let t = Transition::new(&[seen.circuit_state], CircuitState::HalfOpen, now)
            .seen(seen.circuit_changed_at)
            .probe(probe);
        let Some(f) = self.flows.transition(&channel.id, &t).await? else {
            return Ok(None);
        };
        self.remember_flow(&f);
        tracing::info!(channel_id = %channel.id, delivery_id = probe, "breaker half-open: probing");
        self.events
            .publish(vec![circuit_event(
                channel,
                converger_ports::EventType::ChannelCircuitHalfOpen,
                "probing",
                now.ms(),
            )])
            .await;
        self.schedule_probe(&channel.id, breaker).await?;
        Ok(Some(f))
    }

    /// A probe one cooldown from now (the breaker just opened, or a probe failed).
    pub(crate) async fn schedule_probe(
        &self,
        channel: &converger_core::ChannelId,
        breaker: &BreakerConfig,
    ) -> Result<(), FlowError> {
        self.probe_in(
            channel,
            i64::try_from(breaker.cooldown_ms).unwrap_or(i64::MAX),
        )
        .await
    }

    /// Sends a probe job due in `delay_ms` and marks the probe due, so that no other is sent
    /// meanwhile (the sweeper sends one again when a due mark goes stale).
    async fn probe_in(
        &self,
        channel: &converger_core::ChannelId,
        delay_ms: i64,
    ) -> Result<(), FlowError> {
        let delay_ms = delay_ms.max(0);
        let delay_s = u32::try_from((delay_ms + 999) / 1000).unwrap_or(900);
        self.send_flow_job(channel, FlowJobKind::Probe, delay_s)
            .await?;
        let due = self.clock.now_ms().saturating_add(delay_ms);
        let f = self
            .flows
            .mark(channel, Mark::ProbeDue, Some(due), None)
            .await?;
        self.remember_flow(&f);
        Ok(())
    }

    pub(crate) async fn send_flow_job(
        &self,
        channel: &converger_core::ChannelId,
        kind: FlowJobKind,
        delay_s: u32,
    ) -> Result<(), FlowError> {
        let job = FlowJob {
            channel_id: channel.clone(),
            kind,
        };
        Ok(self.queue.send_flow(&job, delay_s).await?)
    }
}
