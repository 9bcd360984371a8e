//! Replays: moving dead letters back to pending, and replay jobs.

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl ReplayStore for DynamoStore {
    async fn replay_many(
        &self,
        rows: &[Delivery],
        actor: &Actor,
        now: Timestamp,
        audits: &[AuditEntry],
    ) -> StoreResult<Vec<Delivery>> {
        check_replay_batch(rows, audits)?;
        let mut items = Vec::with_capacity(rows.len());
        for (d, audit) in rows.iter().zip(audits) {
            items.push(self.replay_items(d, actor, now, audit)?);
        }
        let mut pending: Vec<usize> = (0..rows.len()).collect();
        // Rows an earlier attempt of this same request replayed (see below).
        let mut applied: Vec<usize> = Vec::new();
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
                    return Ok(applied
                        .iter()
                        .chain(&pending)
                        .map(|&i| rows[i].replayed(actor, now))
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
                match (code(2 * k).as_deref(), code(2 * k + 1).as_deref()) {
                    // Our own audit entry (a fresh id) is there already: an attempt of this
                    // very request committed and its answer was lost (the SDK retried it
                    // after a timeout; DynamoDB's idempotency token makes such a retry
                    // succeed, an emulator may not honour it). Replayed by us.
                    (Some("ConditionalCheckFailed"), Some("ConditionalCheckFailed")) => {
                        applied.push(i);
                    }
                    // No longer failed: another replay (or a receipt) took it.
                    (Some("ConditionalCheckFailed"), _) => {}
                    (Some("TransactionConflict"), _) => {
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
            Ok(applied
                .iter()
                .map(|&i| rows[i].replayed(actor, now))
                .collect())
        } else {
            Err(StoreError::Unavailable("replay kept conflicting".into()))
        }
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
