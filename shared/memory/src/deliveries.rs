//! Delivery rows and the attempt lifecycle: claim (a lease), release, and the three outcomes.

use super::*;

#[async_trait]
impl DeliveryStore for MemStore {
    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>> {
        wait(&self.latency, |m| m.get).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.deliveries
                .get(id)
                .filter(|d| !converger_ports::expired(d.expires_at, now))
                .cloned()
        })
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
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Claim> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if let Some(refused) = Claim::refused(s.deliveries.get(id), now_ms) {
                return refused;
            }
            let Some(d) = s.deliveries.get_mut(id) else {
                return Claim::Missing;
            };
            d.lease_token = Some(token.to_owned());
            d.lease_until = Some(now_ms.saturating_add(lease_ms));
            Claim::Claimed(d.clone())
        })
    }
    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.deliveries.get_mut(&d.id) {
            Some(row) if row.lease_token.as_deref() == Some(token) => {
                row.lease_token = None;
                row.lease_until = None;
                true
            }
            _ => false,
        })
    }
    async fn extend_lease(&self, d: &Delivery, token: &str, until_ms: i64) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.deliveries.get_mut(&d.id) {
            Some(row) if row.lease_token.as_deref() == Some(token) => {
                row.lease_until = Some(until_ms);
                true
            }
            _ => false,
        })
    }
    async fn requeue_expired(
        &self,
        id: &DeliveryId,
        until_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.deliveries.get_mut(id) {
            Some(row)
                if row.lease_until == Some(until_ms)
                    && row.status == converger_core::DeliveryStatus::Pending =>
            {
                row.lease_token = None;
                row.lease_until = None;
                row.next_attempt_at = now_ms;
                true
            }
            _ => false,
        })
    }
    async fn mark_sent(
        &self,
        d: &Delivery,
        token: &str,
        info: &SentInfo,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let done = leased(s, d, token, log, |row| {
                row.slot = false;
                row.in_backlog = false;
                row.attempts += 1;
                if info.handed_off {
                    row.status = DeliveryStatus::Pending;
                    row.handed_off = true;
                } else {
                    row.status = DeliveryStatus::Sent;
                    row.sent_at = Some(now.to_owned());
                }
                row.updated_at = now.to_owned();
                row.last_error = None;
                if info.provider_message_id.is_some() {
                    row.provider_message_id = info.provider_message_id.clone();
                }
                if info.response_status.is_some() {
                    row.response_status = info.response_status;
                }
            });
            if done {
                if let Some(id) = &info.provider_message_id {
                    s.providers
                        .insert((d.channel_id.clone(), id.clone()), d.id.clone());
                }
                s.reindex(&d.id);
            }
            done
        })
    }
    async fn mark_attempt_failed(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        next: RetryAt,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        let next_attempt_at = next.at_ms;
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            leased(s, d, token, log, |row| {
                row.slot = false;
                row.status = DeliveryStatus::Pending;
                row.attempts += 1;
                row.last_error = Some(error.to_owned());
                row.next_attempt_at = next_attempt_at;
                row.updated_at = now.to_owned();
            })
        })
    }
    async fn mark_dead(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            leased(s, d, token, log, |row| {
                row.slot = false;
                row.status = DeliveryStatus::Failed;
                row.attempts += 1;
                row.last_error = Some(error.to_owned());
                row.updated_at = now.to_owned();
            })
        })
    }
}
