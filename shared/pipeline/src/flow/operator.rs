//! Operators' and tenants' actions on a channel's flow: pause, resume (audited), and the
//! state the delivery endpoint shows.

use super::*;
use crate::outcome::FlowError;
use converger_core::query::Actor;
use converger_core::{CircuitState, time};
use converger_ports::Flow;
use converger_ports::{AuditEntry, Channel, FlowJobKind, StoreResult, Transition};
use serde_json::json;

impl Operator<'_> {
    /// Pauses a channel's deliveries (`pause_deliveries`, audited).
    pub async fn pause(&self, channel: &Channel, actor: &Actor) -> Result<Flow, FlowError> {
        use CircuitState::*;
        let now = self.clock.now();
        let t = Transition::new(&[Closed, Open, HalfOpen, Paused], Paused, now);
        self.operator_transition(
            channel,
            actor,
            &t,
            "pause_deliveries",
            converger_ports::EventType::ChannelPaused,
        )
        .await
    }

    /// Resumes a channel's deliveries (`resume_deliveries`, audited): force-closes the
    /// breaker and releases the parked backlog. Never replays dead letters.
    pub async fn resume(&self, channel: &Channel, actor: &Actor) -> Result<Flow, FlowError> {
        use CircuitState::*;
        let now = self.clock.now();
        let t = Transition::new(&[Open, HalfOpen, Paused], Closed, now).reset();
        let f = self
            .operator_transition(
                channel,
                actor,
                &t,
                "resume_deliveries",
                converger_ports::EventType::ChannelResumed,
            )
            .await?;
        self.breaker()
            .send_flow_job(&channel.id, FlowJobKind::Release, 0)
            .await?;
        self.breaker()
            .send_flow_job(&channel.id, FlowJobKind::Release, 5)
            .await?;
        Ok(f)
    }

    /// An operator's breaker transition, audited and announced (`event`, with the actor as
    /// its reason) when it moved the breaker; the flow item as it is afterwards (also when
    /// the breaker already was where it was asked to go).
    async fn operator_transition(
        &self,
        channel: &Channel,
        actor: &Actor,
        t: &Transition,
        action: &str,
        event: converger_ports::EventType,
    ) -> Result<Flow, FlowError> {
        let f = match self.flows.transition(&channel.id, t).await? {
            Some(f) => {
                self.events
                    .publish(vec![super::circuit_event(
                        channel,
                        event,
                        &actor.to_string(),
                        t.now.ms(),
                    )])
                    .await;
                f
            }
            None => self.flows.get_flow(&channel.id).await?,
        };
        self.remember_flow(&f);
        self.audit(channel, actor, action, t.now).await?;
        Ok(f)
    }

    pub(crate) async fn audit(
        &self,
        channel: &Channel,
        actor: &Actor,
        action: &str,
        now: converger_core::Timestamp,
    ) -> StoreResult<()> {
        let entry = AuditEntry::new(
            channel.tenant_id.clone(),
            actor.clone(),
            action,
            "channel",
            channel.id.as_str(),
            json!({"channel_id": channel.id}),
            now,
        );
        self.audit_log.add_audit(&entry).await
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
            None => self.flows.get_flow(&channel.id).await?,
        };
        let tier = self.tenant_tier(channel).await?;
        let limits = self.limits(channel, tier);
        let (parked, backlog) = self.flows.waiting_counts(&channel.id).await?;
        let items = limits.cap.map_or(1, converger_core::flow::slot_items);
        let elsewhere = if items > 1 {
            self.flows.held_slots(&channel.id, items).await?.len()
        } else {
            0
        };
        Ok(DeliveryState {
            state: f.circuit_state.delivery_label(),
            circuit_state: f.circuit_state,
            circuit_changed_at: (f.circuit_changed_at > 0)
                .then(|| time::ms_to_rfc3339(f.circuit_changed_at)),
            consecutive_failures: f.consecutive_failures,
            in_flight: f.slots.len() + elsewhere,
            window: limits.cap.map(|cap| f.window.min(cap)),
            max_in_flight: limits.cap,
            rate_limit: limits.rate.map(|r| r.to_string()),
            parked,
            backlog,
        })
    }
}
