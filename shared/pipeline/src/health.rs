//! Channel health checks (every 5 minutes, from per-minute counters), auto-disable, and a
//! tenant's alert webhook: a managed webhook channel that platform events about the tenant's
//! channels are delivered to through the same pipeline (signed, retried, logged).

use crate::flow::circuit_event;
use crate::ingest::NewActivity;
use crate::outcome::FlowError;
use converger_core::health::{
    AUTO_DISABLED, HISTORY_DAYS, HealthStatus, WINDOW_MINUTES, failure_rate, minute,
};
use converger_core::{BreakerConfig, CircuitState, time};
use converger_ports::{Channel, Flow, HealthCheck, PlatformEvent, StoreResult};
use serde_json::Value;

/// The `event` of the health-change body a tenant's alert webhook receives.
pub const ALERT_HEALTH_CHANGED: &str = "channel_health_changed";

/// What one health run did, with the requests it made (by operation).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HealthReport {
    pub channels: usize,
    pub changed: usize,
    pub breakers_opened: usize,
    /// Scan pages over the channels table.
    pub scan_pages: usize,
    /// Reads per channel: one batch read of its window's per-minute counters and its flow
    /// item.
    pub batch_reads: usize,
    /// Queries per channel of its stored dead letters' day counters (the `dead_letters`
    /// gauge).
    pub dead_letter_reads: usize,
    /// Batch writes of health rows (25 each), and latest statuses updated (on a change).
    pub writes: usize,
}

impl HealthReport {
    pub fn requests(&self) -> usize {
        self.scan_pages + self.batch_reads + self.dead_letter_reads + self.writes
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] converger_ports::StoreError),
}

/// Channel health: the periodic checks, auto-disable, the breaker opened on a change to unhealthy, and alerts.
#[derive(Clone, Copy)]
pub struct Health<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) health_store: &'p dyn converger_ports::HealthStore,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) events: &'p dyn converger_ports::Events,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) intake: crate::ingest::Intake<'p>,
    /// How long deliveries are kept (`RETENTION_DAYS`): the dead letters the gauge counts.
    pub(crate) retention: std::time::Duration,
}

impl Health<'_> {
    /// Opens a closed breaker (single winner); the winner announces it and schedules the
    /// probe.
    pub(crate) async fn open_breaker(
        &self,
        channel: &Channel,
        breaker: &BreakerConfig,
        seen: &Flow,
        reason: &str,
    ) -> Result<bool, FlowError> {
        let now = self.clock.now();
        let Some(f) = self
            .flow
            .breaker()
            .open_breaker(&channel.id, breaker, seen, now)
            .await?
        else {
            return Ok(false);
        };
        tracing::warn!(channel_id = %channel.id, failures = f.consecutive_failures, reason, "breaker opened");
        self.intake
            .usage
            .breaker_opened(&channel.tenant_id, &channel.id)
            .await;
        crate::metrics::count(crate::metrics::CIRCUIT_OPENED, channel.kind, None, 1);
        let event = circuit_event(
            channel,
            converger_ports::EventType::ChannelCircuitOpened,
            reason,
            now.ms(),
        );
        self.alert(channel, event.detail.clone()).await;
        self.events.publish(vec![event]).await;
        Ok(true)
    }

    /// After a failed attempt: disables the channel when its consecutive failed attempts
    /// reach the threshold and it has not delivered within the success window.
    pub(crate) async fn auto_disable(
        &self,
        channel: &Channel,
        flow: &Flow,
        now: i64,
    ) -> Result<(), FlowError> {
        let rule = channel.auto_disable.effective();
        if !channel.active || !rule.should_disable(flow.failed_attempts, flow.last_success_at, now)
        {
            return Ok(());
        }
        let at = converger_core::Timestamp::from_ms(now);
        let Some(disabled) = self
            .health_store
            .disable_channel(&channel.id, at, AUTO_DISABLED)
            .await?
        else {
            return Ok(());
        };
        self.cache.forget_channel(&channel.id);
        tracing::warn!(channel_id = %channel.id, failed_attempts = flow.failed_attempts, "channel auto-disabled");
        crate::metrics::count(crate::metrics::CHANNEL_DISABLED, channel.kind, None, 1);
        let kind = converger_ports::EventType::ChannelDisabled;
        let event = PlatformEvent::of(
            kind,
            &converger_ports::events::ChannelDisabled {
                channel: converger_ports::events::ChannelNamed::of(kind, &disabled),
                reason: AUTO_DISABLED.to_owned(),
                failed_attempts: flow.failed_attempts,
                last_success_at: flow.last_success_at.map(time::ms_to_rfc3339),
                disabled_at: at.rfc3339(),
            },
        );
        self.alert(&disabled, event.detail.clone()).await;
        self.events.publish(vec![event]).await;
        Ok(())
    }

    /// Delivers `body` to the alert webhook of `channel`'s tenant, if it has one, as an
    /// activity on its managed channel. Events about the alert channel itself are not
    /// alerted (no loops). Failures are logged: alerts never fail the caller.
    pub async fn alert(&self, channel: &Channel, body: Value) {
        if channel.managed {
            return;
        }
        let tenant = match self.tenants.get_tenant(&channel.tenant_id).await {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(tenant_id = %channel.tenant_id, error = %e, "alert not sent");
                return;
            }
        };
        let Some(alert_channel) = tenant.alert_channel_id.clone() else {
            return;
        };
        let activity = NewActivity {
            event_type: None,
            id: None,
            conversation_id: "alerts".into(),
            seq: None,
            channel_ids: vec![alert_channel],
            payload_upload: None,
            payload: Some(body),
            traceparent: None,
            tracestate: None,
        };
        if let Err(e) = self
            .intake
            .ingest_with(&tenant, activity, crate::ingest::Origin::Platform)
            .await
        {
            tracing::warn!(tenant_id = %tenant.id, error = %e, "alert not sent");
        }
    }

    /// One health run over every active channel of the checked types.
    pub async fn health_check(&self) -> Result<HealthReport, FlowError> {
        let mut report = HealthReport::default();
        // Dead letters still stored, by channel type (the `dead_letters` gauge): each channel's
        // day counters over the retention period, one query each.
        let mut dead: std::collections::BTreeMap<&'static str, (converger_core::ChannelType, u64)> =
            Default::default();
        let mut from = None;
        loop {
            let page = self.health_store.checked_channels(500, from.take()).await?;
            report.scan_pages += 1;
            let mut rows = Vec::with_capacity(page.items.len());
            for channel in page.items {
                match self.stored_dead_letters(&channel).await {
                    Ok(n) => {
                        report.dead_letter_reads += 1;
                        dead.entry(channel.kind.as_str())
                            .or_insert((channel.kind, 0))
                            .1 += n;
                    }
                    Err(e) => {
                        tracing::warn!(channel_id = %channel.id, error = %e, "dead letters of a channel not counted")
                    }
                }
                match self.check_channel(&channel, &mut report).await {
                    Ok(row) => {
                        report.channels += 1;
                        rows.push(row);
                    }
                    Err(e) => {
                        tracing::warn!(channel_id = %channel.id, error = %e, "health check of a channel failed")
                    }
                }
            }
            report.writes += self.health_store.record_health(&rows).await?;
            match page.next {
                Some(n) => from = Some(n),
                None => break,
            }
        }
        for (kind, n) in dead.into_values() {
            crate::metrics::count(crate::metrics::DEAD_LETTERS, kind, None, n);
        }
        tracing::info!(?report, requests = report.requests(), "health checks done");
        Ok(report)
    }

    /// A channel's dead letters still stored (those of deliveries created within the
    /// retention period).
    async fn stored_dead_letters(&self, channel: &Channel) -> Result<u64, FlowError> {
        let now = self.clock.now();
        let days = i64::try_from(self.retention.as_secs() / 86_400).unwrap_or(0) + 1;
        let from_day = now.secs().div_euclid(86_400) - days;
        Ok(self
            .health_store
            .stored_dead_letters(&channel.id, from_day, now)
            .await?)
    }

    /// Checks one channel; returns its row (written in batches by the caller).
    async fn check_channel(
        &self,
        channel: &Channel,
        report: &mut HealthReport,
    ) -> Result<HealthCheck, FlowError> {
        let now = self.clock.now();
        let to = minute(now.ms());
        let inputs = self
            .health_store
            .health_inputs(&channel.id, to - WINDOW_MINUTES, to)
            .await?;
        report.batch_reads += inputs.requests;
        let status = HealthStatus::of(inputs.created, inputs.failed);
        let previous = inputs.previous;
        let changed = previous.unwrap_or_default() != status;
        let check = HealthCheck {
            channel_id: channel.id.clone(),
            tenant_id: channel.tenant_id.clone(),
            status,
            previous_status: previous,
            failure_rate: failure_rate(inputs.created, inputs.failed),
            total_deliveries: inputs.created,
            failed_deliveries: inputs.failed.min(inputs.created),
            checked_at: now,
            expires_at: now.secs() + HISTORY_DAYS * 86_400,
        };
        if !changed {
            return Ok(check);
        }
        self.health_store
            .set_health_status(&channel.id, status)
            .await?;
        report.writes += 1;
        report.changed += 1;
        let kind = converger_ports::EventType::ChannelHealthChanged;
        let changed = converger_ports::events::ChannelHealthChanged {
            channel: converger_ports::events::ChannelNamed::of(kind, channel),
            previous_status: previous.unwrap_or_default(),
            new_status: status,
            failure_rate: check.failure_rate,
            total_deliveries: check.total_deliveries,
            failed_deliveries: check.failed_deliveries,
            checked_at: now.rfc3339(),
        };
        // The tenant's alert webhook gets the body its receivers were written for: the same
        // fields, named `channel_health_changed` (the bus keeps the event's own name).
        let mut alert = changed.clone();
        alert.channel.event = ALERT_HEALTH_CHANGED.to_owned();
        let event = PlatformEvent::of(kind, &changed);
        tracing::info!(channel_id = %channel.id, %status, previous = %previous.unwrap_or_default(), "channel health changed");
        let alert = serde_json::to_value(&alert).unwrap_or_else(|_| event.detail.clone());
        self.alert(channel, alert).await;
        self.events.publish(vec![event]).await;
        // Only the change to unhealthy opens the breaker: a breaker a probe closed is not
        // opened again by failures still inside the window.
        if status == HealthStatus::Unhealthy {
            let flow = self.flow.read_flow(&channel.id).await?;
            if flow.circuit_state == CircuitState::Closed {
                let breaker = channel.circuit_breaker.effective();
                if self
                    .open_breaker(channel, &breaker, &flow, "unhealthy")
                    .await?
                {
                    report.breakers_opened += 1;
                }
            }
        }
        Ok(check)
    }

    /// A channel's latest health and recent checks, for the API.
    pub async fn channel_health(
        &self,
        channel: &Channel,
        limit: usize,
    ) -> StoreResult<ChannelHealth> {
        let history = self
            .health_store
            .health_history(&channel.id, limit, self.clock.now())
            .await?;
        Ok(ChannelHealth {
            channel_id: channel.id.clone(),
            status: history
                .first()
                .map(|c| c.status)
                .unwrap_or(HealthStatus::Unknown),
            checked_at: history.first().map(|c| c.checked_at.rfc3339()),
            history: history
                .into_iter()
                .map(|c| CheckView {
                    status: c.status,
                    failure_rate: c.failure_rate,
                    total_deliveries: c.total_deliveries,
                    failed_deliveries: c.failed_deliveries,
                    checked_at: c.checked_at.rfc3339(),
                })
                .collect(),
        })
    }
}

/// A channel's latest health and its recent checks, newest first.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelHealth {
    pub channel_id: converger_core::ChannelId,
    pub status: HealthStatus,
    /// The latest check's time; `None` before the first.
    pub checked_at: Option<String>,
    pub history: Vec<CheckView>,
}

/// One health check as the API shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckView {
    pub status: HealthStatus,
    pub failure_rate: f64,
    pub total_deliveries: u64,
    pub failed_deliveries: u64,
    pub checked_at: String,
}
