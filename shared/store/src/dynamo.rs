//! The DynamoDB backend of [`Store`]. Every state change is one conditional write.

use crate::model::*;
use crate::ports::*;
use crate::resources::Resources;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use converger_core::query::{Actor, Cursor};
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;

mod accounts;
mod flow;
mod handoff;
mod health;

pub type Item = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    res: Resources,
    /// Set only against an emulator whose transactions are not serializable.
    tx_lock: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn sdk_err<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Unavailable(DisplayErrorContext(&e).to_string())
}

fn now_ms() -> i64 {
    converger_core::time::now_ms()
}

fn to_item<T: Serialize>(v: &T) -> StoreResult<Item> {
    serde_dynamo::to_item(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn from_item<T: DeserializeOwned>(item: Item) -> StoreResult<T> {
    serde_dynamo::from_item(item).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn to_av<T: Serialize>(v: &T) -> StoreResult<AttributeValue> {
    serde_dynamo::to_attribute_value(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The index attributes of a delivery in `status` changed at `updated_at`.
fn index_keys(
    tenant: &TenantId,
    channel: &ChannelId,
    id: &DeliveryId,
    status: DeliveryStatus,
    updated_at: &str,
) -> [(&'static str, AttributeValue); 3] {
    [
        (":ts_pk", s(format!("{tenant}#{status}"))),
        (":cs_pk", s(format!("{channel}#{status}"))),
        (":upd_sk", s(format!("{updated_at}#{id}"))),
    ]
}

fn delivery_item(d: &Delivery) -> StoreResult<Item> {
    let mut item = to_item(d)?;
    for (k, v) in index_keys(&d.tenant_id, &d.channel_id, &d.id, d.status, &d.updated_at) {
        item.insert(k.trim_start_matches(':').to_owned(), v);
    }
    if d.status == DeliveryStatus::Pending && d.in_backlog {
        let [(_, pk), (_, sk)] = backlog_keys(&d.channel_id, d.next_attempt_at);
        item.insert("bl_pk".into(), pk);
        item.insert("bl_sk".into(), sk);
    } else if d.status == DeliveryStatus::Pending {
        let [(_, shard), (_, at)] = due_keys(&d.id, d.next_attempt_at);
        item.insert("due_shard".into(), shard);
        item.insert("due_at".into(), at);
    }
    Ok(item)
}

fn due_keys(id: &DeliveryId, next_attempt_at: i64) -> [(&'static str, AttributeValue); 2] {
    [
        (":due_shard", s(format!("due#{}", due_shard(id)))),
        (":due_at", s(due_key(next_attempt_at))),
    ]
}

/// The backlog index attributes of a delivery of `channel` due at `due_ms`.
fn backlog_keys(channel: &ChannelId, due_ms: i64) -> [(&'static str, AttributeValue); 2] {
    [
        (":bl_pk", s(channel.as_str())),
        (":bl_sk", s(due_key(due_ms))),
    ]
}

/// The provider index key of a delivery of `channel` known to its provider as `id`.
fn provider_key(channel: &ChannelId, id: &str) -> String {
    format!("{channel}#{id}")
}

const SET_INDEX: &str = "ts_pk = :ts_pk, cs_pk = :cs_pk, upd_sk = :upd_sk";

impl DynamoStore {
    /// The transaction items of one replay: the conditional transition and the audit entry.
    fn replay_items(
        &self,
        d: &Delivery,
        actor: &Actor,
        now_ms: i64,
        now: &str,
        audit: &AuditEntry,
    ) -> StoreResult<(aws_sdk_dynamodb::types::Update, Put)> {
        let mut values: HashMap<String, AttributeValue> = HashMap::from([
            (":failed".to_owned(), s(DeliveryStatus::Failed.as_str())),
            (":st".to_owned(), s(DeliveryStatus::Pending.as_str())),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
            (":by".to_owned(), s(actor.to_string())),
            (":now".to_owned(), s(now)),
            (":due".to_owned(), n(now_ms)),
        ]);
        for (k, v) in index_keys(
            &d.tenant_id,
            &d.channel_id,
            &d.id,
            DeliveryStatus::Pending,
            now,
        ) {
            values.insert(k.to_owned(), v);
        }
        for (k, v) in due_keys(&d.id, now_ms) {
            values.insert(k.to_owned(), v);
        }
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.res.deliveries)
            .key("id", s(d.id.as_str()))
            .update_expression(format!(
                "SET #st = :st, attempts = :zero, \
                 retry_count = if_not_exists(retry_count, :zero) + :one, retried_by = :by, \
                 retried_at = :now, next_attempt_at = :due, updated_at = :now, {SET_INDEX}, \
                 due_shard = :due_shard, due_at = :due_at \
                 REMOVE lease_token, lease_until, slot, in_backlog, bl_pk, bl_sk"
            ))
            .condition_expression("#st = :failed")
            .expression_attribute_names("#st", "status")
            .set_expression_attribute_values(Some(values))
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut audit_item = to_item(audit)?;
        audit_item.insert("audit_sk".into(), s(format!("{}#{}", audit.at, audit.id)));
        let put = Put::builder()
            .table_name(&self.res.audit)
            .set_item(Some(audit_item))
            .condition_expression("attribute_not_exists(audit_sk)")
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok((update, put))
    }

    pub fn new(client: Client, res: Resources) -> Self {
        Self {
            client,
            res,
            tx_lock: None,
        }
    }

    /// Runs this process's TransactWriteItems one at a time. Only for the local emulator:
    /// moto checks a transaction's conditions and copies the tables it touches without a lock,
    /// so two concurrent transactions can both pass a condition (measured: 11 of 600 replays
    /// applied twice under two concurrent callers). The breaker's transitions take the same
    /// lock: under load, two concurrent conditional updates of one flow item were seen to
    /// both pass on the emulator. DynamoDB serializes conflicting writes itself, so
    /// production never sets this.
    pub fn with_serial_transactions(mut self, on: bool) -> Self {
        self.tx_lock = on.then(|| std::sync::Arc::new(tokio::sync::Mutex::new(())));
        self
    }

    async fn tx_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.tx_lock {
            Some(l) => Some(l.lock().await),
            None => None,
        }
    }

    /// Writes delivery rows unconditionally in batches of 25 (seeding benchmarks, tests and
    /// migrations; the pipeline never uses it).
    pub async fn seed_deliveries(&self, rows: &[Delivery]) -> StoreResult<()> {
        let items = rows
            .iter()
            .map(delivery_item)
            .collect::<StoreResult<Vec<_>>>()?;
        self.batch_put(&self.res.deliveries, items).await
    }

    /// Writes activities unconditionally in batches of 25 (seeding, like
    /// [`Self::seed_deliveries`]).
    pub async fn seed_activities(&self, rows: &[Activity]) -> StoreResult<()> {
        let items = rows.iter().map(to_item).collect::<StoreResult<Vec<_>>>()?;
        self.batch_put(&self.res.activities, items).await
    }

    pub(crate) async fn batch_put(&self, table: &str, items: Vec<Item>) -> StoreResult<()> {
        self.batch_put_rows(items.into_iter().map(|i| (table.to_owned(), i)).collect())
            .await
    }

    /// Unconditional puts of `(table, item)` rows, 25 to a request; unprocessed items are
    /// sent again with a growing pause, a bounded number of times.
    pub(crate) async fn batch_put_rows(&self, rows: Vec<(String, Item)>) -> StoreResult<()> {
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let mut req: HashMap<String, Vec<aws_sdk_dynamodb::types::WriteRequest>> =
                HashMap::new();
            for (table, item) in rows.by_ref().take(25) {
                let put = aws_sdk_dynamodb::types::PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                req.entry(table).or_default().push(
                    aws_sdk_dynamodb::types::WriteRequest::builder()
                        .put_request(put)
                        .build(),
                );
            }
            let mut pending = Some(req);
            for round in 0..16u64 {
                let Some(req) = pending.take().filter(|r| !r.is_empty()) else {
                    break;
                };
                if round > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(10 * round)).await;
                }
                pending = self
                    .client
                    .batch_write_item()
                    .set_request_items(Some(req))
                    .send()
                    .await
                    .map_err(sdk_err)?
                    .unprocessed_items;
            }
            if pending.is_some_and(|p| p.values().any(|v| !v.is_empty())) {
                return Err(StoreError::Unavailable("batch write throttled".into()));
            }
        }
        Ok(())
    }

    /// The items of `keys` in `table` (those that exist), 100 keys to a request; unprocessed
    /// keys are asked for again with a growing pause, a bounded number of times.
    pub(crate) async fn batch_get(
        &self,
        table: &str,
        keys: Vec<Item>,
        consistent: bool,
    ) -> StoreResult<Vec<Item>> {
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            for round in 0..8u64 {
                if pending.is_empty() {
                    break;
                }
                if round > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(10 * round)).await;
                }
                let ka = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(consistent)
                    .build()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(table, ka)
                    .send()
                    .await
                    .map_err(sdk_err)?;
                if let Some(items) = out.responses.and_then(|mut r| r.remove(table)) {
                    found.extend(items);
                }
                if let Some(mut un) = out.unprocessed_keys
                    && let Some(k) = un.remove(table)
                {
                    pending = k.keys;
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable("batch get throttled".into()));
            }
        }
        Ok(found)
    }

    async fn get<T: DeserializeOwned>(
        &self,
        table: &str,
        key: &str,
        value: &str,
    ) -> StoreResult<Option<T>> {
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key(key, s(value))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        out.item.map(from_item).transpose()
    }

    async fn put_new(&self, table: &str, key: &str, item: Item) -> StoreResult<()> {
        let r = self
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", key)
            .send()
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Err(StoreError::Conflict(format!("{key} exists"))),
            Err(e) => Err(sdk_err(e)),
        }
    }

    /// A conditional update of a delivery held under `token`. `Ok(false)` when the lease was
    /// lost (another attempt took over after it expired).
    async fn leased_update(
        &self,
        d: &Delivery,
        token: &str,
        expr: String,
        values: Vec<(&str, AttributeValue)>,
    ) -> StoreResult<bool> {
        let uses_status = expr.contains("#st");
        let mut req = self
            .client
            .update_item()
            .table_name(&self.res.deliveries)
            .key("id", s(d.id.as_str()))
            .update_expression(expr)
            .condition_expression("lease_token = :token")
            .expression_attribute_values(":token", s(token));
        if uses_status {
            req = req.expression_attribute_names("#st", "status");
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_update_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn outcome_values(
        &self,
        d: &Delivery,
        status: DeliveryStatus,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<Vec<(&'static str, AttributeValue)>> {
        self.spill(d, &log.spill).await?;
        let mut v: Vec<(&'static str, AttributeValue)> = vec![
            (":st", s(status.as_str())),
            (":one", n(1)),
            (":now", s(now)),
            (":log", to_av(&log.recent)?),
        ];
        v.extend(index_keys(&d.tenant_id, &d.channel_id, &d.id, status, now));
        Ok(v)
    }

    /// Moves attempt entries to the attempts table (before the delivery item drops them, so
    /// an entry is never in neither place; a reader de-duplicates by attempt number).
    async fn spill(&self, d: &Delivery, entries: &[AttemptEntry]) -> StoreResult<()> {
        for chunk in entries.chunks(25) {
            let mut writes = Vec::with_capacity(chunk.len());
            for e in chunk {
                let mut item = to_item(e)?;
                item.insert("delivery_id".into(), s(d.id.as_str()));
                item.insert("attempt_sk".into(), s(format!("{:010}", e.attempt)));
                writes.push(
                    aws_sdk_dynamodb::types::WriteRequest::builder()
                        .put_request(
                            aws_sdk_dynamodb::types::PutRequest::builder()
                                .set_item(Some(item))
                                .build()
                                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                        )
                        .build(),
                );
            }
            let mut pending = Some(HashMap::from([(self.res.attempts.clone(), writes)]));
            for _ in 0..8 {
                let Some(req) = pending.take().filter(|r| !r.is_empty()) else {
                    break;
                };
                let out = self
                    .client
                    .batch_write_item()
                    .set_request_items(Some(req))
                    .send()
                    .await
                    .map_err(sdk_err)?;
                pending = out.unprocessed_items;
            }
            if pending.is_some_and(|p| p.values().any(|v| !v.is_empty())) {
                return Err(StoreError::Unavailable(
                    "attempt log spill throttled".into(),
                ));
            }
        }
        Ok(())
    }
}

fn is_conditional<E: aws_sdk_dynamodb::error::ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    e.as_service_error()
        .and_then(|se| se.code())
        .is_some_and(|c| c == "ConditionalCheckFailedException")
}

fn is_update_conditional<R>(e: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        e.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}

const LOG_SET: &str = "attempt_log = :log";

#[async_trait]
impl Store for DynamoStore {
    async fn create_tenant(&self, tenant: &Tenant, api_key_hash: &str) -> StoreResult<()> {
        let mut t = to_item(tenant)?;
        t.insert("pk".into(), s(tenant.id.as_str()));
        // Kept so that a rotation can remove the key item it replaces.
        t.insert("api_key_hash".into(), s(api_key_hash));
        let mut k = Item::new();
        k.insert("pk".into(), s(format!("key#{api_key_hash}")));
        k.insert("tenant_id".into(), s(tenant.id.as_str()));
        let put = |item: Item| -> StoreResult<TransactWriteItem> {
            let p = Put::builder()
                .table_name(&self.res.tenants)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            Ok(TransactWriteItem::builder().put(p).build())
        };
        let _serial = self.tx_guard().await;
        self.client
            .transact_write_items()
            .transact_items(put(t)?)
            .transact_items(put(k)?)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn get_tenant(&self, id: &TenantId) -> StoreResult<Option<Tenant>> {
        self.get(&self.res.tenants, "pk", id.as_str()).await
    }

    async fn tenant_by_api_key_hash(&self, hash: &str) -> StoreResult<Option<Tenant>> {
        #[derive(serde::Deserialize)]
        struct KeyItem {
            tenant_id: TenantId,
        }
        let key: Option<KeyItem> = self
            .get(&self.res.tenants, "pk", &format!("key#{hash}"))
            .await?;
        match key {
            Some(k) => self.get_tenant(&k.tenant_id).await,
            None => Ok(None),
        }
    }

    async fn set_tenant_tier(
        &self,
        id: &TenantId,
        tier: converger_core::Tier,
    ) -> StoreResult<Option<Tenant>> {
        let r = self
            .client
            .update_item()
            .table_name(&self.res.tenants)
            .key("pk", s(id.as_str()))
            .update_expression("SET tier = :tier")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":tier", s(tier.as_str()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match r {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

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

    async fn next_seq(&self, tenant: &TenantId, conversation_id: &str) -> StoreResult<u64> {
        let out = self
            .client
            .update_item()
            .table_name(&self.res.activities)
            .key("id", s(format!("conv#{tenant}#{conversation_id}")))
            .update_expression("ADD seq :one")
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(sdk_err)?;
        out.attributes
            .as_ref()
            .and_then(|a| a.get("seq"))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Corrupt("conversation counter without seq".into()))
    }

    async fn create_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<Created> {
        let put = |table: &str, item: Item| -> StoreResult<TransactWriteItem> {
            let p = Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(id)")
                .build()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            Ok(TransactWriteItem::builder().put(p).build())
        };
        let mut req = self
            .client
            .transact_write_items()
            .transact_items(put(&self.res.activities, to_item(activity)?)?);
        for d in deliveries {
            req = req.transact_items(put(&self.res.deliveries, delivery_item(d)?)?);
        }
        let sent = {
            let _serial = self.tx_guard().await;
            req.send().await
        };
        match sent {
            Ok(_) => Ok(Created::New),
            Err(e) => {
                if let Some(TransactWriteItemsError::TransactionCanceledException(c)) =
                    e.as_service_error()
                {
                    let conditional = c
                        .cancellation_reasons()
                        .iter()
                        .any(|r| r.code() == Some("ConditionalCheckFailed"));
                    if conditional {
                        return Ok(Created::Duplicate);
                    }
                }
                Err(sdk_err(e))
            }
        }
    }

    async fn create_fresh_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<()> {
        let mut rows = Vec::with_capacity(deliveries.len() + 1);
        rows.push((self.res.activities.clone(), to_item(activity)?));
        for d in deliveries {
            rows.push((self.res.deliveries.clone(), delivery_item(d)?));
        }
        self.batch_put_rows(rows).await
    }

    async fn get_activity(&self, id: &ActivityId) -> StoreResult<Option<Activity>> {
        let a: Option<Activity> = self.get(&self.res.activities, "id", id.as_str()).await?;
        Ok(a.filter(|a| !crate::model::expired(a.expires_at, now_ms())))
    }

    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>> {
        let d: Option<Delivery> = self.get(&self.res.deliveries, "id", id.as_str()).await?;
        Ok(d.filter(|d| !crate::model::expired(d.expires_at, now_ms())))
    }

    async fn get_deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>> {
        let keys = ids
            .iter()
            .map(|id| HashMap::from([("id".to_owned(), s(id.as_str()))]))
            .collect();
        let now = now_ms();
        let rows: Vec<Delivery> = self
            .batch_get(&self.res.deliveries, keys, true)
            .await?
            .into_iter()
            .map(from_item)
            .collect::<StoreResult<_>>()?;
        Ok(rows
            .into_iter()
            .filter(|d| !crate::model::expired(d.expires_at, now))
            .collect())
    }

    async fn claim(
        &self,
        id: &DeliveryId,
        token: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<Claim> {
        let r = self
            .client
            .update_item()
            .table_name(&self.res.deliveries)
            .key("id", s(id.as_str()))
            .update_expression("SET lease_token = :token, lease_until = :until")
            .condition_expression(
                "attribute_exists(id) AND #st = :pending AND next_attempt_at <= :now \
                 AND (attribute_not_exists(lease_until) OR lease_until < :now) \
                 AND attribute_not_exists(handed_off) \
                 AND (attribute_not_exists(expires_at) OR expires_at > :now_s)",
            )
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":now_s", n(now_ms.div_euclid(1000)))
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":until", n(now_ms.saturating_add(lease_ms)))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":pending", s(DeliveryStatus::Pending.as_str()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let old = match r {
            Ok(out) => {
                let item = out
                    .attributes
                    .ok_or_else(|| StoreError::Corrupt("claim returned no item".into()))?;
                return Ok(Claim::Claimed(from_item(item)?));
            }
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(c) => match c.item {
                    Some(item) if !item.is_empty() => Some(from_item::<Delivery>(item)?),
                    // Emulators that do not return the old item: read it.
                    _ => self.get_delivery(id).await?,
                },
                other => {
                    return Err(StoreError::Unavailable(
                        DisplayErrorContext(&other).to_string(),
                    ));
                }
            },
        };
        Ok(match old {
            None => Claim::Missing,
            // Past its retention: gone, whatever DynamoDB has not deleted yet.
            Some(d) if crate::model::expired(d.expires_at, now_ms) => Claim::Missing,
            Some(d) if d.status != DeliveryStatus::Pending || d.handed_off => Claim::Settled(d),
            Some(d) if d.next_attempt_at > now_ms => Claim::NotDue(d),
            Some(_) => Claim::Busy,
        })
    }

    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        self.leased_update(d, token, "REMOVE lease_token, lease_until".into(), vec![])
            .await
    }

    async fn mark_sent(
        &self,
        d: &Delivery,
        token: &str,
        info: &SentInfo,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        let mut sets = vec![
            "#st = :st".to_owned(),
            "attempts = attempts + :one".into(),
            "updated_at = :now".into(),
            SET_INDEX.into(),
            LOG_SET.into(),
        ];
        let status = if info.handed_off {
            DeliveryStatus::Pending
        } else {
            DeliveryStatus::Sent
        };
        let mut values = self.outcome_values(d, status, log, now).await?;
        if info.handed_off {
            sets.push("handed_off = :t".into());
            values.push((":t", AttributeValue::Bool(true)));
        } else {
            sets.push("sent_at = :now".into());
        }
        if let Some(id) = &info.provider_message_id {
            sets.push("provider_message_id = :pmid, pm_key = :pmk".into());
            values.push((":pmid", s(id.as_str())));
            values.push((":pmk", s(provider_key(&d.channel_id, id))));
        }
        if let Some(st) = info.response_status {
            sets.push("response_status = :rs".into());
            values.push((":rs", n(st)));
        }
        let expr = format!(
            "SET {} REMOVE lease_token, lease_until, last_error, due_shard, due_at, slot, \
             in_backlog, bl_pk, bl_sk",
            sets.join(", ")
        );
        self.leased_update(d, token, expr, values).await
    }

    async fn mark_attempt_failed(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        next: RetryAt,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        let (next_attempt_at, keep_slot) = (next.at_ms, next.keep_slot);
        let expr = format!(
            "SET #st = :st, attempts = attempts + :one, last_error = :err, \
             next_attempt_at = :next, updated_at = :now, {SET_INDEX}, {LOG_SET}, \
             due_shard = :due_shard, due_at = :due_at, slot = :slot \
             REMOVE lease_token, lease_until"
        );
        let mut values = self
            .outcome_values(d, DeliveryStatus::Pending, log, now)
            .await?;
        values.push((":err", s(error)));
        values.push((":next", n(next_attempt_at)));
        values.push((":slot", AttributeValue::Bool(keep_slot)));
        values.extend(due_keys(&d.id, next_attempt_at));
        self.leased_update(d, token, expr, values).await
    }

    async fn mark_dead(
        &self,
        d: &Delivery,
        token: &str,
        error: &str,
        log: &LogUpdate,
        now: &str,
    ) -> StoreResult<bool> {
        let expr = format!(
            "SET #st = :st, attempts = attempts + :one, last_error = :err, \
             updated_at = :now, {SET_INDEX}, {LOG_SET} \
             REMOVE lease_token, lease_until, due_shard, due_at, slot, in_backlog, bl_pk, bl_sk"
        );
        let mut values = self
            .outcome_values(d, DeliveryStatus::Failed, log, now)
            .await?;
        values.push((":err", s(error)));
        self.leased_update(d, token, expr, values).await
    }

    async fn older_attempts(
        &self,
        id: &DeliveryId,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<Vec<AttemptEntry>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.res.attempts)
            .scan_index_forward(false)
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .expression_attribute_values(":d", s(id.as_str()));
        req = match before {
            Some(b) => req
                .key_condition_expression("delivery_id = :d AND attempt_sk < :b")
                .expression_attribute_values(":b", s(format!("{b:010}"))),
            None => req.key_condition_expression("delivery_id = :d"),
        };
        let out = req.send().await.map_err(sdk_err)?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect()
    }

    async fn overdue(
        &self,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.res.deliveries)
            .index_name("by_due")
            .key_condition_expression("due_shard = :sh AND due_at < :before")
            .expression_attribute_values(":sh", s(format!("due#{shard}")))
            .expression_attribute_values(":before", s(due_key(before_ms)))
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000));
        if let Some(from) = from {
            let start: HashMap<String, String> = serde_json::from_str(&from)
                .map_err(|e| StoreError::Corrupt(format!("bad continuation: {e}")))?;
            req = req
                .set_exclusive_start_key(Some(start.into_iter().map(|(k, v)| (k, s(v))).collect()));
        }
        let out = req.send().await.map_err(sdk_err)?;
        let mut items = Vec::new();
        for item in out.items.unwrap_or_default() {
            #[derive(serde::Deserialize)]
            struct Row {
                id: DeliveryId,
                tier: converger_core::Tier,
                #[serde(default)]
                lease_until: Option<i64>,
                #[serde(default)]
                expires_at: Option<i64>,
            }
            let r: Row = from_item(item)?;
            // Past its retention: not enqueued again (the claim would drop it anyway).
            if crate::model::expired(r.expires_at, before_ms.max(now_ms())) {
                continue;
            }
            items.push(Overdue {
                id: r.id,
                tier: r.tier,
                lease_until: r.lease_until,
            });
        }
        let next = out.last_evaluated_key.filter(|k| !k.is_empty()).map(|k| {
            let m: HashMap<String, String> = k
                .into_iter()
                .filter_map(|(k, v)| v.as_s().ok().map(|v| (k, v.clone())))
                .collect();
            serde_json::to_string(&m).unwrap_or_default()
        });
        Ok(Page { items, next })
    }

    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        let mut n: u64 = 0;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name("by_tenant_status")
                .key_condition_expression("ts_pk = :h")
                .expression_attribute_values(":h", s(format!("{tenant}#{status}")))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            n += u64::try_from(out.count()).unwrap_or(0);
            match out.last_evaluated_key {
                Some(k) if n < cap => start = Some(k),
                _ => return Ok(n),
            }
        }
    }

    async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>> {
        // One activity's deliveries are read by key: their ids follow from the activity's
        // channels, at most 50 of them.
        if let Some(activity) = &q.activity {
            let rows = match self.get_activity(activity).await? {
                Some(a) if a.tenant_id == q.tenant => {
                    let ids: Vec<DeliveryId> = a
                        .channel_ids
                        .iter()
                        .filter(|c| q.channel.as_ref().is_none_or(|x| x == *c))
                        .map(|c| DeliveryId::for_pair(&a.id, c))
                        .collect();
                    self.get_deliveries(&ids).await?
                }
                _ => Vec::new(),
            };
            return Ok(q.page(&rows));
        }
        // The index that serves the filter; the tenant is always part of the key or a filter.
        let (index, hash_attr, hash_val) = match (q.status, &q.channel) {
            (Some(st), Some(ch)) => ("by_channel_status", "cs_pk", format!("{ch}#{st}")),
            (Some(st), None) => ("by_tenant_status", "ts_pk", format!("{}#{st}", q.tenant)),
            (None, _) => ("by_tenant", "tenant_id", q.tenant.to_string()),
        };
        let mut key_cond = "#h = :h".to_owned();
        match (&q.from_key, &q.to_key) {
            (Some(_), Some(_)) => key_cond.push_str(" AND upd_sk BETWEEN :lo AND :hi"),
            (Some(_), None) => key_cond.push_str(" AND upd_sk >= :lo"),
            (None, Some(_)) => key_cond.push_str(" AND upd_sk <= :hi"),
            (None, None) => {}
        }
        let mut filters = Vec::new();
        if hash_attr != "tenant_id" {
            filters.push("tenant_id = :t");
        }
        if q.status.is_none() && q.channel.is_some() {
            filters.push("channel_id = :c");
        }
        if q.error_contains.is_some() {
            filters.push("contains(last_error, :q)");
        }
        let limit = q.limit.clamp(1, 1000);
        // A filter that drops rows (error text; a channel without a status) reads whole
        // pages, up to 1 MB each, so one call can search thousands of rows; the tenant filter
        // on the status indexes never drops a row and does not count.
        let selective = q.error_contains.is_some() || (q.status.is_none() && q.channel.is_some());
        let mut items: Vec<Delivery> = Vec::with_capacity(limit);
        let now = now_ms();
        let mut start: Option<Item> = q.after.as_ref().map(|c| {
            HashMap::from([
                ("id".to_owned(), s(c.id.as_str())),
                (hash_attr.to_owned(), s(hash_val.as_str())),
                ("upd_sk".to_owned(), s(c.sort_key.as_str())),
            ])
        });
        let mut last_evaluated: Option<Item> = None;
        // A bounded number of pages per call, so a sparse filter cannot make one request
        // read a whole partition; the cursor continues where it stopped.
        for _ in 0..10 {
            let want = limit - items.len();
            let mut req = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name(index)
                .key_condition_expression(&key_cond)
                .expression_attribute_names("#h", hash_attr)
                .expression_attribute_values(":h", s(hash_val.as_str()))
                .scan_index_forward(!q.newest_first)
                .limit(i32::try_from(if selective { 1000 } else { want }).unwrap_or(1000))
                .set_exclusive_start_key(start.take());
            if let Some(lo) = &q.from_key {
                req = req.expression_attribute_values(":lo", s(lo.as_str()));
            }
            if let Some(hi) = &q.to_key {
                req = req.expression_attribute_values(":hi", s(hi.as_str()));
            }
            if !filters.is_empty() {
                req = req.filter_expression(filters.join(" AND "));
            }
            if hash_attr != "tenant_id" {
                req = req.expression_attribute_values(":t", s(q.tenant.as_str()));
            }
            if let (None, Some(c)) = (q.status, &q.channel) {
                req = req.expression_attribute_values(":c", s(c.as_str()));
            }
            if let Some(text) = &q.error_contains {
                req = req.expression_attribute_values(":q", s(text.as_str()));
            }
            let out = req.send().await.map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                if items.len() == limit {
                    break;
                }
                let d: Delivery = from_item(item)?;
                // Expired by TTL but not deleted yet: absent.
                if !crate::model::expired(d.expires_at, now) {
                    items.push(d);
                }
            }
            last_evaluated = out.last_evaluated_key.filter(|k| !k.is_empty());
            if items.len() == limit || last_evaluated.is_none() {
                break;
            }
            start = last_evaluated.clone();
        }
        let next = if items.len() == limit {
            items.last().map(Delivery::cursor)
        } else {
            last_evaluated.and_then(|k| {
                Some(Cursor {
                    sort_key: k.get("upd_sk")?.as_s().ok()?.clone(),
                    id: k.get("id")?.as_s().ok()?.clone(),
                })
            })
        };
        Ok(Listed { items, next })
    }

    async fn replay_many(
        &self,
        rows: &[Delivery],
        actor: &Actor,
        now_ms: i64,
        audits: &[AuditEntry],
    ) -> StoreResult<Vec<Delivery>> {
        check_replay_batch(rows, audits)?;
        let now = converger_core::time::ms_to_rfc3339(now_ms);
        let mut items = Vec::with_capacity(rows.len());
        for (d, audit) in rows.iter().zip(audits) {
            items.push(self.replay_items(d, actor, now_ms, &now, audit)?);
        }
        let mut pending: Vec<usize> = (0..rows.len()).collect();
        // Conflicts with concurrent transactions and rows taken by another replay are
        // resolved round by round; a cancelled transaction applies nothing.
        for round in 1..=6u32 {
            if pending.is_empty() {
                break;
            }
            let mut req = self.client.transact_write_items();
            for &i in &pending {
                let (update, put) = &items[i];
                req = req
                    .transact_items(TransactWriteItem::builder().update(update.clone()).build())
                    .transact_items(TransactWriteItem::builder().put(put.clone()).build());
            }
            let sent = {
                let _serial = self.tx_guard().await;
                req.send().await
            };
            let reasons: Vec<Option<String>> = match sent {
                Ok(_) => {
                    return Ok(pending
                        .iter()
                        .map(|&i| rows[i].replayed(actor, now_ms, &now))
                        .collect());
                }
                Err(e) => match e.as_service_error() {
                    Some(TransactWriteItemsError::TransactionCanceledException(c)) => c
                        .cancellation_reasons()
                        .iter()
                        .map(|r| r.code().map(str::to_owned))
                        .collect(),
                    _ => return Err(sdk_err(e)),
                },
            };
            let code = |k: usize| reasons.get(k).cloned().flatten();
            let mut conflict = false;
            let mut kept = Vec::with_capacity(pending.len());
            for (k, &i) in pending.iter().enumerate() {
                match code(2 * k).as_deref() {
                    // No longer failed: another replay (or a receipt) took it.
                    Some("ConditionalCheckFailed") => {}
                    Some("TransactionConflict") => {
                        conflict = true;
                        kept.push(i);
                    }
                    _ => kept.push(i),
                }
                if code(2 * k + 1).as_deref() == Some("TransactionConflict") {
                    conflict = true;
                }
            }
            if kept.len() == pending.len() && !conflict {
                return Err(StoreError::Unavailable(format!(
                    "replay transaction cancelled: {reasons:?}"
                )));
            }
            pending = kept;
            if conflict {
                let pause = 20 * u64::from(round) + rand::random::<u64>() % 20;
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
        }
        if pending.is_empty() {
            Ok(Vec::new())
        } else {
            Err(StoreError::Unavailable("replay kept conflicting".into()))
        }
    }

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

    async fn create_replay_job(&self, job: &ReplayJob) -> StoreResult<()> {
        self.put_new(&self.res.replays, "id", to_item(job)?).await
    }

    async fn get_replay_job(&self, id: &str) -> StoreResult<Option<ReplayJob>> {
        self.get(&self.res.replays, "id", id).await
    }

    async fn save_replay_job(&self, job: &ReplayJob) -> StoreResult<bool> {
        let r = self
            .client
            .put_item()
            .table_name(&self.res.replays)
            .set_item(Some(to_item(job)?))
            .condition_expression("version = :prev")
            .expression_attribute_values(":prev", n(job.version.saturating_sub(1)))
            .send()
            .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
