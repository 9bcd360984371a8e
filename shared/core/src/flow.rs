//! Flow control rules: the circuit breaker, the per-channel window (in-flight cap), rate limits.
//!
//! The breaker and the window live on a channel's flow item; this module decides, the store
//! applies the decision with one conditional write.

use crate::Invalid;

use crate::channel::{Tier, TierConcurrency};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

mod rate;
mod slots;
mod tenant;
pub use rate::*;
pub use slots::*;
pub use tenant::*;

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
    /// Half of the tier's concurrency, counted only while it matters.
    #[default]
    Auto,
    /// No cap of the channel's own (`null`): the platform's bound, [`tier_share`], always
    /// counted, so that a channel to a slow endpoint never holds more than its share of the
    /// consumers its tier's tenants share.
    Unbounded,
    Fixed(u32),
}

impl MaxInFlight {
    /// The cap for a delivery of `tier` (`None` never comes back now that an unbounded
    /// channel has the platform's bound; kept for the callers' shape): a fixed cap is held
    /// to [`tier_share`] as well.
    pub fn resolve(self, tier: Tier, consumers: TierConcurrency) -> Option<u32> {
        match self {
            Self::Auto => Some(u32::try_from(consumers.of(tier) / 2).unwrap_or(1).max(1)),
            Self::Unbounded => Some(tier_share(tier, consumers)),
            // A channel's own cap is within the platform's bound too: no channel holds more
            // than its share of the consumers its tier's tenants share.
            Self::Fixed(n) => Some(n.clamp(1, tier_share(tier, consumers))),
        }
    }

    fn to_json(self) -> Value {
        match self {
            Self::Auto => Value::from("auto"),
            Self::Unbounded => Value::Null,
            Self::Fixed(n) => Value::from(n),
        }
    }

    fn from_json(v: &Value) -> Result<Self, Invalid> {
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

/// Records one consumer of a tier's queue holds at once: the deliver function's SQS batch
/// size in the template (its records run concurrently).
pub const DELIVERY_BATCH_SIZE: usize = 10;

/// The most deliveries a channel without a cap of its own (`max_in_flight: null`) has in
/// flight at once: half of what its tier's consumers hold together (its concurrency times
/// [`DELIVERY_BATCH_SIZE`]: high 50, default 100, bulk 25 at the local stack's concurrency).
/// The tier's queue is shared by
/// all its tenants; an SQS fair queue serves a quiet tenant's messages first, but cannot free
/// a consumer that a slow call holds, so without a bound one slow channel would hold every
/// consumer of its tier and its neighbours would wait behind its calls.
pub fn tier_share(tier: Tier, consumers: TierConcurrency) -> u32 {
    u32::try_from(consumers.of(tier) * DELIVERY_BATCH_SIZE / 2)
        .unwrap_or(u32::MAX)
        .max(1)
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

/// A channel's own breaker and window settings (its `circuit_breaker` object), `None` where
/// the default holds. Stored and shown as that object; reading one checks every value
/// (unknown keys and values out of range are refused), so overrides in hand are valid and
/// [`Self::effective`] parses nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", into = "Map<String, Value>")]
pub struct BreakerOverrides {
    pub failure_threshold: Option<u32>,
    pub cooldown_ms: Option<u64>,
    pub park_seconds: Option<u64>,
    pub max_in_flight: Option<MaxInFlight>,
    pub replay_dead_letters_on_close: Option<bool>,
    pub replay_window_ms: Option<u64>,
}

impl BreakerOverrides {
    /// Reads a channel's `circuit_breaker` object.
    pub fn parse(overrides: &Map<String, Value>) -> Result<Self, Invalid> {
        let mut o = Self::default();
        for (k, v) in overrides {
            let int = |lo: u64, hi: u64| -> Result<u64, Invalid> {
                v.as_u64()
                    .filter(|n| (lo..=hi).contains(n))
                    .ok_or_else(|| Invalid(format!("{k} must be an integer from {lo} to {hi}")))
            };
            match k.as_str() {
                "failure_threshold" => o.failure_threshold = Some(int(1, 1000)? as u32),
                "cooldown_ms" => o.cooldown_ms = Some(int(1000, 86_400_000)?),
                "park_seconds" => o.park_seconds = Some(int(1, 86_400)?),
                "max_in_flight" => o.max_in_flight = Some(MaxInFlight::from_json(v)?),
                "replay_dead_letters_on_close" => {
                    o.replay_dead_letters_on_close = Some(
                        v.as_bool()
                            .ok_or("replay_dead_letters_on_close must be a boolean")?,
                    )
                }
                "replay_window_ms" => o.replay_window_ms = Some(int(1000, 30 * 86_400_000)?),
                other => {
                    return Err(Invalid(format!(
                        "unknown circuit_breaker setting {other:?} (known: {})",
                        KEYS.join(", ")
                    )));
                }
            }
        }
        Ok(o)
    }

    /// Whether it sets nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The defaults with these overrides applied.
    pub fn effective(&self) -> BreakerConfig {
        let d = BreakerConfig::default();
        BreakerConfig {
            failure_threshold: self.failure_threshold.unwrap_or(d.failure_threshold),
            cooldown_ms: self.cooldown_ms.unwrap_or(d.cooldown_ms),
            park_seconds: self.park_seconds.unwrap_or(d.park_seconds),
            max_in_flight: self.max_in_flight.unwrap_or(d.max_in_flight),
            replay_dead_letters_on_close: self
                .replay_dead_letters_on_close
                .unwrap_or(d.replay_dead_letters_on_close),
            replay_window_ms: self.replay_window_ms.unwrap_or(d.replay_window_ms),
        }
    }

    /// As it is stored: the keys it sets.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("failure_threshold", self.failure_threshold.map(Value::from));
        put("cooldown_ms", self.cooldown_ms.map(Value::from));
        put("park_seconds", self.park_seconds.map(Value::from));
        put(
            "max_in_flight",
            self.max_in_flight.map(MaxInFlight::to_json),
        );
        put(
            "replay_dead_letters_on_close",
            self.replay_dead_letters_on_close.map(Value::from),
        );
        put("replay_window_ms", self.replay_window_ms.map(Value::from));
        m
    }
}

impl TryFrom<Map<String, Value>> for BreakerOverrides {
    type Error = Invalid;

    fn try_from(map: Map<String, Value>) -> Result<Self, Invalid> {
        Self::parse(&map)
    }
}

impl From<BreakerOverrides> for Map<String, Value> {
    fn from(o: BreakerOverrides) -> Self {
        o.to_map()
    }
}

impl BreakerConfig {
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
        let c = BreakerOverrides::parse(&map(
            json!({"failure_threshold": 3, "max_in_flight": 2, "cooldown_ms": 5000}),
        ))
        .unwrap()
        .effective();
        assert_eq!((c.failure_threshold, c.cooldown_ms), (3, 5000));
        assert_eq!(c.max_in_flight, MaxInFlight::Fixed(2));
        let o = BreakerOverrides::parse(&map(json!({"max_in_flight": null}))).unwrap();
        assert_eq!(
            serde_json::to_value(o).unwrap(),
            json!({"max_in_flight": null})
        );
        let c = o.effective();
        assert_eq!(c.max_in_flight, MaxInFlight::Unbounded);
        for bad in [
            json!({"failure_threshold": 0}),
            json!({"max_in_flight": "lots"}),
            json!({"max_in_flight": 0}),
            json!({"cooldown_ms": -1}),
            json!({"busy": true}),
            json!({"replay_dead_letters_on_close": "yes"}),
        ] {
            assert!(BreakerOverrides::parse(&map(bad.clone())).is_err(), "{bad}");
            assert!(
                serde_json::from_value::<BreakerOverrides>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn auto_is_half_the_tier() {
        let c = TierConcurrency::default();
        assert_eq!(MaxInFlight::Auto.resolve(Tier::Default, c), Some(10));
        assert_eq!(MaxInFlight::Auto.resolve(Tier::High, c), Some(5));
        assert_eq!(MaxInFlight::Auto.resolve(Tier::Bulk, c), Some(2));
        assert_eq!(MaxInFlight::Fixed(7).resolve(Tier::Bulk, c), Some(7));
        let big = TierConcurrency::parse("default=200").unwrap();
        assert_eq!(MaxInFlight::Auto.resolve(Tier::Default, big), Some(100));
        assert_eq!(MaxInFlight::Auto.resolve(Tier::High, big), Some(5));
    }

    #[test]
    fn tier_concurrency_reads_each_tier_once_within_lambdas_bounds() {
        let c = TierConcurrency::parse(" high=100, bulk=50 ").unwrap();
        assert_eq!((c.high, c.default, c.bulk), (100, 20, 50));
        assert_eq!(
            TierConcurrency::parse("").unwrap(),
            TierConcurrency::default()
        );
        for bad in [
            "high=1",
            "default=1001",
            "high=10,high=20",
            "gold=10",
            "high",
            "high=x",
        ] {
            assert!(TierConcurrency::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_cap_of_its_own_is_half_of_what_the_tiers_consumers_hold() {
        // The local stack's tiers: 10, 20 and 5 concurrent batches of 10 records.
        let c = TierConcurrency::default();
        assert_eq!(MaxInFlight::Unbounded.resolve(Tier::High, c), Some(50));
        assert_eq!(MaxInFlight::Unbounded.resolve(Tier::Default, c), Some(100));
        assert_eq!(MaxInFlight::Unbounded.resolve(Tier::Bulk, c), Some(25));
        // A cap of the channel's own is held to the same bound: a fixed 10,000 does not take
        // a tier's consumers.
        assert_eq!(
            MaxInFlight::Fixed(10_000).resolve(Tier::Default, c),
            Some(100)
        );
        assert_eq!(MaxInFlight::Fixed(10_000).resolve(Tier::Bulk, c), Some(25));
        assert_eq!(MaxInFlight::Fixed(30).resolve(Tier::Default, c), Some(30));
        for c in [
            c,
            TierConcurrency::parse("high=100,default=200,bulk=50").unwrap(),
        ] {
            for t in Tier::ALL {
                let consumers = c.of(t) * DELIVERY_BATCH_SIZE;
                assert!(tier_share(t, c) as usize * 2 <= consumers);
            }
        }
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

    }
}
