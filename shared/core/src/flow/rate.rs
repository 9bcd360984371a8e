//! A channel's outbound rate limit: the GCRA schedule every instance shares, and the batches
//! of tokens an instance takes from it.

use std::fmt;
use std::str::FromStr;

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    }
}
