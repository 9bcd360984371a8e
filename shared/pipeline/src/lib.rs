//! The use cases, one module each, over one set of [`Deps`]: `ingest` (an activity fanned out
//! into deliveries) -> `attempt` (one delivery attempt: prepare, call, settle) -> `flow` (the
//! gate before it and the breaker after it), and beside them `replay`, `sweep`, `health`,
//! `handoff` (receipts, websocket clients, the echo bot) and `tenants`. The types more than
//! one of them speaks are in `outcome`. Nothing here knows AWS or Lambda: the functions'
//! glue (`converger-lambda`) only calls these entry points.

pub mod attempt;
pub mod config;
pub mod flow;
pub mod handoff;
pub mod health;
pub mod ingest;
pub mod metrics;
pub mod outcome;
pub mod replay;
pub mod sweep;
pub mod tenants;

pub use config::PipelineConfig;

use converger_adapters::Adapters;
use converger_core::ChannelId;
use converger_core::cache::TtlCache;
use converger_ports::{Channel, Events, Queue, Sockets, Store, StoreResult};
use std::sync::Arc;

/// What every use case needs, built once per process (per Lambda instance): the ports and the
/// settings. Read through [`Pipeline`] (which dereferences to it).
pub struct Deps {
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn Queue>,
    pub events: Arc<dyn Events>,
    pub adapters: Adapters,
    pub config: PipelineConfig,
    /// Where websocket pushes go ([`Pipeline::with_sockets`]; none by default).
    pub sockets: Arc<dyn Sockets>,
}

/// The use cases' entry points over [`Deps`], with what this instance remembers between
/// invocations: channels (for `channel_cache_ttl`) and the flow module's own caches, which
/// only that module reads.
pub struct Pipeline {
    deps: Deps,
    channels: TtlCache<ChannelId, Arc<Channel>>,
    flow: flow::Caches,
}

impl std::ops::Deref for Pipeline {
    type Target = Deps;

    fn deref(&self) -> &Deps {
        &self.deps
    }
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
            channels: TtlCache::new(config.channel_cache_ttl),
            flow: flow::Caches::new(config.flow_cache_ttl),
            deps: Deps {
                store,
                queue,
                events,
                adapters,
                config,
                sockets: Arc::new(converger_ports::NoSockets),
            },
        }
    }

    /// Lets attempts push to websocket clients through `sockets`.
    pub fn with_sockets(mut self, sockets: Arc<dyn Sockets>) -> Self {
        self.deps.sockets = sockets;
        self
    }

    /// A channel `scope` may see, from this instance's cache (see [`Self::channel`]): another
    /// tenant's channel reads exactly like a missing one.
    pub async fn channel_in(
        &self,
        scope: converger_ports::Scope<'_>,
        id: &ChannelId,
    ) -> StoreResult<Option<Arc<Channel>>> {
        Ok(self.channel(id).await?.filter(|c| scope.sees(&c.tenant_id)))
    }

    /// A channel, from this instance's cache when it was read less than
    /// `channel_cache_ttl` ago.
    pub async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Arc<Channel>>> {
        if let Some(ch) = self.channels.get(id) {
            return Ok(Some(ch));
        }
        let Some(ch) = self.store.get_channel(id).await? else {
            return Ok(None);
        };
        let ch = Arc::new(ch);
        self.channels.insert(id.clone(), ch.clone());
        Ok(Some(ch))
    }

    /// Forgets a cached channel (after this process changed it).
    pub fn forget_channel(&self, id: &ChannelId) {
        self.channels.remove(id);
    }
}
