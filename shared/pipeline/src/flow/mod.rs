//! Flow control, as the pipeline applies it: admission of new deliveries into a channel's
//! window, the gate before an attempt (park, probe, window, rate limit), the breaker's
//! transitions after one, feeding the backlog into freed slots, the probe and release jobs,
//! pause and resume, and the sweeper's reconciliation. The rules are in `core::flow`; every
//! state change is one conditional write in the store.

use crate::PipelineConfig;
use converger_adapters::Adapters;
use converger_core::cache::TtlCache;
use converger_core::flow::RateBatch;
use converger_core::flow::backlog_mark_fresh;
use converger_core::{BreakerConfig, CircuitState, RateLimit, Tier, time};
use converger_core::{ChannelId, DeliveryId};
use converger_ports::Flow;
use converger_ports::{
    ActivityStore, AuditStore, ChannelStore, DeliveryStore, FlowStore, Queue, Store, TenantStore,
};
use converger_ports::{Channel, Mark, PlatformEvent, StoreResult};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

mod admission;
mod backlog;
mod breaker;
mod gate;
mod jobs;
mod operator;
mod reconcile;

pub use crate::outcome::{Admission, Admit};
pub(crate) use breaker::CallEnd;

/// Backlog rows one feed query reads (the ones not fed at once are remembered).
pub const BACKLOG_PREFETCH: usize = 25;

/// How stale `last_success_at` may get before a success is written anyway.
const SUCCESS_MARK_MS: i64 = 600_000;

/// How long remembered backlog rows are trusted.
const HINT_TTL: Duration = Duration::from_secs(5);

/// How often one instance writes a channel's grown window: a success adds one slot, and the
/// successes of this long are written together, so that a window growing toward a large cap
/// does not write the flow item once per delivery.
const GROWTH_WRITE_MS: i64 = 250;

/// How often one instance sends a channel a feed job at most.
const FEED_JOB_EVERY: Duration = Duration::from_secs(2);

/// How long a backlog the next-row lookup found empty is not looked at again by it.
const EMPTY_TTL: Duration = Duration::from_secs(1);

/// What this instance remembers of flow state: the channels' flow items (for
/// `flow_cache_ttl`) and the backlog rows one feed found and did not feed yet. Only this
/// module reads or writes them.
pub struct Caches {
    flows: TtlCache<ChannelId, Flow>,
    backlog_hints: TtlCache<ChannelId, VecDeque<DeliveryId>>,
    /// Backlogs the next-row lookup found empty (trusted for [`EMPTY_TTL`]).
    backlog_empty: TtlCache<ChannelId, ()>,
    /// Uncounted admissions per channel in the current second: (second, count).
    bursts: std::sync::Mutex<std::collections::HashMap<ChannelId, (i64, u32)>>,
    /// Places this instance reserved together in each channel's rate schedule.
    rate_batches: std::sync::Mutex<std::collections::HashMap<ChannelId, RateBatch>>,
    /// One reservation at a time per channel from this instance: the requests that find the
    /// batch used up wait for the one reserving rather than each writing the schedule.
    rate_refills: std::sync::Mutex<std::collections::HashMap<ChannelId, RefillLock>>,
    /// When this instance last sent a channel a feed job (`FlowJobKind::Feed`).
    feed_jobs: TtlCache<ChannelId, ()>,
    /// The window's growth this instance has not written yet, per channel: (when it last
    /// wrote a grown window, successes since).
    growth: std::sync::Mutex<std::collections::HashMap<ChannelId, (i64, u32)>>,
}

impl Caches {
    pub fn new(flow_ttl: Duration) -> Self {
        Self {
            flows: TtlCache::new(flow_ttl),
            backlog_hints: TtlCache::new(HINT_TTL),
            backlog_empty: TtlCache::new(EMPTY_TTL),
            bursts: Default::default(),
            rate_batches: Default::default(),
            rate_refills: Default::default(),
            feed_jobs: TtlCache::new(FEED_JOB_EVERY),
            growth: Default::default(),
        }
    }
}

type RefillLock = std::sync::Arc<tokio::sync::Mutex<()>>;

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
    fn remember_flow(&self, f: &Flow) {
        self.caches.flows.insert(f.channel_id.clone(), f.clone());
    }

    /// Whether the channel's deliveries take window slots now (`core::flow::uncounted`).
    fn counted(&self, limits: &Limits, flow: &Flow) -> bool {
        limits.cap.is_some_and(|cap| {
            !converger_core::flow::uncounted(
                limits.breaker.max_in_flight,
                flow.window,
                cap,
                flow.backlog_at.is_some(),
            )
        })
    }

    /// Counts one uncounted admission of `channel` in this second; `false` once this
    /// instance admitted `cap` of them (the rest of the second's burst is counted).
    fn within_burst(&self, channel: &ChannelId, cap: u32) -> bool {
        let second = self.clock.now_ms() / 1000;
        let Ok(mut bursts) = self.caches.bursts.lock() else {
            return false;
        };
        if bursts.len() > 4096 {
            bursts.retain(|_, (s, _)| *s == second);
        }
        let entry = bursts.entry(channel.clone()).or_insert((second, 0));
        if entry.0 != second {
            *entry = (second, 0);
        }
        entry.1 += 1;
        entry.1 <= cap
    }

    /// The window to write after a success that grows `known` to `grown` (by one): the
    /// successes this instance saw since it last wrote a grown window, once
    /// [`GROWTH_WRITE_MS`] passed (or when the flow item is written anyway: `writes`);
    /// otherwise nothing now (the growth is kept for the next write).
    fn grown_window(
        &self,
        channel: &ChannelId,
        known: u32,
        cap: u32,
        now: i64,
        writes: bool,
    ) -> Option<u32> {
        let Ok(mut growth) = self.caches.growth.lock() else {
            return Some(known.saturating_add(1).min(cap));
        };
        if growth.len() > 4096 {
            growth.retain(|_, (at, _)| now - *at < 60_000);
        }
        let entry = growth.entry(channel.clone()).or_insert((i64::MIN, 0));
        entry.1 = entry.1.saturating_add(1);
        if writes || now.saturating_sub(entry.0) >= GROWTH_WRITE_MS {
            let w = known.saturating_add(entry.1).min(cap);
            *entry = (now, 0);
            Some(w)
        } else {
            None
        }
    }

    /// A place in a channel's rate schedule for a request now (its time, µs): the next of the
    /// places this instance holds, else one of a batch reserved in the shared schedule (one
    /// write for up to [`RateLimit::batch_most`] requests; `core::flow::RateBatch`), one
    /// reservation at a time per channel. A busy schedule gives a later place, not a refusal;
    /// `Err(retry_at_us)` only when the place would lie beyond the reservation horizon.
    pub(crate) async fn rate_place(
        &self,
        channel: &ChannelId,
        rate: &RateLimit,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>> {
        if let Some(at) = self.held_place(channel, rate, now_us) {
            return Ok(Ok(at));
        }
        let refill = self.refill_lock(channel);
        let _one = refill.lock().await;
        // Another request of this instance may have reserved while this one waited.
        let now_us = now_us.max(self.clock.now_ms().saturating_mul(1000));
        if let Some(at) = self.held_place(channel, rate, now_us) {
            return Ok(Ok(at));
        }
        let n = match self.caches.rate_batches.lock() {
            Ok(mut batches) => batches
                .entry(channel.clone())
                .or_default()
                .next_size(rate.batch_most()),
            Err(_) => 1,
        };
        let start = match self.flows.rate_reserve(channel, rate, n, now_us).await? {
            Ok(start) => start,
            Err(retry_at) => return Ok(Err(retry_at)),
        };
        let Ok(mut batches) = self.caches.rate_batches.lock() else {
            return Ok(Ok(rate.place_us(start, 0, now_us)));
        };
        let b = batches.entry(channel.clone()).or_default();
        b.filled(n, start, now_us);
        Ok(Ok(b
            .take(rate, now_us)
            .unwrap_or_else(|| rate.place_us(start, 0, now_us))))
    }

    /// The next place this instance holds in the channel's schedule, if any.
    fn held_place(&self, channel: &ChannelId, rate: &RateLimit, now_us: i64) -> Option<i64> {
        let mut batches = self.caches.rate_batches.lock().ok()?;
        if batches.len() > 4096 {
            batches.clear();
        }
        batches.get_mut(channel)?.take(rate, now_us)
    }

    fn refill_lock(&self, channel: &ChannelId) -> RefillLock {
        match self.caches.rate_refills.lock() {
            Ok(mut locks) => {
                if locks.len() > 4096 {
                    locks.retain(|_, l| std::sync::Arc::strong_count(l) > 1);
                }
                locks.entry(channel.clone()).or_default().clone()
            }
            Err(_) => RefillLock::default(),
        }
    }

    /// The window size to ask for: the latest known window (however old), bounded by the cap.
    fn window_cap(&self, channel: &Channel, cap: u32) -> u32 {
        self.caches
            .flows
            .get_stale(&channel.id)
            .map(|f| f.window)
            .unwrap_or(converger_core::flow::INITIAL_WINDOW)
            .min(cap)
            .max(1)
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
