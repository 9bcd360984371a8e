//! Ordered lanes (`pk` the lane, `sk` its head or an entry): one partition per (channel,
//! conversation), so no key is shared by a channel's lanes. Reads are strongly consistent: a
//! lane's order is decided on what was written, never on an index that lags.

use super::expr::When;
use super::*;
use aws_sdk_dynamodb::types::Delete;

/// A lane item's `seq` (a `u64`: a producer's seq may be beyond `i64`).
fn seq_of(item: &Item) -> u64 {
    item.get("seq")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// An entry's sort key (`core::lanes::entry_key`).
fn entry_sk(entry: &LaneEntry) -> AttributeValue {
    s(converger_core::lanes::entry_key(
        entry.seq,
        entry.delivery_id.as_str(),
    ))
}

fn text_of<'a>(item: &'a Item, k: &str) -> Option<&'a str> {
    item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str)
}

fn delivery_of(item: &Item, k: &str) -> StoreResult<DeliveryId> {
    let t =
        text_of(item, k).ok_or_else(|| StoreError::Corrupt(format!("lane item without {k}")))?;
    DeliveryId::parse(t).map_err(|e| StoreError::Corrupt(format!("lane item: {e}")))
}

/// The condition a move's guards (`ports::lane_moves`) put on the lane's head item.
fn on_head(guards: &[LaneGuard]) -> Update {
    guards.iter().fold(Update::new(), |u, g| match g {
        LaneGuard::NoHead => u.when_absent("pk"),
        LaneGuard::HeadedBy(d) => u.when_eq("holder", s(d.as_str())),
        LaneGuard::Waiting(_) => u,
    })
}

/// The condition they put on the waiting entry `entry`'s item.
fn on_entry(guards: &[LaneGuard], entry: &LaneEntry) -> Update {
    guards.iter().fold(Update::new(), |u, g| match g {
        LaneGuard::Waiting(e) if e == entry => u.when_exists("pk"),
        _ => u,
    })
}

#[async_trait]
impl LaneStore for DynamoStore {
    async fn join_lane(&self, lane: &str, entry: &LaneEntry, expires_at: i64) -> StoreResult<()> {
        self.client
            .put_item()
            .table_name(&self.res.lanes)
            .item("pk", s(lane))
            .item("sk", entry_sk(entry))
            .item("delivery_id", s(entry.delivery_id.as_str()))
            .item("seq", n(entry.seq))
            .item("expires_at", n(expires_at))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn leave_lane(&self, lane: &str, entry: &LaneEntry) -> StoreResult<()> {
        self.client
            .delete_item()
            .table_name(&self.res.lanes)
            .key("pk", s(lane))
            .key("sk", entry_sk(entry))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn lane_head(&self, lane: &str) -> StoreResult<Option<LaneHead>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.lanes)
            .key("pk", s(lane))
            .key("sk", s(LANE_HEAD))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        Ok(Some(LaneHead {
            holder: delivery_of(&item, "holder")?,
            seq: seq_of(&item),
            held: item
                .get("held")
                .and_then(|v| v.as_bool().ok())
                .copied()
                .unwrap_or(false),
            since: text_of(&item, "since").unwrap_or_default().to_owned(),
        }))
    }

    async fn lane_entries(&self, lane: &str, limit: usize) -> StoreResult<Vec<LaneEntry>> {
        let out = self
            .client
            .query()
            .table_name(&self.res.lanes)
            .key_condition_expression("pk = :pk AND sk < :head")
            .expression_attribute_values(":pk", s(lane))
            .expression_attribute_values(":head", s(LANE_HEAD))
            .consistent_read(true)
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .send()
            .await
            .map_err(sdk_err)?;
        out.items
            .unwrap_or_default()
            .iter()
            .map(|i| {
                Ok(LaneEntry {
                    seq: seq_of(i),
                    delivery_id: delivery_of(i, "delivery_id")?,
                })
            })
            .collect()
    }

    async fn promote(
        &self,
        lane: &str,
        entry: &LaneEntry,
        now: Timestamp,
        expires_at: i64,
    ) -> StoreResult<bool> {
        let guards = lane_moves::promote(entry);
        let head = Put::builder()
            .table_name(&self.res.lanes)
            .item("pk", s(lane))
            .item("sk", s(LANE_HEAD))
            .item("holder", s(entry.delivery_id.as_str()))
            .item("seq", n(entry.seq))
            .item("held", AttributeValue::Bool(false))
            .item("since", s(now.rfc3339()))
            .item("expires_at", n(expires_at))
            .when(on_head(&guards).into_condition())
            .build()
            .map_err(StoreError::unreadable)?;
        let gone = Delete::builder()
            .table_name(&self.res.lanes)
            .key("pk", s(lane))
            .key("sk", entry_sk(entry))
            .when(on_entry(&guards, entry).into_condition())
            .build()
            .map_err(StoreError::unreadable)?;
        let sent = {
            let _serial = self.tx_guard().await;
            self.client
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().put(head).build())
                .transact_items(TransactWriteItem::builder().delete(gone).build())
                .send()
                .await
        };
        match sent {
            Ok(_) => Ok(true),
            Err(e) => {
                if is_transaction_conditional(&e) {
                    return Ok(false);
                }
                Err(sdk_err(e))
            }
        }
    }

    async fn let_go(&self, lane: &str, holder: &DeliveryId) -> StoreResult<bool> {
        let r = self
            .client
            .delete_item()
            .table_name(&self.res.lanes)
            .key("pk", s(lane))
            .key("sk", s(LANE_HEAD))
            .when(on_head(&lane_moves::by_holder(holder)).into_condition())
            .send()
            .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn set_held(&self, lane: &str, holder: &DeliveryId, held: bool) -> StoreResult<bool> {
        let r = on_head(&lane_moves::by_holder(holder))
            .set("held", AttributeValue::Bool(held))
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.lanes)
                    .key("pk", s(lane))
                    .key("sk", s(LANE_HEAD)),
            )
            .send()
            .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
