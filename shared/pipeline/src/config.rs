//! Pipeline settings, from the environment.

use converger_core::net::Allowlist;
use serde_json::{Map, Value};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Each tier's tenant API rate limit per API key (`API_RATE_LIMITS`,
    /// `high=500/s,default=100/s,bulk=50/s`).
    pub api_limits: converger_core::api_limit::Defaults,
    /// Verified provider receipts one channel takes (`RECEIPT_RATE_LIMIT`, `3000/s`).
    pub receipt_limit: converger_core::RateLimit,
    /// The global layer of the retry policy (`RETRY_POLICY`, a JSON object).
    pub retry_policy: Map<String, Value>,
    /// Longest single queue delay; longer delays are made of hops (SQS allows 900 s).
    pub hop_ceiling_s: u32,
    /// One slice of an attempt's lease (`LEASE_SECONDS`): renewed while the call runs, so a
    /// crashed attempt's delivery is free again within one slice.
    pub lease_slice: Duration,
    /// How long a channel's configuration is cached per instance.
    pub channel_cache_ttl: Duration,
    /// CIDRs webhooks may reach although they are special-purpose (`WEBHOOK_ALLOW_CIDRS`).
    pub allowlist: Allowlist,
    /// Deliveries of one batch processed at once.
    pub batch_concurrency: usize,
    /// How long deliveries and their activities are kept (`RETENTION_DAYS`; DynamoDB TTL).
    pub retention: Duration,
    /// How long attempt log entries are kept (`RETENTION_DAYS`, or
    /// `ATTEMPT_LOG_RETENTION_DAYS` for the log alone).
    pub attempt_retention: Duration,
    /// How far past its due time a pending delivery must be before the sweeper enqueues it
    /// again (its own message should have run it by then).
    pub sweep_grace: Duration,
    /// How often the scheduled sweeper looks for crashed attempts between its sweeps
    /// (`RECLAIM_INTERVAL_SECONDS`; 0: only at each sweep).
    pub reclaim_interval: Duration,
    /// Most deliveries one sweep enqueues.
    pub sweep_limit: usize,
    /// Most deliveries one bulk replay call replays (a call may ask for fewer, never more).
    pub bulk_retry_limit: usize,
    /// Dead letters one bulk replay chunk (and one replay job message) handles: 500.
    pub replay_chunk: usize,
    /// Replay transactions of one bulk call in flight at once.
    pub bulk_replay_concurrency: usize,
    /// Run DynamoDB transactions one at a time in this process (only against an emulator
    /// whose transactions are not serializable; `DYNAMODB_SERIAL_TRANSACTIONS`).
    pub serial_transactions: bool,
    /// How long a channel's flow state (breaker, window) is cached per instance
    /// (`FLOW_CACHE_TTL_MS`); parking always re-reads it first.
    pub flow_cache_ttl: Duration,
    /// How often an instance writes the health counts it added up (created deliveries, dead
    /// letters) to the per-minute counters: at most once per period per instance
    /// (`HEALTH_FLUSH_MS`; 0: with every count).
    pub health_flush: Duration,
    /// How long a window slot may be held before the sweeper checks its delivery
    /// (`SLOT_GRACE_SECONDS`).
    pub slot_grace: Duration,
    /// Parked deliveries one release job moves before it hands on to the next message.
    pub release_chunk: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            api_limits: converger_core::api_limit::Defaults::default(),
            receipt_limit: converger_core::api_limit::RECEIPTS_PER_CHANNEL,
            retry_policy: Map::new(),
            hop_ceiling_s: 900,
            lease_slice: Duration::from_millis(converger_core::policy::LEASE_SLICE_MS as u64),
            channel_cache_ttl: Duration::from_secs(5),
            allowlist: Allowlist::default(),
            batch_concurrency: 10,
            retention: Duration::from_secs(30 * 86_400),
            attempt_retention: Duration::from_secs(30 * 86_400),
            sweep_grace: Duration::from_secs(300),
            reclaim_interval: Duration::from_secs(3),
            sweep_limit: 10_000,
            bulk_retry_limit: 10_000,
            bulk_replay_concurrency: 16,
            replay_chunk: 500,
            serial_transactions: false,
            flow_cache_ttl: Duration::from_millis(1000),
            health_flush: Duration::from_millis(1000),
            slot_grace: Duration::from_secs(120),
            release_chunk: 5000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("configuration {name}: {message}")]
pub struct ConfigError {
    pub name: &'static str,
    pub message: String,
}

fn var(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn num<T: std::str::FromStr>(name: &'static str) -> Result<Option<T>, ConfigError> {
    var(name)
        .map(|v| {
            v.trim().parse().map_err(|_| ConfigError {
                name,
                message: format!("`{v}` is not a number"),
            })
        })
        .transpose()
}

impl PipelineConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(p) = var("RETRY_POLICY") {
            c.retry_policy = serde_json::from_str(&p).map_err(|e| ConfigError {
                name: "RETRY_POLICY",
                message: format!("must be a JSON object: {e}"),
            })?;
        }
        if let Some(h) = num::<u32>("HOP_CEILING_SECONDS")? {
            c.hop_ceiling_s = h.clamp(1, 900);
        }
        if let Some(s) = num::<u64>("LEASE_SECONDS")? {
            c.lease_slice = Duration::from_secs(s.clamp(2, 900));
        }
        if let Some(ms) = num::<u64>("CHANNEL_CACHE_TTL_MS")? {
            c.channel_cache_ttl = Duration::from_millis(ms);
        }
        if let Some(a) = var("WEBHOOK_ALLOW_CIDRS") {
            c.allowlist = Allowlist::parse(&a).map_err(|message| ConfigError {
                name: "WEBHOOK_ALLOW_CIDRS",
                message,
            })?;
        }
        if let Some(n) = num::<usize>("BATCH_CONCURRENCY")? {
            c.batch_concurrency = n.max(1);
        }
        if let Some(d) = num::<u64>("RETENTION_DAYS")? {
            c.retention = Duration::from_secs(d.max(1) * 86_400);
            c.attempt_retention = c.retention;
        }
        // The attempt log alone may be kept for less.
        if let Some(d) = num::<u64>("ATTEMPT_LOG_RETENTION_DAYS")? {
            c.attempt_retention = Duration::from_secs(d.max(1) * 86_400);
        }
        if let Some(s) = num::<u64>("SWEEP_GRACE_SECONDS")? {
            c.sweep_grace = Duration::from_secs(s);
        }
        if let Some(n) = num::<usize>("BULK_RETRY_LIMIT")? {
            c.bulk_retry_limit = n.max(1);
        }
        if let Some(n) = num::<usize>("BULK_REPLAY_CONCURRENCY")? {
            c.bulk_replay_concurrency = n.max(1);
        }
        if let Some(v) = var("DYNAMODB_SERIAL_TRANSACTIONS") {
            c.serial_transactions = matches!(v.trim(), "1" | "true" | "yes");
        }
        if let Some(ms) = num::<u64>("FLOW_CACHE_TTL_MS")? {
            c.flow_cache_ttl = Duration::from_millis(ms);
        }
        if let Some(s) = num::<u64>("SLOT_GRACE_SECONDS")? {
            c.slot_grace = Duration::from_secs(s.max(1));
        }
        if let Some(ms) = num::<u64>("HEALTH_FLUSH_MS")? {
            c.health_flush = Duration::from_millis(ms.min(60_000));
        }
        if let Some(s) = num::<u64>("RECLAIM_INTERVAL_SECONDS")? {
            c.reclaim_interval = Duration::from_secs(s.min(60));
        }
        if let Some(n) = num::<usize>("SWEEP_LIMIT")? {
            c.sweep_limit = n.max(1);
        }
        if let Some(v) = var("API_RATE_LIMITS") {
            c.api_limits =
                converger_core::api_limit::Defaults::parse(&v).map_err(|message| ConfigError {
                    name: "API_RATE_LIMITS",
                    message,
                })?;
        }
        if let Some(v) = var("RECEIPT_RATE_LIMIT") {
            c.receipt_limit = v.parse().map_err(|message| ConfigError {
                name: "RECEIPT_RATE_LIMIT",
                message,
            })?;
        }
        Ok(c)
    }
}
