//! Time in the forms the store and the API use: milliseconds since the epoch for
//! comparisons, fixed-width RFC 3339 UTC strings (which sort as they compare) for display and
//! sort keys.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
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
    fn fixed_width_and_ordered() {
        let a = ms_to_rfc3339(1_000);
        let b = ms_to_rfc3339(1_764_000_000_123);
        assert_eq!(a.len(), b.len());
        assert!(a < b);
        assert_eq!(b, "2025-11-24T16:00:00.123000Z");
    }
}
