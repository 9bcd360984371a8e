//! The addresses whose requests keep being refused: a bad API key on the tenant API, a
//! receipt that fails its check, a `$connect` with a bad key or token. Each refusal spends one
//! of the source's shared schedule ([`api_limit::REFUSALS_PER_SOURCE`], every instance of
//! every entry point together); past it, the source is answered `source_throttled` before
//! anything is looked up, until the schedule has room again. An instance remembers the
//! sources it throttled, so a throttled source costs no store request.

use converger_core::api_limit;
use converger_core::cache::TtlCache;
use std::time::Duration;

/// How many throttled sources an instance remembers, and for at most how long.
const REMEMBERED: usize = 10_000;
const REMEMBERED_FOR: Duration = Duration::from_secs(60);

pub struct SourceGate {
    /// Source -> the instant (ms) it may be served again.
    throttled: TtlCache<String, i64>,
}

impl Default for SourceGate {
    fn default() -> Self {
        Self {
            throttled: TtlCache::bounded(REMEMBERED_FOR, REMEMBERED),
        }
    }
}

/// Whole seconds from `now_ms` to `until_ms`, at least one.
fn seconds_until(until_ms: i64, now_ms: i64) -> u64 {
    u64::try_from((until_ms - now_ms + 999) / 1000)
        .unwrap_or(1)
        .max(1)
}

/// The sources' refusal throttle as one instance applies it: its remembered sources, and
/// the shared schedules it spends.
#[derive(Clone, Copy)]
pub struct Sources<'p> {
    pub(crate) gate: &'p SourceGate,
    pub(crate) schedules: &'p dyn converger_ports::FlowStore,
    pub(crate) clock: &'p dyn converger_core::time::Clock,
}

impl Sources<'_> {
    /// Seconds until `source` may be served again, while it is throttled.
    pub fn throttled(&self, source: &str) -> Option<u64> {
        let now = self.clock.now_ms();
        self.gate
            .throttled
            .get(&source.to_owned())
            .filter(|until| *until > now)
            .map(|until| seconds_until(until, now))
    }

    /// Counts one refusal of `source`: the seconds it must now wait, when this refusal took
    /// it past its schedule. A schedule that cannot be read throttles no one.
    pub async fn refused(&self, source: &str) -> Option<u64> {
        let now = self.clock.now_ms();
        let limit = api_limit::REFUSALS_PER_SOURCE;
        match self
            .schedules
            .rate_take_n(
                &api_limit::refusals_key(source),
                &limit,
                1,
                now.saturating_mul(1000),
            )
            .await
        {
            Ok(Ok(())) => None,
            Ok(Err(at_us)) => {
                let wait = u64::from(converger_core::RateLimit::snooze_s(
                    at_us,
                    now.saturating_mul(1000),
                ))
                .max(1);
                tracing::warn!(source, "source throttled: too many refused requests");
                let until = now.saturating_add(i64::try_from(wait).unwrap_or(60) * 1000);
                self.gate.throttled.insert(source.to_owned(), until);
                Some(wait)
            }
            Err(e) => {
                tracing::warn!(error = %e, "refusal schedule unreadable; no one throttled");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_whole_seconds_and_never_zero() {
        assert_eq!(seconds_until(1_000, 1_000), 1);
        assert_eq!(seconds_until(2_001, 1_000), 2);
        assert_eq!(seconds_until(61_000, 1_000), 60);
    }
}
