//! The flow side of the probe function's jobs: starting a probe (the breaker half-open, one
//! waiting delivery made its probe), feeding a backlog, and releasing parked deliveries
//! after a close. The jobs themselves run in `flow_jobs`.

use super::Jobs;
use crate::outcome::FlowError;
use converger_core::flow::cooldown_left_ms;
use converger_ports::Flow;
use converger_ports::{Channel, Delivery, DeliveryMessage, FlowJobKind, Mark, Placement};

impl Jobs<'_> {
    /// Starts a probe of an open (or stuck half-open) breaker: one waiting delivery (a parked
    /// one first, else the backlog's next) is named the probe, the breaker goes half-open, the
    /// next probe is scheduled one cooldown on, and the row is made live for the attempt.
    /// `None`: the cooldown is not over (a probe job is sent for its end), nothing waits (the
    /// probe loop stops), or another instance started the probe.
    pub(crate) async fn start_probe(
        &self,
        channel: &Channel,
        flow: &Flow,
    ) -> Result<Option<Delivery>, FlowError> {
        let breaker = channel.circuit_breaker.effective();
        let now = self.clock.now();
        let left = cooldown_left_ms(flow.circuit_changed_at, breaker.cooldown_ms, now.ms());
        if left > 0 {
            let delay_s = u32::try_from((left + 999) / 1000).unwrap_or(900);
            self.breaker()
                .send_flow_job(&channel.id, FlowJobKind::Probe, delay_s)
                .await?;
            return Ok(None);
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
            return Ok(None);
        };
        if self
            .breaker()
            .claim_probe(channel, flow, d.id.as_str(), &breaker, now)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        if parked {
            Ok(self.flows.unpark(&d, Placement::Live, now).await?)
        } else {
            Ok(self.flows.leave_backlog(&d.id, now, 0).await?)
        }
    }

    /// A feed job: feeds a channel's backlog, and sends another in a second while rows still
    /// wait.
    pub(crate) async fn feed_job(&self, channel: &Channel, flow: Flow) -> Result<(), FlowError> {
        let tier = self.tenant_tier(channel).await?;
        self.backlog()
            .feed(channel, tier, flow, super::BACKLOG_PREFETCH)
            .await?;
        if !self
            .flows
            .backlog(&channel.id, self.clock.now_ms(), 1)
            .await?
            .is_empty()
        {
            self.breaker()
                .send_flow_job(&channel.id, FlowJobKind::Feed, 1)
                .await?;
        }
        Ok(())
    }

    /// Moves every parked delivery of a closed channel back to pending (into the backlog
    /// when the channel has a window), then feeds the window.
    pub(crate) async fn release(&self, channel: &Channel, flow: &Flow) -> Result<usize, FlowError> {
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
                    self.backlog()
                        .feed(channel, tenant_tier, f, super::BACKLOG_PREFETCH)
                        .await?;
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
                    .map(|d| DeliveryMessage::new(d.id.clone(), d.tier, None).of(d))
                    .collect();
                self.queue.send_many(&msgs).await?;
            }
            if released >= self.config.release_chunk {
                self.breaker()
                    .send_flow_job(&channel.id, FlowJobKind::Release, 0)
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
            self.backlog()
                .feed(channel, tenant_tier, f, super::BACKLOG_PREFETCH)
                .await?;
        }
        Ok(released)
    }
}
