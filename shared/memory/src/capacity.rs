//! DynamoDB's per-partition throughput, modelled: every partition key value of a table or an
//! index serves at most 1,000 write units and 3,000 read units a second (a token bucket a
//! second deep). A request that any of its partitions cannot serve is refused whole, as
//! DynamoDB answers `ProvisionedThroughputExceededException` (an index's back-pressure
//! throttles the base table's write with it), and tried again as the SDK's standard retry
//! does: up to five attempts in all (`converger_store::aws`), the n-th retry after a random
//! wait of up to 2^(n-1) seconds, at most 20. What each write costs, and where, is the key
//! layout's (`converger_ports::capacity`).

use converger_ports::capacity::{Charge, Partition};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limits and the retry policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityModel {
    pub write_units_per_s: f64,
    pub read_units_per_s: f64,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl CapacityModel {
    /// DynamoDB's limits and the functions' SDK retry settings.
    pub const fn dynamodb() -> Self {
        Self {
            write_units_per_s: 1000.0,
            read_units_per_s: 3000.0,
            max_attempts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(20),
        }
    }

    /// The same with every partition's limits divided by `factor`: a scenario this machine
    /// can drive at a `factor`-th of its target rate meets the throttles the full rate would.
    pub fn scaled_down(self, factor: f64) -> Self {
        let f = factor.max(1.0);
        Self {
            write_units_per_s: self.write_units_per_s / f,
            read_units_per_s: self.read_units_per_s / f,
            ..self
        }
    }

    /// How long the SDK waits before retry `n` (1 for the first retry), with `jitter` in
    /// [0, 1).
    pub fn backoff(&self, n: u32, jitter: f64) -> Duration {
        let cap = self
            .initial_backoff
            .saturating_mul(1u32 << n.saturating_sub(1).min(16))
            .min(self.max_backoff);
        cap.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// A request refused because `.0`'s throughput was exceeded.
#[derive(Debug, Clone, PartialEq)]
pub struct Throttled(pub Partition);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    write: f64,
    read: f64,
    at: Instant,
}

/// What was charged, per partition, since the last [`Capacity::take`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityTally {
    pub writes: BTreeMap<Partition, f64>,
    pub reads: BTreeMap<Partition, f64>,
    /// Requests refused, by the partition that refused them.
    pub throttled: BTreeMap<Partition, u64>,
    /// Requests that succeeded on a retry after a throttle.
    pub retried_ok: u64,
    /// Requests refused on every attempt (the caller got an error).
    pub failed: u64,
}

/// The partitions' buckets and tallies.
#[derive(Debug)]
pub struct Capacity {
    pub model: CapacityModel,
    buckets: Mutex<HashMap<Partition, Bucket>>,
    tally: Mutex<CapacityTally>,
}

impl Capacity {
    pub fn new(model: CapacityModel) -> Self {
        Self {
            model,
            buckets: Mutex::new(HashMap::new()),
            tally: Mutex::new(CapacityTally::default()),
        }
    }

    /// Charges one request's `writes` and `reads` at `now`, all or nothing: refused when any
    /// partition lacks the units (and nothing is charged then: a throttled request is free).
    pub fn charge_at(
        &self,
        now: Instant,
        writes: &[Charge],
        reads: &[Charge],
    ) -> Result<(), Throttled> {
        let mut need: BTreeMap<&Partition, (f64, f64)> = BTreeMap::new();
        for c in writes {
            need.entry(&c.at).or_default().0 += c.units;
        }
        for c in reads {
            need.entry(&c.at).or_default().1 += c.units;
        }
        let m = self.model;
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (p, (w, r)) in &need {
            let b = buckets.entry((*p).clone()).or_insert(Bucket {
                write: m.write_units_per_s,
                read: m.read_units_per_s,
                at: now,
            });
            let dt = now.saturating_duration_since(b.at).as_secs_f64();
            b.write = (b.write + dt * m.write_units_per_s).min(m.write_units_per_s);
            b.read = (b.read + dt * m.read_units_per_s).min(m.read_units_per_s);
            b.at = b.at.max(now);
            // A request larger than a second's worth is served from a full bucket.
            let (w, r) = (w.min(m.write_units_per_s), r.min(m.read_units_per_s));
            if b.write < w || b.read < r {
                let p = (*p).clone();
                drop(buckets);
                let mut t = self.tally();
                *t.throttled.entry(p.clone()).or_default() += 1;
                return Err(Throttled(p));
            }
        }
        for (p, (w, r)) in &need {
            if let Some(b) = buckets.get_mut(*p) {
                b.write -= w.min(m.write_units_per_s);
                b.read -= r.min(m.read_units_per_s);
            }
        }
        drop(buckets);
        let mut t = self.tally();
        for (p, (w, r)) in need {
            if w > 0.0 {
                *t.writes.entry(p.clone()).or_default() += w;
            }
            if r > 0.0 {
                *t.reads.entry(p.clone()).or_default() += r;
            }
        }
        Ok(())
    }

    pub fn charge(&self, writes: &[Charge], reads: &[Charge]) -> Result<(), Throttled> {
        self.charge_at(Instant::now(), writes, reads)
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, CapacityTally> {
        self.tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn retried(&self, ok: bool) {
        let mut t = self.tally();
        if ok {
            t.retried_ok += 1;
        } else {
            t.failed += 1;
        }
    }

    /// The requests refused so far (since the last [`Capacity::take`]).
    pub fn throttled_so_far(&self) -> u64 {
        self.tally().throttled.values().sum()
    }

    /// The tallies so far, and zero again.
    pub fn take(&self) -> CapacityTally {
        std::mem::take(&mut *self.tally())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use converger_ports::capacity::item_write;

    fn w(key: &str, units: usize) -> Charge {
        item_write("flow", "<channel>", key, units * 1024)
    }

    #[test]
    fn a_key_over_its_limit_is_throttled_and_others_are_not() {
        let c = Capacity::new(CapacityModel::dynamodb());
        let t0 = Instant::now();
        for _ in 0..1000 {
            c.charge_at(t0, &[w("hot", 1)], &[]).unwrap();
        }
        let refused = c.charge_at(t0, &[w("hot", 1)], &[]).unwrap_err();
        assert_eq!(refused.0.key, "hot");
        // Another key, and a write that names both, at the same instant.
        c.charge_at(t0, &[w("cold", 1)], &[]).unwrap();
        assert!(c.charge_at(t0, &[w("cold", 1), w("hot", 1)], &[]).is_err());
        // Refused whole: the cold key was not charged for the refused request.
        let t = c.take();
        assert_eq!(t.writes[&w("cold", 1).at], 1.0);
        assert_eq!(t.throttled[&w("hot", 1).at], 2);
        // Reads have their own budget on the same key.
        let read = converger_ports::capacity::item_read("flow", "<channel>", "hot", 10, false);
        c.charge_at(t0, &[], std::slice::from_ref(&read)).unwrap();
    }

    #[test]
    fn the_rate_refills_and_a_retry_succeeds_once_it_falls() {
        let c = Capacity::new(CapacityModel::dynamodb().scaled_down(10.0));
        let t0 = Instant::now();
        for _ in 0..100 {
            c.charge_at(t0, &[w("hot", 1)], &[]).unwrap();
        }
        assert!(c.charge_at(t0, &[w("hot", 1)], &[]).is_err());
        // 100 units a second: 10 ms refills one.
        assert!(
            c.charge_at(t0 + Duration::from_millis(5), &[w("hot", 1)], &[])
                .is_err()
        );
        c.charge_at(t0 + Duration::from_millis(20), &[w("hot", 1)], &[])
            .unwrap();
        // A request larger than the bucket goes through from a full one.
        c.charge_at(t0 + Duration::from_secs(5), &[w("hot", 400)], &[])
            .unwrap();
    }

    #[test]
    fn the_sdk_backs_off_exponentially_with_jitter_up_to_its_cap() {
        let m = CapacityModel::dynamodb();
        assert_eq!(m.backoff(1, 0.999), Duration::from_secs(1).mul_f64(0.999));
        assert_eq!(m.backoff(3, 0.5), Duration::from_secs(2));
        assert_eq!(m.backoff(9, 1.0), Duration::from_secs(20));
        assert_eq!(m.backoff(2, 0.0), Duration::ZERO);
    }
}
