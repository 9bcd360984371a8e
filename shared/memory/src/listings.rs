//! Reading deliveries back: listings and counts by status, older attempts, and the sweeper's overdue rows.

use super::*;

#[async_trait]
impl DeliveryQueries for MemStore {
    async fn older_attempts(
        &self,
        id: &DeliveryId,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<Vec<AttemptEntry>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let key = id.to_string();
            s.attempts
                .range((key.clone(), 0)..(key, before.unwrap_or(u32::MAX)))
                .rev()
                .take(limit.clamp(1, 1000))
                .map(|(_, e)| e.clone())
                .collect()
        })
    }
    async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            q.page(
                s.deliveries
                    .values()
                    .filter(|d| !converger_ports::expired(d.expires_at, now))
                    // As the listing index: a first try joins it when its attempt ends. One
                    // activity's deliveries are read by key, listed or not.
                    .filter(|d| !d.unlisted || q.activity.is_some()),
            )
        })
    }
    async fn handed_off_deliveries(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        limit: usize,
        after: Option<converger_core::query::Cursor>,
    ) -> StoreResult<Listed<Delivery>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        let q = DeliveryQuery {
            status: Some(DeliveryStatus::Pending),
            channel: Some(channel.clone()),
            newest_first: false,
            after,
            ..DeliveryQuery::of_tenant(tenant.clone(), limit)
        };
        // As the channel index holds them: the pending deliveries handed off, no others.
        self.with(|s| {
            q.page(
                s.deliveries
                    .values()
                    .filter(|d| !converger_ports::expired(d.expires_at, now))
                    .filter(|d| d.handed_off),
            )
        })
    }
    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let n = s
                .deliveries
                .values()
                .filter(|d| &d.tenant_id == tenant && d.status == status && !d.unlisted)
                .take(usize::try_from(cap).unwrap_or(usize::MAX))
                .count();
            n as u64
        })
    }
    fn due_shards(&self) -> u32 {
        self.due_shards.unwrap_or(DUE_SHARDS)
    }
    async fn due_grants(&self) -> StoreResult<converger_ports::ShardGrants> {
        wait(&self.latency, |m| m.get).await;
        Ok(self.grants())
    }
    async fn grant_due_shards(&self, grants: &converger_ports::ShardGrants) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        let mut g = self
            .due_grants
            .lock()
            .map_err(|_| StoreError::Unavailable("due grants poisoned".into()))?;
        if g.v + 1 != grants.v {
            return Ok(false);
        }
        *g = grants.clone();
        Ok(true)
    }
    async fn overdue(
        &self,
        part: DuePart,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        // An entry's shard is its id's over the shards the sweep reads now: each entry in
        // exactly one of the shards read.
        let shards = converger_core::shards::due::read_count(
            self.due_shards(),
            self.grants().span.as_ref(),
            now,
        );
        self.with(|s| {
            let mut rows: Vec<(String, &Delivery)> = s
                .deliveries
                .values()
                .filter_map(|d| match d.sparse_index() {
                    SparseIndex::Due { due_ms } if due_shard_of(&d.id, shards) == shard => {
                        Some((due_ms, d))
                    }
                    _ => None,
                })
                .filter(|(at, _)| *at < before_ms)
                .filter(|(_, d)| match part {
                    DuePart::Waiting => true,
                    DuePart::Leased => d.lease_until.is_some_and(|until| until < before_ms),
                })
                .filter(|(_, d)| !converger_ports::expired(d.expires_at, before_ms.max(now)))
                .map(|(at, d)| (format!("{}#{}", due_key(at), d.id), d))
                .filter(|(k, _)| from.as_ref().is_none_or(|f| k > f))
                .collect();
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            let limit = limit.clamp(1, 1000);
            let more = rows.len() > limit;
            rows.truncate(limit);
            let next = more.then(|| rows.last()).flatten().map(|(k, _)| k.clone());
            Page {
                items: rows
                    .into_iter()
                    .map(|(_, d)| Overdue {
                        id: d.id.clone(),
                        tier: d.tier,
                        channel_id: Some(d.channel_id.clone()),
                        lease_until: d.lease_until,
                    })
                    .collect(),
                next,
            }
        })
    }
}
