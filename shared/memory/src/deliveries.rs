//! Delivery rows and the attempt lifecycle: claim (a lease), release, and the three outcomes.

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl DeliveryStore for MemStore {
    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>> {
        let now = converger_core::time::now_ms();
        self.charged(
            |m| m.get,
            |s, meter| {
                let row = s.deliveries.get(id);
                meter.read(|| vec![row_read(id, row, true)])?;
                Ok(row
                    .filter(|d| !converger_ports::expired(d.expires_at, now))
                    .cloned())
            },
        )
        .await
    }
    async fn get_deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            let now = converger_core::time::now_ms();
            ids.iter()
                .filter_map(|i| s.deliveries.get(i))
                .filter(|d| !converger_ports::expired(d.expires_at, now))
                .cloned()
                .collect()
        })
    }
    async fn claim(
        &self,
        id: &DeliveryId,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> StoreResult<Claim> {
        let shards = self.due_write_shards();
        self.charged(
            |m| m.write,
            |s, meter| {
                let row = s.deliveries.get(id);
                if let Some(refused) = Claim::refused(row, now) {
                    // A failed condition costs the item's units all the same.
                    meter.write(|| delivery_write(row, row, shards))?;
                    return Ok(refused);
                }
                let Some(row) = row else {
                    return Ok(Claim::Missing);
                };
                let mut d = row.clone();
                d.lease_token = Some(token.to_owned());
                d.lease_until = Some(now.ms().saturating_add(lease_ms));
                meter.write(|| delivery_write(Some(row), Some(&d), shards))?;
                s.deliveries.insert(id.clone(), d.clone());
                Ok(Claim::Claimed(d))
            },
        )
        .await
    }
    async fn reschedule(&self, d: &Delivery, token: Option<&str>, at_ms: i64) -> StoreResult<bool> {
        let m = moves::reschedule(d, token, at_ms);
        Ok(self.row_move(&d.id, &m).await?.is_some())
    }

    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        let m = moves::release(d, token);
        Ok(self.row_move(&d.id, &m).await?.is_some())
    }
    async fn extend_lease(&self, d: &Delivery, token: &str, until_ms: i64) -> StoreResult<bool> {
        let m = moves::extend_lease(token, until_ms);
        Ok(self.row_move(&d.id, &m).await?.is_some())
    }
    async fn requeue_expired(
        &self,
        id: &DeliveryId,
        until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let m = moves::requeue_expired(until_ms, now.ms());
        Ok(self.row_move(id, &m).await?.is_some())
    }
    async fn record_outcome(
        &self,
        d: &Delivery,
        token: &str,
        outcome: &converger_ports::RowOutcome<'_>,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let shards = self.due_write_shards();
        self.charged(
            |m| m.write,
            |s, meter| {
                let done = leased(s, meter, shards, d, token, log, |row| {
                    outcome.apply(row, now)
                })?;
                if done {
                    if let converger_ports::RowOutcome::Sent(SentInfo {
                        provider_message_id: Some(id),
                        ..
                    }) = outcome
                    {
                        s.providers
                            .insert((d.channel_id.clone(), id.clone()), d.id.clone());
                    }
                    s.reindex(&d.id);
                }
                Ok(done)
            },
        )
        .await
    }
}
