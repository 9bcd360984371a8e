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
use converger_store::{Channel, Events, Queue, Store, StoreResult};
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

    /// Forgets a cached channel (after this process changed it).
    pub fn forget_channel(&self, id: &ChannelId) {
        if let Ok(mut cache) = self.channels.lock() {
            cache.remove(id);
        }
    }
}
