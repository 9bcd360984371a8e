//! Idempotency keys.

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl IdempotencyStore for MemStore {
    async fn take_key(
        &self,
        tenant: &TenantId,
        key: &str,
        record: &KeyRecord,
        now: Timestamp,
    ) -> StoreResult<Option<KeyRecord>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let k = (tenant.clone(), key.to_owned());
            match s.keys_held.get(&k) {
                Some(r)
                    if !converger_ports::expired(Some(r.expires_at), now.ms())
                        && (r.status.is_some() || r.locked_until >= now.ms()) =>
                {
                    Some(r.clone())
                }
                _ => {
                    s.keys_held.insert(k, record.clone());
                    None
                }
            }
        })
    }

    async fn get_key(&self, tenant: &TenantId, key: &str) -> StoreResult<Option<KeyRecord>> {
        wait(&self.latency, |m| m.get).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.keys_held
                .get(&(tenant.clone(), key.to_owned()))
                .filter(|r| !converger_ports::expired(Some(r.expires_at), now))
                .cloned()
        })
    }

    async fn answer_key(
        &self,
        tenant: &TenantId,
        key: &str,
        fingerprint: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if let Some(r) = s
                .keys_held
                .get_mut(&(tenant.clone(), key.to_owned()))
                .filter(|r| r.fingerprint == fingerprint)
            {
                r.status = Some(status);
                r.body = Some(body.to_owned());
            }
        })
    }

    async fn free_key(&self, tenant: &TenantId, key: &str, fingerprint: &str) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let k = (tenant.clone(), key.to_owned());
            if s.keys_held
                .get(&k)
                .is_some_and(|r| r.fingerprint == fingerprint && r.status.is_none())
            {
                s.keys_held.remove(&k);
            }
        })
    }
}
