//! The in-process backend of the ports: the same conditional semantics as DynamoDB and SQS
//! (single-winner transitions, leases, delays, keyset paging), held in memory. It exists for
//! pipeline tests and scale benchmarks, where the emulator cannot measure; the AWS backend
//! stays the product. One conformance suite (`tests/tests/it/store.rs`) runs against both.

use crate::model::*;
use crate::ports::*;
use async_trait::async_trait;
use converger_core::query::{Actor, Cursor};
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

mod accounts;
mod flow;
mod handoff;
mod health;

#[derive(Default)]
struct State {
    tenants: HashMap<TenantId, Tenant>,
    keys: HashMap<String, TenantId>,
    channels: HashMap<ChannelId, Channel>,
    activities: HashMap<ActivityId, Activity>,
    seqs: HashMap<String, u64>,
    deliveries: HashMap<DeliveryId, Delivery>,
    attempts: BTreeMap<(String, u32), AttemptEntry>,
    audit: BTreeMap<(String, String), AuditEntry>,
    replays: HashMap<String, ReplayJob>,
    flows: HashMap<ChannelId, crate::flow::Flow>,
    /// Per-minute health counters: (created, failed).
    counters: HashMap<(ChannelId, i64), (i64, i64)>,
    health: HashMap<ChannelId, Vec<HealthCheck>>,
    /// Rate schedules: the theoretical arrival time (µs) of each channel.
    rates: HashMap<ChannelId, i64>,
    /// The backlog index: (channel, due, delivery).
    backlog: std::collections::BTreeSet<(ChannelId, i64, DeliveryId)>,
    /// The parked index: (channel, delivery).
    parked: std::collections::BTreeSet<(ChannelId, DeliveryId)>,
    /// Which index entry each delivery has, so that it can be moved.
    indexed: HashMap<DeliveryId, Indexed>,
    /// The provider message index: (channel, provider message id) -> delivery.
    providers: HashMap<(ChannelId, String), DeliveryId>,
    connections: HashMap<String, crate::handoff::Connection>,
    users: HashMap<String, crate::accounts::User>,
    /// Each tenant's current API key hash.
    tenant_keys: HashMap<TenantId, String>,
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
        if d.status == DeliveryStatus::Pending && d.in_backlog {
            self.backlog
                .insert((d.channel_id.clone(), d.next_attempt_at, id.clone()));
            self.indexed.insert(
                id.clone(),
                Indexed::Backlog(d.channel_id.clone(), d.next_attempt_at),
            );
        } else if d.status == DeliveryStatus::Paused {
            self.parked.insert((d.channel_id.clone(), id.clone()));
            self.indexed
                .insert(id.clone(), Indexed::Parked(d.channel_id.clone()));
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

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> StoreResult<T> {
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
                s.activities.insert(a.id.clone(), a.clone());
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
        return false;
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
    f(row);
    true
}

#[async_trait]
impl Store for MemStore {
    async fn create_tenant(&self, tenant: &Tenant, api_key_hash: &str) -> StoreResult<()> {
        wait(&self.latency, |m| m.transact).await;
        self.with(|s| {
            if s.tenants.contains_key(&tenant.id) || s.keys.contains_key(api_key_hash) {
                return Err(StoreError::Conflict("tenant or key exists".into()));
            }
            s.tenants.insert(tenant.id.clone(), tenant.clone());
            s.keys.insert(api_key_hash.to_owned(), tenant.id.clone());
            s.tenant_keys
                .insert(tenant.id.clone(), api_key_hash.to_owned());
            Ok(())
        })?
    }

    async fn get_tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.tenants.get(id).cloned())
    }

    async fn tenant_by_api_key_hash(&self, hash: &str) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.keys.get(hash).and_then(|t| s.tenants.get(t)).cloned())
    }

    async fn set_tenant_tier(
        &self,
        id: &TenantId,
        tier: converger_core::Tier,
    ) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.tenants.get_mut(id).map(|t| {
                t.tier = tier;
                t.clone()
            })
        })
    }

    async fn create_channel(&self, channel: &Channel) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if s.channels.contains_key(&channel.id) {
                return Err(StoreError::Conflict("id exists".into()));
            }
            s.channels.insert(channel.id.clone(), channel.clone());
            Ok(())
        })?
    }

    async fn get_channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.channels.get(id).cloned())
    }

    async fn update_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        patch: &ChannelPatch,
        now: &str,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = s.channels.get_mut(id).filter(|c| &c.tenant_id == tenant)?;
            if let Some(n) = &patch.name {
                c.name = n.clone();
            }
            if let Some(cfg) = &patch.config {
                c.config = cfg.clone();
            }
            if let Some(a) = patch.active {
                c.active = a;
            }
            if let Some(p) = &patch.retry_policy {
                c.retry_policy = p.clone();
            }
            if let Some(cb) = &patch.circuit_breaker {
                c.circuit_breaker = cb.clone();
            }
            if let Some(rl) = &patch.rate_limit {
                c.rate_limit = rl.clone();
            }
            if let Some(ad) = &patch.auto_disable {
                c.auto_disable = ad.clone();
            }
            if patch.active == Some(true) {
                c.disabled_at = None;
                c.disabled_reason = None;
            }
            c.updated_at = now.to_owned();
            Some(c.clone())
        })
    }

    async fn next_seq(&self, tenant: &TenantId, conversation_id: &str) -> StoreResult<u64> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let n = s
                .seqs
                .entry(format!("{tenant}#{conversation_id}"))
                .or_insert(0);
            *n += 1;
            *n
        })
    }

    async fn create_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<Created> {
        wait(&self.latency, |m| m.transact).await;
        self.with(|s| {
            if s.activities.contains_key(&activity.id)
                || deliveries.iter().any(|d| s.deliveries.contains_key(&d.id))
            {
                return Created::Duplicate;
            }
            s.activities.insert(activity.id.clone(), activity.clone());
            for d in deliveries {
                s.deliveries.insert(d.id.clone(), d.clone());
                s.reindex(&d.id);
            }
            Created::New
        })
    }

    async fn get_activity(&self, id: &ActivityId) -> StoreResult<Option<Activity>> {
        wait(&self.latency, |m| m.get).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.activities
                .get(id)
                .filter(|a| !crate::model::expired(a.expires_at, now))
                .cloned()
        })
    }

    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>> {
        wait(&self.latency, |m| m.get).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.deliveries
                .get(id)
                .filter(|d| !crate::model::expired(d.expires_at, now))
                .cloned()
        })
    }

    async fn get_deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            let now = converger_core::time::now_ms();
            ids.iter()
                .filter_map(|i| s.deliveries.get(i))
                .filter(|d| !crate::model::expired(d.expires_at, now))
                .cloned()
                .collect()
        })
    }

    async fn claim(
        &self,
        id: &DeliveryId,
        token: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Claim> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let Some(d) = s.deliveries.get_mut(id) else {
                return Claim::Missing;
            };
            if crate::model::expired(d.expires_at, now_ms) {
                return Claim::Missing;
            }
            if d.status != DeliveryStatus::Pending || d.handed_off {
                return Claim::Settled(d.clone());
            }
            if d.next_attempt_at > now_ms {
                return Claim::NotDue(d.clone());
            }
            if d.lease_until.is_some_and(|u| u >= now_ms) {
                return Claim::Busy;
            }
            d.lease_token = Some(token.to_owned());
            d.lease_until = Some(now_ms.saturating_add(lease_ms));
            Claim::Claimed(d.clone())
        })
    }

    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.deliveries.get_mut(&d.id) {
            Some(row) if row.lease_token.as_deref() == Some(token) => {
                row.lease_token = None;
                row.lease_until = None;
                true
            }
            _ => false,
        })
    }

    async fn mark_sent(
        &self,
        d: &Delivery,
        token: &str,
        info: &SentInfo,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let done = leased(s, d, token, log, |row| {
                row.slot = false;
                row.in_backlog = false;
                row.attempts += 1;
                if info.handed_off {
                    row.status = DeliveryStatus::Pending;
                    row.handed_off = true;
                } else {
                    row.status = DeliveryStatus::Sent;
                    row.sent_at = Some(now.to_owned());
                }
                row.updated_at = now.to_owned();
                row.last_error = None;
                if info.provider_message_id.is_some() {
                    row.provider_message_id = info.provider_message_id.clone();
                }
                if info.response_status.is_some() {
                    row.response_status = info.response_status;
                }
            });
            if done {
                if let Some(id) = &info.provider_message_id {
                    s.providers
                        .insert((d.channel_id.clone(), id.clone()), d.id.clone());
                }
                s.reindex(&d.id);
            }
            done
        })
    }

    async fn mark_attempt_failed(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        next: RetryAt,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        let (next_attempt_at, keep_slot) = (next.at_ms, next.keep_slot);
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            leased(s, d, token, log, |row| {
                row.slot = keep_slot;
                row.status = DeliveryStatus::Pending;
                row.attempts += 1;
                row.last_error = Some(error.to_owned());
                row.next_attempt_at = next_attempt_at;
                row.updated_at = now.to_owned();
            })
        })
    }

    async fn mark_dead(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            leased(s, d, token, log, |row| {
                row.slot = false;
                row.status = DeliveryStatus::Failed;
                row.attempts += 1;
                row.last_error = Some(error.to_owned());
                row.updated_at = now.to_owned();
            })
        })
    }

    async fn older_attempts(
        &self,
        id: &DeliveryId,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<Vec<AttemptEntry>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let key = id.to_string();
            s.attempts
                .range((key.clone(), 0)..(key, before.unwrap_or(u32::MAX)))
                .rev()
                .take(limit.clamp(1, 1000))
                .map(|(_, e)| e.clone())
                .collect()
        })
    }

    async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            q.page(
                s.deliveries
                    .values()
                    .filter(|d| !crate::model::expired(d.expires_at, now)),
            )
        })
    }

    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let n = s
                .deliveries
                .values()
                .filter(|d| &d.tenant_id == tenant && d.status == status)
                .take(usize::try_from(cap).unwrap_or(usize::MAX))
                .count();
            n as u64
        })
    }

    async fn replay_many(
        &self,
        rows: &[Delivery],
        actor: &Actor,
        now_ms: i64,
        audits: &[AuditEntry],
    ) -> StoreResult<Vec<Delivery>> {
        check_replay_batch(rows, audits)?;
        wait(&self.latency, |m| m.transact).await;
        let now = converger_core::time::ms_to_rfc3339(now_ms);
        self.with(|s| {
            let mut done = Vec::new();
            for (d, audit) in rows.iter().zip(audits) {
                let Some(current) = s.deliveries.get(&d.id) else {
                    continue;
                };
                if current.status != DeliveryStatus::Failed {
                    continue;
                }
                let row = current.replayed(actor, now_ms, &now);
                s.deliveries.insert(row.id.clone(), row.clone());
                s.audit.insert(
                    (
                        audit.tenant_id.to_string(),
                        format!("{}#{}", audit.at, audit.id),
                    ),
                    audit.clone(),
                );
                done.push(row);
            }
            done
        })
    }

    async fn add_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.audit.insert(
                (
                    entry.tenant_id.to_string(),
                    format!("{}#{}", entry.at, entry.id),
                ),
                entry.clone(),
            );
        })
    }

    async fn list_audit(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&Cursor>,
    ) -> StoreResult<Listed<AuditEntry>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let t = tenant.to_string();
            let hi = after.map_or_else(|| format!("{}", char::MAX), |c| c.sort_key.clone());
            let limit = limit.clamp(1, 1000);
            let mut items: Vec<(String, AuditEntry)> = s
                .audit
                .range((t.clone(), String::new())..(t, hi))
                .rev()
                .take(limit + 1)
                .map(|((_, k), e)| (k.clone(), e.clone()))
                .collect();
            let more = items.len() > limit;
            items.truncate(limit);
            let next = more.then(|| items.last()).flatten().map(|(k, _)| Cursor {
                sort_key: k.clone(),
                id: String::new(),
            });
            Listed {
                items: items.into_iter().map(|(_, e)| e).collect(),
                next,
            }
        })
    }

    async fn create_replay_job(&self, job: &ReplayJob) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if s.replays.contains_key(&job.id) {
                return Err(StoreError::Conflict("id exists".into()));
            }
            s.replays.insert(job.id.clone(), job.clone());
            Ok(())
        })?
    }

    async fn get_replay_job(&self, id: &str) -> StoreResult<Option<ReplayJob>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.replays.get(id).cloned())
    }

    async fn save_replay_job(&self, job: &ReplayJob) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.replays.get(&job.id) {
            Some(cur) if cur.version + 1 == job.version => {
                s.replays.insert(job.id.clone(), job.clone());
                true
            }
            _ => false,
        })
    }

    async fn overdue(
        &self,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            let mut rows: Vec<(String, &Delivery)> = s
                .deliveries
                .values()
                .filter(|d| {
                    d.status == DeliveryStatus::Pending
                        && !d.in_backlog
                        && !d.handed_off
                        && due_shard(&d.id) == shard
                })
                .filter(|d| d.next_attempt_at < before_ms)
                .filter(|d| !crate::model::expired(d.expires_at, before_ms.max(now)))
                .map(|d| (format!("{}#{}", due_key(d.next_attempt_at), d.id), d))
                .filter(|(k, _)| from.as_ref().is_none_or(|f| k > f))
                .collect();
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            let limit = limit.clamp(1, 1000);
            let more = rows.len() > limit;
            rows.truncate(limit);
            let next = more.then(|| rows.last()).flatten().map(|(k, _)| k.clone());
            Page {
                items: rows
                    .into_iter()
                    .map(|(_, d)| Overdue {
                        id: d.id.clone(),
                        tier: d.tier,
                        lease_until: d.lease_until,
                    })
                    .collect(),
                next,
            }
        })
    }
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
        let at =
            converger_core::time::now_ms() + i64::from(delay_s.min(crate::sqs::MAX_DELAY_S)) * 1000;
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
        let at =
            converger_core::time::now_ms() + i64::from(delay_s.min(crate::sqs::MAX_DELAY_S)) * 1000;
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
