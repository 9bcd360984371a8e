//! Flow control, as the pipeline applies it: admission of new deliveries into a channel's
//! window, the gate before an attempt (park, probe, window, rate limit), the breaker's
//! transitions after one, feeding the backlog into freed slots, the probe and release jobs,
//! pause and resume, and the sweeper's reconciliation. The rules are in `core::flow`; every
//! state change is one conditional write in the store.

use crate::Pipeline;
use crate::attempt::{AttemptError, Report};
use crate::replay::BulkFilter;
use converger_core::flow::{
    Gate, backlog_mark_clearable, backlog_mark_fresh, cooldown_left_ms, gate, grow_window,
    should_open, shrink_window,
};
use converger_core::query::{Actor, ActorKind};
use converger_core::{BreakerConfig, CircuitState, RateLimit, Tier, time};
use converger_store::Flow;
use converger_store::{
    AuditEntry, Channel, Delivery, DeliveryMessage, FlowJob, FlowJobKind, Mark, Outcome, Placement,
    PlatformEvent, Settle, SlotTake, StoreResult, Transition,
};
use serde_json::json;
use std::time::Instant;

/// Backlog rows one feed query reads (the ones not fed at once are remembered).
pub const BACKLOG_PREFETCH: usize = 25;

/// How stale `last_success_at` may get before a success is written anyway.
const SUCCESS_MARK_MS: i64 = 600_000;

/// How long remembered backlog rows are trusted.
const HINT_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// Where a new delivery starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Enqueued now (holding a slot when the channel has a window).
    Live,
    /// Waiting in the backlog for a slot.
    Backlog,
    /// Written `paused`: the breaker is open or the channel paused.
    Parked,
}

/// What the gate decided for a claimed delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Admit {
    /// Attempt it. `probe`: it is the half-open probe.
    Go { probe: bool },
    /// Nothing to attempt now; the report says why.
    Done(Report),
}

/// A channel's flow settings for deliveries of `tier`.
pub struct Limits {
    pub breaker: BreakerConfig,
    /// The window's cap (`None`: unbounded).
    pub cap: Option<u32>,
    pub rate: Option<RateLimit>,
}

/// What the delivery endpoint shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeliveryState {
    pub state: &'static str,
    pub circuit_state: CircuitState,
    pub circuit_changed_at: Option<String>,
    pub consecutive_failures: u32,
    pub in_flight: usize,
    pub window: Option<u32>,
    pub max_in_flight: Option<u32>,
    pub rate_limit: Option<String>,
    pub parked: u64,
    pub backlog: u64,
}

impl Pipeline {
    /// The flow settings of `channel` for deliveries of `tier`.
    pub fn limits(&self, channel: &Channel, tier: Tier) -> Limits {
        let breaker = BreakerConfig::effective(&channel.circuit_breaker);
        let rate = match &channel.rate_limit {
            Some(r) => r.parse().ok(),
            None => self
                .adapters
                .get(channel.kind)
                .and_then(|a| a.default_rate_limit()),
        };
        Limits {
            cap: breaker.max_in_flight.resolve(tier),
            breaker,
            rate,
        }
    }

    /// A channel's flow item, from this instance's cache when read less than
    /// `flow_cache_ttl` ago.
    pub async fn flow_state(&self, channel: &converger_core::ChannelId) -> StoreResult<Flow> {
        let ttl = self.config.flow_cache_ttl;
        if !ttl.is_zero()
            && let Ok(cache) = self.flows.lock()
            && let Some((at, f)) = cache.get(channel)
            && at.elapsed() < ttl
        {
            return Ok(f.clone());
        }
        let f = self.store.get_flow(channel).await?;
        self.remember_flow(&f);
        Ok(f)
    }

    /// This instance's fresh view of a flow item, without a read.
    fn cached_flow(&self, channel: &converger_core::ChannelId) -> Option<Flow> {
        let ttl = self.config.flow_cache_ttl;
        let cache = self.flows.lock().ok()?;
        let (at, f) = cache.get(channel)?;
        (at.elapsed() < ttl).then(|| f.clone())
    }

    /// Sets a mark on a channel's flow item, unless this instance's fresh view shows it set
    /// already (then no write: a backlogged or parked delivery costs no mark of its own; a
    /// backlog mark is relied on only while it is recent: see `core::flow`). Returns the
    /// flow item, and whether it is the one the store just returned (else the cached view).
    async fn ensure_mark(
        &self,
        channel: &converger_core::ChannelId,
        mark: Mark,
    ) -> StoreResult<(Flow, bool)> {
        if let Some(f) = self.cached_flow(channel) {
            let set = match mark {
                Mark::Backlog => backlog_mark_fresh(f.backlog_at, time::now_ms()),
                Mark::Parked => f.parked_at.is_some(),
                Mark::ProbeDue => f.probe_due.is_some(),
            };
            if set {
                return Ok((f, false));
            }
        }
        let f = self
            .store
            .mark(channel, mark, Some(time::now_ms()), None)
            .await?;
        self.remember_flow(&f);
        Ok((f, true))
    }

    /// Keeps the flow item a write returned, so the next decision sees it.
    pub(crate) fn remember_flow(&self, f: &Flow) {
        if let Ok(mut cache) = self.flows.lock() {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(f.channel_id.clone(), (Instant::now(), f.clone()));
        }
    }

    /// The window size to ask for: the latest known window, bounded by the cap.
    fn window_cap(&self, channel: &Channel, cap: u32) -> u32 {
        let known = self
            .flows
            .lock()
            .ok()
            .and_then(|c| c.get(&channel.id).map(|(_, f)| f.window));
        known
            .unwrap_or(converger_core::flow::INITIAL_WINDOW)
            .min(cap)
            .max(1)
    }

    /// Takes a slot for `d`, asking again once when the window turned out larger than this
    /// instance knew.
    async fn take(&self, channel: &Channel, d: &Delivery, cap: u32) -> StoreResult<SlotTake> {
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
                self.ensure_mark(&channel.id, Mark::Parked).await?;
                Ok(())
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

    /// The gate before an attempt, with the lease held: park, probe, window, rate limit.
    pub(crate) async fn admit_attempt(
        &self,
        d: &Delivery,
        token: &str,
        msg: &DeliveryMessage,
        channel: &Channel,
    ) -> Result<Admit, AttemptError> {
        let limits = self.limits(channel, d.tier);
        let now = time::now_ms();
        let mut flow = self.flow_state(&channel.id).await?;
        let mut decision = self.decide(&flow, d, &limits, now);
        if decision != Gate::Proceed && decision != Gate::Probe {
            // Never park or probe on a cached view: read the breaker as it is.
            flow = self.store.get_flow(&channel.id).await?;
            self.remember_flow(&flow);
            decision = self.decide(&flow, d, &limits, now);
        }
        match decision {
            Gate::Proceed => {}
            Gate::Probe => return Ok(Admit::Go { probe: true }),
            Gate::ClaimProbe => {
                let t = Transition::new(&[flow.circuit_state], CircuitState::HalfOpen, now)
                    .seen(flow.circuit_changed_at)
                    .probe(d.id.as_str());
                if let Some(f) = self.store.transition(&channel.id, &t).await? {
                    self.remember_flow(&f);
                    tracing::info!(channel_id = %channel.id, delivery_id = %d.id, "breaker half-open: probing");
                    // Whatever happens to this probe, the next check comes after a cooldown.
                    self.schedule_probe(&channel.id, &limits.breaker).await?;
                    return Ok(Admit::Go { probe: true });
                }
                return self.park_claimed(d, token, channel).await;
            }
            Gate::Park => return self.park_claimed(d, token, channel).await,
        }
        // The window: a delivery without a slot (a replay, a long backoff) takes one first.
        if let Some(cap) = limits.cap
            && !d.slot
            && !flow.holds(&d.id)
        {
            match self.take(channel, d, cap).await? {
                SlotTake::Taken(_) | SlotTake::Held(_) => {}
                SlotTake::NotClosed(_) => return self.park_claimed(d, token, channel).await,
                SlotTake::Full(_) => {
                    if !self
                        .store
                        .to_backlog(d, token, now, &time::ms_to_rfc3339(now))
                        .await?
                    {
                        return Ok(Admit::Done(Report::Skipped("lease lost before backlog")));
                    }
                    self.after_admission(channel, d.tier, Admission::Backlog)
                        .await?;
                    return Ok(Admit::Done(Report::Backlogged));
                }
            }
        }
        // The rate limit: over it, the message is snoozed until the schedule has room; no
        // attempt is used.
        if let Some(rate) = limits.rate {
            let now_us = now.saturating_mul(1000);
            if let Err(retry_at) = self.store.rate_take(&channel.id, &rate, now_us).await? {
                let delay_s = RateLimit::snooze_s(retry_at, now_us);
                self.store.release(d, token).await?;
                self.queue.send(msg, delay_s).await?;
                return Ok(Admit::Done(Report::Snoozed { delay_s }));
            }
        }
        Ok(Admit::Go { probe: false })
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
    ) -> Result<Admit, AttemptError> {
        let now = time::now_ms();
        if !self
            .store
            .park(d, Some(token), &time::ms_to_rfc3339(now))
            .await?
        {
            return Ok(Admit::Done(Report::Skipped("lease lost before parking")));
        }
        self.park_marks(channel, d).await?;
        tracing::info!(delivery_id = %d.id, channel_id = %channel.id, "delivery parked");
        Ok(Admit::Done(Report::Parked))
    }

    /// After a delivery was parked: its slot back, the parked mark set.
    pub(crate) async fn park_marks(&self, channel: &Channel, d: &Delivery) -> StoreResult<()> {
        let now = time::now_ms();
        let (f, _) = self.ensure_mark(&channel.id, Mark::Parked).await?;
        // A parked delivery holds no slot (the view may be a cached one: the row says too).
        if d.slot || f.holds(&d.id) {
            let f = self
                .store
                .settle(&channel.id, &Settle::free(d.id.clone(), now))
                .await?;
            self.remember_flow(&f);
        }
        Ok(())
    }

    /// After an attempt: the breaker's counters, the window, the slot; opening or closing
    /// the breaker. Returns whether the breaker is closed afterwards (a retry of a channel
    /// whose breaker is not closed is parked instead of enqueued).
    pub(crate) async fn after_attempt(
        &self,
        d: &Delivery,
        channel: &Channel,
        outcome: Outcome,
        keep_slot: bool,
        probe: bool,
    ) -> Result<bool, AttemptError> {
        let limits = self.limits(channel, d.tier);
        let now = time::now_ms();
        let known = self.flow_state(&channel.id).await?;
        let window = limits.cap.and_then(|cap| {
            let w = match outcome {
                Outcome::Success => grow_window(known.window, cap),
                Outcome::Transient => shrink_window(known.window),
                Outcome::Neutral | Outcome::HandedOff => known.window,
            };
            (w != known.window).then_some(w)
        });
        let free = (!keep_slot && (d.slot || known.holds(&d.id) || limits.cap.is_some()))
            .then(|| d.id.clone());
        let failed = outcome.is_failure();
        // A success is written when there is something to reset, or to keep `last_success_at`
        // (auto-disable's "no success within 24 h") within ten minutes of the truth.
        let success_stale = known
            .last_success_at
            .is_none_or(|t| now - t > SUCCESS_MARK_MS);
        let needs_write = free.is_some()
            || window.is_some()
            || failed
            || (outcome == Outcome::Success
                && (known.consecutive_failures > 0 || known.failed_attempts > 0 || success_stale));
        let flow = if needs_write {
            let f = self
                .store
                .settle(
                    &channel.id,
                    &Settle {
                        free,
                        outcome,
                        failed,
                        window,
                        now_ms: now,
                    },
                )
                .await?;
            self.remember_flow(&f);
            f
        } else {
            known
        };

        if failed {
            self.auto_disable(channel, &flow, now).await?;
        }
        if probe {
            return self.probe_outcome(d, channel, &limits, outcome).await;
        }
        if outcome == Outcome::Transient
            && should_open(
                flow.circuit_state,
                flow.consecutive_failures,
                limits.breaker.failure_threshold,
            )
        {
            self.open_breaker(channel, &limits.breaker, &flow, "failures")
                .await?;
            return Ok(false);
        }
        if flow.circuit_state == CircuitState::Closed {
            if flow.backlog_at.is_some() && !keep_slot {
                self.feed(channel, d.tier, flow).await?;
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// The probe's outcome: a success closes the breaker and releases the parked backlog; a
    /// failure re-opens it for another cooldown.
    async fn probe_outcome(
        &self,
        d: &Delivery,
        channel: &Channel,
        limits: &Limits,
        outcome: Outcome,
    ) -> Result<bool, AttemptError> {
        let now = time::now_ms();
        // A probe handed off to a client went through: the endpoint is back.
        if !outcome.is_failure() {
            let t = Transition::new(&[CircuitState::HalfOpen], CircuitState::Closed, now)
                .probed_by(d.id.as_str())
                .reset();
            if let Some(f) = self.store.transition(&channel.id, &t).await? {
                self.remember_flow(&f);
                tracing::info!(channel_id = %channel.id, "breaker closed: probe succeeded");
                crate::metrics::count("circuit_closed", channel.kind.as_str(), 1);
                let event =
                    circuit_event(channel, "channel.circuit_closed", "probe_succeeded", now);
                self.alert(channel, event.detail.clone()).await;
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
                return Ok(true);
            }
            return Ok(self.flow_state(&channel.id).await?.circuit_state == CircuitState::Closed);
        }
        // Failed (or inconclusive): open again for another cooldown.
        let t = Transition::new(&[CircuitState::HalfOpen], CircuitState::Open, now)
            .probed_by(d.id.as_str());
        if let Some(f) = self.store.transition(&channel.id, &t).await? {
            self.remember_flow(&f);
            tracing::info!(channel_id = %channel.id, "probe failed: breaker open again");
            self.schedule_probe(&channel.id, &limits.breaker).await?;
        }
        Ok(false)
    }

    /// Opens a closed breaker (single winner); the winner announces it and schedules the
    /// probe.
    pub(crate) async fn open_breaker(
        &self,
        channel: &Channel,
        breaker: &BreakerConfig,
        seen: &Flow,
        reason: &str,
    ) -> Result<bool, AttemptError> {
        let now = time::now_ms();
        let t = Transition::new(&[CircuitState::Closed], CircuitState::Open, now)
            .seen(seen.circuit_changed_at);
        let Some(f) = self.store.transition(&channel.id, &t).await? else {
            return Ok(false);
        };
        self.remember_flow(&f);
        tracing::warn!(channel_id = %channel.id, failures = f.consecutive_failures, reason, "breaker opened");
        crate::metrics::count("circuit_opened", channel.kind.as_str(), 1);
        let event = circuit_event(channel, "channel.circuit_opened", reason, now);
        self.alert(channel, event.detail.clone()).await;
        self.events.publish(vec![event]).await;
        self.schedule_probe(&channel.id, breaker).await?;
        Ok(true)
    }

    async fn schedule_probe(
        &self,
        channel: &converger_core::ChannelId,
        breaker: &BreakerConfig,
    ) -> Result<(), AttemptError> {
        let delay_s = u32::try_from(breaker.cooldown_ms.div_ceil(1000)).unwrap_or(900);
        let due = time::now_ms() + i64::try_from(breaker.cooldown_ms).unwrap_or(0);
        self.send_flow_job(channel, FlowJobKind::Probe, delay_s)
            .await?;
        let f = self
            .store
            .mark(channel, Mark::ProbeDue, Some(due), None)
            .await?;
        self.remember_flow(&f);
        Ok(())
    }

    async fn send_flow_job(
        &self,
        channel: &converger_core::ChannelId,
        kind: FlowJobKind,
        delay_s: u32,
    ) -> Result<(), AttemptError> {
        let job = FlowJob {
            channel_id: channel.clone(),
            kind,
        };
        Ok(self.queue.send_flow(&job, delay_s).await?)
    }

    /// Replays the channel's recent dead letters after a probe closed its breaker, as the
    /// system actor `circuit_breaker`. Failures are logged: the close stands.
    async fn replay_on_close(&self, channel: &Channel, breaker: &BreakerConfig, now: i64) {
        let since = now - i64::try_from(breaker.replay_window_ms).unwrap_or(0);
        let actor = Actor {
            kind: ActorKind::System,
            id: "circuit_breaker".into(),
        };
        let filter = BulkFilter {
            from_key: Some(time::ms_to_rfc3339(since)),
            to_key: None,
            activity: None,
            limit: None,
        };
        match self
            .replay_channel(&channel.tenant_id, &channel.id, filter, &actor)
            .await
        {
            Ok(r) => {
                tracing::info!(channel_id = %channel.id, retried = r.retried, "dead letters replayed on close")
            }
            Err(e) => {
                tracing::warn!(channel_id = %channel.id, error = %e, "replay on close failed")
            }
        }
    }

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
                        Some(d) => msgs.push(DeliveryMessage::new(d.id, d.tier, None)),
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
    fn backlog_hints(
        &self,
        channel: &converger_core::ChannelId,
        n: usize,
    ) -> Vec<converger_core::DeliveryId> {
        let Ok(mut hints) = self.backlog_hints.lock() else {
            return Vec::new();
        };
        let Some((at, ids)) = hints.get_mut(channel) else {
            return Vec::new();
        };
        if at.elapsed() > HINT_TTL {
            hints.remove(channel);
            return Vec::new();
        }
        let take = n.min(ids.len());
        ids.drain(..take).collect()
    }

    fn keep_backlog_hints(
        &self,
        channel: &converger_core::ChannelId,
        ids: Vec<converger_core::DeliveryId>,
    ) {
        if let Ok(mut hints) = self.backlog_hints.lock() {
            if hints.len() > 10_000 {
                hints.clear();
            }
            if ids.is_empty() {
                hints.remove(channel);
            } else {
                hints.insert(channel.clone(), (Instant::now(), ids.into()));
            }
        }
    }

    /// Runs a `probe` queue message.
    pub async fn flow_job(&self, job: &FlowJob) -> Result<(), AttemptError> {
        let Some(channel) = self.store.get_channel(&job.channel_id).await? else {
            return Ok(());
        };
        self.forget_channel(&channel.id);
        let flow = self.store.get_flow(&channel.id).await?;
        self.remember_flow(&flow);
        match (job.kind, flow.circuit_state) {
            (FlowJobKind::ReplayDeadLetters, _) => {
                let breaker = BreakerConfig::effective(&channel.circuit_breaker);
                self.replay_on_close(&channel, &breaker, time::now_ms())
                    .await;
                Ok(())
            }
            (_, CircuitState::Closed) => {
                if flow.parked_at.is_some() || job.kind == FlowJobKind::Release {
                    self.release(&channel, &flow).await?;
                }
                Ok(())
            }
            (_, CircuitState::Paused) => Ok(()),
            (FlowJobKind::Release, _) => Ok(()),
            (FlowJobKind::Probe, _) => self.probe(&channel, flow).await,
        }
    }

    /// One probe of an open (or stuck half-open) breaker: one waiting delivery is attempted
    /// as the probe. With nothing waiting the loop stops.
    async fn probe(&self, channel: &Channel, flow: Flow) -> Result<(), AttemptError> {
        let breaker = BreakerConfig::effective(&channel.circuit_breaker);
        let now = time::now_ms();
        let left = cooldown_left_ms(flow.circuit_changed_at, breaker.cooldown_ms, now);
        if left > 0 {
            let delay_s = u32::try_from((left + 999) / 1000).unwrap_or(900);
            self.send_flow_job(&channel.id, FlowJobKind::Probe, delay_s)
                .await?;
            return Ok(());
        }
        let candidate = match self.store.parked(&channel.id, 1).await?.pop() {
            Some(d) => Some((d, true)),
            None => match self.store.backlog(&channel.id, now, 1).await?.pop() {
                Some(w) => self.store.get_delivery(&w.id).await?.map(|d| (d, false)),
                None => None,
            },
        };
        let Some((d, parked)) = candidate else {
            tracing::info!(channel_id = %channel.id, "nothing waits: probe loop stops");
            if let Some(due) = flow.probe_due {
                self.store
                    .mark(&channel.id, Mark::ProbeDue, None, Some(due))
                    .await?;
            }
            return Ok(());
        };
        let t = Transition::new(&[flow.circuit_state], CircuitState::HalfOpen, now)
            .seen(flow.circuit_changed_at)
            .probe(d.id.as_str());
        let Some(f) = self.store.transition(&channel.id, &t).await? else {
            return Ok(());
        };
        self.remember_flow(&f);
        self.schedule_probe(&channel.id, &breaker).await?;
        let now_s = time::ms_to_rfc3339(now);
        let live = if parked {
            self.store.unpark(&d, Placement::Live, now, &now_s).await?
        } else {
            self.store.leave_backlog(&d.id, now).await?
        };
        let Some(live) = live else {
            return Ok(());
        };
        tracing::info!(channel_id = %channel.id, delivery_id = %live.id, "probing");
        let msg = DeliveryMessage::new(live.id.clone(), live.tier, None);
        // The gate sees this delivery named as the probe: its log says `trigger: probe`.
        self.attempt(msg).await?;
        Ok(())
    }

    /// Moves every parked delivery of a closed channel back to pending (into the backlog
    /// when the channel has a window), then feeds the window.
    async fn release(&self, channel: &Channel, flow: &Flow) -> Result<usize, AttemptError> {
        let tenant_tier = self
            .store
            .get_tenant(&channel.tenant_id)
            .await?
            .map(|t| t.tier)
            .unwrap_or(Tier::Default);
        let windowed = self.limits(channel, tenant_tier).cap.is_some();
        let to = if windowed {
            Placement::Backlog
        } else {
            Placement::Live
        };
        let mut released = 0usize;
        loop {
            let rows = self.store.parked(&channel.id, 500).await?;
            if rows.is_empty() {
                break;
            }
            let now = time::now_ms();
            let now_s = time::ms_to_rfc3339(now);
            let mut moved: Vec<Delivery> = Vec::with_capacity(rows.len());
            for chunk in rows.chunks(8) {
                let done = futures::future::join_all(
                    chunk.iter().map(|d| self.store.unpark(d, to, now, &now_s)),
                )
                .await;
                for r in done {
                    moved.extend(r?);
                }
            }
            if moved.is_empty() {
                // The index still shows rows already moved: read again later.
                break;
            }
            released += moved.len();
            if !windowed {
                let msgs: Vec<DeliveryMessage> = moved
                    .iter()
                    .map(|d| DeliveryMessage::new(d.id.clone(), d.tier, None))
                    .collect();
                self.queue.send_many(&msgs).await?;
            }
            if released >= self.config.release_chunk {
                self.send_flow_job(&channel.id, FlowJobKind::Release, 0)
                    .await?;
                break;
            }
        }
        let now = time::now_ms();
        if released < self.config.release_chunk
            && let Some(at) = flow.parked_at
        {
            self.store
                .mark(&channel.id, Mark::Parked, None, Some(at))
                .await?;
        }
        if released > 0 {
            tracing::info!(channel_id = %channel.id, released, "parked deliveries released");
        }
        if windowed {
            let f = if released > 0 {
                self.store
                    .mark(&channel.id, Mark::Backlog, Some(now), None)
                    .await?
            } else {
                self.store.get_flow(&channel.id).await?
            };
            self.remember_flow(&f);
            self.feed(channel, tenant_tier, f).await?;
        }
        Ok(released)
    }

    /// Pauses a channel's deliveries (`pause_deliveries`, audited).
    pub async fn pause(&self, channel: &Channel, actor: &Actor) -> Result<Flow, AttemptError> {
        use CircuitState::*;
        let now = time::now_ms();
        let t = Transition::new(&[Closed, Open, HalfOpen, Paused], Paused, now);
        self.operator_transition(channel, actor, &t, "pause_deliveries")
            .await
    }

    /// Resumes a channel's deliveries (`resume_deliveries`, audited): force-closes the
    /// breaker and releases the parked backlog. Never replays dead letters.
    pub async fn resume(&self, channel: &Channel, actor: &Actor) -> Result<Flow, AttemptError> {
        use CircuitState::*;
        let now = time::now_ms();
        let t = Transition::new(&[Open, HalfOpen, Paused], Closed, now).reset();
        let f = self
            .operator_transition(channel, actor, &t, "resume_deliveries")
            .await?;
        self.send_flow_job(&channel.id, FlowJobKind::Release, 0)
            .await?;
        self.send_flow_job(&channel.id, FlowJobKind::Release, 5)
            .await?;
        Ok(f)
    }

    /// An operator's breaker transition, audited; the flow item as it is afterwards (also
    /// when the breaker already was where it was asked to go).
    async fn operator_transition(
        &self,
        channel: &Channel,
        actor: &Actor,
        t: &Transition,
        action: &str,
    ) -> Result<Flow, AttemptError> {
        let f = match self.store.transition(&channel.id, t).await? {
            Some(f) => f,
            None => self.store.get_flow(&channel.id).await?,
        };
        self.remember_flow(&f);
        self.audit(channel, actor, action, t.now_ms).await?;
        Ok(f)
    }

    async fn audit(
        &self,
        channel: &Channel,
        actor: &Actor,
        action: &str,
        now: i64,
    ) -> StoreResult<()> {
        let entry = AuditEntry::new(
            channel.tenant_id.clone(),
            actor.clone(),
            action,
            "channel",
            channel.id.as_str(),
            json!({"channel_id": channel.id}),
            &time::ms_to_rfc3339(now),
        );
        self.store.add_audit(&entry).await
    }

    /// The delivery state of a channel, as the API shows it (from `flow` when the caller
    /// has just written it).
    pub async fn delivery_state(
        &self,
        channel: &Channel,
        flow: Option<Flow>,
    ) -> StoreResult<DeliveryState> {
        let f = match flow {
            Some(f) => f,
            None => self.store.get_flow(&channel.id).await?,
        };
        let tier = self
            .store
            .get_tenant(&channel.tenant_id)
            .await?
            .map(|t| t.tier)
            .unwrap_or(Tier::Default);
        let limits = self.limits(channel, tier);
        let (parked, backlog) = self.store.waiting_counts(&channel.id).await?;
        Ok(DeliveryState {
            state: f.circuit_state.delivery_label(),
            circuit_state: f.circuit_state,
            circuit_changed_at: (f.circuit_changed_at > 0)
                .then(|| time::ms_to_rfc3339(f.circuit_changed_at)),
            consecutive_failures: f.consecutive_failures,
            in_flight: f.slots.len(),
            window: limits.cap.map(|cap| f.window.min(cap)),
            max_in_flight: limits.cap,
            rate_limit: limits.rate.map(|r| r.to_string()),
            parked,
            backlog,
        })
    }

    /// The sweeper's flow pass: frees slots whose delivery no longer holds them, feeds
    /// backlogs, releases parked deliveries of closed channels after `park_seconds`, and
    /// restarts probe loops whose message was lost. Returns (slots freed, fed, released).
    pub async fn sweep_flows(&self) -> Result<(usize, usize, usize), AttemptError> {
        let mut totals = (0, 0, 0);
        let mut from = None;
        loop {
            let page = self.store.scan_flows(100, from.take()).await?;
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

    async fn sweep_flow(&self, f: Flow) -> Result<(usize, usize, usize), AttemptError> {
        let now = time::now_ms();
        let Some(channel) = self.store.get_channel(&f.channel_id).await? else {
            return Ok((0, 0, 0));
        };
        let breaker = BreakerConfig::effective(&channel.circuit_breaker);
        let grace = i64::try_from(self.config.slot_grace.as_millis()).unwrap_or(i64::MAX);
        let old: Vec<(String, i64)> = f
            .slots
            .iter()
            .filter(|(_, at)| now - **at > grace)
            .map(|(d, at)| (d.clone(), *at))
            .collect();
        let mut freed = 0;
        if !old.is_empty() {
            let ids: Vec<converger_core::DeliveryId> = old
                .iter()
                .filter_map(|(d, _)| converger_core::DeliveryId::parse(d).ok())
                .collect();
            let rows = self.store.get_deliveries(&ids).await?;
            let stale: Vec<(String, i64)> = old
                .into_iter()
                .filter(|(id, _)| {
                    !rows.iter().any(|r| {
                        r.id.as_str() == id
                            && r.status == converger_core::DeliveryStatus::Pending
                            && !r.in_backlog
                    })
                })
                .collect();
            if !stale.is_empty() {
                freed = self.store.free_slots(&channel.id, &stale).await?;
                if freed > 0 {
                    tracing::warn!(channel_id = %channel.id, freed, "window slots reconciled");
                }
            }
        }
        let mut fed = 0;
        let mut released = 0;
        match f.circuit_state {
            CircuitState::Closed => {
                let parked_long = f.parked_at.is_some_and(|p| {
                    now - p > i64::try_from(breaker.park_seconds * 1000).unwrap_or(i64::MAX)
                });
                if parked_long {
                    released = self.release(&channel, &f).await?;
                }
                if f.backlog_at.is_some() || freed > 0 {
                    let tier = self
                        .store
                        .get_tenant(&channel.tenant_id)
                        .await?
                        .map(|t| t.tier)
                        .unwrap_or(Tier::Default);
                    let current = self.store.get_flow(&channel.id).await?;
                    fed = self.feed(&channel, tier, current).await?;
                }
            }
            CircuitState::Open | CircuitState::HalfOpen => {
                if f.probe_due.is_none_or(|due| due + 60_000 < now) {
                    self.send_flow_job(&channel.id, FlowJobKind::Probe, 0)
                        .await?;
                    self.store
                        .mark(&channel.id, Mark::ProbeDue, Some(now), None)
                        .await?;
                }
            }
            CircuitState::Paused => {}
        }
        Ok((freed, fed, released))
    }
}

fn circuit_event(channel: &Channel, kind: &'static str, reason: &str, at_ms: i64) -> PlatformEvent {
    PlatformEvent {
        detail_type: kind,
        detail: json!({
            "event": kind,
            "channel_id": channel.id,
            "channel_name": channel.name,
            "tenant_id": channel.tenant_id,
            "reason": reason,
            "changed_at": time::ms_to_rfc3339(at_ms),
        }),
    }
}
