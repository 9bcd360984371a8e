//! The flow jobs (`probe` queue): the half-open probe and the release of parked deliveries
//! after a close.

use super::FlowControl;
use crate::outcome::FlowError;
use crate::outcome::{AttemptError, BulkFilter};
use converger_core::flow::cooldown_left_ms;
use converger_core::query::{Actor, ActorKind};
use converger_core::{BreakerConfig, CircuitState, time};
use converger_ports::Flow;
use converger_ports::{
    Channel, Delivery, DeliveryMessage, FlowJob, FlowJobKind, Mark, Placement, Transition,
};

/// The probe function's jobs: feeding a backlog, probing an open breaker, releasing parked deliveries, replaying on a close.
#[derive(Clone, Copy)]
pub struct FlowJobs<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) flows: &'p dyn converger_ports::FlowStore,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) attempts: crate::attempt::Attempts<'p>,
    pub(crate) replays: crate::replay::Replays<'p>,
}

impl<'p> FlowJobs<'p> {
    pub(crate) fn of(p: &'p crate::Pipeline) -> Self {
        Self {
            clock: &*p.clock,
            channel_store: &*p.store,
            deliveries: &*p.store,
            flows: &*p.store,
            flow: &p.flow,
            cache: &p.cache,
            attempts: crate::attempt::Attempts::of(p),
            replays: crate::replay::Replays::of(p),
        }
    }
}

impl FlowJobs<'_> {
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
            .replays
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

    /// Runs a `probe` queue message.
    pub async fn flow_job(&self, job: &FlowJob) -> Result<(), AttemptError> {
        let Some(channel) = self.channel_store.get_channel(&job.channel_id).await? else {
            return Ok(());
        };
        self.cache.forget_channel(&channel.id);
        let flow = self.flows.get_flow(&channel.id).await?;
        self.flow.remember_flow(&flow);
        match (job.kind, flow.circuit_state) {
            (FlowJobKind::ReplayDeadLetters, _) => {
                let breaker = channel.circuit_breaker.effective();
                self.replay_on_close(&channel, &breaker, self.clock.now_ms())
                    .await;
                Ok(())
            }
            (FlowJobKind::Feed, CircuitState::Closed) => self.feed_job(&channel, flow).await,
            (FlowJobKind::Feed, _) => Ok(()),
            (_, CircuitState::Closed) => {
                if flow.parked_at.is_some() || job.kind == FlowJobKind::Release {
                    self.flow.release(&channel, &flow).await?;
                }
                Ok(())
            }
            (_, CircuitState::Paused) => Ok(()),
            (FlowJobKind::Release, _) => Ok(()),
            (FlowJobKind::Probe, _) => self.probe(&channel, flow).await,
        }
    }

    /// Feeds a channel's backlog, and comes back in a second while rows still wait.
    async fn feed_job(&self, channel: &Channel, flow: Flow) -> Result<(), AttemptError> {
        let tier = self.flow.tenant_tier(channel).await?;
        self.flow
            .feed(channel, tier, flow, super::BACKLOG_PREFETCH)
            .await?;
        if !self
            .flows
            .backlog(&channel.id, self.clock.now_ms(), 1)
            .await?
            .is_empty()
        {
            self.flow
                .send_flow_job(&channel.id, FlowJobKind::Feed, 1)
                .await?;
        }
        Ok(())
    }

    /// One probe of an open (or stuck half-open) breaker: one waiting delivery is attempted
    /// as the probe. With nothing waiting the loop stops.
    async fn probe(&self, channel: &Channel, flow: Flow) -> Result<(), AttemptError> {
        let breaker = channel.circuit_breaker.effective();
        let now = self.clock.now();
        let left = cooldown_left_ms(flow.circuit_changed_at, breaker.cooldown_ms, now.ms());
        if left > 0 {
            let delay_s = u32::try_from((left + 999) / 1000).unwrap_or(900);
            self.flow
                .send_flow_job(&channel.id, FlowJobKind::Probe, delay_s)
                .await?;
            return Ok(());
        }
        let candidate = match self.flows.parked(&channel.id, 1).await?.pop() {
            Some(d) => Some((d, true)),
            None => match self.flows.backlog(&channel.id, now.ms(), 1).await?.pop() {
                Some(w) => self
                    .deliveries
                    .get_delivery(&w.id)
                    .await?
                    .map(|d| (d, false)),
                None => None,
            },
        };
        let Some((d, parked)) = candidate else {
            tracing::info!(channel_id = %channel.id, "nothing waits: probe loop stops");
            if let Some(due) = flow.probe_due {
                self.flows
                    .mark(&channel.id, Mark::ProbeDue, None, Some(due))
                    .await?;
            }
            return Ok(());
        };
        let t = Transition::new(&[flow.circuit_state], CircuitState::HalfOpen, now)
            .seen(flow.circuit_changed_at)
            .probe(d.id.as_str());
        let Some(f) = self.flows.transition(&channel.id, &t).await? else {
            return Ok(());
        };
        self.flow.remember_flow(&f);
        self.flow.schedule_probe(&channel.id, &breaker).await?;
        let live = if parked {
            let live = self.flows.unpark(&d, Placement::Live, now).await?;
            if let Some(l) = &live {
                self.flow
                    .events
                    .publish(vec![crate::outcome::row_event(l, now)])
                    .await;
            }
            live
        } else {
            self.flows.leave_backlog(&d.id, now, 0).await?
        };
        let Some(live) = live else {
            return Ok(());
        };
        tracing::info!(channel_id = %channel.id, delivery_id = %live.id, "probing");
        let msg = DeliveryMessage::new(live.id.clone(), live.tier, None).of(&live);
        // The gate sees this delivery named as the probe: its log says `trigger: probe`.
        self.attempts.attempt(msg).await?;
        Ok(())
    }
}

impl FlowControl {
    /// Moves every parked delivery of a closed channel back to pending (into the backlog
    /// when the channel has a window), then feeds the window.
    pub(super) async fn release(&self, channel: &Channel, flow: &Flow) -> Result<usize, FlowError> {
        let tenant_tier = self.tenant_tier(channel).await?;
        let windowed = self.limits(channel, tenant_tier).cap.is_some();
        let to = if windowed {
            Placement::Backlog
        } else {
            Placement::Live
        };
        let mut released = 0usize;
        // A windowed channel's backlog starts draining as soon as its first deliveries are
        // in it, not once the whole release is: each attempt that ends feeds the next, so
        // the rows moved meanwhile are taken in their turn.
        let mut feeding = false;
        loop {
            let rows = self.flows.parked(&channel.id, 500).await?;
            if rows.is_empty() {
                break;
            }
            let now = self.clock.now();
            let mut moved: Vec<Delivery> = Vec::with_capacity(rows.len());
            for chunk in rows.chunks(8) {
                let done =
                    futures::future::join_all(chunk.iter().map(|d| self.flows.unpark(d, to, now)))
                        .await;
                for r in done {
                    moved.extend(r?);
                }
                if windowed && !feeding && !moved.is_empty() {
                    feeding = true;
                    let f = self
                        .flows
                        .mark(&channel.id, Mark::Backlog, Some(now.ms()), None)
                        .await?;
                    self.remember_flow(&f);
                    self.feed(channel, tenant_tier, f, super::BACKLOG_PREFETCH)
                        .await?;
                }
            }
            if moved.is_empty() {
                // The index still shows rows already moved: read again later.
                break;
            }
            released += moved.len();
            // Each one pending again.
            self.events
                .publish(
                    moved
                        .iter()
                        .map(|d| crate::outcome::row_event(d, now))
                        .collect(),
                )
                .await;
            if !windowed {
                let msgs: Vec<DeliveryMessage> = moved
                    .iter()
                    .map(|d| DeliveryMessage::new(d.id.clone(), d.tier, None).of(d))
                    .collect();
                self.queue.send_many(&msgs).await?;
            }
            if released >= self.config.release_chunk {
                self.send_flow_job(&channel.id, FlowJobKind::Release, 0)
                    .await?;
                break;
            }
        }
        let now = self.clock.now();
        if released < self.config.release_chunk
            && let Some(at) = flow.parked_at
        {
            self.flows
                .mark(&channel.id, Mark::Parked, None, Some(at))
                .await?;
        }
        if released > 0 {
            tracing::info!(channel_id = %channel.id, released, "parked deliveries released");
        }
        if windowed {
            let f = if released > 0 {
                self.flows
                    .mark(&channel.id, Mark::Backlog, Some(now.ms()), None)
                    .await?
            } else {
                self.flows.get_flow(&channel.id).await?
            };
            self.remember_flow(&f);
            self.feed(channel, tenant_tier, f, super::BACKLOG_PREFETCH)
                .await?;
        }
        Ok(released)
    }
}
