//! Replaying dead letters: a failed delivery goes back to pending with its attempts reset, in
//! one conditional transaction with its audit entry, and is enqueued. The due index holds the
//! row from the moment the transaction commits, so a replay whose send is lost is still
//! enqueued by the next sweep: no committed replay is ever without its message.

use converger_core::ChannelId;
use converger_core::query::Actor;
use converger_core::query::Cursor;
use converger_core::{DeliveryId, DeliveryStatus, TenantId, Timestamp};
use converger_ports::{
    AuditEntry, Delivery, DeliveryMessage, DeliveryQuery, REPLAY_BATCH, ReplayJob, ReplayMessage,
    StoreError,
};
use serde_json::json;

/// The audit entry of one replay: the activity and channel ids, the new retry_count, and
/// `extra` (the previous state for a single replay, `"bulk": true` for a bulk one).
fn retry_audit(d: &Delivery, actor: &Actor, at: Timestamp, extra: serde_json::Value) -> AuditEntry {
    let mut changes = json!({
        "activity_id": d.activity_id,
        "channel_id": d.channel_id,
        "retry_count": d.retry_count + 1,
    });
    if let (Some(c), Some(e)) = (changes.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    AuditEntry::new(
        d.tenant_id.clone(),
        actor.clone(),
        "retry",
        "delivery",
        d.id.as_str(),
        changes,
        at,
    )
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("delivery not found")]
    NotFound,
    #[error("only failed or filtered deliveries can be replayed; this one is {0}")]
    NotFailed(DeliveryStatus),
    /// A filtered delivery whose channel's filter still does not want it.
    #[error("the channel's filter still does not want this delivery; change the filter first")]
    StillFiltered,
    #[error("Channel is inactive")]
    ChannelInactive,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Replays of failed deliveries: one, a channel's, a filter's, and bulk jobs.
#[derive(Clone, Copy)]
pub struct Replays<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) listings: &'p dyn converger_ports::DeliveryQueries,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) replay_store: &'p dyn converger_ports::ReplayStore,
    pub(crate) config: &'p crate::PipelineConfig,
    pub(crate) queue: &'p dyn converger_ports::Queue,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) activities: &'p dyn converger_ports::ActivityStore,
    pub(crate) payloads: &'p crate::payloads::Payloads,
}

impl<'p> Replays<'p> {
    /// The tier a replay of `tenant`'s deliveries goes to: its tier now, not the one its
    /// deliveries were created at (`fallback` if it cannot be read).
    async fn tier_now(
        &self,
        tenant: &TenantId,
        fallback: converger_core::Tier,
    ) -> converger_core::Tier {
        match self.tenants.get_tenant(tenant).await {
            Ok(Some(t)) => t.tier,
            Ok(None) => fallback,
            Err(e) => {
                tracing::warn!(tenant_id = %tenant, error = %e, "tenant not read; the replay keeps its tier");
                fallback
            }
        }
    }
}

impl Replays<'_> {
    /// Replays one dead letter of `tenant` (`None`: of any tenant, for operators) on behalf
    /// of `actor`.
    pub async fn replay_one(
        &self,
        tenant: Option<&TenantId>,
        id: &DeliveryId,
        actor: &Actor,
    ) -> Result<Delivery, ReplayError> {
        let Some(mut d) = self
            .deliveries
            .delivery_in(converger_ports::Scope::of(tenant), id)
            .await?
        else {
            return Err(ReplayError::NotFound);
        };
        if !matches!(d.status, DeliveryStatus::Failed | DeliveryStatus::Filtered) {
            return Err(ReplayError::NotFailed(d.status));
        }
        d.tier = self.tier_now(&d.tenant_id, d.tier).await;
        // The channel as stored now, not as cached: an inactive channel is refused.
        let channel = match self.channel_store.get_channel(&d.channel_id).await? {
            Some(ch) if ch.active => ch,
            _ => return Err(ReplayError::ChannelInactive),
        };
        // A filtered delivery goes again only if the channel's filter, as it is now, wants it.
        if d.status == DeliveryStatus::Filtered
            && let Some(filter) = &channel.filter
        {
            let mut activity = self
                .activities
                .get_activity(&d.tenant_id, &d.activity_id)
                .await?
                .ok_or(ReplayError::NotFound)?;
            let _read = match self.payloads.read(&mut activity).await {
                Ok(permit) => permit,
                Err(crate::payloads::ReadError::Gone(_)) => return Err(ReplayError::NotFound),
                Err(crate::payloads::ReadError::Store(e)) => return Err(e.into()),
            };
            if !filter.matches(activity.event_type.as_deref(), &activity.payload) {
                return Err(ReplayError::StillFiltered);
            }
        }
        let now = self.clock.now();
        let audit = retry_audit(
            &d,
            actor,
            now,
            json!({
                "previous_status": d.status,
                "previous_attempts": d.attempts,
                "previous_last_error": d.last_error,
            }),
        );
        let Some(row) = self
            .replay_store
            .replay_many(
                std::slice::from_ref(&d),
                actor,
                now,
                std::slice::from_ref(&audit),
            )
            .await?
            .pop()
        else {
            // Someone else replayed it (or it changed) between the read and the write.
            let now = self.deliveries.get_delivery(id).await?.map(|d| d.status);
            return Err(ReplayError::NotFailed(
                now.unwrap_or(DeliveryStatus::Pending),
            ));
        };
        if let Err(e) = self
            .queue
            .send(
                &DeliveryMessage::new(row.id.clone(), row.tier, None).of(&row),
                0,
            )
            .await
        {
            tracing::warn!(delivery_id = %row.id, error = %e, "replay committed but not enqueued; the sweeper will enqueue it");
        }
        // Its events (`delivery.retried`, back to pending) and counts follow from the row's
        // change (`crate::changes`).
        tracing::info!(delivery_id = %row.id, retried_by = %actor, "delivery replayed");
        Ok(row)
    }
}

pub use crate::outcome::BulkFilter;

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

impl std::ops::AddAssign for BulkStats {
    fn add_assign(&mut self, o: Self) {
        self.queries += o.queries;
        self.transactions += o.transactions;
        self.send_batches += o.send_batches;
    }
}

/// How long a replay job's record is kept.
const JOB_RETENTION_S: i64 = 30 * 86_400;

/// One chunk's outcome.
struct Page {
    retried: usize,
    next: Option<Cursor>,
}

impl Replays<'_> {
    /// The channel, if `tenant` owns it and it is active.
    async fn replayable_channel(
        &self,
        tenant: &TenantId,
        channel_id: &ChannelId,
    ) -> Result<(), ReplayError> {
        match self
            .channel_store
            .channel_in(converger_ports::Scope::Tenant(tenant), channel_id)
            .await?
        {
            Some(ch) => {
                if ch.active {
                    Ok(())
                } else {
                    Err(ReplayError::ChannelInactive)
                }
            }
            _ => Err(ReplayError::NotFound),
        }
    }

    fn cap(&self, asked: Option<usize>) -> usize {
        asked
            .unwrap_or(self.config.bulk_retry_limit)
            .min(self.config.bulk_retry_limit)
    }

    /// The failed partition of a channel, oldest first, up to `to_key`.
    fn failed_query(
        tenant: &TenantId,
        channel_id: &ChannelId,
        from_key: Option<String>,
        to_key: String,
        activity: Option<converger_core::ActivityId>,
    ) -> DeliveryQuery {
        DeliveryQuery {
            tenant: tenant.clone(),
            status: Some(DeliveryStatus::Failed),
            channel: Some(channel_id.clone()),
            from_key,
            to_key: Some(to_key),
            error_contains: None,
            event_type: None,
            activity,
            newest_first: false,
            limit: 1,
            after: None,
        }
    }

    /// The upper bound that keeps a replay to deliveries failed before it started: every
    /// sort key of this instant or later is above it (`<now>#<id>` > `<now>`).
    fn started_bound(&self, to_key: Option<String>) -> String {
        let started = self.clock.now_rfc3339();
        match to_key {
            Some(t) if t < started => t,
            _ => started,
        }
    }

    /// Replays one chunk (at most `room`, at most 500) of `query`, from `query.after`.
    async fn replay_page(
        &self,
        query: &DeliveryQuery,
        room: usize,
        actor: &Actor,
        stats: &mut BulkStats,
    ) -> Result<Page, ReplayError> {
        use futures::StreamExt;
        let mut q = query.clone();
        q.limit = room.clamp(1, self.config.replay_chunk.max(1));
        let mut chunk = self.listings.list_deliveries(&q).await?;
        stats.queries += 1;
        // A query over several channels skips the deliveries of inactive ones (enable the
        // channel first); a one-channel query's caller checked its channel.
        if query.channel.is_none() {
            let mut keep = Vec::with_capacity(chunk.items.len());
            for d in std::mem::take(&mut chunk.items) {
                if self
                    .cache
                    .channel(&d.channel_id)
                    .await?
                    .is_some_and(|c| c.active)
                {
                    keep.push(d);
                }
            }
            chunk.items = keep;
        }
        // Each to its tenant's tier now (a chunk is one tenant's).
        if let Some((tenant, was)) = chunk.items.first().map(|d| (d.tenant_id.clone(), d.tier)) {
            let tier = self.tier_now(&tenant, was).await;
            for d in chunk.items.iter_mut().filter(|d| d.tenant_id == tenant) {
                d.tier = tier;
            }
        }
        let now = self.clock.now();
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
                    .map(|d| retry_audit(d, actor, now, json!({"bulk": true})))
                    .collect();
                async move {
                    self.replay_store
                        .replay_many(&group, actor, now, &audits)
                        .await
                }
            })
            .buffer_unordered(self.config.bulk_replay_concurrency)
            .collect()
            .await;
        let mut done = Vec::new();
        for o in outcomes {
            done.extend(o?);
        }
        if !done.is_empty() {
            let msgs: Vec<DeliveryMessage> = done
                .iter()
                .map(|d| DeliveryMessage::new(d.id.clone(), d.tier, None).of(d))
                .collect();
            stats.send_batches += msgs.len().div_ceil(10);
            if let Err(e) = self.queue.send_many(&msgs).await {
                tracing::warn!(error = %e, count = msgs.len(), "bulk replay committed but not enqueued; the sweeper will enqueue it");
            }
        }
        Ok(Page {
            retried: done.len(),
            next: chunk.next,
        })
    }

    /// Whether failed deliveries remain after `after` in `query`.
    async fn more_after(
        &self,
        query: &DeliveryQuery,
        after: Option<Cursor>,
        stats: &mut BulkStats,
    ) -> Result<bool, ReplayError> {
        let mut q = query.clone();
        q.limit = 1;
        q.after = after;
        stats.queries += 1;
        Ok(!self.listings.list_deliveries(&q).await?.items.is_empty())
    }

    /// Replays a channel's dead letters, oldest failure first, in chunks of 500: only
    /// deliveries that were already failed when the call started, at most `bulk_retry_limit`.
    /// Each delivery moves with a conditional transaction, so two bulk replays running at
    /// once never replay the same delivery.
    pub async fn replay_channel(
        &self,
        tenant: &TenantId,
        channel_id: &ChannelId,
        filter: BulkFilter,
        actor: &Actor,
    ) -> Result<BulkResult, ReplayError> {
        self.replayable_channel(tenant, channel_id).await?;
        let cap = self.cap(filter.limit);
        let query = Self::failed_query(
            tenant,
            channel_id,
            filter.from_key,
            self.started_bound(filter.to_key),
            filter.activity,
        );
        let r = self.replay_all(query, cap, actor).await?;
        tracing::info!(channel_id = %channel_id, retried = r.retried, stats = ?r.stats, "bulk replay done");
        Ok(r)
    }

    /// Replays the dead letters the listing queries select (the web pages' "Retry all failed":
    /// their filters and search, one query per tenant in scope), oldest failure first, at most
    /// `bulk_retry_limit` for all of them together, in the queries' order: only those already
    /// failed when the call started. `has_more` when a dead letter is left that the limit did
    /// not reach. Deliveries of inactive channels are skipped; a query for one inactive channel
    /// is refused like the channel's bulk replay. A channel filter names one tenant's channel:
    /// the other tenants' queries find no such channel and are passed over.
    pub async fn replay_matching(
        &self,
        queries: Vec<DeliveryQuery>,
        actor: &Actor,
    ) -> Result<BulkResult, ReplayError> {
        let cap = self.cap(None);
        let started = self.clock.now_rfc3339();
        let mut total = BulkResult {
            retried: 0,
            has_more: false,
            stats: BulkStats::default(),
        };
        for mut query in queries {
            query.status = Some(converger_core::DeliveryStatus::Failed);
            query.newest_first = false;
            query.after = None;
            query.to_key = Some(match query.to_key {
                Some(t) if t < started => t,
                _ => started.clone(),
            });
            if total.retried >= cap {
                if !total.has_more {
                    total.has_more = self.more_after(&query, None, &mut total.stats).await?;
                }
                continue;
            }
            if let Some(ch) = &query.channel {
                match self.replayable_channel(&query.tenant, ch).await {
                    Ok(()) => {}
                    Err(ReplayError::NotFound) => continue,
                    Err(e) => return Err(e),
                }
            }
            let r = self.replay_all(query, cap - total.retried, actor).await?;
            total.retried += r.retried;
            total.has_more |= r.has_more;
            total.stats += r.stats;
        }
        Ok(total)
    }

    /// Replays `query`'s dead letters page by page, at most `cap`.
    async fn replay_all(
        &self,
        mut query: DeliveryQuery,
        cap: usize,
        actor: &Actor,
    ) -> Result<BulkResult, ReplayError> {
        let mut retried = 0usize;
        let mut stats = BulkStats::default();
        loop {
            let page = self
                .replay_page(&query, cap - retried, actor, &mut stats)
                .await?;
            retried += page.retried;
            match page.next {
                None => {
                    return Ok(BulkResult {
                        retried,
                        has_more: false,
                        stats,
                    });
                }
                Some(next) if retried >= cap => {
                    let has_more = self.more_after(&query, Some(next), &mut stats).await?;
                    return Ok(BulkResult {
                        retried,
                        has_more,
                        stats,
                    });
                }
                Some(next) => query.after = Some(next),
            }
        }
    }

    /// Starts a bulk replay as a job: the `replay` function runs it one chunk per message,
    /// and `GET /api/v1/replays/{id}` shows its progress.
    pub async fn start_replay_job(
        &self,
        tenant: &TenantId,
        channel_id: &ChannelId,
        filter: BulkFilter,
        actor: &Actor,
    ) -> Result<ReplayJob, ReplayError> {
        self.replayable_channel(tenant, channel_id).await?;
        let now = self.clock.now();
        let job = ReplayJob {
            id: format!("rpl_{}", uuid::Uuid::new_v4().simple()),
            tenant_id: tenant.clone(),
            channel_id: channel_id.clone(),
            from_key: filter.from_key,
            to_key: self.started_bound(filter.to_key),
            activity_id: filter.activity,
            limit: self.cap(filter.limit),
            actor: actor.clone(),
            status: "running".into(),
            retried: 0,
            has_more: false,
            cursor: None,
            error: None,
            version: 0,
            created_at: now,
            updated_at: now,
            expires_at: self.clock.now_ms() / 1000 + JOB_RETENTION_S,
        };
        self.replay_store.create_replay_job(&job).await?;
        // If this send is lost, the job stays `running` without progress: the caller sees it
        // in the job's status and can start another (replays never repeat a delivery).
        self.queue
            .send_replay(&ReplayMessage {
                job_id: job.id.clone(),
            })
            .await
            .map_err(|e| ReplayError::Store(e.into()))?;
        Ok(job)
    }

    /// Runs the next chunk of a replay job and schedules the one after it.
    pub async fn run_replay_job(&self, job_id: &str) -> Result<(), ReplayError> {
        let Some(mut job) = self.replay_store.get_replay_job(job_id).await? else {
            tracing::warn!(
                job_id,
                "message for a replay job that does not exist; dropped"
            );
            return Ok(());
        };
        if job.status != "running" {
            return Ok(());
        }
        let mut query = Self::failed_query(
            &job.tenant_id,
            &job.channel_id,
            job.from_key.clone(),
            job.to_key.clone(),
            job.activity_id.clone(),
        );
        query.after = job.cursor.clone();
        let mut stats = BulkStats::default();
        let active = self
            .replayable_channel(&job.tenant_id, &job.channel_id)
            .await;
        let outcome = match active {
            Ok(()) => self
                .replay_page(&query, job.limit - job.retried, &job.actor, &mut stats)
                .await
                .map(Some),
            Err(ReplayError::ChannelInactive | ReplayError::NotFound) => Ok(None),
            Err(e) => Err(e),
        };
        let page = match outcome {
            Ok(Some(p)) => p,
            Ok(None) => {
                job.status = "failed".into();
                job.error = Some("Channel is inactive".into());
                job.has_more = true;
                job.version += 1;
                job.updated_at = self.clock.now();
                self.replay_store.save_replay_job(&job).await?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        job.retried += page.retried;
        job.version += 1;
        job.updated_at = self.clock.now();
        let more = match page.next {
            None => false,
            Some(next) if job.retried >= job.limit => {
                job.has_more = self.more_after(&query, Some(next), &mut stats).await?;
                false
            }
            Some(next) => {
                job.cursor = Some(next);
                true
            }
        };
        if !more {
            job.status = "done".into();
        }
        // A duplicate message that ran the same chunk loses this write and stops here.
        if !self.replay_store.save_replay_job(&job).await? {
            return Ok(());
        }
        if more {
            self.queue
                .send_replay(&ReplayMessage {
                    job_id: job.id.clone(),
                })
                .await
                .map_err(|e| ReplayError::Store(e.into()))?;
        }
        Ok(())
    }
}
