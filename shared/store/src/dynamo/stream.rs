//! The live stream's table (`pk`, `sk`): a connection's item (`conn#<id>`, `-`) with the set
//! of topics it follows; a topic's subscriptions (`sub#<tenant>#<topic>`, one item per
//! connection); stream tokens (`token#<hash>`, `-`). Everything expires by TTL
//! (`expires_at`), so a connection API Gateway dropped without a `$disconnect` leaves nothing
//! behind for long.

use super::*;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

/// The sort key of items that are alone in their partition.
const ONLY: &str = "-";
/// The connection item's set of topics (a string set, so that `ADD` and `DELETE` keep it).
const TOPICS: &str = "topics";

impl DynamoStore {
    async fn get_stream_item(&self, pk: &str) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.stream)
            .key("pk", s(pk))
            .key("sk", s(ONLY))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out.item)
    }

    /// The connection ids of a partition of one item per connection (a topic's subscriptions,
    /// a tenant's connections): at most `limit`, the expired left out (TTL deletion lags).
    async fn partition_members(&self, pk: &str, limit: usize) -> StoreResult<Vec<String>> {
        let out = self
            .client
            .query()
            .table_name(&self.res.stream)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(pk))
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .send()
            .await
            .map_err(sdk_err)?;
        let now = now_ms();
        Ok(out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter(|i| !converger_core::time::expired(num_opt(i, "expires_at"), now))
            .filter_map(|mut i| match i.remove("sk") {
                Some(AttributeValue::S(c)) => Some(c),
                _ => None,
            })
            .collect())
    }

    async fn delete_subscription_item(&self, pk: &str, connection_id: &str) -> StoreResult<()> {
        self.client
            .delete_item()
            .table_name(&self.res.stream)
            .key("pk", s(pk))
            .key("sk", s(connection_id))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}

/// A connection's item as stored, with its keys removed.
fn connection_of(mut item: Item) -> StoreResult<StreamConnection> {
    item.remove("pk");
    item.remove("sk");
    from_item(item)
}

#[async_trait]
impl StreamStore for DynamoStore {
    async fn put_stream_connection(&self, c: &StreamConnection) -> StoreResult<()> {
        let mut item = to_item(c)?;
        // Topics are only ever added and removed by `subscribe` and `unsubscribe`, as a set.
        item.remove(TOPICS);
        item.insert(
            "pk".into(),
            s(keys::stream_connection_key(&c.connection_id)),
        );
        item.insert("sk".into(), s(ONLY));
        // And its entry in its tenant's connections, as long-lived.
        let entry = self
            .client
            .put_item()
            .table_name(&self.res.stream)
            .item("pk", s(keys::tenant_connections_key(&c.tenant_id)))
            .item("sk", s(&c.connection_id))
            .item("expires_at", n(c.expires_at))
            .send();
        let own = self
            .client
            .put_item()
            .table_name(&self.res.stream)
            .set_item(Some(item))
            .send();
        let (a, b) = tokio::join!(own, entry);
        a.map_err(sdk_err)?;
        b.map_err(sdk_err)?;
        Ok(())
    }

    async fn get_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>> {
        self.get_stream_item(&keys::stream_connection_key(connection_id))
            .await?
            .map(connection_of)
            .transpose()
    }

    async fn delete_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.res.stream)
            .key("pk", s(keys::stream_connection_key(connection_id)))
            .key("sk", s(ONLY))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(sdk_err)?;
        let Some(c) = out
            .attributes
            .filter(|a| !a.is_empty())
            .map(connection_of)
            .transpose()?
        else {
            return Ok(None);
        };
        let drops = c
            .topics
            .iter()
            .map(|topic| keys::subscription_key(&c.tenant_id, topic))
            .chain([keys::tenant_connections_key(&c.tenant_id)])
            .map(|pk| async move { self.delete_subscription_item(&pk, connection_id).await });
        for r in futures::future::join_all(drops).await {
            r?;
        }
        Ok(Some(c))
    }

    async fn subscribe(
        &self,
        connection_id: &str,
        topic: &str,
        max: usize,
        _now: Timestamp,
    ) -> StoreResult<Subscribed> {
        // Added to the connection's topics if it has room for it, or has it already.
        let r = Update::new()
            .add(TOPICS, AttributeValue::Ss(vec![topic.to_owned()]))
            .when_exists("pk")
            .when_one_of(|u| {
                u.when_absent(TOPICS)
                    .when_contains(TOPICS, s(topic))
                    .when_size_lt(TOPICS, n(max))
            })
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.stream)
                    .key("pk", s(keys::stream_connection_key(connection_id)))
                    .key("sk", s(ONLY)),
            )
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let c = match r {
            Ok(out) => connection_of(out.attributes.unwrap_or_default())?,
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                let had = match e.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(c) => c.item,
                    _ => None,
                };
                return Ok(if had.is_some_and(|i| !i.is_empty()) {
                    Subscribed::TooMany
                } else {
                    Subscribed::NoConnection
                });
            }
            Err(e) => return Err(sdk_err(e)),
        };
        self.client
            .put_item()
            .table_name(&self.res.stream)
            .item("pk", s(keys::subscription_key(&c.tenant_id, topic)))
            .item("sk", s(connection_id))
            .item("expires_at", n(c.expires_at))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(Subscribed::Yes)
    }

    async fn unsubscribe(&self, connection_id: &str, topic: &str) -> StoreResult<bool> {
        let r = Update::new()
            .delete(TOPICS, AttributeValue::Ss(vec![topic.to_owned()]))
            .when_exists("pk")
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.stream)
                    .key("pk", s(keys::stream_connection_key(connection_id)))
                    .key("sk", s(ONLY)),
            )
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        let old = match r {
            Ok(out) => connection_of(out.attributes.unwrap_or_default())?,
            Err(e) if is_conditional(&e) => return Ok(false),
            Err(e) => return Err(sdk_err(e)),
        };
        self.delete_subscription_item(
            &keys::subscription_key(&old.tenant_id, topic),
            connection_id,
        )
        .await?;
        Ok(old.topics.iter().any(|t| t == topic))
    }

    async fn subscribers(&self, tenant: &TenantId, topic: &str) -> StoreResult<Vec<String>> {
        self.partition_members(&keys::subscription_key(tenant, topic), 100)
            .await
    }

    async fn drop_subscription(
        &self,
        tenant: &TenantId,
        topic: &str,
        connection_id: &str,
    ) -> StoreResult<()> {
        self.delete_subscription_item(&keys::subscription_key(tenant, topic), connection_id)
            .await
    }

    async fn tenant_connections(
        &self,
        tenant: &TenantId,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.partition_members(&keys::tenant_connections_key(tenant), limit)
            .await
    }

    async fn put_stream_token(&self, hash: &str, token: &StreamToken) -> StoreResult<()> {
        let mut req = self
            .client
            .put_item()
            .table_name(&self.res.stream)
            .item("pk", s(keys::stream_token_key(hash)))
            .item("sk", s(ONLY))
            .item("tenant_id", s(token.tenant_id.as_str()))
            .item("expires_at", n(token.expires_at));
        if let Some(k) = &token.key_hash {
            req = req.item("key_hash", s(k));
        }
        if let Some(ts) = token.topics.as_ref().filter(|ts| !ts.is_empty()) {
            req = req.item("topics", AttributeValue::Ss(ts.clone()));
        }
        req.send().await.map_err(sdk_err)?;
        Ok(())
    }

    async fn stream_token(&self, hash: &str, now: Timestamp) -> StoreResult<Option<StreamToken>> {
        let Some(item) = self.get_stream_item(&keys::stream_token_key(hash)).await? else {
            return Ok(None);
        };
        let tenant = match item.get("tenant_id") {
            Some(AttributeValue::S(t)) => {
                TenantId::parse(t).map_err(|e| StoreError::Corrupt(format!("stream token: {e}")))?
            }
            _ => return Err(StoreError::Corrupt("stream token without a tenant".into())),
        };
        let expires_at = num(&item, "expires_at");
        let key_hash = match item.get("key_hash") {
            Some(AttributeValue::S(k)) => Some(k.clone()),
            _ => None,
        };
        let topics = match item.get("topics") {
            Some(AttributeValue::Ss(ts)) => {
                let mut ts = ts.clone();
                ts.sort();
                Some(ts)
            }
            _ => None,
        };
        Ok((expires_at > now.secs()).then_some(StreamToken {
            tenant_id: tenant,
            expires_at,
            key_hash,
            topics,
        }))
    }
}
