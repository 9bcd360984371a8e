//! The in-process model of [`UsageStore`]: counters by key, charged as the usage table's items.

use super::*;
use converger_core::usage::Counts;
use converger_core::usage::Grain;
use converger_ports::{QueueDepth, UsageKey, UsageStore, depths_key};

/// About the size of a counter item with a few counts.
const COUNTER_BYTES: usize = 120;

#[async_trait]
impl UsageStore for MemStore {
    async fn add_usage(&self, key: &UsageKey, counts: &Counts) -> StoreResult<()> {
        if counts.is_zero() {
            return Ok(());
        }
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "usage",
                        "us#<owner>#<grain>#<bucket>",
                        key.key(),
                        COUNTER_BYTES,
                    )]
                })?;
                s.usage.entry(key.key()).or_default().add(counts);
                Ok(())
            },
        )
        .await
    }

    async fn read_usage(&self, keys: &[UsageKey]) -> StoreResult<Vec<Counts>> {
        self.charged(
            |m| m.get,
            |s, meter| {
                meter.read(|| {
                    keys.iter()
                        .map(|k| {
                            converger_ports::capacity::item_read(
                                "usage",
                                "us#<owner>#<grain>#<bucket>",
                                k.key(),
                                s.usage.get(&k.key()).map_or(0, |_| COUNTER_BYTES),
                                false,
                            )
                        })
                        .collect()
                })?;
                Ok(keys
                    .iter()
                    .map(|k| s.usage.get(&k.key()).copied().unwrap_or_default())
                    .collect())
            },
        )
        .await
    }

    async fn put_depths(
        &self,
        grain: Grain,
        bucket: i64,
        depths: &[QueueDepth],
    ) -> StoreResult<()> {
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "usage",
                        "qd#<grain>#<bucket>",
                        depths_key(grain, bucket),
                        60 + 40 * depths.len(),
                    )]
                })?;
                s.depths.insert(depths_key(grain, bucket), depths.to_vec());
                Ok(())
            },
        )
        .await
    }

    async fn read_depths(
        &self,
        grain: Grain,
        buckets: &[i64],
    ) -> StoreResult<Vec<Vec<QueueDepth>>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            buckets
                .iter()
                .map(|b| {
                    s.depths
                        .get(&depths_key(grain, *b))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect()
        })
    }
}
