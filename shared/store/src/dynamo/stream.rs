//! The live stream's table (`pk`, `sk`): a connection's item (`conn#<id>`, `-`) with the set
//! of topics it follows; a topic's subscriptions (`sub#<tenant>#<topic>`, one item per
//! connection); stream tokens (`token#<hash>`, `-`); each UTC day's live tenants
//! (`live#<day>`, `-`: a map of tenant id to when its last connection of the day expires,
//! read by whoever pushes frames before it looks for subscribers). Everything expires by TTL
//! (`expires_at`), so a connection API Gateway dropped without a `$disconnect` leaves nothing
//! behind for long.

use super::*;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

/// The sort key of items that are alone in their partition.
const ONLY: &str = "-";
/// The connection item's set of topics (a string set, so that `ADD` and `DELETE` keep it).
const TOPICS: &str = "topics";
/// A live-tenants item's map of tenant id to expiry (seconds).
const LIVE: &str = "tenants";
/// A live-tenants item's mark that its map is full: every tenant counts as live that day.
const LIVE_ALL: &str = "all";

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

    /// Marks `tenant` live in the day of `at` until `until_s`: its entry set in the day's
    /// map (made with it when the day has none), or, when the map is full (an item holds
    /// 400 KB, about 10,000 tenants), the day marked as every tenant's.
    async fn mark_live(&self, tenant: &TenantId, at: Timestamp, until_s: i64) -> StoreResult<()> {
        let day = converger_core::stream::live_day(at.secs());
        let pk = keys::live_tenants_key(day);
        let expires = n(converger_core::stream::live_day_expiry(day));
        let path = format!("{LIVE}.{tenant}");
        let update = |u: Update| {
            u.apply(
                self.client
                    .update_item()
                    .table_name(&self.res.stream)
                    .key("pk", s(&pk))
                    .key("sk", s(ONLY)),
            )
            .send()
        };
        for _ in 0..2 {
            let entry = Update::new()
                .set(&path, n(until_s))
                .set("expires_at", expires.clone())
                .when_exists(LIVE);
            match update(entry).await {
                Ok(_) => return Ok(()),
                Err(e) if is_update_conditional(&e) => {}
                Err(e)
                    if aws_sdk_dynamodb::error::ProvideErrorMetadata::code(&e)
                        == Some("ValidationException") =>
                {
                    // Too large for one item: the day counts every tenant as live.
                    update(
                        Update::new()
                            .set(LIVE_ALL, AttributeValue::Bool(true))
                            .set("expires_at", expires.clone()),
                    )
                    .await
                    .map_err(sdk_err)?;
                    return Ok(());
                }
                Err(e) => return Err(sdk_err(e)),
            }
            // The day's first: its map made with this entry (unless another just made it).
            let first = Update::new()
                .set(
                    LIVE,
                    AttributeValue::M(HashMap::from([(tenant.to_string(), n(until_s))])),
                )
                .set("expires_at", expires.clone())
                .when_absent(LIVE);
            match update(first).await {
                Ok(_) => return Ok(()),
                Err(e) if is_update_conditional(&e) => {}
                Err(e) => return Err(sdk_err(e)),
            }
        }
        Err(StoreError::Corrupt(format!(
            "{pk}: the live tenants' map kept changing"
        )))
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
        let live = self.mark_live(&c.tenant_id, c.connected_at, c.expires_at);
        let (a, b, l) = tokio::join!(own, entry, live);
        a.map_err(sdk_err)?;
        b.map_err(sdk_err)?;
        l
    }

    async fn live_tenants(&self, now: Timestamp) -> StoreResult<LiveTenants> {
        // The days a reader reads (`core::stream::live_days`), in one request.
        let keys: Vec<Item> = converger_core::stream::live_days(now.secs())
            .into_iter()
            .map(|d| {
                HashMap::from([
                    ("pk".to_owned(), s(keys::live_tenants_key(d))),
                    ("sk".to_owned(), s(ONLY)),
                ])
            })
            .collect();
        let out = self
            .client
            .batch_get_item()
            .request_items(
                &self.res.stream,
                aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .build()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
            )
            .send()
            .await
            .map_err(sdk_err)?;
        let mut live = LiveTenants::default();
        // Keys the table could not serve now count as every tenant's: a frame is not lost
        // for a read that did not happen.
        if out.unprocessed_keys.as_ref().is_some_and(|u| !u.is_empty()) {
            live.all = true;
        }
        let now_s = now.secs();
        for item in out
            .responses
            .and_then(|mut r| r.remove(&self.res.stream))
            .unwrap_or_default()
        {
            if matches!(item.get(LIVE_ALL), Some(AttributeValue::Bool(true))) {
                live.all = true;
            }
            if let Some(AttributeValue::M(m)) = item.get(LIVE) {
                for (tenant, until) in m {
                    let until = match until {
                        AttributeValue::N(v) => v.parse::<i64>().unwrap_or(i64::MAX),
                        _ => i64::MAX,
                    };
                    if converger_core::stream::live_mark_counts(until, now_s)
                        && let Ok(t) = TenantId::parse(tenant)
                    {
                        live.tenants.insert(t);
                    }
                }
            }
        }
        Ok(live)
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
