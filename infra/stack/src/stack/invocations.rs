//! Counts the functions' invocations and how long each ran, as Lambda bills them (the `cost`
//! benchmark): one invocation per SQS batch, per API request and per scheduled run, each
//! billed in whole milliseconds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One function's invocations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    pub invocations: u64,
    /// The sum of the invocations' durations, each rounded up to a millisecond.
    pub billed_ms: u64,
}

/// Invocations by function (its logical id in the template).
#[derive(Clone, Debug, Default)]
pub struct Invocations {
    by_function: Arc<Mutex<BTreeMap<&'static str, Tally>>>,
}

impl Invocations {
    pub fn new() -> Self {
        Self::default()
    }

    /// One invocation of `function` that took `took`.
    pub fn record(&self, function: &'static str, took: Duration) {
        let ms = u64::try_from(took.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
        let mut m = self
            .by_function
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let t = m.entry(function).or_default();
        t.invocations += 1;
        t.billed_ms = t.billed_ms.saturating_add(ms.max(1));
    }

    /// What was counted since the last call, and a fresh start.
    pub fn take(&self) -> BTreeMap<&'static str, Tally> {
        std::mem::take(
            &mut *self
                .by_function
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_billed_in_whole_milliseconds_per_invocation() {
        let i = Invocations::new();
        i.record("DeliverFunction", Duration::from_micros(1_200));
        i.record("DeliverFunction", Duration::from_micros(10));
        i.record("ApiFunction", Duration::from_millis(5));
        let t = i.take();
        assert_eq!(
            t["DeliverFunction"],
            Tally {
                invocations: 2,
                billed_ms: 3
            }
        );
        assert_eq!(t["ApiFunction"].billed_ms, 5);
        assert!(i.take().is_empty());
    }
}
