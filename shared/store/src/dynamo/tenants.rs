//! Tenants and their API keys.

use super::*;

#[async_trait]
impl TenantStore for DynamoStore {
    async fn create_tenant(&self, tenant: &Tenant, api_key_hash: &str) -> StoreResult<()> {
        let mut t = to_item(tenant)?;
        t.insert("pk".into(), s(tenant.id.as_str()));
        // Kept so that a rotation can remove the key item it replaces.
        t.insert("api_key_hash".into(), s(api_key_hash));
        let mut k = Item::new();
        k.insert("pk".into(), s(api_key_key(api_key_hash)));
        k.insert("tenant_id".into(), s(tenant.id.as_str()));
        let put = |item: Item| -> StoreResult<TransactWriteItem> {
            let p = Put::builder()
                .table_name(&self.res.tenants)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(StoreError::unreadable)?;
            Ok(TransactWriteItem::builder().put(p).build())
        };
        let _serial = self.tx_guard().await;
        self.client
            .transact_write_items()
            .transact_items(put(t)?)
            .transact_items(put(k)?)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
    async fn get_tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.get(&self.res.tenants, "pk", id.as_str()).await
    }
    async fn tenant_by_api_key_hash(&self, hash: &str) -> StoreResult<Option<Tenant>> {
        match self.api_key_tenant(hash).await? {
            Some(id) => self.get_tenant(&id).await,
            None => Ok(None),
        }
    }
    async fn api_key_tenant(&self, hash: &str) -> StoreResult<Option<TenantId>> {
        #[derive(serde::Deserialize)]
        struct KeyItem {
            tenant_id: TenantId,
        }
        let key: Option<KeyItem> = self
            .get(&self.res.tenants, "pk", &api_key_key(hash))
            .await?;
        Ok(key.map(|k| k.tenant_id))
    }
    async fn set_tenant_tier(
        &self,
        id: &TenantId,
        tier: converger_core::Tier,
    ) -> StoreResult<Option<Tenant>> {
        let r = Update::new()
            .set("tier", s(tier.as_str()))
            .when_exists("pk")
            .apply(self.tenant_update(id))
            .send()
            .await;
        match r {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn grow_tenant_delivery_shards(
        &self,
        id: &TenantId,
        shards: u32,
    ) -> StoreResult<Option<Tenant>> {
        let r = Update::new()
            .set("delivery_shards", n(shards))
            .when_exists("pk")
            .when_cmp("delivery_shards", Cmp::Le, n(shards), true)
            .apply(self.tenant_update(id))
            .send()
            .await;
        match r {
            Ok(out) => out.attributes.map(from_item).transpose(),
            // Gone, or grown past `n` by someone else: what it is now.
            Err(e) if is_update_conditional(&e) => self.get_tenant(id).await,
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn write_shard_grants(
        &self,
        id: &TenantId,
        grants: &converger_ports::ShardGrants,
    ) -> StoreResult<bool> {
        // Written over the version it follows, never over another writer's.
        let u = Update::new()
            .set("shard_grants", to_av(grants)?)
            .when_exists("pk");
        let u = match grants.v.saturating_sub(1) {
            0 => u.when_absent("shard_grants"),
            before => u.when_eq("shard_grants.v", n(before)),
        };
        let req = u.apply(
            self.client
                .update_item()
                .table_name(&self.res.tenants)
                .key("pk", s(id.as_str())),
        );
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_update_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn set_tenant_api_rate_limit(
        &self,
        id: &TenantId,
        limit: Option<&str>,
    ) -> StoreResult<Option<Tenant>> {
        self.set_tenant_attr(id, "api_rate_limit", limit.map(s))
            .await
    }

    async fn set_tenant_email_senders(
        &self,
        id: &TenantId,
        senders: &[String],
    ) -> StoreResult<Option<Tenant>> {
        let list =
            (!senders.is_empty()).then(|| AttributeValue::L(senders.iter().map(s).collect()));
        self.set_tenant_attr(id, "email_senders", list).await
    }

    async fn set_tenant_ses_tenant(
        &self,
        id: &TenantId,
        name: Option<&str>,
    ) -> StoreResult<Option<Tenant>> {
        self.set_tenant_attr(id, "ses_tenant", name.map(s)).await
    }

    async fn ensure_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant_attr(id, "aws_external_id", Some(s(external_id)), true)
            .await
    }

    async fn set_tenant_external_id(
        &self,
        id: &TenantId,
        external_id: &str,
    ) -> StoreResult<Option<Tenant>> {
        self.set_tenant_attr(id, "aws_external_id", Some(s(external_id)))
            .await
    }
    async fn mark_typed_events(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.set_tenant_attr(id, "typed_events", Some(AttributeValue::Bool(true)))
            .await
    }
}

impl DynamoStore {
    /// Sets one attribute of an existing tenant (`None` removes it); the tenant as it is now,
    /// `None` if there is no such tenant.
    async fn set_tenant_attr(
        &self,
        id: &TenantId,
        attr: &str,
        value: Option<AttributeValue>,
    ) -> StoreResult<Option<Tenant>> {
        self.update_tenant_attr(id, attr, value, false).await
    }

    /// [`Self::set_tenant_attr`]; with `if_absent`, an attribute the tenant has is kept.
    async fn update_tenant_attr(
        &self,
        id: &TenantId,
        attr: &str,
        value: Option<AttributeValue>,
        if_absent: bool,
    ) -> StoreResult<Option<Tenant>> {
        let u = match value {
            Some(v) if if_absent => Update::new().set_if_absent(attr, v),
            Some(v) => Update::new().set(attr, v),
            None => Update::new().remove(attr),
        };
        let req = u.when_exists("pk").apply(self.tenant_update(id));
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
