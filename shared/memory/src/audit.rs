//! The audit log of operators' and tenants' actions.

use super::*;

#[async_trait]
impl AuditStore for MemStore {
    async fn add_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.audit.insert(
                (entry.tenant_id.to_string(), entry.sort_key()),
                entry.clone(),
            );
        })
    }
    async fn list_audit(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&Cursor>,
    ) -> StoreResult<Listed<AuditEntry>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let t = tenant.to_string();
            let hi = after.map_or_else(|| format!("{}", char::MAX), |c| c.sort_key.clone());
            let limit = limit.clamp(1, 1000);
            let mut items: Vec<(String, AuditEntry)> = s
                .audit
                .range((t.clone(), String::new())..(t, hi))
                .rev()
                .take(limit + 1)
                .map(|((_, k), e)| (k.clone(), e.clone()))
                .collect();
            let more = items.len() > limit;
            items.truncate(limit);
            let next = more.then(|| items.last()).flatten().map(|(k, _)| Cursor {
                sort_key: k.clone(),
                id: String::new(),
            });
            Listed {
                items: items.into_iter().map(|(_, e)| e).collect(),
                next,
            }
        })
    }
}
