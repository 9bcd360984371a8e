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
                    .filter(|d| !converger_ports::expired(d.expires_at, now)),
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
                .filter(|d| &d.tenant_id == tenant && d.status == status)
                .take(usize::try_from(cap).unwrap_or(usize::MAX))
                .count();
            n as u64
        })
    }
    async fn overdue(
        &self,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            let mut rows: Vec<(String, &Delivery)> = s
                .deliveries
                .values()
                .filter(|d| {
                    d.status == DeliveryStatus::Pending
                        && !d.in_backlog
                        && !d.handed_off
                        && due_shard(&d.id) == shard
                })
                .filter(|d| d.next_attempt_at < before_ms)
                .filter(|d| !converger_ports::expired(d.expires_at, before_ms.max(now)))
                .map(|d| (format!("{}#{}", due_key(d.next_attempt_at), d.id), d))
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
                        lease_until: d.lease_until,
                    })
                    .collect(),
                next,
            }
        })
    }
}
