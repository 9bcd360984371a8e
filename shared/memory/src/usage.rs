//! The in-process model of [`UsageStore`]: counters by key, charged as the usage table's items.

use super::*;
use converger_core::usage::Counts;
use converger_core::usage::Grain;
use converger_ports::{QueueDepth, UsageKey, UsageStore, depths_key};

/// About the size of a counter item with a few counts.
pub(crate) const COUNTER_BYTES: usize = 120;

/// About the size of one stream shard's mark on a counter item: its attribute's name (the
/// shard's id, about 40 bytes) and the last sequence number added (21 to 40 digits).
pub(crate) const MARK_BYTES: usize = 75;

impl MemStore {
    /// Adds `counts` to the usage counter item `key`, charged as an item of `bytes`.
    pub(crate) async fn add_usage_item(
        &self,
        key: String,
        counts: &Counts,
        bytes: usize,
    ) -> StoreResult<()> {
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
                        key.clone(),
                        bytes,
                    )]
                })?;
                s.usage.entry(key.clone()).or_default().add(counts);
                Ok(())
            },
        )
        .await
    }
}

#[async_trait]
impl UsageStore for MemStore {
    async fn add_usage(&self, key: &UsageKey, counts: &Counts) -> StoreResult<()> {
        self.add_usage_item(key.key(), counts, COUNTER_BYTES).await
    }

    async fn read_usage(&self, keys: &[UsageKey]) -> StoreResult<Vec<Counts>> {
        let parts: Vec<Vec<String>> = keys.iter().map(|k| k.part_keys().collect()).collect();
        self.charged(
            |m| m.get,
            |s, meter| {
                meter.read(|| {
                    parts
                        .iter()
                        .flatten()
                        .map(|k| {
                            let marks = s.marks_on.get(k).copied().unwrap_or(0);
                            converger_ports::capacity::item_read(
                                "usage",
                                "us#<owner>#<grain>#<bucket>",
                                k.clone(),
                                s.usage
                                    .get(k)
                                    .map_or(0, |_| COUNTER_BYTES + marks * MARK_BYTES),
                                false,
                            )
                        })
                        .collect()
                })?;
                Ok(parts
                    .iter()
                    .map(|ks| {
                        let mut sum = Counts::default();
                        for c in ks.iter().filter_map(|k| s.usage.get(k)) {
                            sum.add(c);
                        }
                        sum
                    })
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
