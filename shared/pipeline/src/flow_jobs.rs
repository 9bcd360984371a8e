//! The probe function's jobs (`probe` queue): a backlog fed, an open breaker's probe
//! attempted, parked deliveries released after a close, recent dead letters replayed on it.
//! Flow control does the flow's part (`flow::jobs`); this runs the attempt and the replay.

use crate::outcome::{AttemptError, BulkFilter, FlowError};
use converger_core::query::{Actor, ActorKind};
use converger_core::{BreakerConfig, CircuitState, time};
use converger_ports::{Channel, DeliveryMessage, FlowJob, FlowJobKind, StoreError};

/// A flow job that could not run (a read or write of flow control, or the probe's own
/// attempt): nothing was lost, and its message returns to the queue.
#[derive(Debug, thiserror::Error)]
pub enum FlowJobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error("the probe's attempt: {0}")]
    Probe(#[from] AttemptError),
}

/// The probe function's jobs: feeding a backlog, probing an open breaker, releasing parked deliveries, replaying on a close.
#[derive(Clone, Copy)]
pub struct FlowJobs<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) attempts: crate::attempt::Attempts<'p>,
    pub(crate) replays: crate::replay::Replays<'p>,
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
    pub async fn flow_job(&self, job: &FlowJob) -> Result<(), FlowJobError> {
        let Some(channel) = self.channel_store.get_channel(&job.channel_id).await? else {
            return Ok(());
        };
        self.cache.forget_channel(&channel.id);
        let flow = self.flow.read_flow(&channel.id).await?;
        match (job.kind, flow.circuit_state) {
            (FlowJobKind::ReplayDeadLetters, _) => {
                let breaker = channel.circuit_breaker.effective();
                self.replay_on_close(&channel, &breaker, self.clock.now_ms())
                    .await;
                Ok(())
            }
            (FlowJobKind::Feed, CircuitState::Closed) => {
                Ok(self.flow.jobs().feed_job(&channel, flow).await?)
            }
            (FlowJobKind::Feed, _) => Ok(()),
            (_, CircuitState::Closed) => {
                if flow.parked_at.is_some() || job.kind == FlowJobKind::Release {
                    self.flow.jobs().release(&channel, &flow).await?;
                }
                Ok(())
            }
            (_, CircuitState::Paused) => Ok(()),
            (FlowJobKind::Release, _) => Ok(()),
            (FlowJobKind::Probe, _) => {
                let Some(live) = self.flow.jobs().start_probe(&channel, &flow).await? else {
                    return Ok(());
                };
                tracing::info!(channel_id = %channel.id, delivery_id = %live.id, "probing");
                let msg = DeliveryMessage::new(live.id.clone(), live.tier, None).of(&live);
                // The gate sees this delivery named as the probe: its log says `trigger: probe`.
                self.attempts.attempt(msg).await?;
                Ok(())
            }
        }
    }
}
