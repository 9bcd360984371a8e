//! The in-process backend of the ports: the same conditional semantics as DynamoDB and SQS
//! (single-winner transitions, leases, delays, keyset paging), held in memory. It exists for
//! pipeline tests and scale benchmarks, where the emulator cannot measure; the AWS backend
//! stays the product. One conformance suite (`tests/tests/it/store.rs`) runs against both.

use async_trait::async_trait;
use converger_core::query::{Actor, Cursor};
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use converger_ports::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

mod accounts;
mod activities;
mod audit;
mod channels;
mod deliveries;
mod flow;
mod handoff;
mod health;
mod idempotency;
mod listings;
mod mail;
mod replays;
mod sockets;
mod tenants;

pub use mail::MemMailer;
pub use sockets::MemSockets;

#[derive(Default)]
struct State {
    tenants: HashMap<TenantId, Tenant>,
    keys: HashMap<String, TenantId>,
    channels: HashMap<ChannelId, Channel>,
    activities: HashMap<(TenantId, ActivityId), Activity>,
    seqs: HashMap<String, u64>,
    deliveries: HashMap<DeliveryId, Delivery>,
    attempts: BTreeMap<(String, u32), AttemptEntry>,
    audit: BTreeMap<(String, String), AuditEntry>,
    replays: HashMap<String, ReplayJob>,
    flows: HashMap<ChannelId, converger_ports::Flow>,
    /// Per-minute health counters: (created, failed).
    counters: HashMap<(ChannelId, i64), (i64, i64)>,
    health: HashMap<ChannelId, Vec<HealthCheck>>,
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
    users: HashMap<String, converger_ports::User>,
    /// Each tenant's current API key hash.
    tenant_keys: HashMap<TenantId, String>,
    /// Idempotency keys, by tenant and key.
    keys_held: HashMap<(TenantId, String), converger_ports::KeyRecord>,
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
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut m = Self::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not name=milliseconds"))?;
            let ms: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("`{v}` is not a number of milliseconds"))?;
            let d = Duration::from_millis(ms);
            match k.trim() {
                "get" => m.get = d,
                "write" => m.write = d,
                "query" => m.query = d,
                "transact" => m.transact = d,
                "sqs_send" => m.sqs_send = d,
                "sqs_receive" => m.sqs_receive = d,
                other => {
                    return Err(format!(
                        "unknown latency `{other}` (get, write, query, transact, sqs_send, sqs_receive)"
                    ));
                }
            }
        }
        Ok(m)
    }

    /// The model `CONVERGER_LATENCY_MS` describes, else the defaults.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var("CONVERGER_LATENCY_MS") {
            Ok(spec) => Self::parse(&spec).map_err(|e| format!("CONVERGER_LATENCY_MS: {e}")),
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
    /// The due index's shards (`None`: the default, [`DUE_SHARDS`]).
    due_shards: Option<u32>,
}

impl MemStore {
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

    /// How many deliveries it holds.
    pub fn delivery_count(&self) -> usize {
        self.with(|s| s.deliveries.len()).unwrap_or(0)
    }
}

/// Applies the outcome of an attempt held under `token`. `false` if the lease was lost.
fn leased(
    s: &mut State,
    d: &Delivery,
    token: &str,
    log: &LogUpdate,
    f: impl FnOnce(&mut Delivery),
) -> bool {
    let Some(row) = s.deliveries.get_mut(&d.id) else {
        return false;
    };
    if row.lease_token.as_deref() != Some(token) {
        // Lost, unless this attempt's own outcome was recorded already (a retried write).
        return row.settled_by.as_deref() == Some(token);
    }
    for e in &log.spill {
        s.attempts.insert((d.id.to_string(), e.attempt), e.clone());
    }
    let Some(row) = s.deliveries.get_mut(&d.id) else {
        return false;
    };
    row.attempt_log = log.recent.clone();
    row.lease_token = None;
    row.lease_until = None;
    row.settled_by = Some(token.to_owned());
    row.unlisted = false;
    f(row);
    true
}

/// The queues, in memory: messages are kept with the time they become visible.
#[derive(Default)]
pub struct MemQueue {
    deliveries: Mutex<Vec<(i64, DeliveryMessage)>>,
    replays: Mutex<Vec<ReplayMessage>>,
    flow_jobs: Mutex<Vec<(i64, FlowJob)>>,
    latency: Option<LatencyModel>,
}

impl MemQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue that waits `model`'s send latency per request (a batch of ten is one).
    pub fn with_latency(model: LatencyModel) -> Self {
        Self {
            latency: Some(model),
            ..Self::default()
        }
    }

    /// Removes and returns the delivery messages visible at `now_ms`.
    pub fn take_due(&self, now_ms: i64) -> Vec<DeliveryMessage> {
        let Ok(mut q) = self.deliveries.lock() else {
            return Vec::new();
        };
        let (due, wait): (Vec<_>, Vec<_>) = q.drain(..).partition(|(at, _)| *at <= now_ms);
        *q = wait;
        due.into_iter().map(|(_, m)| m).collect()
    }

    /// Messages waiting (visible or delayed).
    pub fn depth(&self) -> usize {
        self.deliveries.lock().map(|q| q.len()).unwrap_or(0)
    }

    /// Removes and returns the flow jobs visible at `now_ms`.
    pub fn take_flow_jobs(&self, now_ms: i64) -> Vec<FlowJob> {
        let Ok(mut q) = self.flow_jobs.lock() else {
            return Vec::new();
        };
        let (due, wait): (Vec<_>, Vec<_>) = q.drain(..).partition(|(at, _)| *at <= now_ms);
        *q = wait;
        due.into_iter().map(|(_, m)| m).collect()
    }

    pub fn take_replays(&self) -> Vec<ReplayMessage> {
        self.replays
            .lock()
            .map(|mut q| q.drain(..).collect())
            .unwrap_or_default()
    }
}

#[async_trait]
impl Queue for MemQueue {
    async fn send(&self, msg: &DeliveryMessage, delay_s: u32) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        let at = converger_core::time::now_ms()
            + i64::from(delay_s.min(converger_ports::MAX_DELAY_S)) * 1000;
        self.deliveries
            .lock()
            .map_err(|_| QueueError("poisoned".into()))?
            .push((at, msg.clone()));
        Ok(())
    }

    async fn send_many(&self, msgs: &[DeliveryMessage]) -> Result<(), QueueError> {
        // Batches of ten, eight in flight, as the SQS backend sends them.
        if let Some(m) = &self.latency {
            let batches = msgs.len().div_ceil(10) as u32;
            tokio::time::sleep(m.sqs_send * batches.div_ceil(8)).await;
        }
        let now = converger_core::time::now_ms();
        self.deliveries
            .lock()
            .map_err(|_| QueueError("poisoned".into()))?
            .extend(msgs.iter().map(|m| (now, m.clone())));
        Ok(())
    }

    async fn send_flow(&self, msg: &FlowJob, delay_s: u32) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        let at = converger_core::time::now_ms()
            + i64::from(delay_s.min(converger_ports::MAX_DELAY_S)) * 1000;
        self.flow_jobs
            .lock()
            .map_err(|_| QueueError("poisoned".into()))?
            .push((at, msg.clone()));
        Ok(())
    }

    async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
        let now = converger_core::time::now_ms();
        let q = self
            .deliveries
            .lock()
            .map_err(|_| QueueError("poisoned".into()))?;
        let mut out = Vec::new();
        for tier in converger_core::Tier::ALL {
            let of_tier = || q.iter().filter(|(_, m)| m.tier == tier);
            let name = tier.queue_name();
            // Taken messages leave the queue at once (nothing is in flight), and nothing is
            // ever dead-lettered in process.
            out.push(QueueDepth {
                queue: name.to_owned(),
                visible: of_tier().filter(|(at, _)| *at <= now).count() as u64,
                delayed: of_tier().filter(|(at, _)| *at > now).count() as u64,
                in_flight: 0,
            });
            out.push(QueueDepth {
                queue: format!("{name}-dlq"),
                visible: 0,
                delayed: 0,
                in_flight: 0,
            });
        }
        Ok(out)
    }

    async fn send_replay(&self, msg: &ReplayMessage) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        self.replays
            .lock()
            .map_err(|_| QueueError("poisoned".into()))?
            .push(msg.clone());
        Ok(())
    }
}

/// Platform events, kept in memory.
#[derive(Default)]
pub struct MemEvents {
    pub published: Mutex<Vec<PlatformEvent>>,
}

#[async_trait]
impl Events for MemEvents {
    async fn publish(&self, events: Vec<PlatformEvent>) {
        if let Ok(mut p) = self.published.lock() {
            p.extend(events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LatencyModel;
    use std::time::Duration;

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
