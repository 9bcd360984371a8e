//! Channels.

use super::*;

#[async_trait]
impl ChannelStore for MemStore {
    async fn create_channel(&self, channel: &Channel) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if s.channels.contains_key(&channel.id) {
                return Err(StoreError::Conflict("id exists".into()));
            }
            s.channels.insert(channel.id.clone(), channel.clone());
            Ok(())
        })?
    }
    async fn get_channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.channels.get(id).cloned())
    }
    async fn update_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        patch: &ChannelPatch,
        now: &str,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = s.channels.get_mut(id).filter(|c| &c.tenant_id == tenant)?;
            if let Some(n) = &patch.name {
                c.name = n.clone();
            }
            if let Some(cfg) = &patch.config {
                c.config = cfg.clone();
            }
            if let Some(a) = patch.active {
                c.active = a;
            }
            if let Some(p) = &patch.retry_policy {
                c.retry_policy = p.clone();
            }
            if let Some(cb) = &patch.circuit_breaker {
                c.circuit_breaker = cb.clone();
            }
            if let Some(rl) = &patch.rate_limit {
                c.rate_limit = rl.clone();
            }
            if let Some(ad) = &patch.auto_disable {
                c.auto_disable = ad.clone();
            }
            if patch.active == Some(true) {
                c.disabled_at = None;
                c.disabled_reason = None;
            }
            c.updated_at = now.to_owned();
            Some(c.clone())
        })
    }
}
