//! Channels.

use super::*;
use converger_core::Timestamp;

/// The condition of every tenant write to a channel: it exists, is the tenant's, and was not
/// deleted.
const LIVE_CHANNEL: &str =
    "attribute_exists(id) AND tenant_id = :tenant AND attribute_not_exists(deleted_at)";

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
        let mut sets = vec!["updated_at = :now".to_owned()];
        let mut values: Vec<(&str, AttributeValue)> =
            vec![(":now", s(now.rfc3339())), (":tenant", s(tenant.as_str()))];
        if let Some(name) = &patch.name {
            sets.push("#name = :name".into());
            values.push((":name", s(name.as_str())));
        }
        if let Some(config) = &patch.config {
            sets.push("config = :config".into());
            values.push((":config", to_av(config)?));
        }
        if let Some(active) = patch.active {
            sets.push("active = :active".into());
            values.push((":active", AttributeValue::Bool(active)));
        }
        if let Some(policy) = &patch.retry_policy {
            sets.push("retry_policy = :policy".into());
            values.push((":policy", to_av(policy)?));
        }
        if let Some(cb) = &patch.circuit_breaker {
            sets.push("circuit_breaker = :cb".into());
            values.push((":cb", to_av(cb)?));
        }
        if let Some(ad) = &patch.auto_disable {
            sets.push("auto_disable = :ad".into());
            values.push((":ad", to_av(ad)?));
        }
        let mut removes = Vec::new();
        match &patch.event_types {
            Some(types) if !types.is_empty() => {
                sets.push("event_types = :et".into());
                values.push((":et", to_av(types)?));
            }
            Some(_) => removes.push("event_types"),
            None => {}
        }
        match &patch.filter {
            Some(Some(f)) => {
                sets.push("#filter = :filter".into());
                values.push((":filter", to_av(f)?));
            }
            Some(None) => removes.push("#filter"),
            None => {}
        }
        match &patch.middleware {
            Some(steps) if !steps.is_empty() => {
                sets.push("middleware = :mw".into());
                values.push((":mw", to_av(steps)?));
            }
            Some(_) => removes.push("middleware"),
            None => {}
        }
        if patch.active == Some(true) {
            removes.push("disabled_at");
            removes.push("disabled_reason");
        }
        match &patch.rate_limit {
            Some(Some(rl)) => {
                sets.push("rate_limit = :rl".into());
                values.push((":rl", s(rl.to_string())));
            }
            Some(None) => removes.push("rate_limit"),
            None => {}
        }
        let mut req = self
            .client
            .update_item()
            .table_name(&self.res.channels)
            .key("id", s(id.as_str()))
            .update_expression(if removes.is_empty() {
                format!("SET {}", sets.join(", "))
            } else {
                format!("SET {} REMOVE {}", sets.join(", "), removes.join(", "))
            })
            .condition_expression(LIVE_CHANNEL)
            .return_values(ReturnValue::AllNew);
        if patch.name.is_some() {
            req = req.expression_attribute_names("#name", "name");
        }
        // `filter` is one of DynamoDB's reserved words.
        if patch.filter.is_some() {
            req = req.expression_attribute_names("#filter", "filter");
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
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
        let (expr, retiring) = if rotation.retiring.is_empty() {
            (
                "SET signing_secret = :new, updated_at = :now REMOVE retiring_secrets",
                None,
            )
        } else {
            (
                "SET signing_secret = :new, retiring_secrets = :ret, updated_at = :now",
                Some(to_av(&rotation.retiring)?),
            )
        };
        let mut req = self
            .client
            .update_item()
            .table_name(&self.res.channels)
            .key("id", s(id.as_str()))
            .update_expression(expr)
            .condition_expression(format!("{LIVE_CHANNEL} AND signing_secret = :old"))
            .expression_attribute_values(":tenant", s(tenant.as_str()))
            .expression_attribute_values(":old", s(rotation.replaces.as_str()))
            .expression_attribute_values(":new", s(rotation.secret.as_str()))
            .expression_attribute_values(":now", s(now.rfc3339()))
            .return_values(ReturnValue::AllNew);
        if let Some(r) = retiring {
            req = req.expression_attribute_values(":ret", r);
        }
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
        let req = self
            .client
            .update_item()
            .table_name(&self.res.channels)
            .key("id", s(id.as_str()))
            .update_expression(
                "SET deleted_at = :now, updated_at = :now, #active = :no, expires_at = :exp",
            )
            .condition_expression(LIVE_CHANNEL)
            .expression_attribute_names("#active", "active")
            .expression_attribute_values(":tenant", s(tenant.as_str()))
            .expression_attribute_values(":now", s(now.rfc3339()))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .expression_attribute_values(":exp", n(expires_at))
            .return_values(ReturnValue::AllNew);
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
