//! What the API and the pages read: the read side of each port they show, and nothing that
//! writes. A handler that changes something calls a use case; one that only shows something
//! reads through [`Reads`], so no HTTP code holds a store it could write with.

use converger_core::query::Cursor;
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use converger_ports::{
    AccountStore, Activity, ActivityStore, AuditEntry, AuditStore, Channel, ChannelQuery,
    ChannelStore, Delivery, DeliveryQueries, DeliveryQuery, DeliveryStore, Flow, FlowStore, Listed,
    ReplayJob, ReplayStore, Scope, Store, StoreResult, Tenant, TenantStore,
};
use std::sync::Arc;

/// The read side of the ports the HTTP surfaces show. Cheap to clone.
#[derive(Clone)]
pub struct Reads {
    tenants: Arc<dyn TenantStore>,
    accounts: Arc<dyn AccountStore>,
    channels: Arc<dyn ChannelStore>,
    activities: Arc<dyn ActivityStore>,
    deliveries: Arc<dyn DeliveryStore>,
    listings: Arc<dyn DeliveryQueries>,
    replays: Arc<dyn ReplayStore>,
    audit: Arc<dyn AuditStore>,
    flows: Arc<dyn FlowStore>,
}

impl Reads {
    pub fn new(store: &Arc<dyn Store>) -> Self {
        Self {
            tenants: store.clone(),
            accounts: store.clone(),
            channels: store.clone(),
            activities: store.clone(),
            deliveries: store.clone(),
            listings: store.clone(),
            replays: store.clone(),
            audit: store.clone(),
            flows: store.clone(),
        }
    }

    /// The tenant an API key's hash belongs to.
    pub async fn api_key_tenant(&self, hash: &str) -> StoreResult<Option<TenantId>> {
        self.tenants.api_key_tenant(hash).await
    }

    pub async fn tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.tenants.get_tenant(id).await
    }

    /// Every tenant (the pages' selectors and an operator's lists).
    pub async fn tenants(&self) -> StoreResult<Vec<Tenant>> {
        self.accounts.list_tenants().await
    }

    /// A channel as stored now (no cache); see [`crate::cache::ChannelCache::channel`] for the cached one.
    pub async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        self.channels.get_channel(id).await
    }

    /// A channel `scope` may see: another tenant's reads like a missing one.
    pub async fn channel_in(
        &self,
        scope: Scope<'_>,
        id: &ChannelId,
    ) -> StoreResult<Option<Channel>> {
        self.channels.channel_in(scope, id).await
    }

    /// A tenant's channels that were not deleted.
    pub async fn channels(&self, tenant: &TenantId) -> StoreResult<Vec<Channel>> {
        self.accounts.list_channels(tenant).await
    }

    /// A page of a tenant's channels.
    pub async fn channel_page(&self, q: &ChannelQuery) -> StoreResult<(Vec<Channel>, bool)> {
        self.channels.list_channel_page(q).await
    }

    /// A channel's flow state (breaker, pause, slots).
    pub async fn flow(&self, channel: &ChannelId) -> StoreResult<Flow> {
        self.flows.get_flow(channel).await
    }

    pub async fn activity(
        &self,
        tenant: &TenantId,
        id: &ActivityId,
    ) -> StoreResult<Option<Activity>> {
        self.activities.get_activity(tenant, id).await
    }

    /// A page of a conversation's activities in `seq` order.
    pub async fn conversation_activities(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        after: Option<&(u64, ActivityId)>,
        limit: usize,
    ) -> StoreResult<(Vec<Activity>, bool)> {
        self.activities
            .conversation_activities(tenant, conversation_id, after, limit)
            .await
    }

    /// A delivery `scope` may see.
    pub async fn delivery_in(
        &self,
        scope: Scope<'_>,
        id: &DeliveryId,
    ) -> StoreResult<Option<Delivery>> {
        self.deliveries.delivery_in(scope, id).await
    }

    /// The deliveries of these ids that exist.
    pub async fn deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>> {
        self.deliveries.get_deliveries(ids).await
    }

    /// A page of a listing of deliveries.
    pub async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>> {
        self.listings.list_deliveries(q).await
    }

    /// How many of a tenant's deliveries have `status`, counted up to `cap`.
    pub async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        self.listings.count_by_status(tenant, status, cap).await
    }

    /// A bulk replay's job `scope` may see.
    pub async fn replay_job_in(
        &self,
        scope: Scope<'_>,
        id: &str,
    ) -> StoreResult<Option<ReplayJob>> {
        self.replays.replay_job_in(scope, id).await
    }

    /// A page of a tenant's audit log, newest first.
    pub async fn audit(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&Cursor>,
    ) -> StoreResult<Listed<AuditEntry>> {
        self.audit.list_audit(tenant, limit, after).await
    }
}
