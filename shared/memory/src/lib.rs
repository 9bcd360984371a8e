//! The in-process backend of the ports: the same conditional semantics as DynamoDB and SQS
//! (single-winner transitions, leases, delays, keyset paging), held in memory. It exists for
//! pipeline tests and scale benchmarks, where the emulator cannot measure; the AWS backend
//! stays the product. One conformance suite (`tests/tests/it/store.rs`) runs against both.

use converger_core::Invalid;

use async_trait::async_trait;
use converger_core::query::{Actor, Cursor};
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use converger_ports::capacity::delivery_write;
use converger_ports::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod accounts;
mod activities;
mod audit;
pub mod capacity;
mod changes;
mod channels;
mod deliveries;
mod rows;
pub use rows::SHARD as CHANGES_SHARD;
mod event_types;
mod events;
mod flow;
mod fold;
mod handoff;
mod health;
mod idempotency;
mod lanes;
mod listings;
mod mail;
mod payloads;
mod queue;
mod replays;
mod sockets;
mod stream;
mod tenant_aws;
mod tenants;
mod usage;

pub use capacity::{Capacity, CapacityModel, CapacityTally};
pub use events::MemEvents;
pub use mail::MemMailer;
pub use payloads::MemPayloads;
pub use queue::{MemQueue, QueueOrder, QueueRequests};
pub use sockets::MemSockets;
pub use tenant_aws::{MemTenantAws, Received};

#[derive(Default)]
struct State {
    tenants: HashMap<TenantId, Tenant>,
    keys: HashMap<String, TenantId>,
    channels: HashMap<ChannelId, Channel>,
    activities: HashMap<(TenantId, ActivityId), Activity>,
    seqs: HashMap<String, u64>,
    deliveries: rows::Rows,
    attempts: BTreeMap<(String, u32), AttemptEntry>,
    audit: BTreeMap<(String, String), AuditEntry>,
    replays: HashMap<String, ReplayJob>,
    flows: HashMap<ChannelId, converger_ports::Flow>,
    /// Slot items 1 and up of windows spread over several: (channel, item) -> slots.
    slot_items: HashMap<(ChannelId, u32), BTreeMap<String, i64>>,
    /// Each tenant's busy channels (`core::flow::tenant_window_bound`).
    busy: HashMap<TenantId, BTreeMap<ChannelId, converger_core::flow::BusyEntry>>,
    /// Per-minute health counters: (created, failed).
    counters: HashMap<(ChannelId, i64), (i64, i64)>,
    health: HashMap<ChannelId, Vec<HealthCheck>>,
    /// Dead letters by the day their deliveries were created: (count, expires_at).
    dead_letter_days: BTreeMap<(ChannelId, i64), (i64, i64)>,
    /// Rate schedules: the theoretical arrival time (µs) of each channel.
    rates: HashMap<String, i64>,
    /// The backlog index: (channel, due, delivery).
    backlog: std::collections::BTreeSet<(ChannelId, i64, DeliveryId)>,
    /// The parked index: (channel, delivery).
    parked: std::collections::BTreeSet<(ChannelId, DeliveryId)>,
    /// Which index entry each delivery has, so that it can be moved.
    indexed: HashMap<DeliveryId, Indexed>,
    /// The provider message index: (channel, provider message id) -> delivery.
    providers: HashMap<(ChannelId, String), DeliveryId>,
    connections: HashMap<String, converger_ports::Connection>,
    /// Each websocket channel's replay turn: when its last replay began or ended (ms).
    replay_turns: HashMap<ChannelId, i64>,
    users: HashMap<String, converger_ports::User>,
    /// Sign-in counts by key: the count, its revision, when it expires (seconds).
    sign_in_counts: HashMap<String, (converger_core::web::SignInState, u64, i64)>,
    /// Each tenant's current API key hash.
    tenant_keys: HashMap<TenantId, String>,
    /// Event types, by tenant and name.
    event_types: BTreeMap<(TenantId, String), converger_ports::TenantEventType>,
    /// Idempotency keys, by tenant and key.
    keys_held: HashMap<(TenantId, String), converger_ports::KeyRecord>,
    /// Stream clients, by connection id.
    stream_connections: HashMap<String, StreamConnection>,
    /// The days' live tenants: (day, tenant) to its last connection's expiry (seconds).
    live_tenants: HashMap<(i64, TenantId), i64>,
    /// Each topic's subscribers, by `keys::subscription_key`.
    subscriptions: HashMap<String, std::collections::BTreeSet<String>>,
    /// Stream tokens, by hash.
    stream_tokens: HashMap<String, StreamToken>,
    /// Ordered lanes: each one's head and its waiting entries by entry key.
    lanes: HashMap<String, (Option<LaneHead>, BTreeMap<String, LaneEntry>)>,
    /// Usage counters, by `keys::usage_key`.
    usage: HashMap<String, converger_core::usage::Counts>,
    /// Queue depth samples, by `keys::depths_key`.
    depths: HashMap<String, Vec<converger_ports::QueueDepth>>,
    /// Counters' stream marks: (counter, shard) -> the last record added.
    marks: HashMap<(String, String), String>,
    /// How many marks each counter holds (its item's size grows with them).
    marks_on: HashMap<String, usize>,
    /// The usage log ([`converger_ports::UsageLog`]).
    log: fold::Log,
}

#[derive(Debug, Clone, PartialEq)]
enum Indexed {
    Backlog(ChannelId, i64),
    Parked(ChannelId),
}

impl State {
    /// Puts a delivery into the backlog or parked index its fields call for (and out of the
    /// one it was in), as DynamoDB's sparse indexes follow their attributes.
    fn reindex(&mut self, id: &DeliveryId) {
        match self.indexed.remove(id) {
            Some(Indexed::Backlog(ch, due)) => {
                self.backlog.remove(&(ch, due, id.clone()));
            }
            Some(Indexed::Parked(ch)) => {
                self.parked.remove(&(ch, id.clone()));
            }
            None => {}
        }
        let Some(d) = self.deliveries.get(id) else {
            return;
        };
        match d.sparse_index() {
            SparseIndex::Backlog { due_ms } => {
                self.backlog
                    .insert((d.channel_id.clone(), due_ms, id.clone()));
                self.indexed
                    .insert(id.clone(), Indexed::Backlog(d.channel_id.clone(), due_ms));
            }
            SparseIndex::Parked => {
                self.parked.insert((d.channel_id.clone(), id.clone()));
                self.indexed
                    .insert(id.clone(), Indexed::Parked(d.channel_id.clone()));
            }
            // The sweeper's due rows are found by a scan of the map here.
            SparseIndex::Due { .. } | SparseIndex::None => {}
        }
    }
}

/// Per-request latencies the in-process backend can add, so that a benchmark on it waits
/// about as long as one on AWS would. The defaults and their sources are in
/// `docs/benchmarks.md` (DynamoDB: single-digit milliseconds per item operation; SQS: about
/// 20 ms per request in-region). `CONVERGER_LATENCY_MS` overrides any of them, e.g.
/// `get=2,write=4,sqs_send=15`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyModel {
    pub get: Duration,
    pub write: Duration,
    pub query: Duration,
    pub transact: Duration,
    pub sqs_send: Duration,
    /// From a message being sent to a waiting long poll returning it.
    pub sqs_receive: Duration,
}

impl Default for LatencyModel {
    fn default() -> Self {
        Self {
            get: Duration::from_millis(4),
            write: Duration::from_millis(6),
            query: Duration::from_millis(8),
            transact: Duration::from_millis(25),
            sqs_send: Duration::from_millis(20),
            sqs_receive: Duration::from_millis(20),
        }
    }
}

impl LatencyModel {
    /// The defaults with `name=ms` overrides, comma-separated.
    pub fn parse(spec: &str) -> Result<Self, Invalid> {
        let mut m = Self::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Invalid(format!("`{part}` is not name=milliseconds")))?;
            let ms: u64 = v
                .trim()
                .parse()
                .map_err(|_| Invalid(format!("`{v}` is not a number of milliseconds")))?;
            let d = Duration::from_millis(ms);
            match k.trim() {
                "get" => m.get = d,
                "write" => m.write = d,
                "query" => m.query = d,
                "transact" => m.transact = d,
                "sqs_send" => m.sqs_send = d,
                "sqs_receive" => m.sqs_receive = d,
                other => {
                    return Err(Invalid(format!(
                        "unknown latency `{other}` (get, write, query, transact, sqs_send, sqs_receive)"
                    )));
                }
            }
        }
        Ok(m)
    }

    /// The model `CONVERGER_LATENCY_MS` describes, else the defaults.
    pub fn from_env() -> Result<Self, Invalid> {
        match std::env::var("CONVERGER_LATENCY_MS") {
            Ok(spec) => {
                Self::parse(&spec).map_err(|e| Invalid(format!("CONVERGER_LATENCY_MS: {e}")))
            }
            Err(_) => Ok(Self::default()),
        }
    }

    /// The model in milliseconds, for a benchmark's output.
    pub fn to_json(&self) -> serde_json::Value {
        let ms = |d: Duration| d.as_millis() as u64;
        serde_json::json!({
            "get": ms(self.get), "write": ms(self.write), "query": ms(self.query),
            "transact": ms(self.transact), "sqs_send": ms(self.sqs_send),
            "sqs_receive": ms(self.sqs_receive),
        })
    }
}

async fn wait(model: &Option<LatencyModel>, pick: fn(&LatencyModel) -> Duration) {
    if let Some(m) = model {
        tokio::time::sleep(pick(m)).await;
    }
}

/// The store, in memory. Every method takes the lock once, so every transition is atomic.
#[derive(Default)]
pub struct MemStore {
    state: Mutex<State>,
    latency: Option<LatencyModel>,
    /// An injected outage: every request fails as an unreachable store's would.
    outage: std::sync::atomic::AtomicBool,
    /// Injected failures of the flow marks' writes still to come (see
    /// [`MemStore::fail_marks`]).
    failing_marks: std::sync::atomic::AtomicU32,
    /// The due index's shards (`None`: the default, [`DUE_SHARDS`]).
    due_shards: Option<u32>,
    /// The deployment's grants of more due shards.
    due_grants: Mutex<converger_ports::ShardGrants>,
    /// DynamoDB's per-partition limits, when modelled (`None`: unlimited).
    capacity: Option<std::sync::Arc<Capacity>>,
}

impl MemStore {
    /// The deployment's due-shard grants as they stand.
    fn grants(&self) -> converger_ports::ShardGrants {
        self.due_grants
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default()
    }

    /// The shards a due entry written now is spread over (the grant in force, else the
    /// deployment's own): the partition its index entry is charged to.
    fn due_write_shards(&self) -> u32 {
        converger_core::shards::due::write_count(
            self.due_shards.unwrap_or(DUE_SHARDS),
            self.grants().latest.as_ref(),
            converger_core::time::now_ms(),
        )
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// A store that waits `model`'s latency on every request.
    pub fn with_latency(model: LatencyModel) -> Self {
        Self {
            latency: Some(model),
            ..Self::default()
        }
    }

    /// The same store with DynamoDB's per-partition limits (see [`capacity`]).
    pub fn with_capacity(mut self, model: CapacityModel) -> Self {
        self.capacity = Some(std::sync::Arc::new(Capacity::new(model)));
        self
    }

    /// The modelled partitions' tallies, when modelled.
    pub fn capacity(&self) -> Option<&Capacity> {
        self.capacity.as_deref()
    }

    /// One request: waits its latency (`pick`), runs `f` under the lock charged to the
    /// partitions it names through the [`Meter`], refused whole when one of them is over its
    /// limit (`f` returns before changing anything then), and is tried again as the SDK
    /// would; the last refusal is the error DynamoDB's would be.
    async fn charged<T>(
        &self,
        pick: fn(&LatencyModel) -> Duration,
        mut f: impl FnMut(&mut State, &Meter<'_>) -> Result<T, capacity::Throttled>,
    ) -> StoreResult<T> {
        let meter = Meter(self.capacity.as_deref());
        let mut attempt = 1u32;
        loop {
            wait(&self.latency, pick).await;
            let refused = match self.with(|s| f(s, &meter))? {
                Ok(v) => {
                    if attempt > 1
                        && let Some(c) = &self.capacity
                    {
                        c.retried(true);
                    }
                    return Ok(v);
                }
                Err(capacity::Throttled(p)) => p,
            };
            let Some(c) = &self.capacity else {
                return Err(StoreError::Unavailable("throttled without a model".into()));
            };
            if attempt >= c.model.max_attempts {
                c.retried(false);
                return Err(StoreError::Unavailable(format!(
                    "ProvisionedThroughputExceededException: {} {} partition `{}` over its \
                     throughput ({attempt} attempts)",
                    refused.table,
                    refused.index.unwrap_or("(table)"),
                    refused.key
                )));
            }
            let jitter = uuid::Uuid::new_v4().as_u128() as f64 / u128::MAX as f64;
            tokio::time::sleep(c.model.backoff(attempt, jitter)).await;
            attempt += 1;
        }
    }

    /// The same store with its due index in `shards` shards.
    pub fn with_due_shards(mut self, shards: u32) -> Self {
        self.due_shards = Some(shards.clamp(1, MAX_DUE_SHARDS));
        self
    }

    /// Starts (`true`) or ends an outage: meanwhile every request fails with
    /// `StoreError::Unavailable`, as the SDK's would once its timeouts ran out (the chaos
    /// suite's storage fault on this backend).
    pub fn set_outage(&self, on: bool) {
        self.outage.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next `n` writes of a flow mark (`FlowStore::mark`: the backlog, parked and
    /// probe-due marks) fail as a throttled partition's would once the SDK's retries ran out,
    /// and change nothing: the fault between a delivery's row and the marks that announce it.
    pub fn fail_marks(&self, n: u32) {
        self.failing_marks
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether an injected failure of a mark's write is due (counting it down).
    fn mark_fails(&self) -> bool {
        self.failing_marks
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> StoreResult<T> {
        if self.outage.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unavailable("storage outage (injected)".into()));
        }
        let mut s = self
            .state
            .lock()
            .map_err(|_| StoreError::Unavailable("in-memory store poisoned".into()))?;
        Ok(f(&mut s))
    }

    /// Writes delivery rows unconditionally (seeding benchmarks).
    pub fn seed_deliveries(&self, rows: &[Delivery]) -> StoreResult<()> {
        self.with(|s| {
            for d in rows {
                s.deliveries.insert(d.id.clone(), d.clone());
                s.reindex(&d.id);
            }
        })
    }

    /// Writes activities unconditionally (seeding benchmarks).
    pub fn seed_activities(&self, rows: &[Activity]) -> StoreResult<()> {
        self.with(|s| {
            for a in rows {
                s.activities
                    .insert((a.tenant_id.clone(), a.id.clone()), a.clone());
            }
        })
    }

    /// The deliveries' change stream after record `after` (0: from the oldest kept), at
    /// most `max` records, oldest first; each record's number is its `seq`.
    pub fn row_changes(&self, after: u64, max: usize) -> StoreResult<Vec<RowChange>> {
        self.with(|s| s.deliveries.changes(after, max))
    }

    /// How many deliveries it holds.
    pub fn delivery_count(&self) -> usize {
        self.with(|s| s.deliveries.len()).unwrap_or(0)
    }
}

/// Applies the outcome of an attempt held under `token` (`f` changes the row); `false` if
/// the lease was lost. Charged as DynamoDB charges it: a lease that is not this attempt's
/// still costs the row's units (a failed condition).
#[allow(clippy::too_many_arguments)]
fn leased(
    s: &mut State,
    meter: &Meter<'_>,
    due_shards: u32,
    d: &Delivery,
    token: &str,
    log: &LogUpdate,
    f: impl FnOnce(&mut Delivery),
) -> Result<bool, capacity::Throttled> {
    use converger_ports::capacity::{delivery_write, item_size, item_write};
    let Some(row) = s.deliveries.get(&d.id) else {
        return Ok(false);
    };
    if row.lease_token.as_deref() != Some(token) {
        meter.write(|| delivery_write(Some(row), Some(row), due_shards))?;
        // Lost, unless this attempt's own outcome was recorded already (a retried write).
        return Ok(row.settled_by.as_deref() == Some(token));
    }
    let mut after = row.clone();
    after.attempt_log = log.recent.clone();
    after.lease_token = None;
    after.lease_until = None;
    after.settled_by = Some(token.to_owned());
    after.unlisted = false;
    f(&mut after);
    meter.write(|| {
        let mut charges = delivery_write(Some(row), Some(&after), due_shards);
        for e in &log.spill {
            charges.push(item_write(
                "attempts",
                "<delivery>",
                d.id.to_string(),
                item_size(e),
            ));
        }
        charges
    })?;
    for e in &log.spill {
        s.attempts.insert((d.id.to_string(), e.attempt), e.clone());
    }
    s.deliveries.insert(d.id.clone(), after);
    Ok(true)
}

/// The read of a delivery row (or of its key when there is none).
fn row_read(
    id: &DeliveryId,
    row: Option<&Delivery>,
    consistent: bool,
) -> converger_ports::capacity::Charge {
    item_read_of("deliveries", "<delivery>", id.to_string(), row, consistent)
}

/// Charges a request's units to the modelled partitions (nothing when none are modelled).
struct Meter<'a>(Option<&'a Capacity>);

impl Meter<'_> {
    /// Charges the writes `charges` gives; they are worked out only when partitions are
    /// modelled (a store without limits pays nothing for the model).
    fn write(
        &self,
        charges: impl FnOnce() -> Vec<converger_ports::capacity::Charge>,
    ) -> Result<(), capacity::Throttled> {
        self.0.map_or(Ok(()), |c| c.charge(&charges(), &[]))
    }

    /// Charges the reads `charges` gives (as [`Meter::write`]).
    fn read(
        &self,
        charges: impl FnOnce() -> Vec<converger_ports::capacity::Charge>,
    ) -> Result<(), capacity::Throttled> {
        self.0.map_or(Ok(()), |c| c.charge(&[], &charges()))
    }
}

/// The read of one item of a table, or of its key when there is none.
fn item_read_of<T: serde::Serialize>(
    table: &'static str,
    family: &'static str,
    key: String,
    item: Option<&T>,
    consistent: bool,
) -> converger_ports::capacity::Charge {
    converger_ports::capacity::item_read(
        table,
        family,
        key,
        item.map_or(0, |i| converger_ports::capacity::item_size(i)),
        consistent,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{CapacityModel, HealthStore, LatencyModel, MemStore};
    use converger_core::ChannelId;
    use std::time::Duration;

    /// 10 write units a second per key, and the SDK's backoff in tens of milliseconds.
    fn tight() -> MemStore {
        MemStore::new().with_capacity(CapacityModel {
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            ..CapacityModel::dynamodb().scaled_down(100.0)
        })
    }

    #[tokio::test]
    async fn a_fair_receive_serves_a_quiet_tenant_before_a_noisy_tenants_backlog() {
        use super::{MemQueue, QueueOrder};
        use converger_core::{DeliveryId, TenantId, Tier};
        use converger_ports::{DeliveryMessage, Queue};
        let q = MemQueue::new();
        let (noisy, quiet) = (TenantId::generate(), TenantId::generate());
        let msg = |t: &TenantId| {
            let mut m = DeliveryMessage::new(DeliveryId::generate(), Tier::Default, None);
            m.tenant_id = Some(t.clone());
            m
        };
        for _ in 0..100 {
            q.send(&msg(&noisy), 0).await.unwrap();
        }
        let late = msg(&quiet);
        q.send(&late, 0).await.unwrap();
        q.send(&msg(&quiet), 0).await.unwrap();
        let now = converger_core::time::now_ms();
        let busy = std::collections::HashMap::from([(noisy.to_string(), 10)]);
        // Oldest first: five of the backlog.
        let fifo = q.receive(now, Tier::Default, 5, QueueOrder::Fifo, &busy);
        assert!(fifo.iter().all(|m| m.tenant_id.as_ref() == Some(&noisy)));
        // Fair: the quiet tenant's two first (none of theirs in flight), then the backlog.
        let fair = q.receive(now, Tier::Default, 5, QueueOrder::Fair, &busy);
        assert_eq!(fair[0].delivery_id, late.delivery_id);
        assert_eq!(fair[1].tenant_id.as_ref(), Some(&quiet));
        assert!(
            fair[2..]
                .iter()
                .all(|m| m.tenant_id.as_ref() == Some(&noisy))
        );
        // Another tier's receive sees none of them; what was not taken stays queued.
        assert!(
            q.receive(now, Tier::High, 5, QueueOrder::Fair, &busy)
                .is_empty()
        );
        assert_eq!(q.depth(), 102 - 10);
    }

    #[tokio::test]
    async fn a_hot_key_is_throttled_and_retried_as_the_sdk_does_and_a_cold_one_is_not() {
        let store = tight();
        let (hot, cold) = (ChannelId::generate(), ChannelId::generate());
        // Thirty writes at once to one key: ten are served from its bucket, the rest are
        // refused and tried again as the rate refills (10 a second).
        let writes = (0..30).map(|_| store.count_deliveries(&hot, 7, 1, 0));
        let results = futures::future::join_all(writes).await;
        let cap = store.capacity().unwrap();
        let t = cap.take();
        let hot_key = t
            .throttled
            .keys()
            .find(|p| p.key.contains(hot.as_str()))
            .cloned();
        assert!(hot_key.is_some(), "{t:?}");
        assert!(t.retried_ok > 0 || t.failed > 0, "{t:?}");
        // Five attempts over at most about 0.6 s serve no more than about 16 of 30: the rest
        // fail as DynamoDB's throttle would reach the caller.
        let failed = results.iter().filter(|r| r.is_err()).count() as u64;
        assert_eq!(failed, t.failed);
        let err = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert!(
            err.to_string()
                .contains("ProvisionedThroughputExceededException"),
            "{err}"
        );
        // Another key is not throttled meanwhile.
        store.count_deliveries(&cold, 7, 1, 0).await.unwrap();
        let t = cap.take();
        assert!(t.throttled.keys().all(|p| !p.key.contains(cold.as_str())));
        // Once the rate falls, the hot key serves again on the first attempt.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        store.count_deliveries(&hot, 7, 1, 0).await.unwrap();
        let t = cap.take();
        assert!(t.throttled.is_empty(), "{t:?}");
        assert_eq!(t.writes.values().sum::<f64>(), 1.0);
    }

    #[test]
    fn latency_model_overrides_parse_and_bad_ones_are_refused() {
        let m = LatencyModel::parse("get=2, sqs_send=15").unwrap_or_default();
        assert_eq!(m.get, Duration::from_millis(2));
        assert_eq!(m.sqs_send, Duration::from_millis(15));
        assert_eq!(m.write, LatencyModel::default().write);
        assert_eq!(LatencyModel::parse(""), Ok(LatencyModel::default()));
        assert!(LatencyModel::parse("get").is_err());
        assert!(LatencyModel::parse("get=x").is_err());
        assert!(LatencyModel::parse("disk=3").is_err());
    }
}
