//! Tenants and their API keys.

use super::*;

#[async_trait]
impl TenantStore for MemStore {
    async fn create_tenant(&self, tenant: &Tenant, api_key_hash: &str) -> StoreResult<()> {
        wait(&self.latency, |m| m.transact).await;
        self.with(|s| {
            if s.tenants.contains_key(&tenant.id) || s.keys.contains_key(api_key_hash) {
                return Err(StoreError::Conflict("tenant or key exists".into()));
            }
            s.tenants.insert(tenant.id.clone(), tenant.clone());
            s.keys.insert(api_key_hash.to_owned(), tenant.id.clone());
            s.tenant_keys
                .insert(tenant.id.clone(), api_key_hash.to_owned());
            Ok(())
        })?
    }
    async fn get_tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.charged(
            |m| m.get,
            |s, meter| {
                let t = s.tenants.get(id);
                meter.read(|| {
                    vec![item_read_of(
                        "tenants",
                        "<tenant>",
                        id.to_string(),
                        t,
                        false,
                    )]
                })?;
                Ok(t.cloned())
            },
        )
        .await
    }
    async fn api_key_tenant(&self, hash: &str) -> StoreResult<Option<TenantId>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.keys.get(hash).cloned())
    }
    async fn tenant_by_api_key_hash(&self, hash: &str) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.keys.get(hash).and_then(|t| s.tenants.get(t)).cloned())
    }
    async fn set_tenant_tier(
        &self,
        id: &TenantId,
        tier: converger_core::Tier,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.tier = tier).await
    }

    async fn grow_tenant_delivery_shards(
        &self,
        id: &TenantId,
        n: u32,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| {
            t.delivery_shards = Some(t.delivery_shards.map_or(n, |old| old.max(n)))
        })
        .await
    }

    async fn write_shard_grants(
        &self,
        id: &TenantId,
        grants: &converger_ports::ShardGrants,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.tenants.get_mut(id) {
            Some(t) if t.shard_grants.v + 1 == grants.v => {
                t.shard_grants = grants.clone();
                true
            }
            _ => false,
        })
    }

    async fn set_tenant_api_rate_limit(
        &self,
        id: &TenantId,
        limit: Option<&str>,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.api_rate_limit = limit.map(str::to_owned))
            .await
    }

    async fn set_tenant_email_senders(
        &self,
        id: &TenantId,
        senders: &[String],
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.email_senders = senders.to_vec())
            .await
    }

    async fn set_tenant_ses_tenant(
        &self,
        id: &TenantId,
        name: Option<&str>,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.ses_tenant = name.map(str::to_owned))
            .await
    }

    async fn ensure_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| {
            t.aws_external_id
                .get_or_insert_with(|| external_id.to_owned());
        })
        .await
    }

    async fn set_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.aws_external_id = Some(external_id.to_owned()))
            .await
    }
    async fn mark_typed_events(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.update_tenant(id, |t| t.typed_events = true).await
    }
}

impl MemStore {
    /// Changes one tenant with `f` after a write's latency; the tenant as written, or `None`
    /// when there is no such tenant.
    async fn update_tenant(
        &self,
        id: &TenantId,
        f: impl FnOnce(&mut Tenant),
    ) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.tenants.get_mut(id).map(|t| {
                f(t);
                t.clone()
            })
        })
    }
}
