//! The audit log of operators' and tenants' actions.

use super::*;

#[async_trait]
impl AuditStore for DynamoStore {
    async fn add_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        let mut item = to_item(entry)?;
        item.insert("audit_sk".into(), s(format!("{}#{}", entry.at, entry.id)));
        self.client
            .put_item()
            .table_name(&self.res.audit)
            .set_item(Some(item))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
    async fn list_audit(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&Cursor>,
    ) -> StoreResult<Listed<AuditEntry>> {
        let limit = limit.clamp(1, 1000);
        let out = self
            .client
            .query()
            .table_name(&self.res.audit)
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", s(tenant.as_str()))
            .scan_index_forward(false)
            .limit(i32::try_from(limit).unwrap_or(1000))
            .set_exclusive_start_key(after.map(|c| {
                HashMap::from([
                    ("tenant_id".to_owned(), s(tenant.as_str())),
                    ("audit_sk".to_owned(), s(c.sort_key.as_str())),
                ])
            }))
            .send()
            .await
            .map_err(sdk_err)?;
        let items: Vec<AuditEntry> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect::<StoreResult<_>>()?;
        let next = out
            .last_evaluated_key
            .filter(|k| !k.is_empty())
            .and_then(|k| {
                Some(Cursor {
                    sort_key: k.get("audit_sk")?.as_s().ok()?.clone(),
                    id: String::new(),
                })
            });
        Ok(Listed { items, next })
    }
}
