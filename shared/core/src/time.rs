//! Time in the forms the store and the API use: milliseconds since the epoch for
//! comparisons, fixed-width RFC 3339 UTC strings (which sort as they compare) for display and
//! sort keys.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Where the pipeline reads the time: the system's ([`SystemClock`]), or, in a test, one that
/// moves only when told ([`ManualClock`]), so a backoff or a cooldown is passed in an instant.
/// Only the time the rules compare (due times, cooldowns, leases, windows) comes from it; how
/// long a request may take is the runtime's own timer, which a test's clock does not move.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;

    /// [`Self::now_ms`] as a fixed-width RFC 3339 time.
    fn now_rfc3339(&self) -> String {
        ms_to_rfc3339(self.now_ms())
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }

    fn now_rfc3339(&self) -> String {
        now_rfc3339()
    }
}

/// A clock that stands still until it is moved.
#[derive(Debug)]
pub struct ManualClock {
    ms: std::sync::atomic::AtomicI64,
}

impl ManualClock {
    /// Standing at `ms`.
    pub fn at(ms: i64) -> Self {
        Self {
            ms: std::sync::atomic::AtomicI64::new(ms),
        }
    }

    /// Standing at the system's time now.
    pub fn starting_now() -> Self {
        Self::at(now_ms())
    }

    /// Moves it forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.ms.fetch_add(by, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.ms.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `2026-11-30T03:54:40.123456Z`: fixed width, so string order is time order.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Whether a row whose TTL is `expires_at` (seconds since the epoch) has expired at `now_ms`:
/// such a row is absent, whatever the store has not deleted yet.
pub fn expired(expires_at: Option<i64>, now_ms: i64) -> bool {
    expires_at.is_some_and(|at| at.saturating_mul(1000) <= now_ms)
}

pub fn now_rfc3339() -> String {
    rfc3339(Utc::now())
}

pub fn ms_to_rfc3339(ms: i64) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) => rfc3339(t),
        None => rfc3339(DateTime::<Utc>::UNIX_EPOCH),
    }
}

/// Parses an RFC 3339 time back to milliseconds since the epoch.
pub fn rfc3339_to_ms(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc).timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at(1_000);
        assert_eq!(c.now_ms(), 1_000);
        assert_eq!(c.now_ms(), 1_000);
        c.advance(std::time::Duration::from_secs(30));
        assert_eq!(c.now_ms(), 31_000);
        assert_eq!(c.now_rfc3339(), "1970-01-01T00:00:31.000000Z");
        assert!(SystemClock.now_ms() > 1_700_000_000_000);
    }

    #[test]
    fn fixed_width_and_ordered() {
        let a = ms_to_rfc3339(1_000);
        let b = ms_to_rfc3339(1_764_000_000_123);
        assert_eq!(a.len(), b.len());
        assert!(a < b);
        assert_eq!(b, "2025-11-24T16:00:00.123000Z");
    }
}
