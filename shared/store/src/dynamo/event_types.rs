//! The event-type catalog: one item per tenant and name (`tenant_id`, `name`), the schema kept
//! as its JSON text so that it reads back exactly as written.

use super::*;

fn item(t: &TenantEventType) -> StoreResult<Item> {
    let mut stored = t.clone();
    let schema = stored.schema.take();
    let mut item = to_item(&stored)?;
    if let Some(schema) = schema {
        let text = serde_json::to_string(&schema)
            .map_err(|e| StoreError::Corrupt(format!("event type schema: {e}")))?;
        item.insert("schema_json".into(), s(text));
    }
    Ok(item)
}

fn from_stored(mut item: Item) -> StoreResult<TenantEventType> {
    let schema = match item.remove("schema_json") {
        Some(AttributeValue::S(text)) => Some(
            serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("event type schema: {e}")))?,
        ),
        _ => None,
    };
    let mut t: TenantEventType = from_item(item)?;
    t.schema = schema;
    Ok(t)
}

type PutItem = aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;

impl DynamoStore {
    /// Writes `t` under the condition `when` adds: `false` when it does not hold.
    async fn put_type(
        &self,
        t: &TenantEventType,
        when: impl FnOnce(PutItem) -> PutItem,
    ) -> StoreResult<bool> {
        let put = self
            .client
            .put_item()
            .table_name(&self.res.event_types)
            .set_item(Some(item(t)?));
        match when(put).send().await {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }
}

#[async_trait]
impl EventTypeStore for DynamoStore {
    async fn create_event_type(&self, t: &TenantEventType) -> StoreResult<bool> {
        self.put_type(t, |p| {
            p.condition_expression("attribute_not_exists(tenant_id)")
        })
        .await
    }

    async fn get_event_type(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> StoreResult<Option<TenantEventType>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.event_types)
            .key("tenant_id", s(tenant.as_str()))
            .key("name", s(name))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        out.item.map(from_stored).transpose()
    }

    async fn replace_event_type(&self, t: &TenantEventType) -> StoreResult<bool> {
        let was = n(t.version.saturating_sub(1));
        self.put_type(t, |p| {
            p.condition_expression("version = :was")
                .expression_attribute_values(":was", was)
        })
        .await
    }

    async fn list_event_types(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<(Vec<TenantEventType>, bool)> {
        let limit = limit.clamp(1, 1000);
        let mut q = self
            .client
            .query()
            .table_name(&self.res.event_types)
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", s(tenant.as_str()))
            // One more than asked: whether more follow.
            .limit(i32::try_from(limit + 1).unwrap_or(i32::MAX));
        if let Some(a) = after {
            q = q
                .exclusive_start_key("tenant_id", s(tenant.as_str()))
                .exclusive_start_key("name", s(a));
        }
        let out = q.send().await.map_err(sdk_err)?;
        // A page cut short by DynamoDB's 1 MB has a last key too: more may follow.
        let cut = out.last_evaluated_key.is_some();
        let mut page = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_stored)
            .collect::<StoreResult<Vec<_>>>()?;
        let more = page.len() > limit || cut;
        page.truncate(limit);
        Ok((page, more))
    }
}
