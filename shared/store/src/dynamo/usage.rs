//! The DynamoDB backend of [`UsageStore`]: each counter is an item of the usage table
//! (`keys::channel_usage_key`, `keys::tenant_usage_key`), one `ADD` per non-zero count, with `expires_at` for the table's TTL.

use super::*;
use converger_core::usage::Counts;
use converger_core::usage::Grain;
use converger_ports::{QueueDepth, UsageKey, UsageStore, depths_key};

/// A depths sample as stored.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sample {
    key: String,
    queues: Vec<QueueDepth>,
    expires_at: i64,
}

#[async_trait]
impl UsageStore for DynamoStore {
    async fn add_usage(&self, key: &UsageKey, counts: &Counts) -> StoreResult<()> {
        if counts.fields().is_empty() {
            return Ok(());
        }
        self.add_counter(&CounterAdd::Usage {
            key: key.clone(),
            part: 0,
            counts: *counts,
        })
        .await
    }

    // Read within their buckets' keep time (the charts' ranges are), so the TTL's lag does
    // not show: no expiry filter.
    async fn read_usage(&self, keys: &[UsageKey]) -> StoreResult<Vec<Counts>> {
        // Every part of every counter.
        let names: Vec<Vec<String>> = keys.iter().map(|k| k.part_keys().collect()).collect();
        let mut wanted: Vec<Item> =
            Vec::with_capacity(names.len() * names.first().map_or(0, Vec::len));
        let mut seen = std::collections::HashSet::new();
        for k in names.iter().flatten() {
            if seen.insert(k.as_str()) {
                wanted.push(HashMap::from([("key".to_owned(), s(k.as_str()))]));
            }
        }
        // A batch read per 100 keys, eight at a time (an operator's top tenants read every
        // tenant's days).
        use futures::{StreamExt, TryStreamExt};
        let pages: Vec<Vec<Item>> = futures::stream::iter(wanted.chunks(100).map(<[Item]>::to_vec))
            .map(|chunk| self.batch_get(&self.res.usage, chunk, false))
            .buffer_unordered(8)
            .try_collect()
            .await?;
        let mut found: HashMap<String, Counts> = HashMap::new();
        for item in pages.into_iter().flatten() {
            let Some(k) = item.get("key").and_then(|v| v.as_s().ok()).cloned() else {
                continue;
            };
            let counts = Counts::from_fields(
                item.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_n().ok()?.parse().ok()?))),
            );
            found.insert(k, counts);
        }
        Ok(names
            .iter()
            .map(|parts| {
                let mut sum = Counts::default();
                for c in parts.iter().filter_map(|k| found.get(k)) {
                    sum.add(c);
                }
                sum
            })
            .collect())
    }

    async fn put_depths(
        &self,
        grain: Grain,
        bucket: i64,
        depths: &[QueueDepth],
    ) -> StoreResult<()> {
        let item = to_item(&Sample {
            key: depths_key(grain, bucket),
            queues: depths.to_vec(),
            expires_at: grain.expires_at(bucket),
        })?;
        self.client
            .put_item()
            .table_name(&self.res.usage)
            .set_item(Some(item))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn read_depths(
        &self,
        grain: Grain,
        buckets: &[i64],
    ) -> StoreResult<Vec<Vec<QueueDepth>>> {
        let keys: Vec<Item> = buckets
            .iter()
            .map(|b| HashMap::from([("key".to_owned(), s(depths_key(grain, *b)))]))
            .collect();
        let mut found: HashMap<String, Vec<QueueDepth>> = HashMap::new();
        for item in self.batch_get(&self.res.usage, keys, false).await? {
            let sample: Sample = from_item(item)?;
            found.insert(sample.key, sample.queues);
        }
        Ok(buckets
            .iter()
            .map(|b| found.remove(&depths_key(grain, *b)).unwrap_or_default())
            .collect())
    }
}
