//! The audit log of operators' and tenants' actions.

use super::*;

#[async_trait]
impl AuditStore for DynamoStore {
    async fn add_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        self.client
            .put_item()
            .table_name(&self.res.audit)
            .set_item(Some(audit_item(entry)?))
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
        // Every partition of the tenant's log from the same cursor, merged newest first.
        let pages = futures::future::try_join_all(
            (0..AUDIT_SHARDS).map(|i| self.audit_partition_page(tenant, i, limit, after)),
        )
        .await?;
        let (items, next) = merge_pages(pages, limit, true);
        Ok(Listed {
            items,
            next: next.map(|sort_key| Cursor {
                sort_key,
                id: String::new(),
            }),
        })
    }
}

/// An audit entry as its item: keyed by its partition (`audit_partition`) and sort key.
pub(super) fn audit_item(entry: &AuditEntry) -> StoreResult<Item> {
    let mut item = to_item(entry)?;
    item.insert(
        "audit_pk".into(),
        s(audit_partition(&entry.tenant_id, &entry.id)),
    );
    item.insert("audit_sk".into(), s(entry.sort_key()));
    Ok(item)
}

impl DynamoStore {
    /// Up to `limit` entries of one partition of a tenant's log, newest first, older than the
    /// cursor; `read_up_to` says where a page cut short stopped.
    async fn audit_partition_page(
        &self,
        tenant: &TenantId,
        shard: u32,
        limit: usize,
        after: Option<&Cursor>,
    ) -> StoreResult<PartitionPage<AuditEntry>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.res.audit)
            .expression_attribute_values(":p", s(audit_partition_of(tenant, shard)))
            .scan_index_forward(false)
            .limit(i32::try_from(limit).unwrap_or(1000));
        req = match after {
            Some(c) => req
                .key_condition_expression("audit_pk = :p AND audit_sk < :c")
                .expression_attribute_values(":c", s(c.sort_key.as_str())),
            None => req.key_condition_expression("audit_pk = :p"),
        };
        let out = req.send().await.map_err(sdk_err)?;
        let cut = out.last_evaluated_key.is_some_and(|k| !k.is_empty());
        let rows: Vec<(String, AuditEntry)> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let e: AuditEntry = from_item(i)?;
                Ok((e.sort_key(), e))
            })
            .collect::<StoreResult<_>>()?;
        let read_up_to = if cut {
            rows.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        Ok(PartitionPage { rows, read_up_to })
    }
}
