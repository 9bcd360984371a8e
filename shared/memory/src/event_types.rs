//! The event-type catalog.

use super::*;

#[async_trait]
impl EventTypeStore for MemStore {
    async fn create_event_type(&self, t: &TenantEventType) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let key = (t.tenant_id.clone(), t.name.clone());
            if s.event_types.contains_key(&key) {
                return false;
            }
            s.event_types.insert(key, t.clone());
            true
        })
    }
    async fn get_event_type(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> StoreResult<Option<TenantEventType>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            s.event_types
                .get(&(tenant.clone(), name.to_owned()))
                .cloned()
        })
    }
    async fn replace_event_type(&self, t: &TenantEventType) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            match s
                .event_types
                .get_mut(&(t.tenant_id.clone(), t.name.clone()))
            {
                Some(cur) if cur.version + 1 == t.version => {
                    *cur = t.clone();
                    true
                }
                _ => false,
            }
        })
    }
    async fn list_event_types(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<(Vec<TenantEventType>, bool)> {
        wait(&self.latency, |m| m.query).await;
        let limit = limit.max(1);
        self.with(|s| {
            let mut page: Vec<TenantEventType> = s
                .event_types
                .range((tenant.clone(), after.unwrap_or_default().to_owned())..)
                .take_while(|((t, _), _)| t == tenant)
                .filter(|((_, name), _)| after.is_none_or(|a| name.as_str() > a))
                .map(|(_, v)| v.clone())
                .take(limit + 1)
                .collect();
            let more = page.len() > limit;
            page.truncate(limit);
            (page, more)
        })
    }
}
