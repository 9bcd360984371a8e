//! Pipeline settings, from the environment: each one declared in `core::settings`.

use converger_core::net::Allowlist;
use converger_core::settings::{self as set, Env};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Each tier's tenant API rate limit per API key (`API_RATE_LIMITS`,
    /// `high=500/s,default=100/s,bulk=50/s`).
    pub api_limits: converger_core::api_limit::Defaults,
    /// Verified provider receipts one channel takes (`RECEIPT_RATE_LIMIT`, `3000/s`).
    pub receipt_limit: converger_core::RateLimit,
    /// The global layer of the retry policy (`RETRY_POLICY`, a JSON object).
    pub retry_policy: converger_core::PolicyLayer,
    /// Longest single queue delay; longer delays are made of hops (SQS allows 900 s).
    pub hop_ceiling_s: u32,
    /// One slice of an attempt's lease (`LEASE_SECONDS`): renewed while the call runs, so a
    /// crashed attempt's delivery is free again within one slice.
    pub lease_slice: Duration,
    /// How long a channel's configuration is cached per instance.
    pub channel_cache_ttl: Duration,
    /// How long an API instance keeps the tenant an API key names (`TENANT_CACHE_TTL_MS`).
    pub tenant_cache_ttl: Duration,
    /// How long a delivery waiting in its ordered lane first sleeps before it looks at its
    /// lane again (`LANE_RECHECK_MS`).
    pub lane_recheck: Duration,
    /// Whether the stack has the live stream (`LIVE_STREAM`).
    pub live_stream: bool,
    /// Whether `delivery.status_changed` goes to the bus (`BUS_STATUS_EVENTS`).
    pub bus_status_events: bool,
    /// Whether usage that is not busy is logged and folded once a period (`USAGE_FOLD`).
    pub usage_fold: bool,
    /// The platform's own AWS account (`PLATFORM_ACCOUNT_ID`): tenants' roles must trust
    /// it, and a role in it is never assumed.
    pub platform_account: Option<String>,
    /// CIDRs webhooks may reach although they are special-purpose (`WEBHOOK_ALLOW_CIDRS`).
    pub allowlist: Allowlist,
    /// Deliveries of one batch processed at once.
    pub batch_concurrency: usize,
    /// Deliveries a second one listing shard takes before a tenant is granted more
    /// (`converger_core::shards::SHARD_RATE`; a benchmark that divides the partitions'
    /// limits divides it too).
    pub listing_shard_rate: f64,
    /// How long after a first try's message its watch copy comes (`WATCH_DELAY_SECONDS`).
    pub watch_delay_s: u32,
    /// Each tier's deliver mapping's concurrency (`TIER_CONCURRENCY`): channel windows are
    /// sized from it.
    pub tier_concurrency: converger_core::TierConcurrency,
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
    /// How long an instance may hold the breaker openings it added up before writing them to
    /// the usage counters (`USAGE_FLUSH_MS`, 0: at once; every other count comes from the
    /// deliveries table's stream).
    pub usage_flush: Duration,
    /// The usage estimate's prices (`USAGE_PRICES`).
    pub usage_prices: converger_core::usage::Prices,
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
            retry_policy: converger_core::PolicyLayer::default(),
            hop_ceiling_s: 900,
            lease_slice: Duration::from_millis(converger_core::policy::LEASE_SLICE_MS as u64),
            channel_cache_ttl: Duration::from_secs(5),
            tenant_cache_ttl: Duration::from_secs(30),
            lane_recheck: Duration::from_secs(300),
            live_stream: false,
            bus_status_events: true,
            usage_fold: false,
            platform_account: None,
            allowlist: Allowlist::default(),
            batch_concurrency: 10,
            listing_shard_rate: converger_core::shards::SHARD_RATE,
            tier_concurrency: converger_core::TierConcurrency::default(),
            watch_delay_s: converger_core::policy::WATCH_DELAY_S,
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
            usage_flush: Duration::ZERO,
            usage_prices: converger_core::usage::Prices::default(),
            slot_grace: Duration::from_secs(120),
            release_chunk: 5000,
        }
    }
}

/// A setting the pipeline cannot start with (`core::settings`).
pub type ConfigError = converger_core::settings::SettingError;

impl PipelineConfig {
    /// The settings of this process's environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The settings `var` gives (a function's environment), each read by its declaration in
    /// `core::settings`: unset means the default, a value out of range stops the start.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = Env::new(var);
        let d = Self::default();
        let days = |n: u64| Duration::from_secs(n * 86_400);
        let retention = env.number(&set::RETENTION_DAYS)?.map_or(d.retention, days);
        Ok(Self {
            api_limits: env
                .parsed(
                    &set::API_RATE_LIMITS,
                    converger_core::api_limit::Defaults::parse,
                )?
                .unwrap_or(d.api_limits),
            tier_concurrency: env
                .parsed(
                    &set::TIER_CONCURRENCY,
                    converger_core::TierConcurrency::parse,
                )?
                .unwrap_or(d.tier_concurrency),
            watch_delay_s: env
                .number(&set::WATCH_DELAY_SECONDS)?
                .unwrap_or(d.watch_delay_s),
            receipt_limit: env
                .parsed(&set::RECEIPT_RATE_LIMIT, str::parse)?
                .unwrap_or(d.receipt_limit),
            retry_policy: env
                .parsed(&set::RETRY_POLICY, |v| {
                    let map: serde_json::Map<String, serde_json::Value> =
                        serde_json::from_str(v).map_err(|e| format!("a JSON object ({e})"))?;
                    converger_core::PolicyLayer::from_config(&map).map_err(|e| e.to_string())
                })?
                .unwrap_or(d.retry_policy),
            hop_ceiling_s: env
                .number(&set::HOP_CEILING_SECONDS)?
                .unwrap_or(d.hop_ceiling_s),
            lease_slice: env
                .number(&set::LEASE_SECONDS)?
                .map_or(d.lease_slice, Duration::from_secs),
            channel_cache_ttl: env
                .number(&set::CHANNEL_CACHE_TTL_MS)?
                .map_or(d.channel_cache_ttl, Duration::from_millis),
            tenant_cache_ttl: env
                .number(&set::TENANT_CACHE_TTL_MS)?
                .map_or(d.tenant_cache_ttl, Duration::from_millis),
            lane_recheck: env
                .number(&set::LANE_RECHECK_MS)?
                .map_or(d.lane_recheck, Duration::from_millis),
            live_stream: env.flag(&set::LIVE_STREAM)?.unwrap_or(d.live_stream),
            bus_status_events: env
                .flag(&set::BUS_STATUS_EVENTS)?
                .unwrap_or(d.bus_status_events),
            usage_fold: env.flag(&set::USAGE_FOLD)?.unwrap_or(d.usage_fold),
            platform_account: env.parsed(&set::PLATFORM_ACCOUNT_ID, |v: &str| {
                converger_core::aws::is_account(v)
                    .then(|| v.to_owned())
                    .ok_or("12 digits")
            })?,
            allowlist: env
                .parsed(&set::WEBHOOK_ALLOW_CIDRS, Allowlist::parse)?
                .unwrap_or(d.allowlist),
            batch_concurrency: env
                .number(&set::BATCH_CONCURRENCY)?
                .unwrap_or(d.batch_concurrency),
            listing_shard_rate: d.listing_shard_rate,
            retention,
            // The attempt log alone may be kept for less.
            attempt_retention: env
                .number(&set::ATTEMPT_LOG_RETENTION_DAYS)?
                .map_or(retention, days),
            sweep_grace: env
                .number(&set::SWEEP_GRACE_SECONDS)?
                .map_or(d.sweep_grace, Duration::from_secs),
            reclaim_interval: env
                .number(&set::RECLAIM_INTERVAL_SECONDS)?
                .map_or(d.reclaim_interval, Duration::from_secs),
            sweep_limit: env.number(&set::SWEEP_LIMIT)?.unwrap_or(d.sweep_limit),
            bulk_retry_limit: env
                .number(&set::BULK_RETRY_LIMIT)?
                .unwrap_or(d.bulk_retry_limit),
            replay_chunk: d.replay_chunk,
            bulk_replay_concurrency: env
                .number(&set::BULK_REPLAY_CONCURRENCY)?
                .unwrap_or(d.bulk_replay_concurrency),
            serial_transactions: env
                .flag(&set::DYNAMODB_SERIAL_TRANSACTIONS)?
                .unwrap_or(d.serial_transactions),
            flow_cache_ttl: env
                .number(&set::FLOW_CACHE_TTL_MS)?
                .map_or(d.flow_cache_ttl, Duration::from_millis),
            usage_flush: env
                .number(&set::USAGE_FLUSH_MS)?
                .map_or(d.usage_flush, Duration::from_millis),
            usage_prices: env
                .parsed(&set::USAGE_PRICES, converger_core::usage::Prices::parse)?
                .unwrap_or(d.usage_prices),
            slot_grace: env
                .number(&set::SLOT_GRACE_SECONDS)?
                .map_or(d.slot_grace, Duration::from_secs),
            release_chunk: d.release_chunk,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(pairs: &[(&str, &str)]) -> Result<PipelineConfig, ConfigError> {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        PipelineConfig::from_vars(|k| vars.get(k).cloned())
    }

    #[test]
    fn unset_settings_take_their_defaults() {
        let c = load(&[]).unwrap();
        let d = PipelineConfig::default();
        assert_eq!(c.hop_ceiling_s, d.hop_ceiling_s);
        assert_eq!(c.lease_slice, d.lease_slice);
        assert_eq!(c.retention, d.retention);
        assert!(!c.serial_transactions);
    }

    /// Every setting the pipeline reads, given its documented default as its value, makes
    /// the configuration no value makes: the defaults in `core::settings` (and so in
    /// `docs/configuration.md`) are the ones the code uses.
    #[test]
    fn every_documented_default_is_the_default_in_use() {
        let mut given = Vec::new();
        for s in set::ALL {
            // A default that is a value (a number, a flag, a quoted text), not prose.
            let value = s.default.trim_matches('`');
            let plain = match s.kind {
                set::Kind::Number { .. } => value.parse::<u64>().is_ok(),
                set::Kind::Flag => matches!(value, "true" | "false"),
                set::Kind::Text => s.default.starts_with('`'),
                _ => false,
            };
            if plain {
                given.push((s.name, value));
            }
        }
        assert!(given.len() >= 15, "{given:?}");
        let documented = load(&given).unwrap();
        assert_eq!(
            format!("{documented:?}"),
            format!("{:?}", PipelineConfig::default()),
            "given {given:?}"
        );
    }

    #[test]
    fn values_are_read_and_the_attempt_log_follows_the_retention() {
        let c = load(&[
            ("RETENTION_DAYS", "7"),
            ("LEASE_SECONDS", "20"),
            ("DYNAMODB_SERIAL_TRANSACTIONS", "true"),
            ("RETRY_POLICY", r#"{"max_attempts": 3}"#),
            ("USAGE_PRICES", r#"{"sqs_request": 0.5}"#),
            ("USAGE_FLUSH_MS", "60000"),
        ])
        .unwrap();
        assert_eq!(c.usage_prices.sqs_request, 0.5);
        assert_eq!(
            c.usage_prices.dynamodb_write_unit,
            converger_core::usage::Prices::default().dynamodb_write_unit
        );
        assert_eq!(c.usage_flush, Duration::from_secs(60));
        let refused = load(&[("USAGE_PRICES", r#"{"sqs": 1}"#)]).unwrap_err();
        assert_eq!(refused.name, "USAGE_PRICES");
        assert_eq!(c.retention, Duration::from_secs(7 * 86_400));
        assert_eq!(c.attempt_retention, c.retention);
        assert_eq!(c.lease_slice, Duration::from_secs(20));
        assert!(c.serial_transactions);
        assert_eq!(c.retry_policy.max_attempts, Some(3));
        let c = load(&[("RETENTION_DAYS", "7"), ("ATTEMPT_LOG_RETENTION_DAYS", "2")]).unwrap();
        assert_eq!(c.attempt_retention, Duration::from_secs(2 * 86_400));
    }

    #[test]
    fn a_bad_value_stops_the_start_naming_its_variable() {
        for (name, value) in [
            ("HOP_CEILING_SECONDS", "901"),
            ("LEASE_SECONDS", "1"),
            ("BATCH_CONCURRENCY", "0"),
            ("RETENTION_DAYS", "a month"),
            ("RECLAIM_INTERVAL_SECONDS", "61"),
            ("RETRY_POLICY", "[1"),
            ("RETRY_POLICY", r#"{"backoff":"sideways"}"#),
            ("RETRY_POLICY", r#"{"max_attempts":0}"#),
            ("WEBHOOK_ALLOW_CIDRS", "10.0.0.0/99"),
            ("API_RATE_LIMITS", "fast"),
            ("RECEIPT_RATE_LIMIT", "many"),
            ("DYNAMODB_SERIAL_TRANSACTIONS", "sometimes"),
        ] {
            let err = load(&[(name, value)]).unwrap_err();
            assert_eq!(err.name, name, "{err}");
            assert!(err.to_string().contains(value), "{err}");
        }
    }
}
