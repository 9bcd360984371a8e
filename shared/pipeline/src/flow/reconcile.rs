//! The sweeper's reconciliation of flow items: slots leaked by lost attempts freed, a
//! stalled backlog fed, a missed probe scheduled again.

use crate::Pipeline;
use crate::outcome::AttemptError;
use converger_core::{BreakerConfig, CircuitState, time};
use converger_ports::Flow;
use converger_ports::{FlowJobKind, Mark};

impl Pipeline {
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
                    let tier = self.tenant_tier(&channel).await?;
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
