//! Listing shards that follow a tenant's load: how many a rate calls for, and for how long
//! a grant of them holds.
//!
//! A tenant's listing is spread over its listing shards (`<tenant>#<status>#<n>`), one
//! partition each, and a listing page reads every shard that may hold a row of the page.
//! Each delivery writes one listing entry of about one write unit, so a shard carries about
//! [`SHARD_RATE`] deliveries a second at a quarter of a partition's 1,000 write units: the
//! margin covers the minute a rate takes to be seen and the tenant caches that take a grant
//! to every writer. A tenant past its shards' rate gets a *grant*: more shards for
//! [`GRANT_MS`], renewed while the rate holds, lapsing by itself when it falls: nothing has
//! to take shards away, a tenant that never needed more never has more, and once a grant
//! lapses its deliveries are written to the tenant's own shards again. A listing reads a
//! granted shard only where the grants' span meets the page ([`read_shards`]): rows placed
//! under a grant may be there until they expire.

/// Deliveries a second one listing shard takes before more are granted.
pub const SHARD_RATE: f64 = 250.0;

/// The most listing shards a tenant may have, granted or set.
pub const MAX_SHARDS: u32 = 256;

/// How long a grant holds from when it is made (or renewed).
pub const GRANT_MS: i64 = 15 * 60_000;

/// A grant with less than this left is renewed when its rate still calls for it: a busy
/// tenant's grant is written about once every five minutes.
pub const RENEW_BEFORE_MS: i64 = 10 * 60_000;

/// How far apart the clocks of the writers and readers of a listing may be: a shard is read
/// this much beyond the times its grant says.
pub const SKEW_MS: i64 = 60_000;

/// The shortest part of a minute a rate is read over (a minute's first seconds say little).
const MIN_SPAN_MS: i64 = 10_000;

/// Deliveries a second, from `total` counted in the minute that starts at `minute_start_ms`,
/// read at `now_ms` (over the part of the minute gone, at least ten seconds; the whole
/// minute once it is over).
pub fn minute_rate(total: u64, minute_start_ms: i64, now_ms: i64) -> f64 {
    let span = (now_ms - minute_start_ms).clamp(MIN_SPAN_MS, 60_000);
    total as f64 * 1000.0 / span as f64
}

/// The listing shards `rate` deliveries a second call for beyond `have`, at `per_shard` a
/// shard ([`SHARD_RATE`] as deployed): `None` while `have` carries it, else a power of two
/// that carries it (at most [`MAX_SHARDS`]).
pub fn wanted(rate: f64, have: u32, per_shard: f64) -> Option<u32> {
    wanted_up_to(rate, have, per_shard, MAX_SHARDS)
}

/// [`wanted`] with at most `max` shards.
fn wanted_up_to(rate: f64, have: u32, per_shard: f64, max: u32) -> Option<u32> {
    if !rate.is_finite() || rate <= f64::from(have.max(1)) * per_shard || have >= max {
        return None;
    }
    let need = (rate / per_shard).ceil().min(f64::from(max)) as u32;
    Some(need.next_power_of_two().clamp(have + 1, max))
}

/// More listing shards than a tenant's own, from `from_ms` until `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    pub shards: u32,
    pub from_ms: i64,
    pub until_ms: i64,
}

impl Grant {
    /// Whether it holds at `ms`.
    pub fn holds(&self, ms: i64) -> bool {
        self.from_ms <= ms && ms < self.until_ms
    }

    /// `current`, if it is in force at `now_ms` for a tenant with `own` shards (it holds,
    /// and gives more than the tenant's own).
    pub fn in_force(current: Option<&Grant>, own: u32, now_ms: i64) -> Option<&Grant> {
        current.filter(|g| g.holds(now_ms) && g.shards > own)
    }

    /// The grant that follows `current` (the one in force, or lapsed) when `rate` is seen
    /// at `now_ms` by a tenant with `own` shards, at `per_shard` a shard: a new or larger
    /// one, the same renewed when it ends within [`RENEW_BEFORE_MS`] and the rate still
    /// calls for its shards, or `None` (nothing to write).
    pub fn next(
        current: Option<&Grant>,
        own: u32,
        rate: f64,
        now_ms: i64,
        per_shard: f64,
    ) -> Option<Grant> {
        Self::next_up_to(current, own, rate, now_ms, per_shard, MAX_SHARDS)
    }

    /// [`Self::next`] with at most `max` shards.
    fn next_up_to(
        current: Option<&Grant>,
        own: u32,
        rate: f64,
        now_ms: i64,
        per_shard: f64,
        max: u32,
    ) -> Option<Grant> {
        let live = Self::in_force(current, own, now_ms);
        let have = live.map_or(own, |g| g.shards);
        if let Some(shards) = wanted_up_to(rate, have, per_shard, max) {
            return Some(Grant {
                shards,
                from_ms: live.map_or(now_ms, |g| g.from_ms),
                until_ms: now_ms + GRANT_MS,
            });
        }
        let g = live?;
        // Still called for: its rate is past what one size smaller would carry.
        let called_for = rate > f64::from((g.shards / 2).max(own)) * per_shard;
        (called_for && g.until_ms - now_ms < RENEW_BEFORE_MS).then_some(Grant {
            until_ms: now_ms + GRANT_MS,
            ..*g
        })
    }

    /// `self` and `other` as one: the most shards of either over the span of both (the
    /// shards a listing reads for rows placed under either).
    pub fn merged(&self, other: &Grant) -> Grant {
        Grant {
            shards: self.shards.max(other.shards),
            from_ms: self.from_ms.min(other.from_ms),
            until_ms: self.until_ms.max(other.until_ms),
        }
    }
}

/// A delivery's hold on a granted listing shard: until `until_ms`, then shard `then` (one of
/// its tenant's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lease {
    pub until_ms: i64,
    pub then: u32,
}

/// Where a delivery is listed: its shard, and its lease when that shard is a granted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub shard: u32,
    pub lease: Option<Lease>,
}

/// Where a delivery whose id hashes to `hash` is listed when it is created at `now_ms` by a
/// tenant with `own` shards whose latest grant is `latest`: over the granted shards while the
/// grant is in force, else over its own.
pub fn place(hash: u32, own: u32, latest: Option<&Grant>, now_ms: i64) -> Place {
    let own = own.clamp(1, MAX_SHARDS);
    match Grant::in_force(latest, own, now_ms) {
        Some(g) => {
            let shard = hash % g.shards.min(MAX_SHARDS);
            Place {
                shard,
                lease: (shard >= own).then_some(Lease {
                    until_ms: g.until_ms,
                    then: hash % own,
                }),
            }
        }
        None => Place {
            shard: hash % own,
            lease: None,
        },
    }
}

/// The shard an entry of a delivery placed at `shard` (with `lease`) goes to when it changes
/// at `at_ms` (read only for a leased one): its granted shard until the lease ends, its own
/// after (so a granted shard holds only entries changed within the grants' span).
pub fn shard_at(shard: u32, lease: Option<Lease>, at_ms: impl FnOnce() -> Option<i64>) -> u32 {
    match lease {
        Some(l) if at_ms().is_some_and(|at| at >= l.until_ms) => l.then,
        _ => shard,
    }
}

/// The listing shards that may hold an entry changed within `lo_ms..=hi_ms` (either end
/// open) for a tenant with `own` shards and grants spanning `span`: its own, and the granted
/// ones only where the span (widened by [`SKEW_MS`]) meets the range.
pub fn read_shards(
    own: u32,
    span: Option<&Grant>,
    lo_ms: Option<i64>,
    hi_ms: Option<i64>,
) -> Vec<u32> {
    let own = own.clamp(1, MAX_SHARDS);
    let mut v: Vec<u32> = (0..own).collect();
    if let Some(span) = span.filter(|s| s.shards > own) {
        let meets = hi_ms.is_none_or(|h| h >= span.from_ms - SKEW_MS)
            && lo_ms.is_none_or(|l| l <= span.until_ms + SKEW_MS);
        if meets {
            v.extend(own..span.shards.min(MAX_SHARDS));
        }
    }
    v
}

/// The due index's shards, grown for the whole deployment as a tenant's listing shards are
/// for the tenant: the usage fold sees a minute's writes to the due index (retries past one
/// hop, replays, rows out of a backlog) and grants more shards past [`due::SHARD_RATE`] a
/// shard; writers place a due entry over the granted shards
/// while the grant is in force, and the sweep reads them until every entry placed there
/// can have come due ([`due::LINGER_MS`] past the grants' span).
pub mod due {
    use super::{Grant, SKEW_MS};

    /// Due entries a second one due shard takes: each is written and removed (about two
    /// write units), half a partition's 1,000 at 250.
    pub const SHARD_RATE: f64 = 250.0;

    /// The most due shards a deployment may have, set or granted.
    pub const MAX: u32 = 1024;

    /// How long past a grant's end its shards are still read: the longest a retry may be
    /// scheduled ahead (`policy::MAX_DELAY_MS`, seven days), and the clocks' skew.
    pub const LINGER_MS: i64 = crate::policy::MAX_DELAY_MS as i64 + SKEW_MS;

    /// How long a writer keeps the grants it read: well within a grant's life, so a new
    /// grant is taken up within this and a lapsed one left within it.
    pub const CACHE_MS: i64 = 30_000;

    /// The grant that follows `latest` when the deployment (`own` shards set) schedules
    /// `rate` due entries a second at `now_ms`; `None`: nothing to write.
    pub fn next(latest: Option<&Grant>, own: u32, rate: f64, now_ms: i64) -> Option<Grant> {
        Grant::next_up_to(latest, own, rate, now_ms, SHARD_RATE, MAX)
    }

    /// Whether `rate` due entries a second may call for a grant or a renewal with `own` shards
    /// set: neither does at or under what the own shards carry (a renewal needs more than
    /// half a grant's shards, and a grant has more than the own ones), so the grants need
    /// not be read.
    pub fn may_call_for(rate: f64, own: u32) -> bool {
        rate > f64::from(own.clamp(1, MAX)) * SHARD_RATE
    }

    /// The shards a due entry written at `now_ms` is spread over: the granted ones while
    /// `latest` is in force, else the deployment's own.
    pub fn write_count(own: u32, latest: Option<&Grant>, now_ms: i64) -> u32 {
        let own = own.clamp(1, MAX);
        Grant::in_force(latest, own, now_ms).map_or(own, |g| g.shards.min(MAX))
    }

    /// The shards the sweep reads at `now_ms`: the granted ones until [`LINGER_MS`] past the
    /// end of the grants' `span` (an entry stays in the shard it was written to), else the
    /// deployment's own.
    pub fn read_count(own: u32, span: Option<&Grant>, now_ms: i64) -> u32 {
        let own = own.clamp(1, MAX);
        match span {
            Some(s) if s.shards > own && now_ms <= s.until_ms + LINGER_MS => s.shards.min(MAX),
            _ => own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_read_over_the_minute_gone_and_at_least_ten_seconds() {
        assert_eq!(minute_rate(3_000, 0, 1_000), 300.0);
        assert_eq!(minute_rate(3_000, 0, 20_000), 150.0);
        assert_eq!(minute_rate(6_000, 0, 600_000), 100.0);
    }

    #[test]
    fn shards_are_wanted_past_their_rate_as_a_power_of_two() {
        assert_eq!(wanted(400.0, 2, SHARD_RATE), None);
        assert_eq!(wanted(501.0, 2, SHARD_RATE), Some(4));
        assert_eq!(wanted(10_000.0, 2, SHARD_RATE), Some(64));
        assert_eq!(wanted(1e9, 8, SHARD_RATE), Some(MAX_SHARDS));
        assert_eq!(wanted(1e9, MAX_SHARDS, SHARD_RATE), None);
        assert_eq!(wanted(f64::NAN, 1, SHARD_RATE), None);
        // A tenant set to an odd count still gets more than it has.
        assert_eq!(wanted(3_100.0, 12, SHARD_RATE), Some(16));
    }

    #[test]
    fn a_grant_is_made_renewed_near_its_end_and_left_to_lapse() {
        let g = Grant::next(None, 2, 2_000.0, 0, SHARD_RATE).unwrap();
        assert_eq!((g.shards, g.from_ms, g.until_ms), (8, 0, GRANT_MS));
        // The same rate soon after: nothing to write.
        assert_eq!(Grant::next(Some(&g), 2, 2_000.0, 60_000, SHARD_RATE), None);
        // Near its end, still called for: renewed from then, same start.
        let late = GRANT_MS - RENEW_BEFORE_MS + 1;
        let r = Grant::next(Some(&g), 2, 2_000.0, late, SHARD_RATE).unwrap();
        assert_eq!((r.shards, r.from_ms, r.until_ms), (8, 0, late + GRANT_MS));
        // The rate fell to what half the shards carry: it lapses.
        assert_eq!(Grant::next(Some(&g), 2, 900.0, late, SHARD_RATE), None);
        // More load: a larger grant at once.
        let up = Grant::next(Some(&g), 2, 5_000.0, 60_000, SHARD_RATE).unwrap();
        assert_eq!((up.shards, up.from_ms), (32, 0));
        // Lapsed: a new one starts now.
        let again = Grant::next(Some(&g), 2, 2_000.0, GRANT_MS + 5, SHARD_RATE).unwrap();
        assert_eq!(again.from_ms, GRANT_MS + 5);
    }

    #[test]
    fn a_delivery_is_placed_over_a_grant_in_force_and_moves_home_after_it() {
        let g = Grant {
            shards: 8,
            from_ms: 0,
            until_ms: 1_000,
        };
        // Hash 13: shard 5 of 8 (granted), 1 of its own 2 after.
        let p = place(13, 2, Some(&g), 10);
        assert_eq!(p.shard, 5);
        assert_eq!(
            p.lease,
            Some(Lease {
                until_ms: 1_000,
                then: 1
            })
        );
        assert_eq!(shard_at(p.shard, p.lease, || Some(999)), 5);
        assert_eq!(shard_at(p.shard, p.lease, || Some(1_000)), 1);
        // One of its own shards, or no grant in force: no lease, the time never read.
        assert_eq!(place(9, 2, Some(&g), 10).lease, None);
        assert_eq!(
            place(13, 2, Some(&g), 1_000),
            Place {
                shard: 1,
                lease: None
            }
        );
        assert_eq!(shard_at(3, None, || unreachable!()), 3);
        // Read: own shards always, the granted ones where the span meets the range.
        assert_eq!(
            read_shards(2, Some(&g), None, None),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(
            read_shards(2, Some(&g), None, Some(-SKEW_MS - 1)),
            vec![0, 1]
        );
        assert_eq!(
            read_shards(2, Some(&g), Some(1_000 + SKEW_MS + 1), None),
            vec![0, 1]
        );
        assert_eq!(read_shards(16, Some(&g), None, None).len(), 16);
    }

    #[test]
    fn merged_grants_cover_both() {
        let a = Grant {
            shards: 8,
            from_ms: 10,
            until_ms: 20,
        };
        let b = Grant {
            shards: 4,
            from_ms: 30,
            until_ms: 40,
        };
        assert_eq!(
            a.merged(&b),
            Grant {
                shards: 8,
                from_ms: 10,
                until_ms: 40
            }
        );
    }

    #[test]
    fn due_shards_grow_with_the_retries_and_are_read_until_every_entry_came_due() {
        // 16 shards take 4,000 due entries a second; 10,000 call for 64.
        assert_eq!(due::next(None, 16, 3_000.0, 0), None);
        assert!(!due::may_call_for(4_000.0, 16) && due::may_call_for(4_001.0, 16));
        let g = due::next(None, 16, 10_000.0, 0).unwrap();
        assert_eq!((g.shards, g.until_ms), (64, GRANT_MS));
        assert_eq!(due::next(None, 16, 1e9, 0).unwrap().shards, due::MAX);
        // Written over the grant while it holds, over the own shards after.
        assert_eq!(due::write_count(16, Some(&g), 10), 64);
        assert_eq!(due::write_count(16, Some(&g), GRANT_MS), 16);
        assert_eq!(due::write_count(16, None, 10), 16);
        // Read until the longest delay past its end, then no more.
        let span = Some(&g);
        assert_eq!(due::read_count(16, span, GRANT_MS + due::LINGER_MS), 64);
        assert_eq!(due::read_count(16, span, GRANT_MS + due::LINGER_MS + 1), 16);
        // A deployment that set more than the grant gives reads its own.
        assert_eq!(due::read_count(128, span, 10), 128);
        // A later, larger grant widens the span from the first one's start.
        let up = due::next(Some(&g), 16, 40_000.0, 60_000).unwrap();
        let both = g.merged(&up);
        assert_eq!((both.shards, both.from_ms), (256, 0));
    }
}
