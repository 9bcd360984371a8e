//! Time in the forms the store and the API use: milliseconds since the epoch for
//! comparisons, fixed-width RFC 3339 UTC strings (which sort as they compare) for display and
//! sort keys.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// One instant, read once per operation: the milliseconds the rules compare and the RFC 3339
/// text that rows, sort keys and answers show both come from it, so the two cannot disagree.
/// Kept to the microsecond, the text's precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    micros: i64,
}

impl Timestamp {
    /// `ms` milliseconds since the epoch.
    pub const fn from_ms(ms: i64) -> Self {
        Self {
            micros: ms.saturating_mul(1000),
        }
    }

    /// `micros` microseconds since the epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self { micros }
    }

    /// The system's time now.
    pub fn now() -> Self {
        Self::from_micros(Utc::now().timestamp_micros())
    }

    /// Reads an RFC 3339 time.
    pub fn parse(s: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Self::from_micros(t.with_timezone(&Utc).timestamp_micros()))
    }

    /// Milliseconds since the epoch.
    pub const fn ms(self) -> i64 {
        self.micros.div_euclid(1000)
    }

    /// Microseconds since the epoch.
    pub const fn micros(self) -> i64 {
        self.micros
    }

    /// Whole seconds since the epoch.
    pub const fn secs(self) -> i64 {
        self.micros.div_euclid(1_000_000)
    }

    /// `2026-11-30T03:54:40.123456Z`: fixed width, so text order is time order.
    pub fn rfc3339(self) -> String {
        match Utc.timestamp_micros(self.micros).single() {
            Some(t) => rfc3339(t),
            None => rfc3339(DateTime::<Utc>::UNIX_EPOCH),
        }
    }

    /// `ms` milliseconds later (earlier when negative).
    pub const fn plus_ms(self, ms: i64) -> Self {
        Self {
            micros: self.micros.saturating_add(ms.saturating_mul(1000)),
        }
    }
}

/// Rows and answers hold it as its fixed-width RFC 3339 text; any RFC 3339 time reads back.
impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 time: {text:?}")))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

/// Where the pipeline reads the time: the system's ([`SystemClock`]), or, in a test, one that
/// moves only when told ([`ManualClock`]), so a backoff or a cooldown is passed in an instant.
/// Only the time the rules compare (due times, cooldowns, leases, windows) comes from it; how
/// long a request may take is the runtime's own timer, which a test's clock does not move.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The time now.
    fn now(&self) -> Timestamp;

    /// [`Self::now`] in milliseconds since the epoch.
    fn now_ms(&self) -> i64 {
        self.now().ms()
    }

    /// [`Self::now`] as a fixed-width RFC 3339 time.
    fn now_rfc3339(&self) -> String {
        self.now().rfc3339()
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
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
    fn now(&self) -> Timestamp {
        Timestamp::from_ms(self.ms.load(std::sync::atomic::Ordering::SeqCst))
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
    fn a_timestamp_is_written_as_its_fixed_text_and_reads_any_rfc_3339_time() {
        let t = Timestamp::from_micros(1_764_000_000_123_456);
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(json, serde_json::json!("2025-11-24T16:00:00.123456Z"));
        assert_eq!(serde_json::from_value::<Timestamp>(json).unwrap(), t);
        let other_form: Timestamp =
            serde_json::from_value(serde_json::json!("2025-11-24T17:00:00.5+01:00")).unwrap();
        assert_eq!(other_form, Timestamp::from_ms(1_764_000_000_500));
        let bad = serde_json::from_value::<Timestamp>(serde_json::json!("yesterday"));
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("not an RFC 3339 time")
        );
        assert!(serde_json::from_value::<Timestamp>(serde_json::json!(17)).is_err());
    }

    #[test]
    fn a_timestamp_gives_one_instant_in_each_form() {
        let t = Timestamp::from_micros(1_764_000_000_123_456);
        assert_eq!(t.ms(), 1_764_000_000_123);
        assert_eq!(t.secs(), 1_764_000_000);
        assert_eq!(t.rfc3339(), "2025-11-24T16:00:00.123456Z");
        assert_eq!(Timestamp::parse(&t.rfc3339()), Some(t));
        assert_eq!(t.plus_ms(1_000).ms(), 1_764_000_001_123);
        assert_eq!(Timestamp::from_ms(1_000).rfc3339(), ms_to_rfc3339(1_000));
        // Before the epoch, milliseconds round down as the text does.
        assert_eq!(Timestamp::from_micros(-1).ms(), -1);
        assert!(Timestamp::from_ms(1) < Timestamp::from_ms(2));
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
