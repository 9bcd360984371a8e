//! Flow control rules: the circuit breaker, the per-channel window (in-flight cap), rate limits.
//!
//! The breaker and the window live on a channel's flow item; this module decides, the store
//! applies the decision with one conditional write.

use crate::channel::Tier;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

/// The breaker of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    /// Attempted normally (subject to the window and the rate limit).
    #[default]
    Closed,
    /// Parked; the first delivery after `cooldown_ms` probes.
    Open,
    /// One probe in flight; every other delivery is parked.
    HalfOpen,
    /// Parked until resumed; never probed.
    Paused,
}

impl CircuitState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
            Self::Paused => "paused",
        }
    }

    /// The label the delivery endpoint and the admin pages show.
    pub fn delivery_label(self) -> &'static str {
        match self {
            Self::Closed => "flowing",
            Self::Open => "breaker_open",
            Self::HalfOpen => "probing",
            Self::Paused => "paused",
        }
    }

    /// The Delivery column of the channels pages, as the reference names it.
    pub fn delivery_column(self) -> &'static str {
        match self {
            Self::Closed => "Flowing",
            Self::Open => "Breaker open",
            Self::HalfOpen => "Probing",
            Self::Paused => "Paused",
        }
    }
}

impl fmt::Display for CircuitState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The in-flight cap of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxInFlight {
    /// Half of the tier's concurrency.
    #[default]
    Auto,
    /// No window: every delivery is enqueued at once.
    Unbounded,
    Fixed(u32),
}

impl MaxInFlight {
    /// The cap for a delivery of `tier`; `None` when unbounded.
    pub fn resolve(self, tier: Tier) -> Option<u32> {
        match self {
            Self::Auto => Some(
                u32::try_from(tier.max_concurrency() / 2)
                    .unwrap_or(1)
                    .max(1),
            ),
            Self::Unbounded => None,
            Self::Fixed(n) => Some(n.max(1)),
        }
    }

    fn to_json(self) -> Value {
        match self {
            Self::Auto => Value::from("auto"),
            Self::Unbounded => Value::Null,
            Self::Fixed(n) => Value::from(n),
        }
    }

    fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(Self::Unbounded),
            Value::String(s) if s == "auto" => Ok(Self::Auto),
            Value::Number(n) => match n.as_u64() {
                Some(n @ 1..=MAX_IN_FLIGHT_LIMIT) => Ok(Self::Fixed(n as u32)),
                _ => Err(MAX_IN_FLIGHT_RANGE.into()),
            },
            _ => Err(MAX_IN_FLIGHT_RANGE.into()),
        }
    }
}

/// The largest `max_in_flight` a channel may set.
pub const MAX_IN_FLIGHT_LIMIT: u64 = 10_000;

const MAX_IN_FLIGHT_RANGE: &str =
    "max_in_flight must be \"auto\", null or an integer from 1 to 10000";

/// A channel's breaker and window settings (the `circuit_breaker` object of a channel, with
/// the reference's names and defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// Consecutive transient failures that open the breaker.
    pub failure_threshold: u32,
    /// Time open before a probe.
    pub cooldown_ms: u64,
    /// How long parked deliveries of a closed channel wait before the sweeper releases them on
    /// its own (a safety net behind the release on close).
    pub park_seconds: u64,
    pub max_in_flight: MaxInFlight,
    /// Replay the channel's recent dead letters when a probe closes the breaker.
    pub replay_dead_letters_on_close: bool,
    /// How far back those dead letters go.
    pub replay_window_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cooldown_ms: 30_000,
            park_seconds: 600,
            max_in_flight: MaxInFlight::Auto,
            replay_dead_letters_on_close: false,
            replay_window_ms: 3_600_000,
        }
    }
}

const KEYS: [&str; 6] = [
    "failure_threshold",
    "cooldown_ms",
    "park_seconds",
    "max_in_flight",
    "replay_dead_letters_on_close",
    "replay_window_ms",
];

impl BreakerConfig {
    /// Validates a channel's `circuit_breaker` overrides (unknown keys and bad values refused).
    pub fn validate(overrides: &Map<String, Value>) -> Result<(), String> {
        Self::from_overrides(overrides).map(|_| ())
    }

    /// The defaults with a channel's overrides applied.
    pub fn from_overrides(overrides: &Map<String, Value>) -> Result<Self, String> {
        let mut c = Self::default();
        for (k, v) in overrides {
            let int = |lo: u64, hi: u64| -> Result<u64, String> {
                v.as_u64()
                    .filter(|n| (lo..=hi).contains(n))
                    .ok_or_else(|| format!("{k} must be an integer from {lo} to {hi}"))
            };
            match k.as_str() {
                "failure_threshold" => c.failure_threshold = int(1, 1000)? as u32,
                "cooldown_ms" => c.cooldown_ms = int(1000, 86_400_000)?,
                "park_seconds" => c.park_seconds = int(1, 86_400)?,
                "max_in_flight" => c.max_in_flight = MaxInFlight::from_json(v)?,
                "replay_dead_letters_on_close" => {
                    c.replay_dead_letters_on_close = v
                        .as_bool()
                        .ok_or("replay_dead_letters_on_close must be a boolean")?
                }
                "replay_window_ms" => c.replay_window_ms = int(1000, 30 * 86_400_000)?,
                other => {
                    return Err(format!(
                        "unknown circuit_breaker setting {other:?} (known: {})",
                        KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(c)
    }

    /// The same settings when stored overrides cannot be read (they are validated on write).
    pub fn effective(overrides: &Map<String, Value>) -> Self {
        Self::from_overrides(overrides).unwrap_or_default()
    }

    /// As the API shows it: every setting, defaults included.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "failure_threshold": self.failure_threshold,
            "cooldown_ms": self.cooldown_ms,
            "park_seconds": self.park_seconds,
            "max_in_flight": self.max_in_flight.to_json(),
            "replay_dead_letters_on_close": self.replay_dead_letters_on_close,
            "replay_window_ms": self.replay_window_ms,
        })
    }
}

/// A channel's outbound rate limit: `count` requests per `per_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub count: u32,
    pub per_ms: u64,
}

impl RateLimit {
    /// The spacing of requests at the sustained rate, in microseconds (GCRA's emission
    /// interval): 80/s is 12,500 µs.
    pub fn interval_us(&self) -> i64 {
        let per_us = i64::try_from(self.per_ms).unwrap_or(i64::MAX / 1000) * 1000;
        (per_us / i64::from(self.count.max(1))).max(1)
    }

    /// How far ahead of now the schedule may run: a burst of `count` requests at once is
    /// allowed, then one per interval (GCRA's delay tolerance).
    pub fn tolerance_us(&self) -> i64 {
        self.interval_us() * i64::from(self.count.max(1) - 1)
    }

    /// The decision for a request at `now_us` against the schedule's theoretical arrival
    /// time `tat_us` (None: no request yet): the new `tat` if allowed, else when it may go.
    pub fn decide(&self, tat_us: Option<i64>, now_us: i64) -> Result<i64, i64> {
        self.decide_n(tat_us, now_us, 1)
    }

    /// [`Self::decide`] for `n` requests at once (at most `count`: a batch of tokens taken
    /// together): allowed while the last of them is within the burst tolerance.
    pub fn decide_n(&self, tat_us: Option<i64>, now_us: i64, n: u32) -> Result<i64, i64> {
        let tat = tat_us.unwrap_or(now_us).max(now_us);
        let slack = self.tolerance_us() - self.extra_us(n);
        if tat - now_us <= slack {
            Ok(tat + self.interval_us() * i64::from(n.max(1)))
        } else {
            Err(tat - slack)
        }
    }

    /// How much further than one request `n` requests advance the schedule.
    pub fn extra_us(&self, n: u32) -> i64 {
        self.interval_us() * i64::from(n.max(1) - 1)
    }

    /// Whole seconds to wait until `retry_at_us` (at least 1: SQS delays are seconds).
    pub fn snooze_s(retry_at_us: i64, now_us: i64) -> u32 {
        let us = retry_at_us.saturating_sub(now_us).max(1);
        u32::try_from((us + 999_999) / 1_000_000)
            .unwrap_or(900)
            .clamp(1, 900)
    }
}

/// How long an instance may keep rate tokens it took together from a channel's schedule
/// before it uses them: a batch spans at most this much of the schedule, and tokens not used
/// by then are dropped (the channel then sends a little under its limit, never over it by
/// more than this lag: over any period a channel sends at most its limit for the period plus
/// this long).
pub const RATE_BATCH_US: i64 = 100_000;

/// The most tokens one batch may take from a schedule.
pub const RATE_BATCH_MOST: u32 = 100;

impl RateLimit {
    /// How many requests fit now (fewer than `n`) in a schedule that refused `n` with
    /// `retry_at_us` (`Self::decide_n`'s answer): the tokens released since it last ran.
    pub fn fit_now(&self, retry_at_us: i64, n: u32, now_us: i64) -> u32 {
        let tat = retry_at_us + self.tolerance_us() - self.extra_us(n);
        let room = self.tolerance_us() - (tat - now_us.min(tat));
        if room < 0 {
            return 0;
        }
        u32::try_from(room / self.interval_us() + 1)
            .unwrap_or(u32::MAX)
            .min(n.saturating_sub(1))
    }

    /// The most tokens an instance takes at once from this schedule: as many as the schedule
    /// spaces within [`RATE_BATCH_US`] (5,000/s: 100; 80/s: 8; 500/m: 1, no batching).
    pub fn batch_most(&self) -> u32 {
        u32::try_from(RATE_BATCH_US / self.interval_us())
            .unwrap_or(RATE_BATCH_MOST)
            .clamp(1, RATE_BATCH_MOST)
    }
}

/// Rate tokens one instance took together from a channel's schedule, handed out one per
/// request: the schedule's key is written once per batch rather than once per request. A
/// batch starts at one token and doubles while the instance uses its batches up; it shrinks
/// to what was used when tokens were dropped, and to what fit when the schedule refused it.
#[derive(Debug, Clone, PartialEq)]
pub struct RateBatch {
    left: u32,
    until_us: i64,
    size: u32,
    used: u32,
}

impl Default for RateBatch {
    fn default() -> Self {
        Self {
            left: 0,
            until_us: i64::MIN,
            size: 1,
            used: 0,
        }
    }
}

impl RateBatch {
    /// Hands out a token this instance holds, if one is left and still fresh.
    pub fn take(&mut self, now_us: i64) -> bool {
        if self.left > 0 && now_us < self.until_us {
            self.left -= 1;
            self.used += 1;
            true
        } else {
            false
        }
    }

    /// How many tokens to ask the schedule for next (at most `most`): double the last batch
    /// if it was used up, what was used of it if tokens were dropped.
    pub fn next_size(&mut self, most: u32) -> u32 {
        self.size = if self.left == 0 && self.used > 0 {
            self.size.saturating_mul(2)
        } else if self.used > 0 {
            self.used
        } else {
            self.size
        }
        .clamp(1, most.max(1));
        self.size
    }

    /// The schedule had room for only `fit` of the batch asked for: the next one starts there.
    pub fn refused(&mut self, fit: u32) {
        self.size = fit.max(1);
        self.used = 0;
    }

    /// Keeps `n` tokens just taken at `now_us`, one of them handed out at once (with what is
    /// left of a batch another request of this instance took meanwhile).
    pub fn filled(&mut self, n: u32, now_us: i64) {
        if self.left > 0 && now_us < self.until_us {
            self.left = self.left.saturating_add(n.saturating_sub(1));
            self.used = self.used.saturating_add(1);
        } else {
            self.left = n.saturating_sub(1);
            self.used = 1;
        }
        self.until_us = now_us.saturating_add(RATE_BATCH_US);
    }
}

impl FromStr for RateLimit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("rate_limit must look like \"80/s\", \"500/m\" or \"1000/h\", not {s:?}");
        let (count, unit) = s.trim().split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let per_ms = match unit.trim() {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad()),
        };
        if count == 0 || count > 1_000_000 {
            return Err("rate_limit's count must be from 1 to 1000000".into());
        }
        Ok(Self { count, per_ms })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per_ms {
            1_000 => "s",
            60_000 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// Slot ids one slot item holds at most once a window spans several: a delivery id and the
/// time its slot was taken are about 40 bytes, so an item of 8 stays well under the 1 KB a
/// write unit buys.
pub const SLOTS_PER_ITEM: u32 = 8;

/// The largest window that lives on the flow item alone (one item, as small channels always
/// had): 16 slot ids, under 1 KB with the breaker's fields.
pub const SINGLE_ITEM_WINDOW: u32 = 16;

/// How many slot items the window of a channel whose cap (`max_in_flight`, resolved) is
/// `cap` is spread over. A cap of up to [`SINGLE_ITEM_WINDOW`] is the flow item's own slot
/// map, as small channels always had; a larger one is split into items of at most
/// [`SLOTS_PER_ITEM`] (item 0 is still the flow item, the others are items of their own), so
/// that no key is written by every delivery of a busy channel: at 2,000 deliveries a second,
/// a cap of 2,000 is 250 items, each written 16 times a second. The count follows the cap,
/// not the adaptive window, so a slot stays in the item it was taken in however the window
/// moves, and no item ever holds more than its share of the cap: the endpoint never sees
/// more than `max_in_flight` at once.
pub fn slot_items(cap: u32) -> u32 {
    if cap <= SINGLE_ITEM_WINDOW {
        1
    } else {
        cap.div_ceil(SLOTS_PER_ITEM)
    }
}

/// Item `item`'s part of `total` slots divided over `items` items as evenly as it goes (the
/// parts add up to `total`).
pub fn slot_item_cap(total: u32, items: u32, item: u32) -> u32 {
    let items = items.max(1);
    total / items + u32::from(item < total % items)
}

/// The items that share a window of `window` slots out of the `items` of the cap: all of
/// them once the window has a slot for each, else the first `window` (one slot each), so
/// that even a small window's takes are spread over as many keys as it has slots.
pub fn active_slot_items(window: u32, items: u32) -> u32 {
    window.clamp(1, items.max(1))
}

/// What slot item `item` may hold while the window is `window` under the cap `cap`: its part
/// of the window divided over the cap's items (the parts add up to the window). A part never
/// exceeds the item's part of the cap, however the window moves, so no item holds more than
/// that and the endpoint never sees more than `cap` at once.
pub fn slot_item_share(window: u32, cap: u32, item: u32) -> u32 {
    slot_item_cap(window.min(cap), slot_items(cap), item)
}

/// The slot items a delivery tries, in order, among the `active` ones: the one its id's
/// stable hash names, then the next (a full item does not send a delivery to the backlog
/// while its neighbour has room).
pub fn slot_item_choices(hash: u32, active: u32) -> Vec<u32> {
    let active = active.max(1);
    let first = hash % active;
    if active == 1 {
        vec![first]
    } else {
        vec![first, (first + 1) % active]
    }
}

/// The window a channel starts with (and returns to after a long quiet): small, so that a
/// channel that is dead from the start sends as few requests as possible into the void.
pub const INITIAL_WINDOW: u32 = 2;

/// Consecutive transient failures that count as congestion when nothing else says so: one
/// failing request (a 503, a refused connection) says nothing about the load the endpoint
/// takes, three in a row on one channel do.
pub const CONGESTION_FAILURES: u32 = 3;

/// What an attempt tells the window about its endpoint's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The endpoint took the delivery.
    Success,
    /// The endpoint is overloaded: the call timed out, or it answered 429 or asked to be
    /// retried later (`Retry-After`).
    Congestion,
    /// Some other transient failure.
    Failure,
    /// Nothing about the load (a permanent error, a hand-off to a client).
    Neutral,
}

/// The window after an attempt that ended with `signal`, `failures` being the channel's
/// consecutive transient failures counting this one. It grows by one per success (doubling
/// every round trip while the endpoint keeps up) and is halved only on evidence of
/// congestion: a timeout, a 429 or a `Retry-After`, or [`CONGESTION_FAILURES`] transient
/// failures in a row. A single failure leaves it as it is.
pub fn window_after(window: u32, cap: u32, signal: Signal, failures: u32) -> u32 {
    let w = match signal {
        Signal::Success => window.saturating_add(1),
        Signal::Congestion => window / 2,
        Signal::Failure if failures >= CONGESTION_FAILURES => window / 2,
        Signal::Failure | Signal::Neutral => window,
    };
    w.min(cap).max(1)
}

/// Whether a channel's deliveries go without window slots. An `auto` window that has grown to
/// its cap belongs to an endpoint that keeps up with what it is sent; while nothing waits in
/// its backlog, counting its deliveries one by one would cost two flow writes each and
/// decide nothing. Counting resumes as soon as the window shrinks (evidence of congestion)
/// or a backlog forms. A fixed `max_in_flight` is a promise to the endpoint and is always
/// counted.
pub fn uncounted(limit: MaxInFlight, window: u32, cap: u32, backlog_marked: bool) -> bool {
    limit == MaxInFlight::Auto && window >= cap && !backlog_marked
}

/// Whether an attempt takes its channel's next backlog row while its call runs, to run it as
/// soon as the call ends with the slot it hands on: only when there is a backlog to take from
/// (the mark), behind a closed breaker and a counted window, and only for a channel that has
/// not failed since its last success (a failing call may well end in a timeout, with the row
/// waiting leased for it).
pub fn takes_next_ahead(
    state: CircuitState,
    backlog_marked: bool,
    consecutive_failures: u32,
    counted: bool,
) -> bool {
    state == CircuitState::Closed && backlog_marked && consecutive_failures == 0 && counted
}

/// What the gate does with a claimed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The breaker is closed: attempt (window and rate limit permitting).
    Proceed,
    /// This delivery is the half-open probe: attempt.
    Probe,
    /// The breaker cooled down (or its probe is stuck): try to become the probe.
    ClaimProbe,
    /// Park the delivery.
    Park,
}

/// A channel's backlog mark (`backlog_at`: when a row last went into its backlog) tells the
/// feeders and the sweeper to look at the backlog. Setting it always writes the newest time,
/// so a feeder that found the backlog empty clears only the mark it saw, never a newer one.
/// A writer of a new backlog row may skip setting it when its view shows it set this
/// recently...
pub const BACKLOG_MARK_FRESH_MS: i64 = 2_000;
/// ...because a mark is never cleared before it is this old: the skipping writer's row is
/// readable in the backlog index (eventually consistent, well under a second) before anyone
/// may clear the mark it relied on.
pub const BACKLOG_MARK_CLEAR_AFTER_MS: i64 = 5_000;

/// Whether a writer of a new backlog row can rely on the mark its view shows.
pub fn backlog_mark_fresh(backlog_at: Option<i64>, now_ms: i64) -> bool {
    backlog_at.is_some_and(|at| now_ms - at <= BACKLOG_MARK_FRESH_MS)
}

/// Whether a feeder that found the backlog empty may clear a mark set at `backlog_at`.
pub fn backlog_mark_clearable(backlog_at: i64, now_ms: i64) -> bool {
    now_ms - backlog_at >= BACKLOG_MARK_CLEAR_AFTER_MS
}

/// How long a breaker that changed at `changed_at_ms` still cools down (0: cooled).
pub fn cooldown_left_ms(changed_at_ms: i64, cooldown_ms: u64, now_ms: i64) -> i64 {
    let cooled_at = changed_at_ms.saturating_add(i64::try_from(cooldown_ms).unwrap_or(i64::MAX));
    cooled_at.saturating_sub(now_ms).max(0)
}

/// The gate's decision for `delivery` given the channel's breaker.
pub fn gate(
    state: CircuitState,
    changed_at_ms: i64,
    probe: Option<&str>,
    delivery: &str,
    cooldown_ms: u64,
    now_ms: i64,
) -> Gate {
    let cooled = cooldown_left_ms(changed_at_ms, cooldown_ms, now_ms) == 0;
    match state {
        CircuitState::Closed => Gate::Proceed,
        CircuitState::Paused => Gate::Park,
        CircuitState::Open if cooled => Gate::ClaimProbe,
        CircuitState::Open => Gate::Park,
        CircuitState::HalfOpen if probe == Some(delivery) => Gate::Probe,
        // A probe stuck for longer than the cooldown (its runner died) can be taken over.
        CircuitState::HalfOpen if cooled => Gate::ClaimProbe,
        CircuitState::HalfOpen => Gate::Park,
    }
}

/// Whether `failures` consecutive transient failures open a closed breaker.
pub fn should_open(state: CircuitState, failures: u32, threshold: u32) -> bool {
    state == CircuitState::Closed && failures >= threshold
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_backlog_mark_is_relied_on_only_while_it_cannot_be_cleared() {
        let now = 1_000_000;
        assert!(backlog_mark_fresh(Some(now - BACKLOG_MARK_FRESH_MS), now));
        assert!(!backlog_mark_fresh(
            Some(now - BACKLOG_MARK_FRESH_MS - 1),
            now
        ));
        assert!(!backlog_mark_fresh(None, now));
        assert!(!backlog_mark_clearable(
            now - BACKLOG_MARK_CLEAR_AFTER_MS + 1,
            now
        ));
        assert!(backlog_mark_clearable(
            now - BACKLOG_MARK_CLEAR_AFTER_MS,
            now
        ));
        // A mark fresh enough to skip is not clearable for at least the difference.
        for age in 0..=BACKLOG_MARK_FRESH_MS {
            let at = now - age;
            assert!(backlog_mark_fresh(Some(at), now));
            assert!(!backlog_mark_clearable(
                at,
                now + BACKLOG_MARK_CLEAR_AFTER_MS - BACKLOG_MARK_FRESH_MS - 1
            ));
        }
    }

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn rate_tokens_are_taken_in_batches_that_grow_while_used_up_and_expire() {
        let five_k: RateLimit = "5000/s".parse().unwrap();
        assert_eq!(five_k.batch_most(), 100);
        assert_eq!("80/s".parse::<RateLimit>().unwrap().batch_most(), 8);
        assert_eq!("500/m".parse::<RateLimit>().unwrap().batch_most(), 1);
        let mut b = RateBatch::default();
        assert!(!b.take(0), "nothing held at first");
        assert_eq!(b.next_size(100), 1);
        b.filled(1, 0);
        assert!(!b.take(1), "the one token went to its request");
        assert_eq!(b.next_size(100), 2, "used up: doubles");
        b.filled(2, 10);
        assert!(b.take(11));
        assert_eq!(b.next_size(100), 4);
        b.filled(4, 20);
        assert!(b.take(21));
        assert!(!b.take(20 + RATE_BATCH_US), "expired tokens are dropped");
        assert_eq!(
            b.next_size(100),
            2,
            "what was used of a batch with tokens dropped"
        );
        assert_eq!(b.next_size(1), 1, "never above the most");
        // A schedule that refused a batch says how many fit now.
        let limit: RateLimit = "10/s".parse().unwrap();
        let tat = 1_000_000 + 950_000; // 9.5 intervals ahead: half a token of room
        let retry = limit.decide_n(Some(tat), 1_000_000, 5).unwrap_err();
        assert_eq!(limit.fit_now(retry, 5, 1_000_000), 0);
        let retry = limit
            .decide_n(Some(1_000_000 + 500_000), 1_000_000, 8)
            .unwrap_err();
        assert_eq!(limit.fit_now(retry, 8, 1_000_000), 5);
        assert!(
            limit
                .decide_n(Some(1_000_000 + 500_000), 1_000_000, 5)
                .is_ok()
        );
        assert!(
            limit
                .decide_n(Some(1_000_000 + 500_000), 1_000_000, 6)
                .is_err()
        );
        b.refused(5);
        assert_eq!(b.next_size(100), 5, "the next batch starts at what fit");
        // Two batches taken at once by two requests: the second adds to the first.
        b.filled(3, 1_000_000);
        b.filled(3, 1_000_001);
        assert!((0..4).all(|i| b.take(1_000_002 + i)));
        assert!(!b.take(1_000_010));
    }

    #[test]
    fn a_small_window_is_one_item_and_a_large_one_is_split_into_items_of_eight() {
        assert_eq!(slot_items(1), 1);
        assert_eq!(slot_items(SINGLE_ITEM_WINDOW), 1);
        assert_eq!(slot_items(SINGLE_ITEM_WINDOW + 1), 3);
        assert_eq!(slot_items(2000), 250);
        assert_eq!(active_slot_items(2, 250), 2);
        assert_eq!(active_slot_items(2000, 250), 250);
        assert_eq!(slot_item_share(20, 2000, 19), 1);
        assert_eq!(slot_item_share(20, 2000, 20), 0);
        assert_eq!(slot_item_share(300, 2000, 49), 2);
        assert_eq!(slot_item_share(300, 2000, 50), 1);
        assert_eq!(slot_item_choices(7, 1), vec![0]);
        assert_eq!(slot_item_choices(7, 5), vec![2, 3]);
        assert_eq!(slot_item_choices(9, 5), vec![4, 0]);
    }

    proptest! {
        #[test]
        fn the_items_shares_stay_within_the_window_and_their_part_of_the_cap(
            cap in 1u32..=10_000,
            window_part in 0.0f64..=1.0,
        ) {
            let items = slot_items(cap);
            let window = ((f64::from(cap) * window_part).round() as u32).clamp(1, cap);
            let shares: Vec<u32> = (0..items).map(|i| slot_item_share(window, cap, i)).collect();
            prop_assert_eq!(shares.iter().sum::<u32>(), window);
            let most = if items == 1 { SINGLE_ITEM_WINDOW } else { SLOTS_PER_ITEM };
            for (i, share) in shares.iter().enumerate() {
                prop_assert!(*share <= slot_item_share(cap, cap, i as u32));
                prop_assert!(slot_item_cap(cap, items, i as u32) <= most);
                prop_assert_eq!(*share >= 1, (i as u32) < active_slot_items(window, items));
            }
            // The whole cap is shared out at the cap.
            let full: u32 = (0..items).map(|i| slot_item_share(cap, cap, i)).sum();
            prop_assert_eq!(full, cap);
        }

        #[test]
        fn a_delivery_tries_items_of_the_window(hash in any::<u32>(), items in 1u32..=1250) {
            let c = slot_item_choices(hash, items);
            prop_assert!(c.iter().all(|i| *i < items));
            prop_assert_eq!(c.len(), if items == 1 { 1 } else { 2 });
        }
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn defaults_are_the_references() {
        let c = BreakerConfig::default();
        assert_eq!(c.failure_threshold, 5);
        assert_eq!(c.cooldown_ms, 30_000);
        assert_eq!(c.park_seconds, 600);
        assert_eq!(c.max_in_flight, MaxInFlight::Auto);
        assert!(!c.replay_dead_letters_on_close);
        assert_eq!(c.replay_window_ms, 3_600_000);
    }

    #[test]
    fn overrides_apply_and_bad_ones_are_refused() {
        let c = BreakerConfig::from_overrides(&map(
            json!({"failure_threshold": 3, "max_in_flight": 2, "cooldown_ms": 5000}),
        ))
        .unwrap();
        assert_eq!((c.failure_threshold, c.cooldown_ms), (3, 5000));
        assert_eq!(c.max_in_flight, MaxInFlight::Fixed(2));
        let c = BreakerConfig::from_overrides(&map(json!({"max_in_flight": null}))).unwrap();
        assert_eq!(c.max_in_flight.resolve(Tier::Default), None);
        for bad in [
            json!({"failure_threshold": 0}),
            json!({"max_in_flight": "lots"}),
            json!({"max_in_flight": 0}),
            json!({"cooldown_ms": -1}),
            json!({"busy": true}),
            json!({"replay_dead_letters_on_close": "yes"}),
        ] {
            assert!(BreakerConfig::validate(&map(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn auto_is_half_the_tier() {
        assert_eq!(MaxInFlight::Auto.resolve(Tier::Default), Some(10));
        assert_eq!(MaxInFlight::Auto.resolve(Tier::High), Some(5));
        assert_eq!(MaxInFlight::Auto.resolve(Tier::Bulk), Some(2));
        assert_eq!(MaxInFlight::Fixed(7).resolve(Tier::Bulk), Some(7));
    }

    #[test]
    fn rate_limits_parse_and_print() {
        for (s, count, per) in [
            ("80/s", 80, 1000),
            ("500/m", 500, 60_000),
            ("7/h", 7, 3_600_000),
        ] {
            let r: RateLimit = s.parse().unwrap();
            assert_eq!((r.count, r.per_ms), (count, per));
            assert_eq!(r.to_string(), s);
        }
        for bad in ["", "80", "0/s", "x/s", "5/d", "-1/s"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_burst_of_count_then_one_per_interval() {
        let r: RateLimit = "5/s".parse().unwrap();
        assert_eq!((r.interval_us(), r.tolerance_us()), (200_000, 800_000));
        // Five at once, the sixth 200 ms later, and so on.
        let mut tat = None;
        for _ in 0..5 {
            tat = Some(r.decide(tat, 0).unwrap());
        }
        assert_eq!(r.decide(tat, 0), Err(200_000));
        assert_eq!(r.decide(tat, 199_999), Err(200_000));
        let tat = r.decide(tat, 200_000).unwrap();
        assert_eq!(tat, 1_200_000);
        // An idle channel does not bank credit beyond the burst.
        assert_eq!(r.decide(Some(0), 60_000_000), Ok(60_200_000));
        assert_eq!(RateLimit::snooze_s(200_000, 0), 1);
        assert_eq!(RateLimit::snooze_s(2_000_001, 0), 3);
        assert_eq!("80/s".parse::<RateLimit>().unwrap().interval_us(), 12_500);
    }

    #[test]
    fn one_failure_is_not_congestion_but_a_timeout_or_a_run_of_them_is() {
        assert_eq!(window_after(8, 10, Signal::Failure, 1), 8);
        assert_eq!(window_after(8, 10, Signal::Failure, 2), 8);
        assert_eq!(window_after(8, 10, Signal::Failure, CONGESTION_FAILURES), 4);
        assert_eq!(window_after(8, 10, Signal::Congestion, 1), 4);
        assert_eq!(window_after(8, 10, Signal::Neutral, 9), 8);
        assert_eq!(window_after(8, 10, Signal::Success, 0), 9);
        assert_eq!(window_after(10, 10, Signal::Success, 0), 10);
        assert_eq!(window_after(1, 10, Signal::Congestion, 1), 1);
    }

    #[test]
    fn only_a_healthy_counted_backlogged_channel_takes_its_next_row_ahead() {
        assert!(takes_next_ahead(CircuitState::Closed, true, 0, true));
        assert!(!takes_next_ahead(CircuitState::Closed, false, 0, true));
        assert!(!takes_next_ahead(CircuitState::Closed, true, 1, true));
        assert!(!takes_next_ahead(CircuitState::Closed, true, 0, false));
        assert!(!takes_next_ahead(CircuitState::HalfOpen, true, 0, true));
    }

    #[test]
    fn only_an_auto_window_at_its_cap_without_a_backlog_goes_uncounted() {
        assert!(uncounted(MaxInFlight::Auto, 10, 10, false));
        assert!(!uncounted(MaxInFlight::Auto, 9, 10, false));
        assert!(!uncounted(MaxInFlight::Auto, 10, 10, true));
        assert!(!uncounted(MaxInFlight::Fixed(10), 10, 10, false));
        assert!(!uncounted(MaxInFlight::Unbounded, 10, 10, false));
    }

    #[test]
    fn gate_decisions() {
        use CircuitState::*;
        assert_eq!(gate(Closed, 0, None, "d", 1000, 5), Gate::Proceed);
        assert_eq!(gate(Paused, 0, None, "d", 1000, 99_999), Gate::Park);
        assert_eq!(gate(Open, 0, None, "d", 1000, 999), Gate::Park);
        assert_eq!(gate(Open, 0, None, "d", 1000, 1000), Gate::ClaimProbe);
        assert_eq!(gate(HalfOpen, 0, Some("d"), "d", 1000, 1), Gate::Probe);
        assert_eq!(gate(HalfOpen, 0, Some("p"), "d", 1000, 999), Gate::Park);
        assert_eq!(
            gate(HalfOpen, 0, Some("p"), "d", 1000, 1000),
            Gate::ClaimProbe
        );
    }

    #[test]
    fn only_a_closed_breaker_opens_and_at_the_threshold() {
        assert!(!should_open(CircuitState::Closed, 4, 5));
        assert!(should_open(CircuitState::Closed, 5, 5));
        assert!(!should_open(CircuitState::Open, 9, 5));
        assert!(!should_open(CircuitState::Paused, 9, 5));
    }

    proptest! {
        #[test]
        fn window_stays_within_one_and_the_cap(w in 0u32..2000, cap in 1u32..1000, f in 0u32..10) {
            for signal in [Signal::Success, Signal::Congestion, Signal::Failure, Signal::Neutral] {
                let next = window_after(w, cap, signal, f);
                prop_assert!((1..=cap).contains(&next));
            }
            let g = window_after(w, cap, Signal::Success, 0);
            prop_assert!(g >= 1 && g <= cap);
            let s = window_after(w, cap, Signal::Congestion, 0);
            prop_assert!(s >= 1 && s <= w.max(1));
        }

        #[test]
        fn no_window_of_the_period_admits_more_than_count_plus_burst(
            count in 1u32..50,
            gaps in prop::collection::vec(0i64..400_000, 1..200),
        ) {
            // Requests at arbitrary times: within any one period, at most 2 x count pass
            // (a full burst plus a period's worth at the sustained rate).
            let r = RateLimit { count, per_ms: 1000 };
            let mut now = 0i64;
            let mut tat = None;
            let mut passed = Vec::new();
            for g in gaps {
                now += g;
                if let Ok(t) = r.decide(tat, now) {
                    tat = Some(t);
                    passed.push(now);
                }
            }
            for (i, t0) in passed.iter().enumerate() {
                let n = passed[i..].iter().take_while(|t| **t - t0 < 1_000_000).count();
                prop_assert!(n as u32 <= 2 * count, "{n} within a second at {count}/s");
            }
        }
    }
}
