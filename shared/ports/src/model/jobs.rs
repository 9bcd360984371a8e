//! Flow jobs (probe, release) and health checks.

use super::*;

/// What a `probe` queue message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowJobKind {
    /// Probe the channel if its breaker is open and cooled down.
    Probe,
    /// Release the channel's parked deliveries if its breaker is closed.
    Release,
    /// Replay the channel's recent dead letters (a probe closed its breaker and the channel
    /// asks for it).
    ReplayDeadLetters,
    /// Feed the backlog of a channel whose window spans several slot items (a take found it
    /// full while deliveries went to the backlog): no attempt's end may have seen them. Sent
    /// again a second later while rows wait.
    Feed,
}

/// A `probe` queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowJob {
    pub channel_id: ChannelId,
    pub kind: FlowJobKind,
}

/// One health check of a channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheck {
    pub channel_id: ChannelId,
    pub tenant_id: TenantId,
    pub status: converger_core::health::HealthStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_status: Option<converger_core::health::HealthStatus>,
    pub failure_rate: f64,
    pub total_deliveries: u64,
    pub failed_deliveries: u64,
    pub checked_at: Timestamp,
    /// When the row stops being shown and is deleted (seconds since the epoch).
    pub expires_at: i64,
}
