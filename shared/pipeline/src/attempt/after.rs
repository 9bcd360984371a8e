//! The attempt's last stage: flow control told how the call ended (the slot back, the
//! window, the breaker's counters), then what follows from it: auto-disable after a failure,
//! a probe's close or reopening, the breaker opened by failures, the backlog fed.

use super::{Attempts, Prepared};
use crate::flow::CallEnd;
use crate::outcome::AttemptError;
use converger_ports::Delivery;

impl Attempts<'_> {
    /// After an attempt of `d` (as it is now). Returns whether the channel's breaker is closed
    /// afterwards (a retry of a channel whose breaker is not closed is parked instead of
    /// enqueued).
    #[tracing::instrument(skip_all, fields(outcome = ?end.outcome()))]
    pub(super) async fn after_attempt(
        &self,
        d: &Delivery,
        p: &Prepared,
        end: CallEnd<'_>,
    ) -> Result<bool, AttemptError> {
        let channel = &*p.channel;
        let settled = self.flow.breaker().settle_call(d, channel, end).await?;
        if end.outcome().is_failure() {
            self.health
                .auto_disable(channel, &settled.flow, settled.now.ms())
                .await?;
        }
        if p.probe {
            let ended = self
                .flow
                .breaker()
                .probe_ended(d, channel, &settled)
                .await?;
            if let Some(alert) = ended.alert {
                self.health.alert(channel, alert).await;
            }
            return Ok(ended.closed);
        }
        if settled.opens_breaker() {
            self.health
                .open_breaker(channel, &settled.limits.breaker, &settled.flow, "failures")
                .await?;
            return Ok(false);
        }
        Ok(self
            .flow
            .breaker()
            .feed_after_call(channel, d.tier, settled)
            .await?)
    }
}
