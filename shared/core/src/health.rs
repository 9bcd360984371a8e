//! Channel health and auto-disable rules.

use crate::Invalid;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// How far back a health check looks: deliveries created in the last 60 minutes.
pub const WINDOW_MINUTES: i64 = 60;

/// How long health rows are kept.
pub const HISTORY_DAYS: i64 = 7;

/// The channel types a health check covers.
pub const CHECKED_TYPES: [&str; 5] = [
    "webhook",
    "whatsapp_meta",
    "whatsapp_infobip",
    "slack",
    "email",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// No deliveries in the window.
    #[default]
    Unknown,
    /// Failure rate below 10%.
    Healthy,
    /// 10% up to (not including) 50%.
    Degraded,
    /// 50% or more.
    Unhealthy,
}

impl HealthStatus {
    /// The status for `failed` of `total` deliveries created in the window.
    pub fn of(total: u64, failed: u64) -> Self {
        if total == 0 {
            return Self::Unknown;
        }
        // Integer comparisons: failed/total < 0.1 <=> 10 * failed < total.
        let failed = failed.min(total);
        if failed * 10 < total {
            Self::Healthy
        } else if failed * 2 < total {
            Self::Degraded
        } else {
            Self::Unhealthy
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Healthy => "healthy",
            Self::Degraded => "degraded",
            Self::Unhealthy => "unhealthy",
        }
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The failure rate as the health event shows it (0 with no deliveries).
pub fn failure_rate(total: u64, failed: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        failed.min(total) as f64 / total as f64
    }
}

/// The minute bucket of a time (ms since the epoch).
pub fn minute(ms: i64) -> i64 {
    ms.div_euclid(60_000)
}

/// A channel's auto-disable settings (the `auto_disable` object of a channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoDisable {
    /// Consecutive failed attempts (of any kind) before a channel may be disabled; 0 turns
    /// auto-disable off.
    pub failed_attempts: u32,
    /// ... and no successful delivery within this long.
    pub success_window_ms: i64,
}

impl Default for AutoDisable {
    fn default() -> Self {
        Self {
            failed_attempts: 20,
            success_window_ms: 86_400_000,
        }
    }
}

/// `disabled_reason` of an auto-disabled channel.
pub const AUTO_DISABLED: &str = "auto_disabled_failure_threshold";

/// A channel's own auto-disable settings (its `auto_disable` object), `None` where the
/// default holds; checked when read or written, like [`crate::BreakerOverrides`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", into = "Map<String, Value>")]
pub struct AutoDisableOverrides {
    pub failed_attempts: Option<u32>,
    pub success_window_ms: Option<i64>,
}

impl AutoDisableOverrides {
    /// Reads a channel's `auto_disable` object.
    pub fn parse(overrides: &Map<String, Value>) -> Result<Self, Invalid> {
        let mut o = Self::default();
        for (k, v) in overrides {
            match k.as_str() {
                "failed_attempts" => {
                    o.failed_attempts = Some(
                        v.as_u64()
                            .filter(|n| *n <= 100_000)
                            .ok_or("failed_attempts must be an integer from 0 (off) to 100000")?
                            as u32,
                    )
                }
                "success_window_ms" => {
                    o.success_window_ms = Some(
                        v.as_i64()
                            .filter(|n| (60_000..=90 * 86_400_000).contains(n))
                            .ok_or(
                                "success_window_ms must be an integer from 60000 to 7776000000",
                            )?,
                    )
                }
                other => {
                    return Err(Invalid(format!(
                        "unknown auto_disable setting {other:?} (known: failed_attempts, success_window_ms)"
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
    pub fn effective(&self) -> AutoDisable {
        let d = AutoDisable::default();
        AutoDisable {
            failed_attempts: self.failed_attempts.unwrap_or(d.failed_attempts),
            success_window_ms: self.success_window_ms.unwrap_or(d.success_window_ms),
        }
    }

    /// As it is stored: the keys it sets.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(n) = self.failed_attempts {
            m.insert("failed_attempts".into(), Value::from(n));
        }
        if let Some(ms) = self.success_window_ms {
            m.insert("success_window_ms".into(), Value::from(ms));
        }
        m
    }
}

impl TryFrom<Map<String, Value>> for AutoDisableOverrides {
    type Error = Invalid;

    fn try_from(map: Map<String, Value>) -> Result<Self, Invalid> {
        Self::parse(&map)
    }
}

impl From<AutoDisableOverrides> for Map<String, Value> {
    fn from(o: AutoDisableOverrides) -> Self {
        o.to_map()
    }
}

impl AutoDisable {
    /// Whether a channel with `failed_in_row` consecutive failed attempts and its last success
    /// at `last_success_ms` is disabled at `now_ms`. Both conditions must hold.
    pub fn should_disable(
        &self,
        failed_in_row: u32,
        last_success_ms: Option<i64>,
        now_ms: i64,
    ) -> bool {
        self.failed_attempts > 0
            && failed_in_row >= self.failed_attempts
            && last_success_ms.is_none_or(|t| now_ms - t >= self.success_window_ms)
    }

    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "failed_attempts": self.failed_attempts,
            "success_window_ms": self.success_window_ms,
        })
    }
}

/// The health counts an instance has not written yet, per (channel, minute): deliveries
/// created and dead letters (a replayed one counts `-1`). Counting each delivery with a write
/// of its own would put a write per delivery on one key per channel (a ceiling of 1,000
/// deliveries/s, and a unit on every first try); an instance adds up what it counts instead
/// and writes the sums at most once per `every_ms` (at once when it wrote none before), so a
/// busy channel's counters take one write per instance a second. What a crash loses is at most
/// that long of one instance's counts: a health rate is a statistic, never a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally<K: Ord> {
    counts: std::collections::BTreeMap<(K, i64), (i64, i64)>,
    last_flush_ms: Option<i64>,
}

impl<K: Ord> Default for Tally<K> {
    fn default() -> Self {
        Self {
            counts: std::collections::BTreeMap::new(),
            last_flush_ms: None,
        }
    }
}

impl<K: Ord + Clone> Tally<K> {
    pub fn add(&mut self, key: K, minute: i64, created: i64, failed: i64) {
        let c = self.counts.entry((key, minute)).or_insert((0, 0));
        c.0 += created;
        c.1 += failed;
    }

    /// Everything counted, and empty again, when the last flush was `every_ms` ago or more
    /// (or there was none); nothing otherwise. Sums that add up to nothing are left out.
    pub fn take_due(&mut self, now_ms: i64, every_ms: i64) -> Vec<((K, i64), (i64, i64))> {
        if self
            .last_flush_ms
            .is_some_and(|last| now_ms.saturating_sub(last) < every_ms)
        {
            return Vec::new();
        }
        self.last_flush_ms = Some(now_ms);
        std::mem::take(&mut self.counts)
            .into_iter()
            .filter(|(_, (c, f))| *c != 0 || *f != 0)
            .collect()
    }

    /// Puts back sums that could not be written (they go with the next flush).
    pub fn restore(&mut self, entries: Vec<((K, i64), (i64, i64))>) {
        for ((k, m), (c, f)) in entries {
            self.add(k, m, c, f);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tally_writes_its_sums_at_most_once_per_period() {
        let mut t: Tally<&str> = Tally::default();
        t.add("a", 10, 1, 0);
        assert_eq!(
            t.take_due(1_000, 1_000),
            vec![(("a", 10), (1, 0))],
            "the first at once"
        );
        t.add("a", 10, 1, 0);
        t.add("a", 10, 1, 1);
        t.add("b", 11, 0, 1);
        t.add("c", 11, 1, 0);
        t.add("c", 11, -1, 0);
        assert!(
            t.take_due(1_500, 1_000).is_empty(),
            "within the period: held"
        );
        let due = t.take_due(2_000, 1_000);
        assert_eq!(due, vec![(("a", 10), (2, 1)), (("b", 11), (0, 1))]);
        assert!(t.is_empty());
        t.restore(due);
        assert_eq!(
            t.take_due(3_000, 1_000),
            vec![(("a", 10), (2, 1)), (("b", 11), (0, 1))],
            "what could not be written goes with the next flush"
        );
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn thresholds_at_their_edges() {
        assert_eq!(HealthStatus::of(0, 0), HealthStatus::Unknown);
        assert_eq!(HealthStatus::of(1000, 99), HealthStatus::Healthy, "9.9%");
        assert_eq!(HealthStatus::of(1000, 100), HealthStatus::Degraded, "10%");
        assert_eq!(HealthStatus::of(1000, 499), HealthStatus::Degraded, "49.9%");
        assert_eq!(HealthStatus::of(1000, 500), HealthStatus::Unhealthy, "50%");
        assert_eq!(HealthStatus::of(10, 10), HealthStatus::Unhealthy);
        assert_eq!(HealthStatus::of(10, 0), HealthStatus::Healthy);
        assert_eq!(failure_rate(80, 10), 0.125);
    }

    #[test]
    fn auto_disable_needs_both_conditions() {
        let a = AutoDisable::default();
        let now = 100 * 86_400_000;
        let h = 3_600_000;
        assert!(!a.should_disable(19, None, now));
        assert!(a.should_disable(20, None, now));
        assert!(
            !a.should_disable(20, Some(now - 23 * h), now),
            "a success 23 h ago"
        );
        assert!(a.should_disable(20, Some(now - 24 * h), now));
        let off = AutoDisable {
            failed_attempts: 0,
            ..a
        };
        assert!(!off.should_disable(1000, None, now));
        let m = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            AutoDisableOverrides::parse(&m(serde_json::json!({"failed_attempts": 3})))
                .unwrap()
                .effective()
                .failed_attempts,
            3
        );
        assert!(
            AutoDisableOverrides::parse(&m(serde_json::json!({"failed_attempts": -1}))).is_err()
        );
        assert!(AutoDisableOverrides::parse(&m(serde_json::json!({"after": 3}))).is_err());
        let written = serde_json::json!({"failed_attempts": 0, "success_window_ms": 60000});
        let read: AutoDisableOverrides = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(read).unwrap(), written);
        assert!(
            serde_json::from_value::<AutoDisableOverrides>(serde_json::json!({"after": 3}))
                .is_err()
        );
    }

    proptest! {
        #[test]
        fn status_agrees_with_the_rate(total in 1u64..1_000_000, f in 0u64..1_000_000) {
            let failed = f % (total + 1);
            let rate = failed as f64 / total as f64;
            let expected = if rate < 0.1 { HealthStatus::Healthy } else if rate < 0.5 { HealthStatus::Degraded } else { HealthStatus::Unhealthy };
            prop_assert_eq!(HealthStatus::of(total, failed), expected);
        }
    }
}
