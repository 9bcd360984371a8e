//! The deployment's due-shard grants (`core::shards::due`): one item of the flow table
//! (`due#grants`, no `channel_id`, so the flow sweep's scan passes it by), written by the usage
//! fold, read strongly by the sweep and, kept for [`due::CACHE_MS`], by the writers of due
//! entries. A writer that has not read it yet, or whose grant ended, writes over the
//! deployment's own shards: always among those the sweep reads.

use super::*;
use converger_core::shards::due;
use converger_ports::ShardGrants;

/// The grants' key in the flow table.
const DUE_GRANTS_KEY: &str = "due#grants";

/// What a writer last read of the grants, and when.
#[derive(Debug, Default)]
pub(super) struct DueCache(std::sync::Mutex<Option<(i64, ShardGrants)>>);

impl DueCache {
    fn get(&self) -> Option<(i64, ShardGrants)> {
        self.0.lock().ok().and_then(|g| g.clone())
    }

    fn put(&self, at_ms: i64, grants: ShardGrants) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some((at_ms, grants));
        }
    }
}

impl DynamoStore {
    /// This store with `grants` as if just read (the pinned requests' store, which must not
    /// read them first).
    #[cfg(test)]
    pub(super) fn with_due_grants(self, grants: ShardGrants) -> Self {
        self.due_cache.put(converger_core::time::now_ms(), grants);
        self
    }

    /// The shards a due entry written now is spread over: the grant in force as this
    /// instance last read it, else the deployment's own.
    pub(super) fn due_write_shards(&self) -> u32 {
        let now = converger_core::time::now_ms();
        let latest = self.due_cache.get().and_then(|(_, g)| g.latest);
        due::write_count(self.res.due_shards, latest.as_ref(), now)
    }

    /// Reads the grants again when this instance's copy is older than [`due::CACHE_MS`]
    /// (before a write that places retries). A failed read keeps the old copy, until the
    /// next try a wait later: the writes that follow stay among the shards the sweep reads
    /// either way.
    pub(super) async fn refresh_due_grants(&self) {
        let now = converger_core::time::now_ms();
        if self
            .due_cache
            .get()
            .is_some_and(|(at, _)| now - at < due::CACHE_MS)
        {
            return;
        }
        match self.read_due_grants(false).await {
            Ok(g) => self.due_cache.put(now, g),
            Err(e) => {
                // Tried again after the same wait, not at every write.
                let old = self.due_cache.get().map(|(_, g)| g).unwrap_or_default();
                self.due_cache.put(now, old);
                tracing::warn!(error = %e, "due-shard grants not read");
            }
        }
    }

    async fn read_due_grants(&self, consistent: bool) -> StoreResult<ShardGrants> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.flow)
            .key("key", s(DUE_GRANTS_KEY))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(sdk_err)?;
        match out.item.and_then(|mut i| i.remove("grants")) {
            Some(av) => serde_dynamo::from_attribute_value(av).map_err(StoreError::unreadable),
            None => Ok(ShardGrants::default()),
        }
    }

    pub(super) async fn due_grants_now(&self) -> StoreResult<ShardGrants> {
        self.read_due_grants(true).await
    }

    /// Written over the version it follows, never over another writer's (as a tenant's
    /// listing grants are).
    pub(super) async fn put_due_grants(&self, grants: &ShardGrants) -> StoreResult<bool> {
        let u = Update::new().set("grants", to_av(grants)?);
        let u = match grants.v.saturating_sub(1) {
            0 => u.when_absent("grants"),
            before => u.when_eq("grants.v", n(before)),
        };
        let r = u
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.flow)
                    .key("key", s(DUE_GRANTS_KEY)),
            )
            .send()
            .await;
        match r {
            Ok(_) => {
                self.due_cache
                    .put(converger_core::time::now_ms(), grants.clone());
                Ok(true)
            }
            Err(e) if is_update_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
