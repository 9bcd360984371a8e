//! What each platform event says: its `detail` on the bus, a stream frame's `data` and an
//! alert's body, typed once. The producers build these and [`PlatformEvent::of`] turns one
//! into the bus's JSON; consumers may read a detail back into its type.

use crate::{Channel, Delivery, EventType, PlatformEvent};
use converger_core::health::HealthStatus;
use converger_core::{ActivityId, ChannelId, DeliveryId, TenantId};
use serde::{Deserialize, Serialize};

impl PlatformEvent {
    /// The event `detail_type` with `detail` as its JSON.
    pub fn of(detail_type: EventType, detail: &impl Serialize) -> Self {
        Self {
            detail_type,
            // Plain structs of strings and numbers: serializing cannot fail.
            detail: serde_json::to_value(detail).unwrap_or_default(),
        }
    }
}

/// The delivery an event is about, as its row says (flattened into the detail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryNamed {
    pub delivery_id: DeliveryId,
    pub activity_id: ActivityId,
    pub channel_id: ChannelId,
    pub tenant_id: TenantId,
    pub conversation_id: String,
    pub attempts: u32,
    pub error: Option<String>,
    /// When the row was written so.
    pub at: String,
}

impl DeliveryNamed {
    pub fn of(d: &Delivery) -> Self {
        Self {
            delivery_id: d.id.clone(),
            activity_id: d.activity_id.clone(),
            channel_id: d.channel_id.clone(),
            tenant_id: d.tenant_id.clone(),
            conversation_id: d.conversation_id.clone(),
            attempts: d.attempts,
            error: d.last_error.clone(),
            at: d.updated_at.rfc3339(),
        }
    }
}

/// `delivery.status_changed`: a write changed what a delivery shows (its status, attempts,
/// error, next attempt or acknowledgement).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryStatusChanged {
    /// Unique per event (the stream record's id and the event's place in it).
    pub event_id: String,
    #[serde(flatten)]
    pub delivery: DeliveryNamed,
    pub status: String,
    /// Handed to a websocket client that has not acknowledged it.
    pub awaiting_ack: bool,
    /// When the next attempt is due, while it is retrying.
    pub next_attempt_at: Option<String>,
}

/// `delivery.dead_lettered`: a delivery failed for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryDeadLettered {
    pub event_id: String,
    #[serde(flatten)]
    pub delivery: DeliveryNamed,
}

/// `delivery.retried`: deliveries were sent again by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRetried {
    pub event_id: String,
    pub count: usize,
    pub delivery_ids: Vec<DeliveryId>,
    pub tenant_id: TenantId,
    /// Who asked (an API key's or a user's id).
    pub actor: Option<String>,
}

/// The channel an event is about, and the event's name (flattened into the detail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelNamed {
    /// The event's name, as its detail type.
    pub event: String,
    pub channel_id: ChannelId,
    pub channel_name: String,
    pub tenant_id: TenantId,
}

impl ChannelNamed {
    pub fn of(kind: EventType, c: &Channel) -> Self {
        Self {
            event: kind.as_str().to_owned(),
            channel_id: c.id.clone(),
            channel_name: c.name.clone(),
            tenant_id: c.tenant_id.clone(),
        }
    }
}

/// A channel's breaker opened or closed, or its deliveries were paused or resumed
/// (`channel.circuit_opened`, `channel.circuit_closed`, `channel.paused`, `channel.resumed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CircuitChanged {
    #[serde(flatten)]
    pub channel: ChannelNamed,
    pub reason: String,
    pub changed_at: String,
}

/// `channel.disabled`: the health run disabled a channel that kept failing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelDisabled {
    #[serde(flatten)]
    pub channel: ChannelNamed,
    pub reason: String,
    pub failed_attempts: u32,
    pub last_success_at: Option<String>,
    pub disabled_at: String,
}

/// `channel.health_changed`: a channel's health status changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelHealthChanged {
    #[serde(flatten)]
    pub channel: ChannelNamed,
    pub previous_status: HealthStatus,
    pub new_status: HealthStatus,
    pub failure_rate: f64,
    pub total_deliveries: u64,
    pub failed_deliveries: u64,
    pub checked_at: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_change_is_the_json_its_consumers_read_and_reads_back() {
        let (d, a, c, t) = (
            DeliveryId::generate(),
            ActivityId::generate(),
            ChannelId::generate(),
            TenantId::generate(),
        );
        let detail = DeliveryStatusChanged {
            event_id: "e:0".into(),
            delivery: DeliveryNamed {
                delivery_id: d.clone(),
                activity_id: a.clone(),
                channel_id: c.clone(),
                tenant_id: t.clone(),
                conversation_id: "conv-1".into(),
                attempts: 1,
                error: Some("HTTP 503".into()),
                at: "2026-12-06T08:00:00.000Z".into(),
            },
            status: "pending".into(),
            awaiting_ack: false,
            next_attempt_at: None,
        };
        let e = PlatformEvent::of(EventType::DeliveryStatusChanged, &detail);
        assert_eq!(
            e.detail,
            json!({
                "event_id": "e:0", "delivery_id": d, "activity_id": a, "channel_id": c,
                "tenant_id": t, "conversation_id": "conv-1", "status": "pending",
                "attempts": 1, "error": "HTTP 503", "awaiting_ack": false,
                "next_attempt_at": null, "at": "2026-12-06T08:00:00.000Z",
            })
        );
        let back: DeliveryStatusChanged = serde_json::from_value(e.detail).unwrap();
        assert_eq!(back, detail);
    }

    #[test]
    fn a_health_change_names_both_statuses() {
        let e = PlatformEvent::of(
            EventType::ChannelHealthChanged,
            &ChannelHealthChanged {
                channel: ChannelNamed {
                    event: "channel.health_changed".into(),
                    channel_id: ChannelId::generate(),
                    channel_name: "hook".into(),
                    tenant_id: TenantId::generate(),
                },
                previous_status: HealthStatus::Healthy,
                new_status: HealthStatus::Unhealthy,
                failure_rate: 0.5,
                total_deliveries: 10,
                failed_deliveries: 5,
                checked_at: "2026-12-06T08:00:00.000Z".into(),
            },
        );
        assert_eq!(e.detail["event"], "channel.health_changed");
        assert_eq!(e.detail["channel_name"], "hook");
        assert_eq!(e.detail["previous_status"], "healthy");
        assert_eq!(e.detail["new_status"], "unhealthy");
        assert_eq!(e.detail["failure_rate"], 0.5);
    }
}
