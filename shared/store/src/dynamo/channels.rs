//! Channels.

use super::*;
use converger_core::Timestamp;

/// `u` under the condition of every tenant write to a channel: it exists, is the tenant's,
/// and was not deleted.
fn live_channel(u: Update, tenant: &TenantId) -> Update {
    u.when_exists("id")
        .when_eq("tenant_id", s(tenant.as_str()))
        .when_absent("deleted_at")
}

#[async_trait]
impl ChannelStore for DynamoStore {
    async fn create_channel(&self, channel: &Channel) -> StoreResult<()> {
        self.put_new(&self.res.channels, "id", to_item(channel)?)
            .await
    }
    async fn get_channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        self.get(&self.res.channels, "id", id.as_str()).await
    }
    async fn update_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        patch: &ChannelPatch,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>> {
        let mut u = Update::new().set("updated_at", s(now.rfc3339()));
        if let Some(name) = &patch.name {
            u = u.set("name", s(name.as_str()));
        }
        if let Some(config) = &patch.config {
            u = u.set("config", to_av(config)?);
        }
        if let Some(active) = patch.active {
            u = u.set("active", AttributeValue::Bool(active));
        }
        if let Some(policy) = &patch.retry_policy {
            u = u.set("retry_policy", to_av(policy)?);
        }
        if let Some(cb) = &patch.circuit_breaker {
            u = u.set("circuit_breaker", to_av(cb)?);
        }
        if let Some(ad) = &patch.auto_disable {
            u = u.set("auto_disable", to_av(ad)?);
        }
        // An empty list, or no filter, is stored as no attribute.
        match &patch.event_types {
            Some(types) if !types.is_empty() => u = u.set("event_types", to_av(types)?),
            Some(_) => u = u.remove("event_types"),
            None => {}
        }
        match &patch.filter {
            Some(Some(f)) => u = u.set("filter", to_av(f)?),
            Some(None) => u = u.remove("filter"),
            None => {}
        }
        match &patch.middleware {
            Some(steps) if !steps.is_empty() => u = u.set("middleware", to_av(steps)?),
            Some(_) => u = u.remove("middleware"),
            None => {}
        }
        if patch.active == Some(true) {
            u = u.remove_each(["disabled_at", "disabled_reason"]);
        }
        match &patch.rate_limit {
            Some(Some(rl)) => u = u.set("rate_limit", s(rl.to_string())),
            Some(None) => u = u.remove("rate_limit"),
            None => {}
        }
        let req = live_channel(u, tenant).apply(self.channel_update(id));
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn list_channel_page(&self, q: &ChannelQuery) -> StoreResult<(Vec<Channel>, bool)> {
        let mut filter = vec!["attribute_not_exists(deleted_at)"];
        let mut names: Vec<(&str, &str)> = Vec::new();
        let mut values: Vec<(&str, AttributeValue)> = vec![(":t", s(q.tenant.as_str()))];
        if let Some(k) = q.kind {
            filter.push("#type = :k");
            names.push(("#type", "type"));
            values.push((":k", s(k.as_str())));
        }
        if let Some(a) = q.active {
            filter.push("#active = :a");
            names.push(("#active", "active"));
            values.push((":a", AttributeValue::Bool(a)));
        }
        let key = match &q.after {
            Some(after) => {
                values.push((":after", s(after.as_str())));
                "tenant_id = :t AND id > :after"
            }
            None => "tenant_id = :t",
        };
        let query = || {
            let mut req = self
                .client
                .query()
                .table_name(&self.res.channels)
                .index_name("by_tenant")
                .key_condition_expression(key)
                .filter_expression(filter.join(" AND "));
            for (k, v) in &names {
                req = req.expression_attribute_names(*k, *v);
            }
            for (k, v) in &values {
                req = req.expression_attribute_values(*k, v.clone());
            }
            req
        };
        self.query_upto(q.limit, None, query, |item| from_item(item).map(Some))
            .await
    }

    async fn rotate_secret(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        rotation: &SecretRotation,
        now: Timestamp,
    ) -> StoreResult<Option<Channel>> {
        let u = Update::new()
            .set("signing_secret", s(rotation.secret.as_str()))
            .set("updated_at", s(now.rfc3339()));
        let u = if rotation.retiring.is_empty() {
            u.remove("retiring_secrets")
        } else {
            u.set("retiring_secrets", to_av(&rotation.retiring)?)
        };
        let req = live_channel(u, tenant)
            .when_eq("signing_secret", s(rotation.replaces.as_str()))
            .apply(self.channel_update(id));
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn delete_channel(
        &self,
        tenant: &TenantId,
        id: &ChannelId,
        now: Timestamp,
        expires_at: i64,
    ) -> StoreResult<Option<Channel>> {
        let u = Update::new()
            .set("deleted_at", s(now.rfc3339()))
            .set("updated_at", s(now.rfc3339()))
            .set("active", AttributeValue::Bool(false))
            .set("expires_at", n(expires_at));
        let req = live_channel(u, tenant).apply(self.channel_update(id));
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
