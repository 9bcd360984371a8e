//! Channels.

use super::*;

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
        now: &str,
    ) -> StoreResult<Option<Channel>> {
        let mut sets = vec!["updated_at = :now".to_owned()];
        let mut values: Vec<(&str, AttributeValue)> =
            vec![(":now", s(now)), (":tenant", s(tenant.as_str()))];
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
        if patch.active == Some(true) {
            removes.push("disabled_at");
            removes.push("disabled_reason");
        }
        match &patch.rate_limit {
            Some(Some(rl)) => {
                sets.push("rate_limit = :rl".into());
                values.push((":rl", s(rl.as_str())));
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
            .condition_expression("attribute_exists(id) AND tenant_id = :tenant")
            .return_values(ReturnValue::AllNew);
        if patch.name.is_some() {
            req = req.expression_attribute_names("#name", "name");
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
}
