//! Flow control, as the pipeline applies it: admission of new deliveries into a channel's
//! window, the gate before an attempt (park, probe, window, rate limit), the breaker's
//! transitions after one, feeding the backlog into freed slots, the probe and release jobs,
//! pause and resume, and the sweeper's reconciliation. The rules are in `core::flow`; every
//! state change is one conditional write in the store.

use crate::PipelineConfig;
use converger_adapters::Adapters;
use converger_core::cache::TtlCache;
use converger_core::flow::backlog_mark_fresh;
use converger_core::{BreakerConfig, CircuitState, RateLimit, Tier, time};
use converger_core::{ChannelId, DeliveryId, TenantId};
use converger_ports::Flow;
use converger_ports::{
    ActivityStore, AuditStore, ChannelStore, DeliveryStore, FlowStore, Queue, Store, TenantStore,
};
use converger_ports::{Channel, Mark, PlatformEvent, StoreResult};
use std::sync::Arc;
use std::time::Duration;

mod admission;
mod backlog;
mod breaker;
mod gate;
mod jobs;
mod operator;
mod reconcile;
mod share;

pub use crate::outcome::{Admission, Admit};
pub(crate) use breaker::CallEnd;

/// Backlog rows one feed query reads (the ones not fed at once are remembered).
pub const BACKLOG_PREFETCH: usize = 25;

/// How stale `last_success_at` may get before a success is written anyway.
const SUCCESS_MARK_MS: i64 = 600_000;

/// What this instance remembers of flow state: the channels' flow items (for
/// `flow_cache_ttl`), which every part reads, and each part's own memory, in a type of the
/// part's file whose fields only that file reaches (no part reads another's state).
pub struct Caches {
    flows: TtlCache<ChannelId, Flow>,
    window: admission::WindowCaches,
    backlog: backlog::BacklogCaches,
    share: share::ShareCaches,
}

impl Caches {
    pub fn new(flow_ttl: Duration) -> Self {
        Self {
            flows: TtlCache::new(flow_ttl),
            window: admission::WindowCaches::new(),
            backlog: backlog::BacklogCaches::new(),
            share: share::ShareCaches::new(),
        }
    }
}

/// Flow control as one component: what the attempt asks before it calls (the gate), during
/// (the backlog's next row, the lease) and after (the slot back, the window), admission at
/// ingest and replay, the operator's pause and resume, and the sweeper's reconciliation. It
/// holds the ports it uses and its own caches; the breaker's announcements (alerts, replays
/// on close) and the flow jobs that run attempts are the use cases above it, which calls into here.
pub struct FlowControl {
    flows: Arc<dyn FlowStore>,
    deliveries: Arc<dyn DeliveryStore>,
    activities: Arc<dyn ActivityStore>,
    channels: Arc<dyn ChannelStore>,
    tenants: Arc<dyn TenantStore>,
    audit_log: Arc<dyn AuditStore>,
    pub(crate) queue: Arc<dyn Queue>,
    /// Where each delivery's park and release are announced (`delivery.status_changed`).
    pub(crate) events: Arc<dyn converger_ports::Events>,
    /// The channel types' default rate limits.
    adapters: Adapters,
    pub(crate) config: PipelineConfig,
    caches: Caches,
    pub(crate) clock: Arc<dyn converger_core::time::Clock>,
}

impl FlowControl {
    pub(crate) fn new(
        store: &Arc<dyn Store>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn converger_ports::Events>,
        adapters: Adapters,
        config: PipelineConfig,
    ) -> Self {
        Self {
            flows: store.clone(),
            deliveries: store.clone(),
            activities: store.clone(),
            channels: store.clone(),
            tenants: store.clone(),
            audit_log: store.clone(),
            queue,
            events,
            adapters,
            caches: Caches::new(config.flow_cache_ttl),
            config,
            clock: Arc::new(converger_core::time::SystemClock),
        }
    }

    /// One slice of an attempt's lease, in milliseconds.
    pub(crate) fn lease_slice_ms(&self) -> i64 {
        i64::try_from(self.config.lease_slice.as_millis())
            .unwrap_or(converger_core::policy::LEASE_SLICE_MS)
    }
}

/// One part of flow control, with the methods of one job: a view of [`FlowControl`], which
/// holds the ports and the flow items' cache they share (a part's own memory is in
/// [`Caches`], behind fields only its file reaches). The attempt, ingest, replay and the sweeper ask the
/// part they need (`flow.gate()`, `flow.breaker()`, ...).
macro_rules! part {
    ($(#[$doc:meta])* $name:ident, $get:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'f>(&'f FlowControl);

        impl std::ops::Deref for $name<'_> {
            type Target = FlowControl;
            fn deref(&self) -> &FlowControl {
                self.0
            }
        }

        impl FlowControl {
            $(#[$doc])*
            pub fn $get(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
}

part!(
    /// The gate before an attempt: park, probe, window and rate limit (`gate.rs`).
    AttemptGate,
    gate
);
part!(
    /// A channel's window: admission of new deliveries, slots, growth and rate places
    /// (`admission.rs`).
    Window,
    window
);
part!(
    /// The breaker after a call: the verdict's effect, opening, probes (`breaker.rs`).
    Breaker,
    breaker
);
part!(
    /// The backlog fed into freed slots (`backlog.rs`).
    Backlog,
    backlog
);
part!(
    /// The probe, feed and release jobs' flow side (`jobs.rs`).
    Jobs,
    jobs
);
part!(
    /// Pause, resume and the state the delivery endpoint shows (`operator.rs`).
    Operator,
    operator
);
part!(
    /// A tenant's share of its tier over its busy channels (`share.rs`).
    TenantShare,
    share
);
part!(
    /// The sweeper's reconciliation of slots, backlogs and probes (`reconcile.rs`).
    Reconciler,
    reconciler
);

/// A channel's flow settings for deliveries of `tier`.
pub struct Limits {
    pub breaker: BreakerConfig,
    /// The window's cap (`None`: unbounded).
    pub cap: Option<u32>,
    pub rate: Option<RateLimit>,
}

/// What the delivery endpoint shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeliveryState {
    pub state: &'static str,
    pub circuit_state: CircuitState,
    pub circuit_changed_at: Option<String>,
    pub consecutive_failures: u32,
    pub in_flight: usize,
    pub window: Option<u32>,
    pub max_in_flight: Option<u32>,
    pub rate_limit: Option<String>,
    pub parked: u64,
    pub backlog: u64,
}

impl FlowControl {
    /// The flow settings of `channel` for deliveries of `tier`.
    pub fn limits(&self, channel: &Channel, tier: Tier) -> Limits {
        let breaker = channel.circuit_breaker.effective();
        let rate = match &channel.rate_limit {
            Some(r) => Some(*r),
            None => self
                .adapters
                .get(channel.kind)
                .and_then(|a| a.default_rate_limit(&channel.config, &channel.parsed_config)),
        };
        Limits {
            cap: breaker
                .max_in_flight
                .resolve(tier, self.config.tier_concurrency),
            breaker,
            rate,
        }
    }

    /// A channel's flow item, from this instance's cache when read less than
    /// `flow_cache_ttl` ago.
    pub async fn flow_state(&self, channel: &ChannelId) -> StoreResult<Flow> {
        if let Some(f) = self.caches.flows.get(channel) {
            return Ok(f);
        }
        self.read_flow(channel).await
    }

    /// A channel's flow item as stored now (kept for the next decisions).
    pub(crate) async fn read_flow(&self, channel: &ChannelId) -> StoreResult<Flow> {
        let f = self.flows.get_flow(channel).await?;
        self.remember_flow(&f);
        Ok(f)
    }

    /// This instance's fresh view of a flow item, without a read.
    fn cached_flow(&self, channel: &ChannelId) -> Option<Flow> {
        self.caches.flows.get(channel)
    }

    /// Sets a mark on a channel's flow item, unless this instance's fresh view shows it set
    /// already (then no write: a backlogged or parked delivery costs no mark of its own; a
    /// backlog mark is relied on only while it is recent: see `core::flow`). Returns the
    /// flow item, and whether it is the one the store just returned (else the cached view).
    async fn ensure_mark(
        &self,
        channel: &converger_core::ChannelId,
        mark: Mark,
    ) -> StoreResult<(Flow, bool)> {
        if let Some(f) = self.cached_flow(channel) {
            let set = match mark {
                Mark::Backlog => backlog_mark_fresh(f.backlog_at, self.clock.now_ms()),
                Mark::Parked => f.parked_at.is_some(),
                Mark::ProbeDue => f.probe_due.is_some(),
            };
            if set {
                return Ok((f, false));
            }
        }
        let f = self
            .flows
            .mark(channel, mark, Some(self.clock.now_ms()), None)
            .await?;
        self.remember_flow(&f);
        Ok((f, true))
    }

    /// The tier of the channel's tenant (its deliveries' limits depend on it).
    pub(crate) async fn tenant_tier(&self, channel: &Channel) -> StoreResult<Tier> {
        Ok(self
            .tenants
            .get_tenant(&channel.tenant_id)
            .await?
            .map_or(Tier::Default, |t| t.tier))
    }

    /// Keeps the flow item a write returned, so the next decision sees it.
    pub(super) fn remember_flow(&self, f: &Flow) {
        self.caches.flows.insert(f.channel_id.clone(), f.clone());
    }
}

pub(crate) fn circuit_event(
    channel: &Channel,
    kind: converger_ports::EventType,
    reason: &str,
    at_ms: i64,
) -> PlatformEvent {
    PlatformEvent::of(
        kind,
        &converger_ports::events::CircuitChanged {
            channel: converger_ports::events::ChannelNamed::of(kind, channel),
            reason: reason.to_owned(),
            changed_at: time::ms_to_rfc3339(at_ms),
        },
    )
}
