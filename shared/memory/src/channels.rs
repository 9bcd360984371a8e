//! Channels.

use super::*;
use converger_core::Timestamp;

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
        self.charged(
            |m| m.get,
            |s, meter| {
                let c = s.channels.get(id);
                meter.read(|| {
                    vec![item_read_of(
                        "channels",
                        "<channel>",
                        id.to_string(),
                        c,
                        false,
                    )]
                })?;
                Ok(c.cloned())
            },
        )
        .await
    }
    async fn update_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        patch: &ChannelPatch,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = live(&mut s.channels, tenant, id)?;
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
                c.circuit_breaker = *cb;
            }
            if let Some(rl) = &patch.rate_limit {
                c.rate_limit = *rl;
            }
            if let Some(ad) = &patch.auto_disable {
                c.auto_disable = *ad;
            }
            if let Some(t) = &patch.event_types {
                c.event_types = t.clone();
            }
            if let Some(m) = &patch.middleware {
                c.middleware = m.clone();
            }
            if let Some(f) = &patch.filter {
                c.filter = f.clone();
            }
            if patch.active == Some(true) {
                c.disabled_at = None;
                c.disabled_reason = None;
            }
            c.updated_at = now;
            Some(c.clone())
        })
    }

    async fn list_channel_page(&self, q: &ChannelQuery) -> StoreResult<(Vec<Channel>, bool)> {
        wait(&self.latency, |m| m.query).await;
        let want = q.limit.clamp(1, 1000);
        self.with(|s| {
            let mut v: Vec<Channel> = s
                .channels
                .values()
                .filter(|c| q.matches(c) && q.after.as_ref().is_none_or(|a| &c.id > a))
                .cloned()
                .collect();
            v.sort_by(|a, b| a.id.cmp(&b.id));
            let more = v.len() > want;
            v.truncate(want);
            (v, more)
        })
    }

    async fn rotate_secret(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        rotation: &SecretRotation,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = live(&mut s.channels, tenant, id)
                .filter(|c| c.signing_secret == rotation.replaces)?;
            c.signing_secret = rotation.secret.clone();
            c.retiring_secrets = rotation.retiring.clone();
            c.updated_at = now;
            Some(c.clone())
        })
    }

    async fn delete_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        now: Timestamp,
        expires_at: i64,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = live(&mut s.channels, tenant, id)?;
            c.deleted_at = Some(now);
            c.updated_at = now;
            c.active = false;
            c.expires_at = Some(expires_at);
            Some(c.clone())
        })
    }
}

/// A channel of `tenant` that was not deleted, to change.
fn live<'a>(
    channels: &'a mut std::collections::HashMap<ChannelId, Channel>,
    tenant: &TenantId,
    id: &ChannelId,
) -> Option<&'a mut Channel> {
    channels
        .get_mut(id)
        .filter(|c| &c.tenant_id == tenant && c.deleted_at.is_none())
}
