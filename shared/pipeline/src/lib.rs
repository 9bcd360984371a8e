//! The use cases: ingest (fan an activity out into deliveries) and one delivery attempt, plus
//! the generic SQS partial-batch helper the queue-triggered functions share.

pub mod attempt;
pub mod batch;
pub mod bootstrap;
pub mod config;
pub mod flow;
pub mod handlers;
pub mod handoff;
pub mod health;
pub mod ingest;
pub mod metrics;
pub mod replay;
pub mod sweep;
pub mod tenants;

pub use config::PipelineConfig;

use converger_adapters::Adapters;
use converger_core::ChannelId;
use converger_store::{AttemptEntry, Channel, Delivery, Events, Queue, Store, StoreResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Everything a use case needs, built once per process (per Lambda instance).
pub struct Pipeline {
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn Queue>,
    pub events: Arc<dyn Events>,
    pub adapters: Adapters,
    pub config: PipelineConfig,
    /// Where websocket pushes go ([`Pipeline::with_sockets`]; none by default).
    pub sockets: Arc<dyn converger_store::Sockets>,
    channels: Mutex<HashMap<ChannelId, (Instant, Arc<Channel>)>>,
    flows: Mutex<HashMap<ChannelId, (Instant, converger_store::Flow)>>,
    backlog_hints: Mutex<
        HashMap<
            ChannelId,
            (
                Instant,
                std::collections::VecDeque<converger_core::DeliveryId>,
            ),
        >,
    >,
}

impl Pipeline {
    pub fn new(
        store: Arc<dyn Store>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn Events>,
        adapters: Adapters,
        config: PipelineConfig,
    ) -> Self {
        Self {
            store,
            queue,
            events,
            adapters,
            config,
            sockets: Arc::new(converger_store::NoSockets),
            channels: Mutex::new(HashMap::new()),
            flows: Mutex::new(HashMap::new()),
            backlog_hints: Mutex::new(HashMap::new()),
        }
    }

    /// A channel `scope` may see, from this instance's cache (see [`Self::channel`]): another
    /// tenant's channel reads exactly like a missing one.
    pub async fn channel_in(
        &self,
        scope: converger_store::Scope<'_>,
        id: &ChannelId,
    ) -> StoreResult<Option<Arc<Channel>>> {
        Ok(self.channel(id).await?.filter(|c| scope.sees(&c.tenant_id)))
    }

    /// A channel, from this instance's cache when it was read less than
    /// `channel_cache_ttl` ago.
    pub async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Arc<Channel>>> {
        let ttl = self.config.channel_cache_ttl;
        if !ttl.is_zero()
            && let Ok(cache) = self.channels.lock()
            && let Some((at, ch)) = cache.get(id)
            && at.elapsed() < ttl
        {
            return Ok(Some(ch.clone()));
        }
        let Some(ch) = self.store.get_channel(id).await? else {
            return Ok(None);
        };
        let ch = Arc::new(ch);
        if !ttl.is_zero()
            && let Ok(mut cache) = self.channels.lock()
        {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(id.clone(), (Instant::now(), ch.clone()));
        }
        Ok(Some(ch))
    }

    /// A delivery's attempt log, newest first: the attempts numbered below `before` (all when
    /// `None`), at most `limit`, and whether more follow. The newest attempts live in the
    /// delivery item and older ones in the attempts table; entries past their retention are
    /// left out.
    pub async fn attempt_log(
        &self,
        d: &Delivery,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<(Vec<AttemptEntry>, bool)> {
        let below = |a: u32| before.is_none_or(|b| a < b);
        let mut entries: Vec<AttemptEntry> = d
            .attempt_log
            .iter()
            .rev()
            .filter(|e| below(e.attempt))
            .cloned()
            .collect();
        let oldest_kept = d.attempt_log.first().map_or(u32::MAX, |e| e.attempt);
        if entries.len() <= limit && oldest_kept > 1 && !d.attempt_log.is_empty() {
            let from = before.map_or(oldest_kept, |b| b.min(oldest_kept));
            let older = self
                .store
                .older_attempts(&d.id, Some(from), limit + 1 - entries.len())
                .await?;
            entries.extend(older);
        }
        let now_s = converger_core::time::now_ms() / 1000;
        entries.retain(|e| e.expires_at.is_none_or(|x| x > now_s));
        entries.dedup_by_key(|e| e.attempt);
        let more = entries.len() > limit;
        entries.truncate(limit);
        Ok((entries, more))
    }

    /// Forgets a cached channel (after this process changed it).
    pub fn forget_channel(&self, id: &ChannelId) {
        if let Ok(mut cache) = self.channels.lock() {
            cache.remove(id);
        }
    }
}
