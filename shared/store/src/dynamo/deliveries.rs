//! Delivery rows and the attempt lifecycle: claim (a lease), release, and the three outcomes.

use super::*;
use converger_core::Timestamp;
use converger_ports::{RowOutcome, moves};

#[async_trait]
impl DeliveryStore for DynamoStore {
    async fn get_delivery(&self, id: &DeliveryId) -> StoreResult<Option<Delivery>> {
        let d: Option<Delivery> = self.get(&self.res.deliveries, "id", id.as_str()).await?;
        Ok(d.filter(|d| !converger_ports::expired(d.expires_at, now_ms())))
    }
    async fn get_deliveries(&self, ids: &[DeliveryId]) -> StoreResult<Vec<Delivery>> {
        self.rows_by_id(ids, true).await
    }
    async fn claim(
        &self,
        id: &DeliveryId,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> StoreResult<Claim> {
        // A row that turns out claimable after the write was refused changed in between: it
        // was just created (a message sent beside its row's write), or another attempt's lease
        // ended. The claim is made again, a few times at most.
        for _ in 0..3 {
            if let Some(c) = self.claim_once(id, token, now, lease_ms).await? {
                return Ok(c);
            }
        }
        Ok(Claim::Busy)
    }
    async fn release(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        self.leased_move(&moves::release(d, token), d, token).await
    }
    async fn reschedule(&self, d: &Delivery, token: Option<&str>, at_ms: i64) -> StoreResult<bool> {
        let m = moves::reschedule(d, token, at_ms);
        match token {
            Some(token) => self.leased_move(&m, d, token).await,
            None => Ok(self.row_move(&m, &d.id, Some(d)).await?.is_some()),
        }
    }

    async fn extend_lease(&self, d: &Delivery, token: &str, until_ms: i64) -> StoreResult<bool> {
        self.leased_move(&moves::extend_lease(token, until_ms), d, token)
            .await
    }
    async fn requeue_expired(
        &self,
        id: &DeliveryId,
        until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let m = moves::requeue_expired(until_ms, now.ms());
        Ok(self.row_move(&m, id, None).await?.is_some())
    }
    async fn record_outcome(
        &self,
        d: &Delivery,
        token: &str,
        outcome: &RowOutcome<'_>,
        log: &LogUpdate,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // `RowOutcome::apply` as one update conditional on the lease; the index attributes
        // follow the row's new state (a retry is due again; the others leave the due index
        // and the backlog).
        let status = outcome.status();
        let mut u = self
            .outcome_update(
                d,
                token,
                status,
                matches!(outcome, RowOutcome::Sent(info) if info.handed_off),
                log,
                now,
            )
            .await?
            .remove_each(LEASE)
            .remove("slot_item");
        if outcome.leaves_indexes() {
            u = u
                .remove_each(DUE_PLACE)
                .remove("slot")
                .remove_each(BACKLOG_PLACE)
                .remove("watched");
        }
        if matches!(outcome, RowOutcome::Retry { retry, .. } if !retry.watched) {
            self.refresh_due_grants().await;
        }
        let at = now.rfc3339();
        let u = match outcome {
            RowOutcome::Sent(info) => {
                let mut u = u.remove("last_error");
                u = if info.handed_off {
                    u.set("handed_off", AttributeValue::Bool(true))
                } else {
                    u.set("sent_at", s(at.as_str()))
                };
                if let Some(id) = &info.provider_message_id {
                    u = u
                        .set("provider_message_id", s(id.as_str()))
                        .set("pm_key", s(provider_key(&d.channel_id, id)));
                }
                if let Some(st) = info.response_status {
                    u = u.set("response_status", n(st));
                }
                u
            }
            // Carried by its message and watch copy (in no due index), or due in the index.
            RowOutcome::Retry { error, retry } if retry.watched => u
                .set("last_error", s(*error))
                .set("next_attempt_at", n(retry.at_ms))
                .remove_each(DUE_PLACE)
                .set("watched", AttributeValue::Bool(true))
                .set("slot", AttributeValue::Bool(false)),
            RowOutcome::Retry { error, retry } => {
                let u = u
                    .set("last_error", s(*error))
                    .set("next_attempt_at", n(retry.at_ms));
                self.placed_due(u, &d.id, retry.at_ms)
                    .set("slot", AttributeValue::Bool(false))
            }
            RowOutcome::Dead { error } => u.set("last_error", s(*error)),
        };
        self.leased_update(d, token, u).await
    }
}

impl DynamoStore {
    /// One conditional claim; `None` when refused although the row read after it is claimable.
    async fn claim_once(
        &self,
        id: &DeliveryId,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> StoreResult<Option<Claim>> {
        let until = now.ms().saturating_add(lease_ms);
        // The lease is not projected into the due index: the claim writes the row alone.
        // The rule is `Claim::refused`'s: pending, due, no live lease, not handed off, not
        // past its retention.
        let req = Update::new()
            .set("lease_token", s(token))
            .set("lease_until", n(until))
            .when_exists("id")
            .when_eq("status", s(DeliveryStatus::Pending.as_str()))
            .when_cmp("next_attempt_at", Cmp::Le, n(now.ms()), false)
            .when_cmp("lease_until", Cmp::Lt, n(now.ms()), true)
            .when_absent("handed_off")
            .when_cmp("expires_at", Cmp::Gt, n(now.secs()), true)
            .apply(self.delivery_update(id))
            .return_values(ReturnValue::AllNew);
        match self.update_or_old(req, self.get_delivery(id)).await? {
            Conditional::Applied(item) => {
                let item =
                    item.ok_or_else(|| StoreError::Corrupt("claim returned no item".into()))?;
                Ok(Some(Claim::Claimed(from_item(item)?)))
            }
            // Claimable by the old row but refused by the condition: it changed in between.
            Conditional::Refused(old) => Ok(Claim::refused(old.as_ref(), now)),
        }
    }
}

impl DynamoStore {
    /// Delivery rows by id (`BatchGetItem`, strongly consistent or not), those past their
    /// retention left out.
    pub(super) async fn rows_by_id(
        &self,
        ids: &[DeliveryId],
        consistent: bool,
    ) -> StoreResult<Vec<Delivery>> {
        let keys = ids
            .iter()
            .map(|id| HashMap::from([("id".to_owned(), s(id.as_str()))]))
            .collect();
        let now = now_ms();
        let rows: Vec<Delivery> = self
            .batch_get(&self.res.deliveries, keys, consistent)
            .await?
            .into_iter()
            .map(from_item)
            .collect::<StoreResult<_>>()?;
        Ok(rows
            .into_iter()
            .filter(|d| !converger_ports::expired(d.expires_at, now))
            .collect())
    }
}
