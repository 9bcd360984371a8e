//! Usage: what each channel and tenant did per minute, hour and day (deliveries created and
//! sent, attempts, failed attempts, dead letters, breaker openings, the ingest-to-sent
//! latency as a histogram), added up per instance and written once per key and flush (never
//! per delivery: see [`SeriesTally`]); and the estimate of the AWS cost a tenant's usage
//! caused, at prices that are configuration ([`CostModel`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The parts a usage counter is kept in. The changes function writes each counter once per
/// batch of a stream shard, and in a large deployment a busy tenant's or channel's records
/// are in every shard's batches: one item would take every batch's write (a thousand a second
/// at 100,000 deliveries a second) and every shard's mark. A shard's batches add to one part
/// ([`part_of`]); a counter reads as the sum of its parts, read together.
pub const PARTS: u32 = 8;

/// The part of a counter a stream shard's batches add to.
pub fn part_of(shard: &str) -> u32 {
    crate::ids::stable_hash(shard) % PARTS
}

/// The usage log's rules (ADR 0089): a tenant's usage that is not busy is logged per
/// stream batch and folded into its counters once a period.
pub mod fold {
    /// A period of the log: one minute.
    pub const PERIOD_MS: i64 = 60_000;

    /// The period `ms` falls in.
    pub fn period_of(ms: i64) -> i64 {
        ms.div_euclid(PERIOD_MS)
    }

    /// Whole periods a fold waits after a period ends before it reads it: an entry is
    /// written within the changes function's timeout (60 s, one period) of the clock reading
    /// that names its period, and one more period covers clocks that disagree.
    pub const GRACE_PERIODS: i64 = 2;

    /// The last period a fold may read at `now_ms`.
    pub fn foldable_to(now_ms: i64) -> i64 {
        period_of(now_ms) - 1 - GRACE_PERIODS
    }

    /// Where the first fold of a deployment starts, before its first foldable period.
    pub const LOOKBACK_PERIODS: i64 = 60;

    /// Most periods one fold run reads (a fold that fell behind catches up run by run).
    pub const PERIODS_PER_RUN: i64 = 30;

    /// Deliveries a tenant creates in one stream batch that make it busy: a busy tenant's
    /// usage is written at once, as its minute counter tells the listing shards' growth its
    /// rate, and its counters are shared by enough deliveries to cost little.
    pub const BUSY_CREATED: i64 = 10;

    /// The log's partitions per period. A stream shard logs to one ([`log_part_of`]); at
    /// 100,000 deliveries a second the log is about 32,000 write units a second, 500 on each.
    pub const LOG_PARTS: u32 = 64;

    /// The part of the log a stream shard's entries go to.
    pub fn log_part_of(shard: &str) -> u32 {
        crate::ids::stable_hash(shard) % LOG_PARTS
    }

    /// How long a log entry is kept past its period (a fold more than this behind loses it).
    pub const LOG_KEEP_S: i64 = 86_400;

    /// A period as keys and marks write it: text that sorts as the number.
    pub fn period_key(period: i64) -> String {
        format!("{period:012}")
    }

    /// The periods one fold run reads up to `last` (at most: [`foldable_to`] the clock),
    /// after `folded_to` (the last folded).
    pub fn next_periods(folded_to: Option<i64>, last: i64) -> std::ops::RangeInclusive<i64> {
        let first = folded_to.map_or(last - LOOKBACK_PERIODS + 1, |f| f + 1);
        first..=last.min(first + PERIODS_PER_RUN - 1)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_period_is_folded_only_after_its_grace() {
            let p = 29_000_000;
            let start = p * PERIOD_MS;
            // A write that read its clock at the period's last moment commits within the
            // next period; the fold waits one more.
            assert_eq!(foldable_to(start + PERIOD_MS - 1), p - 3);
            assert_eq!(foldable_to(start + 3 * PERIOD_MS), p);
            assert!(foldable_to(start + 3 * PERIOD_MS - 1) < p);
        }

        #[test]
        fn runs_go_on_from_the_last_folded_and_catch_up_in_steps() {
            let now = 29_000_000 * PERIOD_MS;
            let last = foldable_to(now);
            assert_eq!(next_periods(Some(last - 1), last), last..=last);
            assert!(next_periods(Some(last), last).is_empty());
            let first = next_periods(None, last);
            assert_eq!(*first.start(), last - LOOKBACK_PERIODS + 1);
            assert_eq!(first.count() as i64, PERIODS_PER_RUN);
            assert!(period_key(5) < period_key(40) && period_key(40).len() == 12);
        }
    }
}

/// How long a bucket of a series is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grain {
    Minute,
    Hour,
    Day,
}

impl Grain {
    pub const ALL: [Grain; 3] = [Grain::Minute, Grain::Hour, Grain::Day];

    pub fn seconds(self) -> i64 {
        match self {
            Self::Minute => 60,
            Self::Hour => 3_600,
            Self::Day => 86_400,
        }
    }

    /// The bucket (whole grains since the epoch) an instant in ms falls in.
    pub fn bucket(self, ms: i64) -> i64 {
        ms.div_euclid(self.seconds() * 1000)
    }

    /// The bucket's first instant, in ms.
    pub fn start_ms(self, bucket: i64) -> i64 {
        bucket.saturating_mul(self.seconds() * 1000)
    }

    /// How long a bucket is kept after it ends, in seconds: a minute two hours (the 1 h
    /// charts), an hour eight days (the 24 h and 7 d charts), a day 400 days (usage).
    pub fn keep_s(self) -> i64 {
        match self {
            Self::Minute => 2 * 3_600,
            Self::Hour => 8 * 86_400,
            Self::Day => 400 * 86_400,
        }
    }

    /// When a bucket's counter expires (seconds since the epoch).
    pub fn expires_at(self, bucket: i64) -> i64 {
        (bucket + 1).saturating_mul(self.seconds()) + self.keep_s()
    }

    /// The short name in a counter's key.
    pub fn code(self) -> &'static str {
        match self {
            Self::Minute => "m",
            Self::Hour => "h",
            Self::Day => "d",
        }
    }
}

/// What a chart shows: the last hour by minute, the last day or week by hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Range {
    #[serde(rename = "1h")]
    Hour,
    #[default]
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
}

impl Range {
    pub const ALL: [Range; 3] = [Range::Hour, Range::Day, Range::Week];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.label() == s)
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::Day => "24h",
            Self::Week => "7d",
        }
    }

    pub fn grain(self) -> Grain {
        match self {
            Self::Hour => Grain::Minute,
            Self::Day | Self::Week => Grain::Hour,
        }
    }

    /// The buckets shown at `now_ms`, oldest first, the current one last.
    pub fn buckets(self, now_ms: i64) -> std::ops::RangeInclusive<i64> {
        let n = match self {
            Self::Hour => 60,
            Self::Day => 24,
            Self::Week => 168,
        };
        let last = self.grain().bucket(now_ms);
        last - (n - 1)..=last
    }
}

/// A day (days since the epoch) as `YYYY-MM-DD`, UTC.
pub fn date_of_day(day: i64) -> String {
    chrono::DateTime::from_timestamp(day.saturating_mul(86_400), 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// A `YYYY-MM-DD` date as days since the epoch.
pub fn day_of_date(date: &str) -> Option<i64> {
    let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some((d - epoch).num_days())
}

/// The most days one usage query covers.
pub const MAX_USAGE_DAYS: i64 = 400;
/// The most days the top tenants by cost cover (every tenant's days are read).
pub const MAX_TOP_DAYS: i64 = 31;
/// The days a usage query covers when it names none: the last 30, today included.
pub const DEFAULT_USAGE_DAYS: i64 = 30;

/// The days (since the epoch) `from..=to` of a usage query at `now_ms`: dates as
/// `YYYY-MM-DD`, `to` today when absent, `from` 29 days before `to` when absent. Refused
/// when a date is not one, `from` is after `to`, or the span is more than
/// [`MAX_USAGE_DAYS`].
pub fn usage_days(
    from: Option<&str>,
    to: Option<&str>,
    now_ms: i64,
) -> Result<(i64, i64), crate::Invalid> {
    let day = |name: &str, v: &str| {
        day_of_date(v).ok_or_else(|| format!("`{name}` must be a date as YYYY-MM-DD, not `{v}`"))
    };
    let to = match to {
        Some(v) => day("to", v)?,
        None => Grain::Day.bucket(now_ms),
    };
    let from = match from {
        Some(v) => day("from", v)?,
        None => to - (DEFAULT_USAGE_DAYS - 1),
    };
    if from > to {
        return Err(crate::Invalid::new("`from` must not be after `to`"));
    }
    if to - from + 1 > MAX_USAGE_DAYS {
        return Err(format!("a usage query covers at most {MAX_USAGE_DAYS} days").into());
    }
    Ok((from, to))
}

/// Upper bounds (ms) of the ingest-to-sent latency histogram's buckets; the last takes the rest.
pub const LATENCY_BOUNDS_MS: [i64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000,
    21_600_000, 86_400_000,
];
/// Buckets in the histogram: one per bound, and one past the last.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// One bucket's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Deliveries created (one per activity and channel).
    pub created: i64,
    pub sent: i64,
    /// Requests made (first tries and retries).
    pub attempts: i64,
    pub failed_attempts: i64,
    pub dead_letters: i64,
    pub breaker_opened: i64,
    /// Deliveries their channel's filter did not want (never attempted).
    pub filtered: i64,
    /// Sent deliveries by ingest-to-sent latency (see [`LATENCY_BOUNDS_MS`]).
    pub latency: [i64; LATENCY_BUCKETS],
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.created += o.created;
        self.sent += o.sent;
        self.attempts += o.attempts;
        self.failed_attempts += o.failed_attempts;
        self.dead_letters += o.dead_letters;
        self.breaker_opened += o.breaker_opened;
        self.filtered += o.filtered;
        for (a, b) in self.latency.iter_mut().zip(o.latency) {
            *a += b;
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// A sent delivery that waited `latency_ms` from ingest (its attempt is counted apart:
    /// a websocket delivery is sent when its client acknowledges it).
    pub fn sent_after(latency_ms: i64) -> Self {
        let mut c = Self {
            sent: 1,
            ..Self::default()
        };
        c.latency[latency_bucket(latency_ms)] = 1;
        c
    }

    /// The named counters as stored (`l0`.. are the latency buckets), zeros left out.
    pub fn fields(&self) -> Vec<(String, i64)> {
        let named = [
            ("created", self.created),
            ("sent", self.sent),
            ("attempts", self.attempts),
            ("failed_attempts", self.failed_attempts),
            ("dead_letters", self.dead_letters),
            ("breaker_opened", self.breaker_opened),
            ("filtered", self.filtered),
        ];
        named
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .chain(
                self.latency
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("l{i}"), *v)),
            )
            .filter(|(_, v)| *v != 0)
            .collect()
    }

    /// The counts from stored fields ([`Self::fields`]); unknown names are ignored.
    pub fn from_fields<'a>(fields: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut c = Self::default();
        for (k, v) in fields {
            match k {
                "created" => c.created = v,
                "sent" => c.sent = v,
                "attempts" => c.attempts = v,
                "failed_attempts" => c.failed_attempts = v,
                "dead_letters" => c.dead_letters = v,
                "breaker_opened" => c.breaker_opened = v,
                "filtered" => c.filtered = v,
                _ => {
                    if let Some(i) = k.strip_prefix('l').and_then(|i| i.parse::<usize>().ok())
                        && let Some(slot) = c.latency.get_mut(i)
                    {
                        *slot = v;
                    }
                }
            }
        }
        c
    }

    /// The latency under which a share `q` (0..=1) of the sent deliveries were sent: the
    /// upper bound of the histogram bucket it falls in (`None` with nothing sent).
    pub fn latency_quantile_ms(&self, q: f64) -> Option<i64> {
        let total: i64 = self.latency.iter().sum();
        if total <= 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as i64).max(1);
        let mut seen = 0;
        for (i, n) in self.latency.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(
                    LATENCY_BOUNDS_MS
                        .get(i)
                        .copied()
                        .unwrap_or(LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.len() - 1] * 2),
                );
            }
        }
        None
    }
}

/// The histogram bucket of a latency.
pub fn latency_bucket(ms: i64) -> usize {
    LATENCY_BOUNDS_MS
        .iter()
        .position(|b| ms <= *b)
        .unwrap_or(LATENCY_BOUNDS_MS.len())
}

/// Counts added up per `(key, bucket)` by one instance and written at most once per period:
/// the writes a busy instance makes are one per key and period, whatever its traffic.
#[derive(Debug)]
pub struct SeriesTally<K: Ord> {
    counts: BTreeMap<K, Counts>,
    /// The period starts at the first count after a flush (not at once: a few deliveries
    /// write once per period, as many do).
    since_ms: Option<i64>,
}

impl<K: Ord> Default for SeriesTally<K> {
    fn default() -> Self {
        Self {
            counts: BTreeMap::new(),
            since_ms: None,
        }
    }
}

impl<K: Ord + Clone> SeriesTally<K> {
    pub fn add(&mut self, key: K, counts: &Counts, now_ms: i64) {
        self.since_ms.get_or_insert(now_ms);
        self.counts.entry(key).or_default().add(counts);
    }

    /// Everything counted, and empty again, once `every_ms` has passed since the first count
    /// of the period; nothing before. Sums that add up to nothing are left out.
    pub fn take_due(&mut self, now_ms: i64, every_ms: i64) -> Vec<(K, Counts)> {
        match self.since_ms {
            Some(since) if now_ms.saturating_sub(since) >= every_ms => {}
            _ => return Vec::new(),
        }
        self.since_ms = None;
        std::mem::take(&mut self.counts)
            .into_iter()
            .filter(|(_, c)| !c.is_zero())
            .collect()
    }

    /// Puts back sums that could not be written: they go with the next flush.
    pub fn restore(&mut self, entries: Vec<(K, Counts)>, now_ms: i64) {
        for (k, c) in entries {
            self.add(k, &c, now_ms);
        }
    }
}

/// One tenant's usage over a span of days, and what it cost.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub deliveries: i64,
    pub attempts: i64,
    pub dead_letters: i64,
    /// Of the deliveries, those their channel's filter did not want.
    #[serde(default)]
    pub filtered: i64,
}

impl Usage {
    pub fn of(c: &Counts) -> Self {
        Self {
            deliveries: c.created,
            attempts: c.attempts,
            dead_letters: c.dead_letters,
            filtered: c.filtered,
        }
    }
}

/// List prices in dollars per million units (US East, on-demand), each overridable by the
/// `USAGE_PRICES` setting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    pub dynamodb_write_unit: f64,
    pub dynamodb_read_unit: f64,
    pub sqs_request: f64,
    pub eventbridge_event: f64,
    pub api_request: f64,
    pub lambda_request: f64,
    /// Per million GB-seconds.
    pub lambda_gb_second: f64,
    /// Per million GB of logs ingested.
    pub logs_gb: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            dynamodb_write_unit: 0.625,
            dynamodb_read_unit: 0.125,
            sqs_request: 0.40,
            eventbridge_event: 1.00,
            api_request: 1.00,
            lambda_request: 0.20,
            lambda_gb_second: 16.6667,
            logs_gb: 500_000.0,
        }
    }
}

impl Prices {
    /// The list prices with the overrides of a JSON object (`{"sqs_request": 0.5}`); an
    /// unknown name or a negative price is refused.
    pub fn parse(json: &str) -> Result<Self, crate::Invalid> {
        let p: Prices = serde_json::from_str(json)
            .map_err(|e| format!("a JSON object of prices per million ({e})"))?;
        let all = [
            p.dynamodb_write_unit,
            p.dynamodb_read_unit,
            p.sqs_request,
            p.eventbridge_event,
            p.api_request,
            p.lambda_request,
            p.lambda_gb_second,
            p.logs_gb,
        ];
        if all.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err("a JSON object of prices of 0 or more".into());
        }
        Ok(p)
    }
}

/// What one unit of usage takes of each priced resource.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub dynamodb_write_units: f64,
    pub dynamodb_read_units: f64,
    pub sqs_requests: f64,
    pub eventbridge_events: f64,
    pub api_requests: f64,
    pub lambda_requests: f64,
    pub lambda_gb_seconds: f64,
    pub log_bytes: f64,
}

impl Profile {
    fn dollars(&self, p: &Prices) -> [(&'static str, f64); 6] {
        [
            (
                "dynamodb",
                self.dynamodb_write_units * p.dynamodb_write_unit
                    + self.dynamodb_read_units * p.dynamodb_read_unit,
            ),
            ("sqs", self.sqs_requests * p.sqs_request),
            ("eventbridge", self.eventbridge_events * p.eventbridge_event),
            ("api_gateway", self.api_requests * p.api_request),
            (
                "lambda",
                self.lambda_requests * p.lambda_request
                    + self.lambda_gb_seconds * p.lambda_gb_second,
            ),
            ("logs", self.log_bytes / 1e9 * p.logs_gb),
        ]
        .map(|(k, v)| (k, v / 1e6))
    }
}

/// The resources a delivery, a retry and a dead letter take, as `bench cost` measured them on
/// a webhook (see `docs/benchmarks/cost.md`): a first try; each attempt after the first; a dead
/// letter beyond its last attempt. The API request is counted per delivery (an activity to
/// several channels shares one, so this errs high).
pub const FIRST_TRY: Profile = Profile {
    dynamodb_write_units: 8.37,
    dynamodb_read_units: 0.37,
    sqs_requests: 3.0,
    eventbridge_events: 1.0,
    api_requests: 1.0,
    lambda_requests: 2.0,
    lambda_gb_seconds: 0.0118,
    log_bytes: 495.0,
};
pub const RETRY: Profile = Profile {
    dynamodb_write_units: 9.1,
    dynamodb_read_units: 2.4,
    sqs_requests: 3.0,
    eventbridge_events: 0.0,
    api_requests: 0.0,
    lambda_requests: 1.0,
    lambda_gb_seconds: 0.0168,
    log_bytes: 390.0,
};
pub const DEAD_LETTER: Profile = Profile {
    dynamodb_write_units: 6.0,
    dynamodb_read_units: 1.0,
    sqs_requests: 0.0,
    eventbridge_events: 1.0,
    api_requests: 0.0,
    lambda_requests: 0.0,
    lambda_gb_seconds: 0.0055,
    log_bytes: 20.0,
};

/// A delivery its channel's filter did not want, read from the writes it makes rather than
/// measured: its row with its listing entry, its share of the activity's request and of the
/// change stream's invocation, and its status event. No message, no attempt.
pub const FILTERED: Profile = Profile {
    dynamodb_write_units: 2.0,
    dynamodb_read_units: 0.0,
    sqs_requests: 0.0,
    eventbridge_events: 1.0,
    api_requests: 1.0,
    lambda_requests: 0.01,
    lambda_gb_seconds: 0.0005,
    log_bytes: 100.0,
};

/// The estimate of what a usage cost, in dollars, by service.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Estimate {
    pub total_usd: f64,
    pub by_service_usd: BTreeMap<String, f64>,
}

/// Usage to dollars: `deliveries × first try + retries × retry + dead letters × dead letter`
/// (a filtered delivery at [`FILTERED`] instead of a first try),
/// priced at [`Prices`]. An estimate at list prices, not a bill: free tiers, savings plans
/// and the fixed monthly cost of the scheduled functions are not in it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CostModel {
    pub prices: Prices,
}

impl CostModel {
    pub fn estimate(&self, u: &Usage) -> Estimate {
        let filtered = u.filtered.clamp(0, u.deliveries.max(0));
        // A delivery that was filtered and then retried by hand counts once as each.
        let tried = (u.deliveries - filtered).max(0);
        let retries = (u.attempts - tried).max(0) as f64;
        let parts = [
            (tried as f64, FIRST_TRY),
            (filtered as f64, FILTERED),
            (retries, RETRY),
            (u.dead_letters.max(0) as f64, DEAD_LETTER),
        ];
        let mut e = Estimate::default();
        for (n, profile) in parts {
            for (k, usd) in profile.dollars(&self.prices) {
                *e.by_service_usd.entry(k.to_owned()).or_default() += n * usd;
            }
        }
        e.total_usd = e.by_service_usd.values().sum();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grains_buckets_and_ranges() {
        let ms = 90 * 60_000 + 5_000; // 01:30:05 on day 0
        assert_eq!(Grain::Minute.bucket(ms), 90);
        assert_eq!(Grain::Hour.bucket(ms), 1);
        assert_eq!(Grain::Day.bucket(ms), 0);
        assert_eq!(Grain::Minute.bucket(-1), -1, "before the epoch rounds down");
        assert_eq!(Grain::Hour.expires_at(1), 2 * 3_600 + 8 * 86_400);
        assert_eq!(Range::Hour.buckets(ms), 31..=90);
        assert_eq!(Range::Week.buckets(ms).count(), 168);
        assert_eq!(Range::parse("7d"), Some(Range::Week));
        assert_eq!(Range::parse("2d"), None);
        assert_eq!(date_of_day(20_426), "2025-12-04");
        assert_eq!(day_of_date("2025-12-04"), Some(20_426));
        assert_eq!(day_of_date("2025-13-04"), None);
        let now = 20_426 * 86_400_000 + 5;
        assert_eq!(
            usage_days(None, None, now),
            Ok((20_397, 20_426)),
            "the last 30 days"
        );
        assert_eq!(
            usage_days(Some("2025-12-01"), Some("2025-12-04"), now),
            Ok((20_423, 20_426))
        );
        assert!(usage_days(Some("2025-12-05"), Some("2025-12-04"), now).is_err());
        assert!(
            usage_days(Some("2024-01-01"), Some("2025-12-04"), now)
                .unwrap_err()
                .message()
                .contains("400")
        );
        assert!(
            usage_days(Some("yesterday"), None, now)
                .unwrap_err()
                .message()
                .contains("`from`")
        );
    }

    #[test]
    fn latency_quantiles_are_the_bounds_of_their_buckets() {
        let mut c = Counts::default();
        for ms in [50, 60, 70, 80, 90, 200, 200, 200, 900, 40_000] {
            c.add(&Counts::sent_after(ms));
        }
        assert_eq!(c.sent, 10);
        assert_eq!(
            c.latency_quantile_ms(0.5),
            Some(100),
            "5 of 10 under 100 ms"
        );
        assert_eq!(c.latency_quantile_ms(0.6), Some(250));
        assert_eq!(c.latency_quantile_ms(0.95), Some(60_000));
        assert_eq!(Counts::default().latency_quantile_ms(0.5), None);
        assert_eq!(latency_bucket(100), 0, "a bound is in its own bucket");
        assert_eq!(latency_bucket(i64::MAX), LATENCY_BUCKETS - 1);
    }

    #[test]
    fn counts_round_trip_through_their_stored_fields() {
        let mut c = Counts::sent_after(3_000);
        c.created = 4;
        c.dead_letters = 1;
        c.breaker_opened = 1;
        let f = c.fields();
        assert!(f.iter().all(|(_, v)| *v != 0), "zeros are not stored");
        let back = Counts::from_fields(f.iter().map(|(k, v)| (k.as_str(), *v)));
        assert_eq!(back, c);
    }

    #[test]
    fn a_tally_writes_once_per_period_from_its_first_count() {
        let mut t: SeriesTally<&str> = SeriesTally::default();
        let one = Counts {
            created: 1,
            ..Counts::default()
        };
        t.add("a", &one, 1_000);
        assert!(t.take_due(1_000, 60_000).is_empty(), "not at once");
        t.add("a", &one, 30_000);
        t.add("b", &Counts::default(), 30_000);
        assert!(t.take_due(60_999, 60_000).is_empty());
        let due = t.take_due(61_000, 60_000);
        assert_eq!(due.len(), 1, "a zero sum is not written: {due:?}");
        assert_eq!(due[0].1.created, 2);
        assert!(
            t.take_due(200_000, 60_000).is_empty(),
            "nothing counted since"
        );
        t.restore(due, 200_000);
        assert_eq!(t.take_due(260_000, 60_000)[0].1.created, 2);
        let mut now = SeriesTally::default();
        now.add("a", &one, 5);
        assert_eq!(
            now.take_due(5, 0).len(),
            1,
            "a period of 0 writes with every count"
        );
    }

    #[test]
    fn the_estimate_prices_first_tries_retries_and_dead_letters() {
        let m = CostModel::default();
        let first = m.estimate(&Usage {
            deliveries: 1_000_000,
            attempts: 1_000_000,
            dead_letters: 0,
            filtered: 0,
        });
        assert!(
            (first.total_usd - 9.3).abs() < 0.2,
            "bench cost's first try: {first:?}"
        );
        let dead = m.estimate(&Usage {
            deliveries: 1_000_000,
            attempts: 3_000_000,
            dead_letters: 1_000_000,
            filtered: 0,
        });
        let filtered = m.estimate(&Usage {
            deliveries: 1_000_000,
            attempts: 0,
            dead_letters: 0,
            filtered: 1_000_000,
        });
        assert!(
            filtered.total_usd < first.total_usd / 2.0,
            "a filtered delivery makes no attempt: {filtered:?}"
        );
        assert!(
            (dead.total_usd - 30.2).abs() < 1.5,
            "bench cost's dead letter after three: {dead:?}"
        );
        let free = CostModel {
            prices: Prices::parse(r#"{"dynamodb_write_unit": 0, "dynamodb_read_unit": 0}"#)
                .unwrap(),
        };
        assert_eq!(free.estimate(&Usage::default()).total_usd, 0.0);
        assert!(
            free.estimate(&Usage::of(&Counts::sent_after(1)))
                .by_service_usd["dynamodb"]
                == 0.0
        );
        assert!(Prices::parse(r#"{"sqs": 1}"#).is_err(), "an unknown name");
        assert!(Prices::parse(r#"{"sqs_request": -1}"#).is_err());
    }
}
