//! The DynamoDB backend of [`Store`]. Every state change is one conditional write.

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
use converger_core::Timestamp;
use converger_core::query::{Actor, Cursor};
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId};
use converger_ports::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;

mod accounts;
mod activities;
mod audit;
mod backfill;
mod changes;
mod channels;
mod deliveries;
mod due;
mod expr;
use expr::{Cmp, Update};
mod event_types;
mod flow;
mod fold;
mod handoff;
mod health;
mod idempotency;
mod lanes;
mod listings;
#[cfg(test)]
mod pinned;
mod replays;
mod stream;
mod tenants;
mod usage;

pub type Item = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    res: Resources,
    /// Set only against an emulator whose transactions are not serializable.
    tx_lock: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// The due-shard grants as this instance last read them.
    due_cache: std::sync::Arc<due::DueCache>,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

use crate::aws::sdk_err;

/// A number attribute of `item` (0 when it has none or it does not parse).
fn num(item: &Item, k: &str) -> i64 {
    num_opt(item, k).unwrap_or(0)
}

/// A number attribute of `item`, if it has one that parses.
fn num_opt(item: &Item, k: &str) -> Option<i64> {
    item.get(k)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn now_ms() -> i64 {
    converger_core::time::now_ms()
}

fn to_item<T: Serialize>(v: &T) -> StoreResult<Item> {
    serde_dynamo::to_item(v).map_err(StoreError::unreadable)
}

fn from_item<T: DeserializeOwned>(item: Item) -> StoreResult<T> {
    serde_dynamo::from_item(item).map_err(StoreError::unreadable)
}

fn to_av<T: Serialize>(v: &T) -> StoreResult<AttributeValue> {
    serde_dynamo::to_attribute_value(v).map_err(StoreError::unreadable)
}

/// The index attributes of a delivery in `status` (`handed_off` to a client, if pending)
/// changed at `updated_at`.
fn index_keys(
    d: &Delivery,
    status: DeliveryStatus,
    updated_at: Timestamp,
    handed_off: bool,
) -> Vec<(&'static str, AttributeValue)> {
    let mut v = vec![
        (
            "tl_pk",
            s(tenant_listing_key(
                &d.tenant_id,
                status,
                d.listing_shard(updated_at),
            )),
        ),
        ("upd_sk", s(listing_sort_key(updated_at, &d.id))),
    ];
    if in_channel_index(status, handed_off) {
        v.push((
            "cl_pk",
            s(channel_listing_key(
                &d.channel_id,
                status,
                channel_shard(&d.id),
            )),
        ));
    }
    v
}

/// The delivery id of an index entry (every index projects the table's key); `what` names
/// the index in the error of an entry without one.
fn entry_id(item: &Item, what: &str) -> StoreResult<DeliveryId> {
    let id = item
        .get("id")
        .and_then(|v| v.as_s().ok())
        .ok_or_else(|| StoreError::Corrupt(format!("{what} entry without id")))?;
    DeliveryId::parse(id).map_err(|e| StoreError::Corrupt(format!("{what} entry: {e}")))
}

/// `u` with the listing indexes' attributes of a delivery moving to `status` at `updated_at`
/// (the values [`index_keys`] gives): the tenant listing always, the channel index only while
/// the delivery is failed or paused (sparse: a delivery on its way to `sent` never enters it).
/// A delivery not listed yet (`Delivery::unlisted`) is listed from here on.
fn listed(u: Update, d: &Delivery, status: DeliveryStatus, updated_at: Timestamp) -> Update {
    listed_as(u, d, status, updated_at, false)
}

/// [`listed`] for a write that leaves the delivery `handed_off` to a websocket client (or
/// not): a pending one waiting for its ack is in its channel's index too.
fn listed_as(
    u: Update,
    d: &Delivery,
    status: DeliveryStatus,
    updated_at: Timestamp,
    handed_off: bool,
) -> Update {
    let u = u
        .set_each(index_keys(d, status, updated_at, handed_off))
        .remove("unlisted");
    if in_channel_index(status, handed_off) {
        u
    } else {
        u.remove("cl_pk")
    }
}

/// A delivery's lease.
const LEASE: [&str; 2] = ["lease_token", "lease_until"];
/// Its place in the due index.
const DUE_PLACE: [&str; 2] = ["due_shard", "due_at"];
/// Its window slot, and the slot item that holds it.
const SLOT: [&str; 2] = ["slot", "slot_item"];
/// Its place in its channel's backlog.
const BACKLOG_PLACE: [&str; 3] = ["in_backlog", "bl_pk", "bl_sk"];

/// The lease and every place a row leaving `pending` drops.
fn lease_and_places() -> impl Iterator<Item = &'static str> {
    LEASE
        .into_iter()
        .chain(DUE_PLACE)
        .chain(SLOT)
        .chain(BACKLOG_PLACE)
        .chain(["watched"])
}

fn activity_item(a: &Activity) -> StoreResult<Item> {
    // A payload the payload bucket keeps is not written again here.
    let mut item = to_item(&*a.row())?;
    item.insert("activity_id".into(), s(a.id.as_str()));
    item.insert(
        "conv_key".into(),
        s(conversation_key(&a.tenant_id, &a.conversation_id)),
    );
    item.insert("id".into(), s(activity_key(&a.tenant_id, &a.id)));
    Ok(item)
}

fn activity_from_item(mut item: Item) -> StoreResult<Activity> {
    item.remove("conv_key");
    let id = item
        .remove("activity_id")
        .ok_or_else(|| StoreError::Corrupt("activity row without activity_id".into()))?;
    item.insert("id".into(), id);
    from_item(item)
}

/// `BatchWriteItem` requests of one `batch_put_rows` in flight at once.
const BATCH_WRITES_AT_ONCE: usize = 4;

impl DynamoStore {
    fn delivery_item(&self, d: &Delivery) -> StoreResult<Item> {
        let mut item = to_item(d)?;
        // A delivery sent to its queue at creation joins the listing at its first transition.
        for (k, v) in index_keys(d, d.status, d.updated_at, d.handed_off) {
            if d.unlisted && (k == "tl_pk" || k == "upd_sk") {
                continue;
            }
            item.insert(k.to_owned(), v);
        }
        match d.sparse_index() {
            SparseIndex::Backlog { due_ms } => {
                for (k, v) in backlog_keys(&d.channel_id, due_ms) {
                    item.insert(k.to_owned(), v);
                }
            }
            SparseIndex::Due { due_ms } => {
                for (k, v) in self.due_keys(&d.id, due_ms) {
                    item.insert(k.to_owned(), v);
                }
            }
            // Parked rows are found through the channel-status index every row is in.
            SparseIndex::Parked | SparseIndex::None => {}
        }
        Ok(item)
    }

    /// The due index attributes of a pending delivery due at `next_attempt_at`, in the shard
    /// its id gives over the shards written now (the grant in force, as this instance last
    /// read it, else the deployment's own; a claim leaves them as they are).
    fn due_keys(
        &self,
        id: &DeliveryId,
        next_attempt_at: i64,
    ) -> [(&'static str, AttributeValue); 2] {
        [
            (
                "due_shard",
                s(due_partition(due_shard_of(id, self.due_write_shards()))),
            ),
            ("due_at", s(due_key(next_attempt_at))),
        ]
    }

    /// `u` with the delivery placed in the due index at `next_attempt_at`: a row the sweep
    /// finds is carried by no message of its own (`Delivery::watched` dropped).
    fn placed_due(&self, u: Update, id: &DeliveryId, next_attempt_at: i64) -> Update {
        u.set_each(self.due_keys(id, next_attempt_at))
            .remove("watched")
    }
}

/// The backlog index attributes of a delivery of `channel` due at `due_ms`.
fn backlog_keys(channel: &ChannelId, due_ms: i64) -> [(&'static str, AttributeValue); 2] {
    [
        ("bl_pk", s(channel.as_str())),
        ("bl_sk", s(due_key(due_ms))),
    ]
}

/// `u` with a delivery of `channel` placed in the backlog, due at `due_ms` (and carried by
/// no message of its own).
fn into_backlog(u: Update, channel: &ChannelId, due_ms: i64) -> Update {
    u.set("in_backlog", AttributeValue::Bool(true))
        .set_each(backlog_keys(channel, due_ms))
        .remove("watched")
}

/// What a conditional update found.
pub(super) enum Conditional<T> {
    /// The condition held: the attributes the update returned (as its `ReturnValue` asks).
    Applied(Option<Item>),
    /// The condition failed: the item as it was (`None`: there is none).
    Refused(Option<T>),
}

impl DynamoStore {
    /// The first `want` items of a query after the item keyed `start` (and whether more
    /// follow), reading page after page past what `keep` leaves out (a filter expression or
    /// an expired row): `query` builds the request, each page continuing from the last.
    async fn query_upto<T>(
        &self,
        want: usize,
        mut start: Option<Item>,
        query: impl Fn() -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        keep: impl Fn(Item) -> StoreResult<Option<T>>,
    ) -> StoreResult<(Vec<T>, bool)> {
        let want = want.clamp(1, 1000);
        let mut out: Vec<T> = Vec::new();
        loop {
            let page = query()
                .set_exclusive_start_key(start.take())
                .limit(i32::try_from(want + 1).unwrap_or(1001))
                .send()
                .await
                .map_err(sdk_err)?;
            for item in page.items.unwrap_or_default() {
                if let Some(v) = keep(item)? {
                    out.push(v);
                }
            }
            start = page.last_evaluated_key.filter(|k| !k.is_empty());
            if out.len() > want || start.is_none() {
                break;
            }
        }
        let more = out.len() > want;
        out.truncate(want);
        Ok((out, more))
    }

    /// Sends an update whose condition may fail, asking for the old item on failure
    /// (`ReturnValuesOnConditionCheckFailure`), so that the caller learns what stopped it
    /// without another read; emulators that do not return the old item get `reread` (a
    /// future, run only then). The one place the "write, else look at the old row" sequence
    /// is written.
    pub(super) async fn update_or_old<T: DeserializeOwned>(
        &self,
        req: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
        reread: impl std::future::Future<Output = StoreResult<Option<T>>>,
    ) -> StoreResult<Conditional<T>> {
        let r = req
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match r {
            Ok(out) => Ok(Conditional::Applied(out.attributes)),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(c) => match c.item {
                    Some(item) if !item.is_empty() => {
                        Ok(Conditional::Refused(Some(from_item(item)?)))
                    }
                    _ => Ok(Conditional::Refused(reread.await?)),
                },
                other => Err(StoreError::Service {
                    message: DisplayErrorContext(&other).to_string(),
                    source: Box::new(other),
                }),
            },
        }
    }
}

impl DynamoStore {
    /// The transaction items of one replay: the conditional transition and the audit entry.
    fn replay_items(
        &self,
        d: &Delivery,
        actor: &Actor,
        now: Timestamp,
        audit: &AuditEntry,
    ) -> StoreResult<(aws_sdk_dynamodb::types::Update, Put)> {
        let at = now.rfc3339();
        let u = Update::new()
            .set("status", s(DeliveryStatus::Pending.as_str()))
            .set("attempts", n(0))
            .increment("retry_count", 1)
            // To its tenant's tier now (the caller's row says which).
            .set("tier", s(d.tier.as_str()))
            .set("retried_by", s(actor.to_string()))
            .set("retried_at", s(at.as_str()))
            .set("next_attempt_at", n(now.ms()))
            .set("updated_at", s(at.as_str()))
            .remove_each(LEASE.into_iter().chain(SLOT).chain(BACKLOG_PLACE))
            // From the status it was read in: a dead letter, or (one at a time) a filtered one.
            .when_eq("status", s(d.status.as_str()));
        let u = self.placed_due(u, &d.id, now.ms());
        let update = listed(u, d, DeliveryStatus::Pending, now)
            .apply_to_transaction(
                aws_sdk_dynamodb::types::Update::builder()
                    .table_name(&self.res.deliveries)
                    .key("id", s(d.id.as_str())),
            )
            .build()
            .map_err(StoreError::unreadable)?;
        let put = Put::builder()
            .table_name(&self.res.audit)
            .set_item(Some(audit::audit_item(audit)?))
            .condition_expression("attribute_not_exists(audit_sk)")
            .build()
            .map_err(StoreError::unreadable)?;
        Ok((update, put))
    }

    pub fn new(client: Client, res: Resources) -> Self {
        Self {
            client,
            res,
            tx_lock: None,
            due_cache: std::sync::Arc::default(),
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
            .map(|d| self.delivery_item(d))
            .collect::<StoreResult<Vec<_>>>()?;
        self.batch_put(&self.res.deliveries, items).await
    }

    /// Writes activities unconditionally in batches of 25 (seeding, like
    /// [`Self::seed_deliveries`]).
    pub async fn seed_activities(&self, rows: &[Activity]) -> StoreResult<()> {
        let items = rows
            .iter()
            .map(activity_item)
            .collect::<StoreResult<Vec<_>>>()?;
        self.batch_put(&self.res.activities, items).await
    }

    pub(crate) async fn batch_put(&self, table: &str, items: Vec<Item>) -> StoreResult<()> {
        self.batch_put_rows(items.into_iter().map(|i| (table.to_owned(), i)).collect())
            .await
    }

    /// Unconditional puts of `(table, item)` rows, 25 to a request; unprocessed items are
    /// sent again with a growing pause, a bounded number of times.
    pub(crate) async fn batch_put_rows(&self, rows: Vec<(String, Item)>) -> StoreResult<()> {
        use futures::{StreamExt, TryStreamExt};
        let mut chunks: Vec<Vec<(String, Item)>> = Vec::new();
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            chunks.push(rows.by_ref().take(25).collect());
        }
        // A batch of activities is several requests: a few at once.
        futures::stream::iter(chunks.into_iter().map(|c| self.batch_put_chunk(c)))
            .buffer_unordered(BATCH_WRITES_AT_ONCE)
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
    }

    /// One `BatchWriteItem` of at most 25 puts; unprocessed items are sent again with a
    /// growing pause, a bounded number of times.
    async fn batch_put_chunk(&self, rows: Vec<(String, Item)>) -> StoreResult<()> {
        let mut req: HashMap<String, Vec<aws_sdk_dynamodb::types::WriteRequest>> = HashMap::new();
        for (table, item) in rows {
            let put = aws_sdk_dynamodb::types::PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(StoreError::unreadable)?;
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
                    .map_err(StoreError::unreadable)?;
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
        self.get_raw(table, key, value)
            .await?
            .map(from_item)
            .transpose()
    }

    /// One item by its key, strongly consistent, as stored.
    async fn get_raw(&self, table: &str, key: &str, value: &str) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key(key, s(value))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out.item)
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

    /// An `UpdateItem` of the delivery row `id`, for an [`Update`] to fill in.
    fn delivery_update(
        &self,
        id: &DeliveryId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.res.deliveries)
            .key("id", s(id.as_str()))
    }

    /// An update of a tenant's item, answered with the item as it is after it.
    fn tenant_update(
        &self,
        id: &TenantId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.res.tenants)
            .key("pk", s(id.as_str()))
            .return_values(ReturnValue::AllNew)
    }

    /// An update of a channel's item, answered with the item as it is after it.
    fn channel_update(
        &self,
        id: &ChannelId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.res.channels)
            .key("id", s(id.as_str()))
            .return_values(ReturnValue::AllNew)
    }

    /// A conditional update of a delivery held under `token`. `Ok(false)` when the lease was
    /// lost (another attempt took over after it expired).
    async fn leased_update(&self, d: &Delivery, token: &str, u: Update) -> StoreResult<bool> {
        let req = u
            .when_eq("lease_token", s(token))
            .apply(self.delivery_update(&d.id));
        match self.update_or_old(req, self.get_delivery(&d.id)).await? {
            Conditional::Applied(_) => Ok(true),
            // The lease is gone; if it went with this very write (an SDK retry of a write that
            // had landed), the row names this attempt's token as the one that settled it.
            Conditional::Refused(old) => {
                Ok(old.is_some_and(|o| o.settled_by.as_deref() == Some(token)))
            }
        }
    }

    /// What every outcome write of an attempt holding `token` sets: the status (and the
    /// listings it moves the row in), one more attempt, the attempt log (its older entries
    /// moved to the attempts table first) and the lease token that settled it.
    async fn outcome_update(
        &self,
        d: &Delivery,
        token: &str,
        status: DeliveryStatus,
        handed_off: bool,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<Update> {
        self.spill(d, &log.spill).await?;
        let u = Update::new()
            .set("status", s(status.as_str()))
            .increment("attempts", 1)
            .set("updated_at", s(now.rfc3339()))
            .set("attempt_log", to_av(&log.recent)?)
            .set("settled_by", s(token));
        Ok(listed_as(u, d, status, now, handed_off))
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
                                .map_err(StoreError::unreadable)?,
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

/// Whether a transaction was cancelled because a condition of one of its items failed.
fn is_transaction_conditional<R>(e: &SdkError<TransactWriteItemsError, R>) -> bool {
    matches!(
        e.as_service_error(),
        Some(TransactWriteItemsError::TransactionCanceledException(c))
            if c.cancellation_reasons()
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed"))
    )
}

fn is_update_conditional<R>(e: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        e.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}
