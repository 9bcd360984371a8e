//! What one instance remembers of channels between invocations: each channel (for
//! `channel_cache_ttl`) and each tenant's channel list. Writers in this process forget what
//! they changed; other instances see a change within the TTL.

use converger_core::cache::TtlCache;
use converger_core::{ChannelId, Scope, TenantId};
use converger_ports::{AccountStore, Channel, ChannelStore, StoreResult};
use std::sync::Arc;
use std::time::Duration;

/// The channels this instance read, and the tenants' channel lists.
pub struct ChannelCache {
    channels_store: Arc<dyn ChannelStore>,
    lists: Arc<dyn AccountStore>,
    channels: TtlCache<ChannelId, Arc<Channel>>,
    /// Each tenant's channels (the subscriber lists of event types).
    tenant_channels: TtlCache<TenantId, Arc<Vec<Arc<Channel>>>>,
}

impl ChannelCache {
    pub(crate) fn new(
        channels_store: Arc<dyn ChannelStore>,
        lists: Arc<dyn AccountStore>,
        ttl: Duration,
    ) -> Self {
        Self {
            channels_store,
            lists,
            channels: TtlCache::new(ttl),
            tenant_channels: TtlCache::bounded(ttl, 10_000),
        }
    }

    /// A channel `scope` may see, from this instance's cache (see [`Self::channel`]): another
    /// tenant's channel reads exactly like a missing one.
    pub async fn channel_in(
        &self,
        scope: Scope<'_>,
        id: &ChannelId,
    ) -> StoreResult<Option<Arc<Channel>>> {
        Ok(self.channel(id).await?.filter(|c| c.visible_to(scope)))
    }

    /// A channel, from this instance's cache when it was read less than
    /// `channel_cache_ttl` ago.
    pub async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Arc<Channel>>> {
        if let Some(ch) = self.channels.get(id) {
            return Ok(Some(ch));
        }
        let Some(ch) = self.channels_store.get_channel(id).await? else {
            return Ok(None);
        };
        let ch = Arc::new(ch);
        self.channels.insert(id.clone(), ch.clone());
        Ok(Some(ch))
    }

    /// Forgets a cached channel, and its tenant's cached channel list (after this process
    /// changed it).
    pub fn forget_channel(&self, id: &ChannelId) {
        if let Some(c) = self.channels.get_stale(id) {
            self.tenant_channels.remove(&c.tenant_id);
        }
        self.channels.remove(id);
    }

    /// Forgets a tenant's cached channel list (after this process created or changed one of
    /// its channels).
    pub fn forget_tenant_channels(&self, tenant: &TenantId) {
        self.tenant_channels.remove(tenant);
    }

    /// A tenant's channels that were not deleted (at most 1,000), from this instance's cache
    /// when read less than `channel_cache_ttl` ago.
    pub async fn tenant_channels(&self, tenant: &TenantId) -> StoreResult<Arc<Vec<Arc<Channel>>>> {
        if let Some(list) = self.tenant_channels.get(tenant) {
            return Ok(list);
        }
        let list: Arc<Vec<Arc<Channel>>> = Arc::new(
            self.lists
                .list_channels(tenant)
                .await?
                .into_iter()
                .map(Arc::new)
                .collect(),
        );
        self.tenant_channels.insert(tenant.clone(), list.clone());
        Ok(list)
    }
}
