//! The health counters every delivery feeds (created, dead-lettered, replayed), added up
//! per instance and written once per channel and minute per `health_flush`
//! (see [`converger_core::health::Tally`]); and, from the same sums, each channel's
//! dead letters by the day their deliveries were created (the `dead_letters` gauge), written
//! once per channel and day per flush.

use converger_core::ChannelId;
use converger_core::health::Tally;
use converger_ports::{Delivery, HealthStore};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// This instance's health counts not written yet.
pub struct HealthCounts {
    store: Arc<dyn HealthStore>,
    flush: Duration,
    /// How long deliveries are kept: a day's dead-letter counter is kept as long.
    retention: Duration,
    tally: Mutex<Tally<ChannelId>>,
    pub(crate) clock: Arc<dyn converger_core::time::Clock>,
}

impl HealthCounts {
    pub(crate) fn new(store: Arc<dyn HealthStore>, flush: Duration, retention: Duration) -> Self {
        Self {
            store,
            flush,
            retention,
            tally: Mutex::new(Tally::default()),
            clock: Arc::new(converger_core::time::SystemClock),
        }
    }

    /// Counts a dead letter (`+1`) or a replayed one (`-1`) into the minute its delivery was
    /// created in, so the window's failures are those of the deliveries it counts.
    pub(crate) async fn count_failed(&self, d: &Delivery, delta: i64) {
        self.count_failed_many(std::slice::from_ref(d), delta).await;
    }

    /// [`Self::count_failed`] for many deliveries.
    pub(crate) async fn count_failed_many(&self, rows: &[Delivery], delta: i64) {
        self.count(rows.iter().map(|d| (d, 0, delta))).await;
    }

    /// Counts deliveries just written as created into their channels' health counters.
    pub(crate) async fn count_created(&self, rows: &[Delivery]) {
        self.count(rows.iter().map(|d| (d, 1, 0))).await;
    }

    /// Adds `(delivery, created, failed)` to this instance's tally, and writes the tally
    /// (one write per channel and minute) when its period has passed.
    async fn count(&self, counts: impl Iterator<Item = (&Delivery, i64, i64)>) {
        let due = match self.tally.lock() {
            Ok(mut t) => {
                for (d, c, f) in counts {
                    t.add(d.channel_id.clone(), d.created_minute(), c, f);
                }
                let every = i64::try_from(self.flush.as_millis()).unwrap_or(0);
                t.take_due(self.clock.now_ms(), every)
            }
            Err(_) => return,
        };
        let mut days: std::collections::BTreeMap<(ChannelId, i64), i64> = Default::default();
        for ((channel, m), (_, f)) in &due {
            if *f != 0 {
                *days
                    .entry((channel.clone(), m.div_euclid(1440)))
                    .or_default() += f;
            }
        }
        let mut failed = Vec::new();
        for ((channel, m), (c, f)) in due {
            if let Err(e) = self.store.count_deliveries(&channel, m, c, f).await {
                tracing::warn!(channel_id = %channel, error = %e, "health counter not written");
                failed.push(((channel, m), (c, f)));
            }
        }
        if !failed.is_empty()
            && let Ok(mut t) = self.tally.lock()
        {
            t.restore(failed);
        }
        // Kept until the day's last delivery expires.
        let keep_s = i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX / 4) + 86_400;
        for ((channel, day), n) in days {
            if let Err(e) = self
                .store
                .count_dead_letters(&channel, day, n, day * 86_400 + keep_s)
                .await
            {
                // The gauge is off by `n` until these deliveries expire; nothing else reads it.
                tracing::warn!(channel_id = %channel, day, n, error = %e, "dead-letter counter not written");
            }
        }
    }
}
