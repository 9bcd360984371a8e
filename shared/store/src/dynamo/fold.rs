//! The DynamoDB backend of [`UsageLog`], in the health table: an entry's pieces under
//! `fold#<period>#<part>` (sort key `<shard>#<first>#<piece>`), each shard's log mark under
//! `fold#mark#<shard>` / `mark` (a partition each: every shard writes its own), and the last
//! folded period under `fold` / `folded`.

use super::*;
use converger_core::usage::fold::{LOG_KEEP_S, PERIOD_MS, period_key};
use converger_ports::{LOG_PIECE_BYTES, Marked, UsageLog, UsageLogEntry, UsageRow};

/// The partition of a period's part.
fn log_pk(period: i64, part: u32) -> String {
    format!("fold#{}#{part}", period_key(period))
}

/// The partition of the log's marks and the fold's cursor.
const FOLD_PK: &str = "fold";
const FOLDED_SK: &str = "folded";

fn mark_pk(shard: &str) -> String {
    format!("fold#mark#{shard}")
}
const MARK_SK: &str = "mark";

impl DynamoStore {
    /// How far `shard`'s log got (a strongly consistent read).
    async fn log_mark(&self, shard: &str) -> StoreResult<Option<String>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.health)
            .key("channel_id", s(mark_pk(shard)))
            .key("checked_sk", s(MARK_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out
            .item
            .and_then(|i| i.get("last").and_then(|v| v.as_s().ok()).cloned()))
    }
}

#[async_trait]
impl UsageLog for DynamoStore {
    async fn log_usage(&self, entry: &UsageLogEntry) -> StoreResult<Marked> {
        let part = converger_core::usage::fold::log_part_of(&entry.shard);
        let expires_at = (entry.period + 1) * PERIOD_MS / 1000 + LOG_KEEP_S;
        let mut items = Vec::new();
        for (i, piece) in entry.pieces(LOG_PIECE_BYTES).into_iter().enumerate() {
            let put = Put::builder()
                .table_name(&self.res.health)
                .item("channel_id", s(log_pk(entry.period, part)))
                .item(
                    "checked_sk",
                    s(format!("{}#{}#{i:03}", entry.shard, entry.first)),
                )
                .item("rows", s(piece))
                .item("expires_at", n(expires_at))
                .build()
                .map_err(StoreError::unreadable)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        // A shard's mark outlives the shard's records on the stream (24 hours).
        let mark = Update::new()
            .set("last", s(&entry.last))
            .set("expires_at", n(expires_at + LOG_KEEP_S))
            .when_cmp("last", Cmp::Lt, s(&entry.first), true)
            .apply_to_transaction(
                aws_sdk_dynamodb::types::Update::builder()
                    .table_name(&self.res.health)
                    .key("channel_id", s(mark_pk(&entry.shard)))
                    .key("checked_sk", s(MARK_SK)),
            )
            .build()
            .map_err(StoreError::unreadable)?;
        items.push(TransactWriteItem::builder().update(mark).build());
        let sent = {
            let _serial = self.tx_guard().await;
            self.client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
        };
        match sent {
            Ok(_) => Ok(Marked::Applied { created: None }),
            Err(e) => {
                if is_transaction_conditional(&e) {
                    let to = self
                        .log_mark(&entry.shard)
                        .await?
                        .unwrap_or_else(|| entry.last.clone());
                    return Ok(Marked::Behind { to });
                }
                Err(sdk_err(e))
            }
        }
    }

    async fn logged_usage(&self, period: i64, part: u32) -> StoreResult<Vec<UsageRow>> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.res.health)
                .key_condition_expression("channel_id = :pk")
                .expression_attribute_values(":pk", s(log_pk(period, part)))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                let piece = item.get("rows").and_then(|v| v.as_s().ok());
                let (got, bad) = UsageLogEntry::rows_of(piece.map_or("", String::as_str));
                if bad > 0 {
                    tracing::warn!(period, part, bad, "usage log rows not readable");
                }
                rows.extend(got);
            }
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(rows)
    }

    async fn usage_folded_to(&self) -> StoreResult<Option<i64>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.health)
            .key("channel_id", s(FOLD_PK))
            .key("checked_sk", s(FOLDED_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out.item.and_then(|i| num_opt(&i, "period")))
    }

    async fn set_usage_folded_to(&self, period: i64) -> StoreResult<()> {
        // Never back: two fold runs at once both end here, the later period kept.
        let r = Update::new()
            .set("period", n(period))
            .when_cmp("period", Cmp::Lt, n(period), true)
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.health)
                    .key("channel_id", s(FOLD_PK))
                    .key("checked_sk", s(FOLDED_SK)),
            )
            .send()
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Ok(()),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
