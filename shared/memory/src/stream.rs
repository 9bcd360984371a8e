//! The in-process backend of [`StreamStore`].

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl StreamStore for MemStore {
    async fn put_stream_connection(&self, c: &StreamConnection) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.stream_connections
                .insert(c.connection_id.clone(), c.clone());
            // As the day's live tenants item keeps it: the last connection's expiry.
            let day = converger_core::stream::live_day(c.connected_at.secs());
            s.live_tenants
                .insert((day, c.tenant_id.clone()), c.expires_at);
        })
    }

    async fn live_tenants(&self, now: Timestamp) -> StoreResult<LiveTenants> {
        wait(&self.latency, |m| m.get).await;
        let days = converger_core::stream::live_days(now.secs());
        self.with(|s| LiveTenants {
            all: false,
            tenants: s
                .live_tenants
                .iter()
                .filter(|((d, _), until)| {
                    days.contains(d)
                        && converger_core::stream::live_mark_counts(**until, now.secs())
                })
                .map(|((_, t), _)| t.clone())
                .collect(),
        })
    }

    async fn get_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.stream_connections.get(connection_id).cloned())
    }

    async fn delete_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = s.stream_connections.remove(connection_id)?;
            for topic in &c.topics {
                if let Some(subs) = s
                    .subscriptions
                    .get_mut(&keys::subscription_key(&c.tenant_id, topic))
                {
                    subs.remove(connection_id);
                }
            }
            Some(c)
        })
    }

    async fn subscribe(
        &self,
        connection_id: &str,
        topic: &str,
        max: usize,
        _now: Timestamp,
    ) -> StoreResult<Subscribed> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let Some(c) = s.stream_connections.get_mut(connection_id) else {
                return Subscribed::NoConnection;
            };
            if !c.topics.iter().any(|t| t == topic) {
                if c.topics.len() >= max {
                    return Subscribed::TooMany;
                }
                c.topics.push(topic.to_owned());
            }
            let key = keys::subscription_key(&c.tenant_id, topic);
            s.subscriptions
                .entry(key)
                .or_default()
                .insert(connection_id.to_owned());
            Subscribed::Yes
        })
    }

    async fn unsubscribe(&self, connection_id: &str, topic: &str) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let Some(c) = s.stream_connections.get_mut(connection_id) else {
                return false;
            };
            let had = c.topics.iter().any(|t| t == topic);
            c.topics.retain(|t| t != topic);
            let key = keys::subscription_key(&c.tenant_id, topic);
            if let Some(subs) = s.subscriptions.get_mut(&key) {
                subs.remove(connection_id);
            }
            had
        })
    }

    async fn subscribers(&self, tenant: &TenantId, topic: &str) -> StoreResult<Vec<String>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            s.subscriptions
                .get(&keys::subscription_key(tenant, topic))
                .map(|subs| subs.iter().take(100).cloned().collect())
                .unwrap_or_default()
        })
    }

    async fn drop_subscription(
        &self,
        tenant: &TenantId,
        topic: &str,
        connection_id: &str,
    ) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if let Some(subs) = s
                .subscriptions
                .get_mut(&keys::subscription_key(tenant, topic))
            {
                subs.remove(connection_id);
            }
        })
    }

    async fn tenant_connections(
        &self,
        tenant: &TenantId,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.stream_connections
                .values()
                .filter(|c| &c.tenant_id == tenant)
                // As DynamoDB's TTL deletion lags, an expired one is read as gone.
                .filter(|c| !converger_core::time::expired(Some(c.expires_at), now))
                .take(limit)
                .map(|c| c.connection_id.clone())
                .collect()
        })
    }

    async fn put_stream_token(&self, hash: &str, token: &StreamToken) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.stream_tokens.insert(hash.to_owned(), token.clone());
        })
    }

    async fn stream_token(&self, hash: &str, now: Timestamp) -> StoreResult<Option<StreamToken>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            s.stream_tokens
                .get(hash)
                .filter(|t| t.expires_at > now.secs())
                .cloned()
        })
    }
}
