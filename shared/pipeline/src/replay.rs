//! Replaying dead letters: a failed delivery goes back to pending with its attempts reset, in
//! one conditional transaction with its audit entry, and is enqueued. The due index holds the
//! row from the moment the transaction commits, so a replay whose send is lost is still
//! enqueued by the next sweep: no committed replay is ever without its message.

use crate::Pipeline;
use converger_core::query::Actor;
use converger_core::{DeliveryId, DeliveryStatus, TenantId, time};
use converger_store::dynamo::REPLAY_BATCH;
use converger_store::{AuditEntry, Delivery, DeliveryMessage, PlatformEvent, StoreError};
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
        let Some(row) = self
            .store
            .replay_many(
                std::slice::from_ref(&d),
                actor,
                now_ms,
                std::slice::from_ref(&audit),
            )
            .await?
            .pop()
        else {
            // Someone else replayed it (or it changed) between the read and the write.
            let now = self.store.get_delivery(id).await?.map(|d| d.status);
            return Err(ReplayError::NotFailed(
                now.unwrap_or(DeliveryStatus::Pending),
            ));
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

/// What one bulk replay may replay.
#[derive(Debug, Clone, Default)]
pub struct BulkFilter {
    /// Inclusive bounds on `<updated_at>#<id>` (UTC days, see `core::query`).
    pub from_key: Option<String>,
    pub to_key: Option<String>,
    pub activity: Option<converger_core::ActivityId>,
    /// Asked-for cap; never above the configured `bulk_retry_limit`.
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BulkResult {
    pub retried: usize,
    pub has_more: bool,
    /// What the call cost.
    pub stats: BulkStats,
}

/// AWS requests one bulk replay made (besides the channel read and the events).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkStats {
    pub queries: usize,
    pub transactions: usize,
    pub send_batches: usize,
}

/// Deliveries replayed per chunk.
pub const BULK_CHUNK: usize = 500;

impl Pipeline {
    /// Replays a channel's dead letters, oldest failure first, in chunks of 500: only
    /// deliveries that were already failed when the call started, at most `bulk_retry_limit`.
    /// Each delivery moves with its own conditional transaction, so two bulk replays running
    /// at once never replay the same delivery.
    pub async fn replay_channel(
        &self,
        tenant: &TenantId,
        channel_id: &converger_core::ChannelId,
        filter: BulkFilter,
        actor: &Actor,
    ) -> Result<BulkResult, ReplayError> {
        use futures::StreamExt;
        match self.store.get_channel(channel_id).await? {
            Some(ch) if &ch.tenant_id == tenant => {
                if !ch.active {
                    return Err(ReplayError::ChannelInactive);
                }
            }
            _ => return Err(ReplayError::NotFound),
        }
        let cap = filter
            .limit
            .unwrap_or(self.config.bulk_retry_limit)
            .min(self.config.bulk_retry_limit);
        // Failed before the call started: every sort key of this instant or later is above
        // the bound (`<now>#<id>` > `<now>`).
        let started = time::now_rfc3339();
        let to_key = match filter.to_key {
            Some(t) if t < started => t,
            _ => started,
        };
        let mut query = converger_store::DeliveryQuery {
            tenant: tenant.clone(),
            status: Some(DeliveryStatus::Failed),
            channel: Some(channel_id.clone()),
            from_key: filter.from_key,
            to_key: Some(to_key),
            error_contains: None,
            activity: filter.activity,
            newest_first: false,
            limit: BULK_CHUNK,
            after: None,
        };
        let mut retried = 0usize;
        let mut stats = BulkStats::default();
        loop {
            let room = cap - retried;
            if room == 0 {
                break;
            }
            query.limit = room.min(BULK_CHUNK);
            let chunk = self.store.list_deliveries(&query).await?;
            tracing::debug!(
                rows = chunk.items.len(),
                more = chunk.next.is_some(),
                retried,
                "bulk replay chunk"
            );
            let now_ms = time::now_ms();
            let now = time::ms_to_rfc3339(now_ms);
            stats.queries += 1;
            let groups: Vec<Vec<Delivery>> = chunk
                .items
                .chunks(REPLAY_BATCH)
                .map(<[Delivery]>::to_vec)
                .collect();
            stats.transactions += groups.len();
            let outcomes: Vec<Result<Vec<Delivery>, StoreError>> = futures::stream::iter(groups)
                .map(|group| {
                    let audits: Vec<AuditEntry> = group
                        .iter()
                        .map(|d| {
                            AuditEntry::new(
                                d.tenant_id.clone(),
                                actor.clone(),
                                "retry",
                                "delivery",
                                d.id.as_str(),
                                json!({
                                    "activity_id": d.activity_id,
                                    "channel_id": d.channel_id,
                                    "retry_count": d.retry_count + 1,
                                    "bulk": true,
                                }),
                                &now,
                            )
                        })
                        .collect();
                    async move { self.store.replay_many(&group, actor, now_ms, &audits).await }
                })
                .buffer_unordered(self.config.bulk_replay_concurrency)
                .collect()
                .await;
            let mut done = Vec::new();
            for o in outcomes {
                done.extend(o?);
            }
            retried += done.len();
            if !done.is_empty() {
                let msgs: Vec<DeliveryMessage> = done
                    .iter()
                    .map(|d| DeliveryMessage::new(d.id.clone(), d.tier, None))
                    .collect();
                stats.send_batches += msgs.len().div_ceil(10);
                if let Err(e) = self.queue.send_many(&msgs).await {
                    tracing::warn!(error = %e, count = msgs.len(), "bulk replay committed but not enqueued; the sweeper will enqueue it");
                }
                self.events
                    .publish(vec![PlatformEvent {
                        detail_type: "delivery.retried",
                        detail: json!({
                            "count": done.len(),
                            "delivery_ids": done.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
                            "tenant_id": tenant,
                            "actor": actor.to_string(),
                        }),
                    }])
                    .await;
            }
            match chunk.next {
                Some(next) => query.after = Some(next),
                None => {
                    return Ok(BulkResult {
                        retried,
                        has_more: false,
                        stats,
                    });
                }
            }
        }
        // The cap stopped the call: is anything left?
        query.limit = 1;
        let rest = self.store.list_deliveries(&query).await?;
        stats.queries += 1;
        tracing::info!(channel_id = %channel_id, retried, ?stats, "bulk replay done");
        Ok(BulkResult {
            retried,
            has_more: !rest.items.is_empty(),
            stats,
        })
    }
}
