//! A channel's outbound rate limit: the GCRA schedule every instance shares, and the batches
//! of tokens an instance takes from it.

use crate::Invalid;

use std::fmt;
use std::str::FromStr;

/// A channel's outbound rate limit: `count` requests per `per_ms`. Stored and shown as its
/// text (`"80/s"`); reading one checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
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

/// How long after its place in the schedule a reserved request may still use it: a place not
/// used by then is dropped (the channel then sends a little under its limit, never over it by
/// more than this lag: over any period a channel sends at most its limit for the period plus
/// this long).
pub const RATE_BATCH_US: i64 = 100_000;

/// The most places one batch may reserve in a schedule.
pub const RATE_BATCH_MOST: u32 = 100;

/// How far ahead of now a channel's schedule may be reserved. A request whose place lies
/// further ahead is snoozed without one (its message comes back when the schedule is there).
/// Within it, the waits are held by SQS's message delay (at most 900 s).
pub const RATE_RESERVE_HORIZON_US: i64 = 600_000_000;

/// The longest wait for a reserved place that an attempt sleeps through rather than handing
/// its message back to the queue with a delay (SQS delays are whole seconds).
pub const RATE_WAIT_LOCAL_US: i64 = 250_000;

/// How long after its place a snoozed request's message may still use the place it reserved
/// (a message that arrives later reserves again; a retry's message never carries one).
pub const RATE_PLACE_GRACE_US: i64 = 30_000_000;

impl RateLimit {
    /// Reserves `n` places in the schedule whose theoretical arrival time is `tat_us` (None:
    /// no request yet) at `now_us`: `Ok((new_tat, start))`, the places being
    /// [`Self::place_us`]`(start, i, now_us)` for `i` in `0..n`; `Err(retry_at)` when the first
    /// place lies beyond [`RATE_RESERVE_HORIZON_US`]. Unlike [`Self::decide_n`], a busy
    /// schedule is not a refusal: the request waits for its place, so requests over the limit
    /// queue in the schedule instead of coming back together.
    pub fn reserve_n(&self, tat_us: Option<i64>, now_us: i64, n: u32) -> Result<(i64, i64), i64> {
        let start = tat_us.unwrap_or(now_us).max(now_us);
        let first = self.place_us(start, 0, now_us);
        if first - now_us > RATE_RESERVE_HORIZON_US {
            return Err(first - RATE_RESERVE_HORIZON_US);
        }
        Ok((start + self.interval_us() * i64::from(n.max(1)), start))
    }

    /// When the `i`-th place of a batch reserved at `reserved_us` from `start` (the schedule's
    /// arrival time then, at least `reserved_us`) may go: GCRA's earliest conforming time, the
    /// burst tolerance ahead of the arrival time, never before the reservation.
    pub fn place_us(&self, start: i64, i: u32, reserved_us: i64) -> i64 {
        (start + self.interval_us() * i64::from(i) - self.tolerance_us()).max(reserved_us)
    }

    /// The most places an instance reserves at once in this schedule: as many as the schedule
    /// spaces within [`RATE_BATCH_US`] (5,000/s: 100; 80/s: 8; 500/m: 1, no batching).
    pub fn batch_most(&self) -> u32 {
        u32::try_from(RATE_BATCH_US / self.interval_us())
            .unwrap_or(RATE_BATCH_MOST)
            .clamp(1, RATE_BATCH_MOST)
    }
}

/// What a request does with the place it reserved in its channel's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateWait {
    /// Its place has come: go now.
    Go,
    /// Its place is a moment away: wait this many microseconds, then go.
    Sleep(i64),
    /// Its place is further away: hand the message back for this many whole seconds
    /// (rounded up: a request may go after its place, never before), keeping the place.
    Snooze(u32),
}

impl RateWait {
    /// The wait for a place at `place_us` seen at `now_us`.
    pub fn for_place(place_us: i64, now_us: i64) -> Self {
        let wait = place_us.saturating_sub(now_us);
        if wait <= 0 {
            Self::Go
        } else if wait <= RATE_WAIT_LOCAL_US {
            Self::Sleep(wait)
        } else {
            Self::Snooze(RateLimit::snooze_s(place_us, now_us))
        }
    }

    /// Whether a message's reserved place (`place_us`) may still be used at `now_us`.
    pub fn place_usable(place_us: i64, now_us: i64) -> bool {
        now_us <= place_us.saturating_add(RATE_PLACE_GRACE_US)
    }
}

/// Places one instance reserved together in a channel's schedule, handed out one per request
/// in order: the schedule's key is written once per batch rather than once per request. A
/// batch starts at one place and doubles while the instance uses its batches up; it shrinks
/// to what was used when places were dropped (not used within [`RATE_BATCH_US`] of their
/// time).
#[derive(Debug, Clone, PartialEq)]
pub struct RateBatch {
    /// The schedule's arrival time the batch was reserved from, and when.
    start_us: i64,
    reserved_us: i64,
    /// Places reserved, and the index of the next one to hand out.
    count: u32,
    next: u32,
    size: u32,
    used: u32,
}

impl Default for RateBatch {
    fn default() -> Self {
        Self {
            start_us: 0,
            reserved_us: 0,
            count: 0,
            next: 0,
            size: 1,
            used: 0,
        }
    }
}

impl RateBatch {
    /// The time of the next place this instance holds (dropping the ones whose time passed
    /// more than [`RATE_BATCH_US`] ago), if one is left.
    pub fn take(&mut self, limit: &RateLimit, now_us: i64) -> Option<i64> {
        while self.next < self.count {
            let at = limit.place_us(self.start_us, self.next, self.reserved_us);
            self.next += 1;
            if at.saturating_add(RATE_BATCH_US) >= now_us {
                self.used += 1;
                return Some(at);
            }
        }
        None
    }

    /// How many places to reserve next (at most `most`): double the last batch if it was
    /// used up, what was used of it if places were dropped.
    pub fn next_size(&mut self, most: u32) -> u32 {
        self.size = if self.count > 0 && self.used >= self.count {
            self.size.saturating_mul(2)
        } else if self.used > 0 {
            self.used
        } else {
            self.size
        }
        .clamp(1, most.max(1));
        self.size
    }

    /// Keeps `n` places just reserved at `now_us` from `start_us` (the schedule's answer).
    pub fn filled(&mut self, n: u32, start_us: i64, now_us: i64) {
        self.start_us = start_us;
        self.reserved_us = now_us;
        self.count = n;
        self.next = 0;
        self.used = 0;
    }
}

impl FromStr for RateLimit {
    type Err = Invalid;

    fn from_str(s: &str) -> Result<Self, Invalid> {
        let bad =
            || format!("rate_limit must look like \"80/s\", \"500/m\" or \"1000/h\", not {s:?}");
        let (count, unit) = s.trim().split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let per_ms = match unit.trim() {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad().into()),
        };
        if count == 0 || count > 1_000_000 {
            return Err(Invalid::new("rate_limit's count must be from 1 to 1000000"));
        }
        Ok(Self { count, per_ms })
    }
}

impl TryFrom<String> for RateLimit {
    type Error = Invalid;

    fn try_from(s: String) -> Result<Self, Invalid> {
        s.parse()
    }
}

impl From<RateLimit> for String {
    fn from(r: RateLimit) -> Self {
        r.to_string()
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn places_are_reserved_in_batches_that_grow_while_used_up_and_expire() {
        let five_k: RateLimit = "5000/s".parse().unwrap();
        assert_eq!(five_k.batch_most(), 100);
        assert_eq!("80/s".parse::<RateLimit>().unwrap().batch_most(), 8);
        assert_eq!("500/m".parse::<RateLimit>().unwrap().batch_most(), 1);
        let limit: RateLimit = "10/s".parse().unwrap(); // 100 ms apart, a burst of 10
        let mut b = RateBatch::default();
        assert_eq!(b.take(&limit, 0), None, "nothing held at first");
        assert_eq!(b.next_size(100), 1);
        // An idle schedule: the place is now.
        let (tat, start) = limit.reserve_n(None, 0, 1).unwrap();
        assert_eq!((tat, start), (100_000, 0));
        b.filled(1, start, 0);
        assert_eq!(b.take(&limit, 0), Some(0));
        assert_eq!(b.take(&limit, 1), None, "the one place went to its request");
        assert_eq!(b.next_size(100), 2, "used up: doubles");
        let (tat, start) = limit.reserve_n(Some(tat), 10, 2).unwrap();
        assert_eq!((tat, start), (300_000, 100_000));
        b.filled(2, start, 10);
        // Within the burst, both places are at once.
        assert_eq!(b.take(&limit, 11), Some(10));
        assert_eq!(b.take(&limit, 11), Some(10));
        assert_eq!(b.next_size(100), 4);
        b.filled(4, tat, 20);
        assert_eq!(b.take(&limit, 21), Some(20));
        assert_eq!(
            b.take(&limit, 20 + 2 * RATE_BATCH_US),
            None,
            "places whose time passed long ago are dropped"
        );
        assert_eq!(
            b.next_size(100),
            1,
            "what was used of a batch with places dropped"
        );
        assert_eq!(b.next_size(1), 1, "never above the most");
    }

    #[test]
    fn a_busy_schedule_is_reserved_in_order_and_only_up_to_the_horizon() {
        let limit: RateLimit = "10/s".parse().unwrap();
        // Ten at once use the burst; the next ten are spaced at the interval.
        let mut tat = None;
        let mut places = Vec::new();
        for _ in 0..20 {
            let (next, start) = limit.reserve_n(tat, 0, 1).unwrap();
            places.push(limit.place_us(start, 0, 0));
            tat = Some(next);
        }
        assert!(places[..10].iter().all(|p| *p == 0));
        let later: Vec<i64> = (1..=10).map(|i| i * 100_000).collect();
        assert_eq!(&places[10..], &later[..]);
        // A batch reserves the same places as its requests one by one would.
        let (_, start) = limit.reserve_n(Some(2_000_000), 0, 5).unwrap();
        let batch: Vec<i64> = (0..5).map(|i| limit.place_us(start, i, 0)).collect();
        assert_eq!(
            batch,
            vec![1_100_000, 1_200_000, 1_300_000, 1_400_000, 1_500_000]
        );
        // Beyond the horizon, no place: the request comes back when the schedule is there.
        let far = RATE_RESERVE_HORIZON_US + limit.tolerance_us() + 1_000_000;
        let retry = limit.reserve_n(Some(far), 0, 1).unwrap_err();
        assert_eq!(retry, far - limit.tolerance_us() - RATE_RESERVE_HORIZON_US);
    }

    #[test]
    fn a_reserved_place_is_waited_for_here_when_near_and_in_the_queue_when_not() {
        assert_eq!(RateWait::for_place(100, 100), RateWait::Go);
        assert_eq!(RateWait::for_place(99, 100), RateWait::Go);
        assert_eq!(
            RateWait::for_place(100 + RATE_WAIT_LOCAL_US, 100),
            RateWait::Sleep(RATE_WAIT_LOCAL_US)
        );
        assert_eq!(RateWait::for_place(1_300_000, 0), RateWait::Snooze(2));
        assert!(RateWait::place_usable(0, RATE_PLACE_GRACE_US));
        assert!(!RateWait::place_usable(0, RATE_PLACE_GRACE_US + 1));
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

    proptest! {
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

        #[test]
        fn requests_sent_at_their_reserved_places_never_exceed_count_plus_burst(
            count in 1u32..50,
            arrivals in prop::collection::vec((0i64..400_000, 1u32..8), 1..100),
        ) {
            // Batches reserved at arbitrary times, every place used at its time (or later,
            // rounded up to the second as a snoozed message is): within any one period, at
            // most 2 x count go.
            let r = RateLimit { count, per_ms: 1000 };
            let (mut now, mut tat) = (0i64, None);
            let mut sent = Vec::new();
            for (gap, n) in arrivals {
                now += gap;
                let n = n.min(count);
                let (next, start) = r.reserve_n(tat, now, n).unwrap();
                tat = Some(next);
                for i in 0..n {
                    let at = r.place_us(start, i, now);
                    sent.push(match RateWait::for_place(at, now) {
                        RateWait::Go => now,
                        RateWait::Sleep(us) => now + us,
                        RateWait::Snooze(s) => now + i64::from(s) * 1_000_000,
                    });
                }
            }
            sent.sort_unstable();
            for (i, t0) in sent.iter().enumerate() {
                let n = sent[i..].iter().take_while(|t| **t - t0 < 1_000_000).count();
                prop_assert!(n as u32 <= 2 * count, "{n} within a second at {count}/s");
            }
        }
    }
}
