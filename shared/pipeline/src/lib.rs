//! The use cases, one module each, over one set of [`Deps`]: `ingest` (an activity fanned out
//! into deliveries) -> `attempt` (one delivery attempt: prepare, call, settle) -> `flow` (the
//! gate before it and the breaker after it), and beside them `replay`, `sweep`, `health`,
//! `handoff` (receipts, websocket clients, the echo bot) and `tenants`. The types more than
//! one of them speaks are in `outcome`. Nothing here knows AWS or Lambda: the functions'
//! glue (`converger-lambda`) only calls these entry points.

pub mod attempt;
pub mod channels;
pub mod config;
pub mod events;
pub mod flow;
pub mod handoff;
pub mod health;
pub mod ingest;
pub mod metrics;
pub mod middleware;
pub mod outcome;
pub mod reads;
pub mod replay;
pub mod sweep;
pub mod tenants;

pub use config::PipelineConfig;
pub use reads::Reads;

use converger_adapters::Adapters;
use converger_core::cache::TtlCache;
use converger_core::{ChannelId, TenantId};
use converger_ports::{
    AccountStore, Channel, Events, IdempotencyStore, Queue, QueueDepth, Sockets, Store, StoreResult,
};
use std::sync::Arc;

/// What every use case needs, built once per process (per Lambda instance): the ports and the
/// settings. Read through [`Pipeline`] (which dereferences to it).
///
/// The ports are this crate's own: outside it, [`Pipeline`] hands out use cases, the read side
/// ([`Pipeline::reads`]) and two narrow ports the HTTP surfaces keep themselves (accounts and
/// idempotency keys), never the store or the queues.
pub struct Deps {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) queue: Arc<dyn Queue>,
    pub(crate) events: Arc<dyn Events>,
    pub adapters: Adapters,
    pub config: PipelineConfig,
    /// Where websocket pushes go ([`Pipeline::with_sockets`]; none by default).
    pub(crate) sockets: Arc<dyn Sockets>,
    /// Where email goes ([`Pipeline::with_mailer`]; none by default).
    pub(crate) mailer: Arc<dyn converger_ports::Mailer>,
}

/// The use cases' entry points over [`Deps`], with what this instance remembers between
/// invocations: channels (for `channel_cache_ttl`) and the flow module's own caches, which
/// only that module reads.
pub struct Pipeline {
    deps: Deps,
    reads: Reads,
    channels: TtlCache<ChannelId, Arc<Channel>>,
    /// Each tenant's channels (the subscriber lists of event types).
    tenant_channels: TtlCache<TenantId, Arc<Vec<Arc<Channel>>>>,
    flow: flow::FlowControl,
    /// Health counts not written yet (see [`converger_core::health::Tally`]).
    health_tally: std::sync::Mutex<converger_core::health::Tally<ChannelId>>,
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
            reads: Reads::new(&store),
            channels: TtlCache::new(config.channel_cache_ttl),
            tenant_channels: TtlCache::bounded(config.channel_cache_ttl, 10_000),
            flow: flow::FlowControl::new(
                &store,
                queue.clone(),
                events.clone(),
                adapters.clone(),
                config.clone(),
            ),
            health_tally: std::sync::Mutex::new(Default::default()),
            deps: Deps {
                store,
                queue,
                events,
                adapters,
                config,
                sockets: Arc::new(converger_ports::NoSockets),
                mailer: Arc::new(converger_ports::NoMailer),
            },
        }
    }

    /// Sends platform events ten to a request ([`events::BatchedEvents`]): for the deliver
    /// function, whose handler flushes them at the end of each batch.
    pub fn with_batched_events(mut self) -> Self {
        self.deps.events = Arc::new(events::BatchedEvents::new(self.deps.events.clone()));
        self.flow.set_events(self.deps.events.clone());
        self
    }

    /// Sends the platform events held back by [`Self::with_batched_events`] (at the end of a
    /// batch, before the instance can be frozen).
    pub async fn flush_events(&self) {
        self.deps.events.flush().await;
    }

    /// Lets attempts send email through `mailer`.
    pub fn with_mailer(mut self, mailer: Arc<dyn converger_ports::Mailer>) -> Self {
        self.deps.mailer = mailer;
        self
    }

    /// Lets attempts push to websocket clients through `sockets`.
    pub fn with_sockets(mut self, sockets: Arc<dyn Sockets>) -> Self {
        self.deps.sockets = sockets;
        self
    }

    /// Flow control: pause, resume and the delivery state the API shows.
    pub fn flow(&self) -> &flow::FlowControl {
        &self.flow
    }

    /// What the API and the pages read.
    pub fn reads(&self) -> &Reads {
        &self.reads
    }

    /// The web pages' users and sign-in counts.
    pub fn accounts(&self) -> Arc<dyn AccountStore> {
        self.deps.store.clone()
    }

    /// The API's idempotency keys.
    pub fn idempotency_keys(&self) -> Arc<dyn IdempotencyStore> {
        self.deps.store.clone()
    }

    /// Takes `n` places of an API key's rate schedule (`schedule`, at `limit`) at `now_us`, or
    /// the instant (µs) the next place frees.
    pub async fn take_api_rate(
        &self,
        schedule: &str,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>> {
        self.deps
            .store
            .rate_take_n(schedule, limit, n, now_us)
            .await
    }

    /// The queues' approximate depths (the dashboard).
    pub async fn queue_depths(&self) -> Result<Vec<QueueDepth>, converger_ports::QueueError> {
        self.deps.queue.depths().await
    }

    /// A channel `scope` may see, from this instance's cache (see [`Self::channel`]): another
    /// tenant's channel reads exactly like a missing one.
    pub async fn channel_in(
        &self,
        scope: converger_ports::Scope<'_>,
        id: &ChannelId,
    ) -> StoreResult<Option<Arc<Channel>>> {
        Ok(self.channel(id).await?.filter(|c| c.visible_to(scope)))
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

    /// Forgets a cached channel, and its tenant's cached channel list (after this process
    /// changed it).
    pub fn forget_channel(&self, id: &ChannelId) {
        if let Some(c) = self.channels.get_stale(id) {
            self.tenant_channels.remove(&c.tenant_id);
        }
        self.channels.remove(id);
    }

    /// Forgets a tenant's cached channel list (after this process created or changed one of
    /// its channels).
    pub fn forget_tenant_channels(&self, tenant: &TenantId) {
        self.tenant_channels.remove(tenant);
    }

    /// A tenant's channels that were not deleted (at most 1,000), from this instance's cache
    /// when read less than `channel_cache_ttl` ago.
    pub async fn tenant_channels(&self, tenant: &TenantId) -> StoreResult<Arc<Vec<Arc<Channel>>>> {
        if let Some(list) = self.tenant_channels.get(tenant) {
            return Ok(list);
        }
        let list: Arc<Vec<Arc<Channel>>> = Arc::new(
            self.store
                .list_channels(tenant)
                .await?
                .into_iter()
                .map(Arc::new)
                .collect(),
        );
        self.tenant_channels.insert(tenant.clone(), list.clone());
        Ok(list)
    }
}
