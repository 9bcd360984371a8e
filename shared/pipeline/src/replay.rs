//! Replaying dead letters: a failed delivery goes back to pending with its attempts reset, in
//! one conditional transaction with its audit entry, and is enqueued. The due index holds the
//! row from the moment the transaction commits, so a replay whose send is lost is still
//! enqueued by the next sweep: no committed replay is ever without its message.

use crate::Pipeline;
use converger_core::query::Actor;
use converger_core::{DeliveryId, DeliveryStatus, TenantId, time};
use converger_store::{AuditEntry, Delivery, DeliveryMessage, PlatformEvent, Replayed, StoreError};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("delivery not found")]
    NotFound,
    #[error("only failed deliveries can be replayed; this one is {0}")]
    NotFailed(DeliveryStatus),
    #[error("Channel is inactive")]
    ChannelInactive,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Pipeline {
    /// Replays one dead letter of `tenant` on behalf of `actor`.
    pub async fn replay_one(
        &self,
        tenant: &TenantId,
        id: &DeliveryId,
        actor: &Actor,
    ) -> Result<Delivery, ReplayError> {
        let d = match self.store.get_delivery(id).await? {
            Some(d) if &d.tenant_id == tenant => d,
            _ => return Err(ReplayError::NotFound),
        };
        if d.status != DeliveryStatus::Failed {
            return Err(ReplayError::NotFailed(d.status));
        }
        // The channel as stored now, not as cached: an inactive channel is refused.
        match self.store.get_channel(&d.channel_id).await? {
            Some(ch) if ch.active => {}
            _ => return Err(ReplayError::ChannelInactive),
        }
        let now_ms = time::now_ms();
        let audit = AuditEntry::new(
            d.tenant_id.clone(),
            actor.clone(),
            "retry",
            "delivery",
            d.id.as_str(),
            json!({
                "activity_id": d.activity_id,
                "channel_id": d.channel_id,
                "retry_count": d.retry_count + 1,
                "previous_status": d.status,
                "previous_attempts": d.attempts,
                "previous_last_error": d.last_error,
            }),
            &time::ms_to_rfc3339(now_ms),
        );
        let row = match self.store.replay(&d, actor, now_ms, &audit).await? {
            Replayed::Done(row) => *row,
            // Someone else replayed it (or it changed) between the read and the write.
            Replayed::NotFailed => {
                let now = self.store.get_delivery(id).await?.map(|d| d.status);
                return Err(ReplayError::NotFailed(
                    now.unwrap_or(DeliveryStatus::Pending),
                ));
            }
        };
        if let Err(e) = self
            .queue
            .send(&DeliveryMessage::new(row.id.clone(), row.tier, None), 0)
            .await
        {
            tracing::warn!(delivery_id = %row.id, error = %e, "replay committed but not enqueued; the sweeper will enqueue it");
        }
        tracing::info!(delivery_id = %row.id, retried_by = %actor, "delivery replayed");
        self.events
            .publish(vec![
                PlatformEvent {
                    detail_type: "delivery.retried",
                    detail: json!({"count": 1, "delivery_ids": [row.id], "tenant_id": row.tenant_id, "actor": actor.to_string()}),
                },
                PlatformEvent {
                    detail_type: "delivery.status_changed",
                    detail: json!({
                        "delivery_id": row.id, "activity_id": row.activity_id, "channel_id": row.channel_id,
                        "tenant_id": row.tenant_id, "conversation_id": row.conversation_id,
                        "status": "pending", "attempts": 0, "error": row.last_error,
                    }),
                },
            ])
            .await;
        Ok(row)
    }
}
