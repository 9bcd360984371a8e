//! Retry policy: the five fields, their defaults, the three-layer merge, validation and the
//! backoff formulas.
//!
//! Layers, later ones winning: global configuration, the adapter's defaults, the channel's own
//! override. Each layer is a [`PolicyLayer`], parsed and checked once: the deployment's when
//! the function starts (a bad value stops it, naming `RETRY_POLICY`), a channel's when it is
//! written (a bad value is refused with every problem named), an adapter's in code. The merge
//! has nothing left to check.

mod layer;
pub use layer::{PolicyError, PolicyErrors, PolicyLayer};

use crate::error::Failure;
use serde::{Deserialize, Serialize};

/// The keys a policy layer may contain: the reference's five, plus three extensions
/// (`schedule`, `jitter`, `retry_after_max_ms`).
pub const KEYS: [&str; 8] = [
    "max_attempts",
    "backoff",
    "base_ms",
    "max_ms",
    "timeout_ms",
    "schedule",
    "jitter",
    "retry_after_max_ms",
];

/// The longest wait a provider's `Retry-After` may ask for by default: 24 hours. The
/// reference honours any value; a receiver answering `Retry-After: 315360000` would park a
/// delivery for ten years, so the wait is capped (`retry_after_max_ms` changes the cap).
pub const RETRY_AFTER_MAX_MS: u64 = 86_400_000;

fn default_retry_after_max_ms() -> u64 {
    RETRY_AFTER_MAX_MS
}

/// Longest explicit schedule.
pub const MAX_SCHEDULE_LEN: usize = 100;

/// Most attempts a policy may allow: a safety cap far above any sane policy (the reference's
/// workers stop at 100 too).
pub const MAX_ATTEMPTS_LIMIT: u32 = 100;

/// Longest delay a policy may name (`base_ms`, `max_ms`, a `schedule` step,
/// `retry_after_max_ms`): a week, past which a retry outlives most retention periods.
pub const MAX_DELAY_MS: u64 = 7 * 86_400_000;

/// The longest request an adapter makes: a policy's `timeout_ms` above it is cut to it.
pub const ADAPTER_TIMEOUT_MAX_MS: u64 = 30_000;

/// How long past its own timeout an adapter call may run before the attempt gives up on it.
pub const CALL_GRACE_MS: u64 = 5_000;

/// How long one lease slice lasts by default (`LEASE_SECONDS`). An attempt's lease is short
/// and renewed while its call runs, so a crashed attempt's delivery is free again within one
/// slice, however long the channel's timeout.
pub const LEASE_SLICE_MS: i64 = 8_000;

/// Whether a lease ending at `lease_until` should be renewed at `now_ms`: once less than half
/// of a `slice_ms` slice is left (a call that ends sooner costs no renewal).
pub fn lease_renewal_due(lease_until: i64, now_ms: i64, slice_ms: i64) -> bool {
    lease_until.saturating_sub(now_ms) < slice_ms / 2
}

/// How many times a delivery message whose attempt found storage unreachable comes back
/// early before it is left to the queue's own redelivery (and dead-letter queue).
pub const MAX_BOUNCES: u32 = 30;

/// How long a message waits before its `bounces`-th early return: 1, 2, 4 ... 60 s.
pub fn bounce_delay_s(bounces: u32) -> u32 {
    1u32.checked_shl(bounces).unwrap_or(u32::MAX).min(60)
}

/// A finishing attempt hands its window slot to the next row of its channel's backlog and
/// runs that row itself, in the same invocation, instead of through the queue (a send and a
/// receive saved per hand-off, so a backlog keeps the window full) while its invocation has
/// run less than this. With the longest call ([`ADAPTER_TIMEOUT_MAX_MS`] and
/// [`CALL_GRACE_MS`]) the invocation ends within 50 s, under the deliver function's 60 s
/// timeout; a chain also yields its worker to the tier's other messages this often.
pub const CHAIN_BUDGET_MS: u64 = 15_000;

/// How long a delivery message sent beside its row's write (not after it) may wait for the
/// row: the write's own deadline (30 s) with room. A row that lands later still is enqueued
/// by the sweeper; a message whose row never lands (the write failed, and the producer was
/// told) is dropped after it.
pub const ROW_WAIT_MS: i64 = 60_000;

/// How long after a first try's message (or a retry's that rides its messages,
/// [`retry_rides_messages`]) its watch copy comes by default (SQS `DelaySeconds`;
/// `WATCH_DELAY_SECONDS`). Such an attempt is in no due index: if the attempt that took it
/// dies, the watch message finds its row unclaimed (or its lease ended) and attempts it, so
/// it is attempted again within about this time plus a lease slice. A row it finds settled,
/// waiting for a later retry, or in an index is left alone.
pub const WATCH_DELAY_S: u32 = 15;

/// Most client connections one websocket channel has open at once: each is a place a
/// delivery may be pushed to, and the channel's token is often shipped to many devices, so
/// one channel must not hold the API's connections (or its tenant's pushes) for everyone.
/// Counted at `$connect` (live records only: expired ones are passed over), so connections made at
/// the same instant may pass it by a few.
pub const MAX_CHANNEL_CONNECTIONS: usize = 100;

/// The most channels a tenant keeps (deleted ones aside): a tenant's channel listing shows
/// this many, and each of its channels with a backlog keeps at least one slot of its tier's
/// share (ADR 0092), so the floor of a tenant's busy channels stays within the default tier's
/// share at the template's defaults (1,000).
pub const MAX_CHANNELS_PER_TENANT: usize = 1_000;

/// The shortest time between two replays of one websocket channel (whichever of its clients
/// asks): clients that send replay frames in a loop push each waiting delivery once per
/// interval, not once a frame.
pub const SOCKET_REPLAY_INTERVAL_MS: i64 = 2_000;

/// How long a replay holds its channel's turn while it runs: the next may begin an interval
/// after it ends (`end_replay`), or after this and an interval if its instance died. One
/// replay at a time on a channel, whichever client asks and instance each frame reaches.
pub const SOCKET_REPLAY_RUN_MS: i64 = 30_000;

/// How long one replay pushes before it stops and says there is `more`: under the
/// websocket function's 29 s (API Gateway's integration timeout), whatever the channel's
/// middleware and the pushes take.
pub const SOCKET_REPLAY_BUDGET_MS: i64 = 20_000;

/// Whether a replay that began at `began_ms` and has tried `tried` deliveries tries another at
/// `now_ms`: the first always (a replay moves on even when one push takes the whole budget),
/// the rest within [`SOCKET_REPLAY_BUDGET_MS`].
pub fn socket_replay_goes_on(began_ms: i64, now_ms: i64, tried: usize) -> bool {
    tried == 0 || now_ms.saturating_sub(began_ms) < SOCKET_REPLAY_BUDGET_MS
}

/// How long a channel whose last replay began (or ended) at `last` waits at `now_ms` before
/// another may begin (at most the interval); `None` when it may now. Both backends apply it
/// (DynamoDB as the update's condition).
pub fn socket_replay_wait_ms(last: Option<i64>, now_ms: i64) -> Option<i64> {
    let until = last?.saturating_add(SOCKET_REPLAY_INTERVAL_MS);
    (until > now_ms).then(|| (until - now_ms).min(SOCKET_REPLAY_INTERVAL_MS))
}

/// When a watch message that found a live lease looks again: after one lease slice and a
/// second, by when the lease has been renewed (the attempt lives) or has ended (it died).
pub fn watch_again_s(lease_ms: i64) -> u32 {
    u32::try_from(lease_ms.max(0) / 1000 + 1)
        .unwrap_or(MAX_QUEUE_DELAY_S)
        .clamp(1, MAX_QUEUE_DELAY_S)
}

/// What a message that found no row does while it may still wait: `Some(ms)` to look again
/// after an in-process pause (the row's write is usually a few milliseconds behind: 25, 100
/// and 400 ms), `None` to be sent again with a one-second delay, after `looks` looks so far.
/// Few looks, spread out, so that a slow table is not also flooded with them.
pub fn row_wait(looks: u32) -> Option<u64> {
    match looks {
        0..=2 => Some(25u64 << (2 * looks)),
        _ => None,
    }
}

/// When a lease ending at `lease_until` is next renewed: halfway through its last slice.
pub fn lease_renewal_at(lease_until: i64, slice_ms: i64) -> i64 {
    lease_until.saturating_sub(slice_ms / 2)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    Exponential,
    Linear,
    Fixed,
}

impl Backoff {
    fn name(self) -> &'static str {
        match self {
            Self::Exponential => "exponential",
            Self::Linear => "linear",
            Self::Fixed => "fixed",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "exponential" => Some(Self::Exponential),
            "linear" => Some(Self::Linear),
            "fixed" => Some(Self::Fixed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts before the delivery is dead-lettered.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// Backoff base in milliseconds.
    pub base_ms: u64,
    /// Cap on the computed backoff (not on a provider's Retry-After).
    pub max_ms: u64,
    /// Adapter request timeout.
    pub timeout_ms: u64,
    /// Extension: explicit delays in ms, the n-th used after attempt n, the last repeating.
    /// Replaces `backoff`/`base_ms`; used as given (not capped by `max_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Vec<u64>>,
    /// Extension: random spread of each policy delay, as a fraction (0.1 = +-10%).
    #[serde(default)]
    pub jitter: f64,
    /// Extension: cap on a provider's Retry-After ([`RETRY_AFTER_MAX_MS`] by default).
    #[serde(default = "default_retry_after_max_ms")]
    pub retry_after_max_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            backoff: Backoff::Exponential,
            base_ms: 10_000,
            max_ms: 3_600_000,
            timeout_ms: 15_000,
            schedule: None,
            jitter: 0.0,
            retry_after_max_ms: RETRY_AFTER_MAX_MS,
        }
    }
}

/// What happens after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Attempt again after this many milliseconds.
    RetryIn(u64),
    /// Dead-letter: permanent error or retries exhausted.
    Dead,
}

impl RetryPolicy {
    /// Applies one layer on top of `self`.
    pub fn with_layer(mut self, layer: &PolicyLayer) -> Self {
        let l = layer;
        self.max_attempts = l.max_attempts.unwrap_or(self.max_attempts);
        self.backoff = l.backoff.unwrap_or(self.backoff);
        self.base_ms = l.base_ms.unwrap_or(self.base_ms);
        self.max_ms = l.max_ms.unwrap_or(self.max_ms);
        self.timeout_ms = l.timeout_ms.unwrap_or(self.timeout_ms);
        if let Some(s) = &l.schedule {
            self.schedule = Some(s.clone());
        }
        self.jitter = l.jitter.unwrap_or(self.jitter);
        self.retry_after_max_ms = l.retry_after_max_ms.unwrap_or(self.retry_after_max_ms);
        self
    }

    /// The effective policy: defaults, then configuration, adapter and channel layers.
    pub fn effective(config: &PolicyLayer, adapter: &PolicyLayer, channel: &PolicyLayer) -> Self {
        Self::default()
            .with_layer(config)
            .with_layer(adapter)
            .with_layer(channel)
    }

    /// The computed backoff before the retry that follows attempt `n` (1-based), in
    /// milliseconds, before rounding.
    pub fn raw_backoff_ms(&self, n: u32) -> u64 {
        if let Some(schedule) = self.schedule.as_deref().filter(|s| !s.is_empty()) {
            let i = usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX);
            return schedule[i.min(schedule.len() - 1)];
        }
        let raw = match self.backoff {
            Backoff::Exponential => self.base_ms.saturating_mul(3u64.saturating_pow(n)),
            Backoff::Linear => self.base_ms.saturating_mul(u64::from(n)),
            Backoff::Fixed => self.base_ms,
        };
        raw.min(self.max_ms)
    }

    /// The delay before the retry that follows attempt `n`, in whole seconds (at least one),
    /// expressed in milliseconds, before jitter.
    pub fn backoff_ms(&self, n: u32) -> u64 {
        (self.raw_backoff_ms(n) / 1000).max(1) * 1000
    }

    /// [`Self::backoff_ms`] spread by `jitter`: `u` is a uniform random number in [0, 1) that
    /// picks the point in `[d * (1 - jitter), d * (1 + jitter)]`. At least one second.
    pub fn jittered_backoff_ms(&self, n: u32, u: f64) -> u64 {
        let d = self.backoff_ms(n);
        if self.jitter <= 0.0 {
            return d;
        }
        let factor = 1.0 + self.jitter * (2.0 * u.clamp(0.0, 1.0) - 1.0);
        // Delays are far below 2^53 ms, so the float round trip is exact enough.
        ((d as f64 * factor).round() as u64).max(1000)
    }

    /// The delay before the next attempt after attempt `n` failed as `f` says: the provider's
    /// Retry-After when it gave one (capped by `retry_after_max_ms`, not by `max_ms`, not
    /// jittered), else the policy's backoff with its jitter (`u` in [0, 1)).
    pub fn retry_delay_ms(&self, n: u32, f: &Failure, u: f64) -> u64 {
        match f.retry_after_ms {
            // Whole seconds, rounded up so a retry never comes before the provider asked.
            Some(ms) => ms
                .min(self.retry_after_max_ms)
                .div_ceil(1000)
                .max(1)
                .saturating_mul(1000),
            None => self.jittered_backoff_ms(n, u),
        }
    }

    /// Decides what follows attempt `n` (1-based, counting this one) that failed as `f` says.
    pub fn next_after_failure(&self, n: u32, f: &Failure, u: f64) -> Next {
        if !f.retryable || n >= self.max_attempts {
            Next::Dead
        } else {
            Next::RetryIn(self.retry_delay_ms(n, f, u))
        }
    }
}

/// SQS's longest message delay (`DelaySeconds`).
pub const MAX_QUEUE_DELAY_S: u32 = 900;

/// Whether a retry sent `delay_s` ahead rides its messages (ADR 0094): its message and its
/// watch copy, `watch_s` after it, both reach their times in one hop (`ceiling`, at most
/// SQS's 900 s). Then it needs no due-index entry: if the attempt that takes it dies, the
/// watch copy attempts it, as it does for a first try. A longer retry waits in the due
/// index, where the sweep finds it.
pub fn retry_rides_messages(delay_s: u32, watch_s: u32, ceiling: u32) -> bool {
    delay_s.saturating_add(watch_s) <= ceiling.min(MAX_QUEUE_DELAY_S)
}

/// The queue delay, in whole seconds, of a message that must not run before `at_ms`: rounded
/// up (never early), at least 1 s, at most `ceiling` (SQS allows 900). A longer wait is made
/// of several such hops.
pub fn hop_delay_s(at_ms: i64, now_ms: i64, ceiling: u32) -> u32 {
    let ms = u64::try_from(at_ms.saturating_sub(now_ms)).unwrap_or(0);
    u32::try_from(ms.div_ceil(1000))
        .unwrap_or(u32::MAX)
        .clamp(1, ceiling.max(1))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_retry_rides_its_messages_only_when_both_fit_one_hop() {
        // The default schedule's longest step (810 s) and the watch copy 15 s after it.
        assert!(retry_rides_messages(810, 15, 900));
        assert!(retry_rides_messages(885, 15, 900));
        assert!(!retry_rides_messages(886, 15, 900));
        // A lower hop ceiling, and never past SQS's own.
        assert!(!retry_rides_messages(60, 15, 60));
        assert!(!retry_rides_messages(890, 15, 3_600));
        assert!(!retry_rides_messages(u32::MAX, 15, 900));
    }

    #[test]
    fn a_connection_replays_once_per_interval() {
        assert_eq!(socket_replay_wait_ms(None, 10_000), None);
        assert_eq!(socket_replay_wait_ms(Some(10_000), 10_500), Some(1_500));
        assert_eq!(socket_replay_wait_ms(Some(10_000), 12_000), None);
        // A connection that is gone answers as if its replay had just begun.
        assert_eq!(
            socket_replay_wait_ms(Some(i64::MAX), 10_000),
            Some(SOCKET_REPLAY_INTERVAL_MS)
        );
    }

    #[test]
    fn a_message_before_its_row_looks_three_times_within_a_second() {
        let pauses: Vec<u64> = (0..).map_while(row_wait).collect();
        assert_eq!(pauses, vec![25, 100, 400]);
        assert!(pauses.iter().sum::<u64>() < 1000);
    }

    #[test]
    fn bounces_back_off_to_a_minute() {
        let delays: Vec<u32> = (0..8).map(bounce_delay_s).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(bounce_delay_s(u32::MAX), 60);
    }

    #[test]
    fn a_lease_is_renewed_in_the_second_half_of_its_slice() {
        let slice = LEASE_SLICE_MS;
        let until = 1_000_000 + slice;
        assert!(!lease_renewal_due(until, 1_000_000, slice), "fresh");
        assert!(!lease_renewal_due(until, 1_000_000 + slice / 2, slice));
        assert!(lease_renewal_due(until, 1_000_001 + slice / 2, slice));
        assert!(lease_renewal_due(until, until + 1, slice), "ended");
        assert_eq!(lease_renewal_at(until, slice), 1_000_000 + slice / 2);
        assert!(lease_renewal_due(i64::MIN, i64::MAX, slice));
        assert_eq!(lease_renewal_at(i64::MIN, slice), i64::MIN);
    }

    use super::*;
    use crate::DeliveryError;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn layer(v: Value) -> PolicyLayer {
        PolicyLayer::parse(&map(v)).unwrap()
    }

    #[test]
    fn defaults_give_the_reference_schedule() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.jittered_backoff_ms(1, 0.99),
            30_000,
            "no jitter by default"
        );
        let delays: Vec<u64> = (1..=4).map(|n| p.backoff_ms(n) / 1000).collect();
        assert_eq!(delays, vec![30, 90, 270, 810]);
        let err = DeliveryError::transient("boom");
        assert_eq!(
            p.next_after_failure(4, &err.failure(), 0.5),
            Next::RetryIn(810_000)
        );
        assert_eq!(p.next_after_failure(5, &err.failure(), 0.5), Next::Dead);
        assert_eq!(
            p.next_after_failure(1, &DeliveryError::permanent("bad").failure(), 0.5),
            Next::Dead
        );
    }

    #[test]
    fn hops_round_up_and_respect_the_ceiling() {
        assert_eq!(hop_delay_s(10_500, 10_000, 900), 1);
        assert_eq!(hop_delay_s(17_000, 10_000, 2), 2);
        assert_eq!(hop_delay_s(12_001, 10_000, 900), 3);
        assert_eq!(hop_delay_s(5_000, 10_000, 900), 1);
        assert_eq!(hop_delay_s(10_000 + 86_400_000, 10_000, 900), 900);
    }

    #[test]
    fn formulas() {
        let lin = RetryPolicy {
            backoff: Backoff::Linear,
            base_ms: 30_000,
            ..Default::default()
        };
        assert_eq!(lin.backoff_ms(3), 90_000);
        let fixed = RetryPolicy {
            backoff: Backoff::Fixed,
            base_ms: 1_000,
            ..Default::default()
        };
        assert_eq!(fixed.backoff_ms(7), 1_000);
        let tiny = RetryPolicy {
            backoff: Backoff::Fixed,
            base_ms: 10,
            ..Default::default()
        };
        assert_eq!(tiny.backoff_ms(1), 1_000, "at least one second");
        let capped = RetryPolicy {
            max_ms: 60_000,
            ..Default::default()
        };
        assert_eq!(capped.backoff_ms(5), 60_000);
    }

    #[test]
    fn retry_after_overrides_and_is_capped_by_its_own_maximum() {
        let p = RetryPolicy {
            max_ms: 60_000,
            ..Default::default()
        };
        let mut err = DeliveryError::transient("slow down");
        err.retry_after_ms = Some(86_400_000);
        assert_eq!(
            p.retry_delay_ms(1, &err.failure(), 0.5),
            86_400_000,
            "not capped by max_ms"
        );
        // Ten years, and the largest value a header can carry: a day.
        err.retry_after_ms = Some(315_360_000_000);
        assert_eq!(p.retry_delay_ms(1, &err.failure(), 0.5), RETRY_AFTER_MAX_MS);
        let now = std::time::SystemTime::UNIX_EPOCH;
        err.retry_after_ms = crate::error::parse_retry_after("18446744073709551615", now);
        assert_eq!(err.retry_after_ms, Some(u64::MAX));
        assert_eq!(p.retry_delay_ms(1, &err.failure(), 0.5), RETRY_AFTER_MAX_MS);
        let shorter = p
            .clone()
            .with_layer(&layer(json!({"retry_after_max_ms": 90_500})));
        assert_eq!(
            shorter.retry_delay_ms(1, &err.failure(), 0.5),
            91_000,
            "whole seconds"
        );
        err.retry_after_ms = Some(1_500);
        assert_eq!(
            p.retry_delay_ms(1, &err.failure(), 0.5),
            2_000,
            "rounded up, never early"
        );
        err.retry_after_ms = Some(0);
        assert_eq!(p.retry_delay_ms(1, &err.failure(), 0.5), 1_000);
    }

    #[test]
    fn merge_layers_later_wins() {
        let config =
            PolicyLayer::from_config(&map(json!({"max_attempts": 8, "base_backoff_seconds": 5})))
                .unwrap();
        let adapter = layer(json!({"timeout_ms": 10000}));
        let channel = layer(json!({"max_attempts": 3}));
        let p = RetryPolicy::effective(&config, &adapter, &channel);
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.base_ms, 5_000);
        assert_eq!(p.backoff, Backoff::Exponential);
        assert_eq!(p.timeout_ms, 10_000);
        assert_eq!(p.max_ms, 3_600_000);
        let both =
            PolicyLayer::from_config(&map(json!({"base_backoff_seconds": 5, "base_ms": 2000})))
                .unwrap();
        let none = PolicyLayer::default();
        assert_eq!(RetryPolicy::effective(&both, &none, &none).base_ms, 2_000);
    }

    /// The Yotel schedule: 5 s, 30 s, 3 min, 15 min, 1 h, 6 h, dead after attempt 7, +-10%.
    fn yotel() -> RetryPolicy {
        let layer = map(json!({
            "max_attempts": 7,
            "schedule": [5000, 30000, 180000, 900000, 3600000, 21600000],
            "jitter": 0.1,
        }));
        let layer = PolicyLayer::parse(&layer).unwrap();
        let none = PolicyLayer::default();
        RetryPolicy::effective(&none, &none, &layer)
    }

    #[test]
    fn the_yotel_schedule_is_expressible() {
        let p = yotel();
        let err = DeliveryError::transient("x");
        let nominal = [5_000u64, 30_000, 180_000, 900_000, 3_600_000, 21_600_000];
        for (i, d) in nominal.iter().enumerate() {
            let n = i as u32 + 1;
            assert_eq!(
                p.next_after_failure(n, &err.failure(), 0.5),
                Next::RetryIn(*d),
                "midpoint is nominal"
            );
            assert_eq!(p.retry_delay_ms(n, &err.failure(), 0.0), d * 9 / 10);
            assert_eq!(
                p.retry_delay_ms(n, &err.failure(), 0.999_999_9),
                (*d as f64 * 1.1).round() as u64
            );
        }
        assert_eq!(p.next_after_failure(7, &err.failure(), 0.5), Next::Dead);
        // The last entry repeats (if max_attempts allowed more).
        assert_eq!(p.raw_backoff_ms(12), 21_600_000);
    }

    fn any_policy() -> impl Strategy<Value = RetryPolicy> {
        (
            1u32..20,
            prop_oneof![
                Just(Backoff::Exponential),
                Just(Backoff::Linear),
                Just(Backoff::Fixed)
            ],
            1u64..10_000_000,
            1u64..100_000_000,
        )
            .prop_map(|(max_attempts, backoff, base_ms, max_ms)| RetryPolicy {
                max_attempts,
                backoff,
                base_ms,
                max_ms,
                timeout_ms: 1000,
                ..Default::default()
            })
    }

    proptest! {
        #[test]
        fn any_retry_after_gives_a_whole_second_delay_within_the_cap(
            ms in any::<u64>(),
            cap in 1u64..=u64::MAX / 2,
        ) {
            let p = RetryPolicy { retry_after_max_ms: cap, ..RetryPolicy::default() };
            let mut err = DeliveryError::transient("slow down");
            err.retry_after_ms = Some(ms);
            let d = p.retry_delay_ms(1, &err.failure(), 0.5);
            prop_assert_eq!(d % 1000, 0);
            prop_assert!(d >= 1000);
            prop_assert!(d >= ms.min(cap), "never before the provider asked, up to the cap");
            prop_assert!(d < ms.min(cap).saturating_add(1000).max(1000) + 1);
        }

        #[test]
        fn backoff_is_whole_seconds_at_least_one_and_capped(p in any_policy(), n in 1u32..200) {
            let d = p.backoff_ms(n);
            prop_assert_eq!(d % 1000, 0);
            prop_assert!(d >= 1000);
            prop_assert!(d <= p.max_ms.max(1000));
        }

        #[test]
        fn yotel_delays_stay_within_bounds(n in 1u32..7, u in 0.0f64..1.0) {
            let nominal = [5_000u64, 30_000, 180_000, 900_000, 3_600_000, 21_600_000][n as usize - 1] as f64;
            let Next::RetryIn(d) = yotel().next_after_failure(n, &DeliveryError::transient("x").failure(), u) else {
                return Err(TestCaseError::fail("retry expected"));
            };
            prop_assert!(d as f64 >= nominal * 0.9 - 0.5 && d as f64 <= nominal * 1.1 + 0.5, "{} outside +-10% of {}", d, nominal);
        }

        #[test]
        fn jitter_stays_within_its_fraction(p in any_policy(), n in 1u32..30, j in 0.0f64..0.99, u in 0.0f64..1.0) {
            let p = RetryPolicy { jitter: j, ..p };
            let d = p.backoff_ms(n) as f64;
            let got = p.jittered_backoff_ms(n, u) as f64;
            let lo = (d * (1.0 - j)).round().max(1000.0);
            let hi = (d * (1.0 + j)).round().max(1000.0);
            prop_assert!(got >= lo && got <= hi, "{} outside [{}, {}]", got, lo, hi);
        }

        #[test]
        fn backoff_never_shrinks_with_attempts(p in any_policy(), n in 1u32..100) {
            prop_assert!(p.backoff_ms(n + 1) >= p.backoff_ms(n));
        }

        #[test]
        fn exponential_matches_formula(base in 1u64..100_000, max in 1u64..100_000_000, n in 1u32..10) {
            let p = RetryPolicy { backoff: Backoff::Exponential, base_ms: base, max_ms: max, ..Default::default() };
            let expect = (base * 3u64.pow(n)).min(max);
            prop_assert_eq!(p.raw_backoff_ms(n), expect);
        }

        #[test]
        fn attempts_never_exceed_max(p in any_policy(), n in 1u32..40) {
            let next = p.next_after_failure(n, &DeliveryError::transient("x").failure(), 0.3);
            if n >= p.max_attempts { prop_assert_eq!(next, Next::Dead); }
            else { prop_assert!(matches!(next, Next::RetryIn(_))); }
        }

        #[test]
        fn a_layer_that_reads_gives_positive_numbers(
            a in proptest::collection::btree_map("[a-z_]{1,12}", prop_oneof![
                Just(Value::from(0)), Just(Value::from(5)), Just(Value::from("linear")),
                Just(Value::from("x")), Just(Value::from(-1)), Just(Value::Null)], 0..6),
        ) {
            let map: Map<String, Value> = a.into_iter().collect();
            // A layer that reads at all gives a policy whose every number is positive.
            if let Ok(layer) = PolicyLayer::parse(&map) {
                let p = RetryPolicy::default().with_layer(&layer);
                prop_assert!(p.max_attempts > 0 && p.base_ms > 0 && p.max_ms > 0 && p.timeout_ms > 0);
            }
        }
    }

    #[test]
    fn a_replay_pushes_within_its_budget_and_always_its_first() {
        assert!(socket_replay_goes_on(0, 60_000, 0));
        assert!(socket_replay_goes_on(0, SOCKET_REPLAY_BUDGET_MS - 1, 7));
        assert!(!socket_replay_goes_on(0, SOCKET_REPLAY_BUDGET_MS, 7));
        // A clock that stepped back does not stop it.
        assert!(socket_replay_goes_on(10_000, 0, 3));
    }
}
