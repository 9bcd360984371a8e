//! Delivery rows and the attempt lifecycle: claim (a lease), release, and the three outcomes.

use super::*;
use converger_core::Timestamp;
use converger_ports::RowOutcome;

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
        // In the due index at its due time (where the claim left it).
        self.leased_update(
            d,
            token,
            "SET due_shard = :due_shard, due_at = :due_at REMOVE lease_token, lease_until".into(),
            self.due_keys(&d.id, d.next_attempt_at).into(),
        )
        .await
    }
    async fn reschedule(&self, d: &Delivery, token: Option<&str>, at_ms: i64) -> StoreResult<bool> {
        let expr = "SET next_attempt_at = :at, due_shard = :due_shard, due_at = :due_at \
                    REMOVE lease_token, lease_until";
        let mut values = vec![(":at", n(at_ms))];
        values.extend(self.due_keys(&d.id, at_ms));
        if let Some(token) = token {
            return self.leased_update(d, token, expr.into(), values).await;
        }
        let mut req = self
            .client
            .update_item()
            .table_name(&self.res.deliveries)
            .key("id", s(d.id.as_str()))
            .update_expression(expr)
            .condition_expression("#st = :pending AND attribute_not_exists(lease_token)")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":pending", s(DeliveryStatus::Pending.as_str()));
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn extend_lease(&self, d: &Delivery, token: &str, until_ms: i64) -> StoreResult<bool> {
        self.leased_update(
            d,
            token,
            "SET lease_until = :until".into(),
            vec![(":until", n(until_ms))],
        )
        .await
    }
    async fn requeue_expired(
        &self,
        id: &DeliveryId,
        until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut values: Vec<(&str, AttributeValue)> = vec![
            (":until", n(until_ms)),
            (":now", n(now.ms())),
            (":pending", s(DeliveryStatus::Pending.as_str())),
        ];
        values.extend(self.due_keys(id, now.ms()));
        Ok(self
            .row_update(
                id,
                "SET next_attempt_at = :now, due_shard = :due_shard, due_at = :due_at \
                 REMOVE lease_token, lease_until"
                    .into(),
                "lease_until = :until AND #st = :pending",
                values,
            )
            .await?
            .is_some())
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
        let mut sets = vec![
            "#st = :st".to_owned(),
            "attempts = attempts + :one".into(),
            "updated_at = :now".into(),
            LOG_SET.into(),
        ];
        let mut removes = vec!["lease_token", "lease_until", "slot_item"];
        if outcome.leaves_indexes() {
            removes.extend([
                "due_shard",
                "due_at",
                "slot",
                "in_backlog",
                "bl_pk",
                "bl_sk",
            ]);
        }
        let mut values = self.outcome_values(d, status, log, now).await?;
        match outcome {
            RowOutcome::Sent(info) => {
                removes.push("last_error");
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
            }
            RowOutcome::Retry { error, retry } => {
                sets.push(
                    "last_error = :err, next_attempt_at = :next, due_shard = :due_shard, \
                     due_at = :due_at, slot = :slot"
                        .into(),
                );
                values.push((":err", s(*error)));
                values.push((":next", n(retry.at_ms)));
                values.push((":slot", AttributeValue::Bool(false)));
                values.extend(self.due_keys(&d.id, retry.at_ms));
            }
            RowOutcome::Dead { error } => {
                sets.push("last_error = :err".into());
                values.push((":err", s(*error)));
            }
        }
        let expr = transition(status, &sets.join(", "), &removes.join(", "));
        self.leased_update(d, token, expr, values).await
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
        let req = self
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
            .expression_attribute_values(":now_s", n(now.secs()))
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":until", n(until))
            .expression_attribute_values(":now", n(now.ms()))
            .expression_attribute_values(":pending", s(DeliveryStatus::Pending.as_str()))
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
