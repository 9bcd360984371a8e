//! The use cases, each a type that borrows only the ports and components it uses, built by
//! [`Pipeline`] (the composition root, one per process) in `compose.rs`, the one place that
//! wires them, so no use case names the root:
//!
//! - [`ingest::Intake`]: an activity fanned out into deliveries;
//! - [`attempt::Attempts`]: one delivery attempt (claim, prepare, call, settle), with the
//!   breaker's step after it;
//! - [`flow::FlowControl`]: the component every use case that moves a delivery asks first,
//!   through its parts (the window's admission, the gate, the breaker, the backlog, the jobs,
//!   pause and resume, reconciliation);
//! - [`flow_jobs::FlowJobs`]: the probe function's jobs (feed, probe, release, replay on close);
//! - [`replay::Replays`], [`sweep::Sweeper`], [`health::Health`] (checks, auto-disable and
//!   alerts), [`handoff::Handoff`] (receipts, websocket clients, the echo bot, email events),
//!   [`tenants::Tenants`] and [`channels::Channels`];
//! - [`Reads`]: what the API and the pages show.
//!
//! - [`usage::UsageReads`]: the charts' series, a tenant's usage and its estimated cost.
//!
//! Beside them, two components they share: [`cache::ChannelCache`] and
//! [`usage::UsageCounts`]. The types more than one of them speaks are in `outcome`.
//! Nothing here knows AWS or Lambda: the functions' glue (`converger-lambda`) only calls
//! these entry points.

pub mod attempt;
pub mod cache;
pub mod changes;
pub mod channels;
mod compose;
pub mod config;
pub mod event_types;
pub mod events;
pub mod flow;
pub mod flow_jobs;
pub mod fold;
pub mod handoff;
pub mod health;
pub mod ingest;
pub mod lanes;
pub mod metrics;
pub mod middleware;
pub mod outcome;
pub mod payloads;
pub mod reads;
pub mod replay;
pub mod shards;
pub mod sources;
pub mod stream;
pub mod sweep;
pub mod tenants;
pub mod usage;

pub use config::PipelineConfig;
pub use reads::Reads;

use converger_adapters::Adapters;
use converger_ports::{
    AccountStore, Events, IdempotencyStore, Mailer, Queue, QueueDepth, Sockets, Store, StoreResult,
};
use std::sync::Arc;

/// The composition root: the ports and settings of one process (one Lambda instance), the
/// components its use cases share, and the use cases themselves, each borrowing only what it
/// uses. Outside this crate it hands out use cases, the read side ([`Pipeline::reads`]) and
/// two narrow ports the HTTP surfaces keep themselves (accounts and idempotency keys), never
/// the store or the queues.
pub struct Pipeline {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) queue: Arc<dyn Queue>,
    pub(crate) events: Arc<dyn Events>,
    /// Where websocket pushes go ([`Pipeline::with_sockets`]; none by default).
    pub(crate) sockets: Arc<dyn Sockets>,
    /// Where email goes ([`Pipeline::with_mailer`]; none by default).
    pub(crate) mailer: Arc<dyn Mailer>,
    /// Where AWS channel types send ([`Pipeline::with_tenant_aws`]; none by default).
    pub(crate) tenant_aws: Arc<dyn converger_ports::TenantAws>,
    /// Where attempts' spans go ([`Pipeline::with_spans`]; nowhere by default).
    pub(crate) spans: Arc<dyn converger_ports::Spans>,
    /// This instance's attempts' metrics, written at the end of each batch.
    pub(crate) metrics: metrics::Buffer,
    /// The payload bucket ([`Pipeline::with_payloads`]; none by default: payloads stay in
    /// their rows, at most `core::payload::ROW_MAX_BYTES`).
    pub(crate) payloads: payloads::Payloads,
    pub(crate) adapters: Adapters,
    pub(crate) config: PipelineConfig,
    reads: Reads,
    pub(crate) cache: cache::ChannelCache,
    pub(crate) flow: flow::FlowControl,
    pub(crate) usage: usage::UsageCounts,
    /// The tenants the changes function read for their listing shards.
    pub(crate) shard_memo: shards::ShardMemo,
    /// The sources this instance throttled for their refused requests.
    pub(crate) sources: sources::SourceGate,
    /// The live stream's tenants, as this instance last read them.
    pub(crate) live: stream::LiveCache,
    /// Where the rules read the time ([`Pipeline::with_clock`]; the system's by default).
    pub(crate) clock: Arc<dyn converger_core::time::Clock>,
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
            cache: cache::ChannelCache::new(
                store.clone(),
                store.clone(),
                store.clone(),
                store.clone(),
                config.channel_cache_ttl,
            ),
            flow: flow::FlowControl::new(
                &store,
                queue.clone(),
                events.clone(),
                adapters.clone(),
                config.clone(),
            ),
            usage: usage::UsageCounts::new(store.clone(), config.usage_flush),
            shard_memo: shards::ShardMemo::default(),
            sources: sources::SourceGate::default(),
            live: stream::LiveCache::default(),
            store,
            queue,
            events,
            sockets: Arc::new(converger_ports::NoSockets),
            mailer: Arc::new(converger_ports::NoMailer),
            tenant_aws: Arc::new(converger_ports::NoTenantAws),
            spans: Arc::new(converger_ports::NoSpans),
            metrics: metrics::Buffer::default(),
            payloads: payloads::Payloads::default(),
            adapters,
            config,
            clock: Arc::new(converger_core::time::SystemClock),
        }
    }

    /// Reads the time from `clock` (a test's [`converger_core::time::ManualClock`], so that a
    /// backoff or a cooldown passes when the test moves it).
    pub fn with_clock(mut self, clock: Arc<dyn converger_core::time::Clock>) -> Self {
        self.flow.clock = clock.clone();
        self.usage.clock = clock.clone();
        self.clock = clock;
        self
    }

    /// Where the rules read the time.
    pub fn clock(&self) -> &dyn converger_core::time::Clock {
        &*self.clock
    }

    /// Lets attempts send email through `mailer`.
    pub fn with_mailer(mut self, mailer: Arc<dyn Mailer>) -> Self {
        self.mailer = mailer;
        self
    }

    /// Lets attempts send into tenants' AWS accounts through `tenant_aws`.
    pub fn with_tenant_aws(mut self, tenant_aws: Arc<dyn converger_ports::TenantAws>) -> Self {
        self.tenant_aws = tenant_aws;
        self
    }

    /// Keeps payloads over `core::payload::KEPT_IN_ROW_BYTES` in `store`, and takes
    /// payloads up to `core::payload::MAX_BYTES`.
    pub fn with_payloads(mut self, store: Arc<dyn converger_ports::PayloadStore>) -> Self {
        self.payloads = payloads::Payloads::new(store);
        self
    }

    /// The payload bucket, as the API reads it.
    pub fn payloads(&self) -> &payloads::Payloads {
        &self.payloads
    }

    /// Exports attempts' spans through `spans`.
    pub fn with_spans(mut self, spans: Arc<dyn converger_ports::Spans>) -> Self {
        self.spans = spans;
        self
    }

    /// Sends the spans of the attempts that ended and writes their metrics' lines (at the
    /// end of a batch, before the instance can be frozen).
    pub async fn flush_telemetry(&self) {
        self.spans.flush().await;
        self.metrics.flush();
    }

    /// Lets attempts push to websocket clients through `sockets`.
    pub fn with_sockets(mut self, sockets: Arc<dyn Sockets>) -> Self {
        self.sockets = sockets;
        self
    }

    /// The settings this pipeline runs with.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The channel types this build delivers to.
    pub fn adapters(&self) -> &Adapters {
        &self.adapters
    }

    /// Flow control: pause, resume and the delivery state the API shows.
    pub fn flow(&self) -> &flow::FlowControl {
        &self.flow
    }

    /// The channels this instance remembers.
    pub fn channel_cache(&self) -> &cache::ChannelCache {
        &self.cache
    }

    /// What the API and the pages read.
    pub fn reads(&self) -> &Reads {
        &self.reads
    }

    /// The web pages' users and sign-in counts.
    pub fn accounts(&self) -> Arc<dyn AccountStore> {
        self.store.clone()
    }

    /// The API's idempotency keys.
    pub fn idempotency_keys(&self) -> Arc<dyn IdempotencyStore> {
        self.store.clone()
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
        self.store.rate_take_n(schedule, limit, n, now_us).await
    }

    /// The queues' approximate depths (the dashboard).
    pub async fn queue_depths(&self) -> Result<Vec<QueueDepth>, converger_ports::QueueError> {
        self.queue.depths().await
    }
}
