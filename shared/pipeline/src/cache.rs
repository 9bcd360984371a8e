//! What one instance remembers of channels between invocations: each channel (for
//! `channel_cache_ttl`), each tenant's channel list, and the external ids its AWS channels
//! send with. Writers in this process forget what
//! they changed; other instances see a change within the TTL.

use converger_core::cache::TtlCache;
use converger_core::schema::PayloadSchema;
use converger_core::{ChannelId, Scope, TenantId};
use converger_ports::{
    AccountStore, Channel, ChannelStore, EventTypeStore, StoreResult, TenantStore,
};
use std::sync::Arc;
use std::time::Duration;

/// The channels this instance read, and the tenants' channel lists.
pub struct ChannelCache {
    channels_store: Arc<dyn ChannelStore>,
    lists: Arc<dyn AccountStore>,
    channels: TtlCache<ChannelId, Arc<Channel>>,
    /// Each tenant's channels (the subscriber lists of event types).
    tenant_channels: TtlCache<TenantId, Arc<Vec<Arc<Channel>>>>,
    tenants: Arc<dyn TenantStore>,
    /// Each tenant's external id (`None`: it has none yet), for the AWS channel types.
    external_ids: TtlCache<TenantId, Option<Arc<str>>>,
    event_types: Arc<dyn EventTypeStore>,
    /// The payload schema of each event type read (`None`: no such type, or no schema).
    schemas: TtlCache<(TenantId, String), Option<PayloadSchema>>,
}

impl ChannelCache {
    pub(crate) fn new(
        channels_store: Arc<dyn ChannelStore>,
        lists: Arc<dyn AccountStore>,
        tenants: Arc<dyn TenantStore>,
        event_types: Arc<dyn EventTypeStore>,
        ttl: Duration,
    ) -> Self {
        Self {
            event_types,
            schemas: TtlCache::bounded(ttl, 10_000),
            channels_store,
            lists,
            channels: TtlCache::new(ttl),
            tenant_channels: TtlCache::bounded(ttl, 10_000),
            tenants,
            external_ids: TtlCache::bounded(ttl, 10_000),
        }
    }

    /// A tenant's external id, from this instance's cache when read less than
    /// `channel_cache_ttl` ago (a rotation elsewhere applies within it); `Ok(None)` when the
    /// tenant has none, or is gone.
    pub async fn external_id(&self, tenant: &TenantId) -> StoreResult<Option<Arc<str>>> {
        if let Some(id) = self.external_ids.get(tenant) {
            return Ok(id);
        }
        let id: Option<Arc<str>> = self
            .tenants
            .get_tenant(tenant)
            .await?
            .and_then(|t| t.aws_external_id)
            .map(Arc::from);
        self.external_ids.insert(tenant.clone(), id.clone());
        Ok(id)
    }

    /// The payload schema of `tenant`'s event type `name`, from this instance's cache when
    /// read less than `channel_cache_ttl` ago; `None` when the type is not in the catalog or
    /// has no schema. A stored schema that no longer compiles is none (it was checked when
    /// written).
    pub async fn payload_schema(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> StoreResult<Option<PayloadSchema>> {
        if converger_core::channel::check_event_type(name).is_err() {
            return Ok(None);
        }
        let key = (tenant.clone(), name.to_owned());
        if let Some(s) = self.schemas.get(&key) {
            return Ok(s);
        }
        let schema = self
            .event_types
            .get_event_type(tenant, name)
            .await?
            .and_then(|t| t.schema)
            .and_then(|raw| match PayloadSchema::compile(&raw) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(event_type = name, error = %e, "stored schema does not compile; not checked");
                    None
                }
            });
        self.schemas.insert(key, schema.clone());
        Ok(schema)
    }

    /// Forgets a cached schema (after this process changed its event type).
    pub fn forget_schema(&self, tenant: &TenantId, name: &str) {
        self.schemas.remove(&(tenant.clone(), name.to_owned()));
    }

    /// Forgets a tenant's cached external id (after this process rotated it).
    pub fn forget_external_id(&self, tenant: &TenantId) {
        self.external_ids.remove(tenant);
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
