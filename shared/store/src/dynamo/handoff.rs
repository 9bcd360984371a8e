//! The DynamoDB backend of [`HandoffStore`]: hand-offs and acknowledgements as conditional
//! updates of the delivery item, receipts found through the sparse `by_provider_message`
//! index, connections in their own table.

use super::*;
use crate::handoff::*;

impl DynamoStore {
    /// The delivery of `channel` its provider knows as `pmid`.
    async fn by_provider_message(
        &self,
        channel: &ChannelId,
        pmid: &str,
    ) -> StoreResult<Option<DeliveryId>> {
        let out = self
            .client
            .query()
            .table_name(&self.res.deliveries)
            .index_name("by_provider_message")
            .key_condition_expression("pm_key = :k")
            .expression_attribute_values(":k", s(provider_key(channel, pmid)))
            .limit(1)
            .send()
            .await
            .map_err(sdk_err)?;
        let id = out
            .items
            .unwrap_or_default()
            .into_iter()
            .next()
            .and_then(|i| i.get("id").and_then(|v| v.as_s().ok()).cloned());
        Ok(id.and_then(|id| DeliveryId::parse(&id).ok()))
    }
}

#[async_trait]
impl HandoffStore for DynamoStore {
    async fn mark_handed_off(
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
            "handed_off = :t".into(),
            "updated_at = :now".into(),
            SET_INDEX.into(),
            LOG_SET.into(),
        ];
        let mut values = self
            .outcome_values(d, DeliveryStatus::Pending, log, now)
            .await?;
        values.push((":t", AttributeValue::Bool(true)));
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

    async fn acknowledge(&self, id: &DeliveryId, now: &str) -> StoreResult<Ack> {
        for _ in 0..3 {
            let Some(d) = self.get_delivery(id).await? else {
                return Ok(Ack::Missing);
            };
            if d.status.is_accepted() {
                return Ok(Ack::Already(d));
            }
            if !(d.status == DeliveryStatus::Pending && d.handed_off) {
                return Ok(Ack::NotAwaiting(d));
            }
            let mut req = self
                .client
                .update_item()
                .table_name(&self.res.deliveries)
                .key("id", s(id.as_str()))
                .update_expression(format!(
                    "SET #st = :sent, sent_at = :now, updated_at = :now, {SET_INDEX} \
                     REMOVE handed_off"
                ))
                .condition_expression("#st = :pending AND handed_off = :t")
                .expression_attribute_names("#st", "status")
                .expression_attribute_values(":sent", s(DeliveryStatus::Sent.as_str()))
                .expression_attribute_values(":pending", s(DeliveryStatus::Pending.as_str()))
                .expression_attribute_values(":t", AttributeValue::Bool(true))
                .expression_attribute_values(":now", s(now))
                .return_values(ReturnValue::AllNew);
            for (k, v) in index_keys(
                &d.tenant_id,
                &d.channel_id,
                &d.id,
                DeliveryStatus::Sent,
                now,
            ) {
                req = req.expression_attribute_values(k, v);
            }
            match req.send().await {
                Ok(out) => {
                    let item = out
                        .attributes
                        .ok_or_else(|| StoreError::Corrupt("ack returned no item".into()))?;
                    return Ok(Ack::Acked(from_item(item)?));
                }
                Err(e) if is_update_conditional(&e) => continue,
                Err(e) => return Err(sdk_err(e)),
            }
        }
        Err(StoreError::Conflict(format!(
            "delivery {id} kept changing during the acknowledgement"
        )))
    }

    async fn apply_receipt(
        &self,
        channel: &ChannelId,
        provider_message_id: &str,
        receipt: DeliveryStatus,
        error: Option<&str>,
        now: &str,
    ) -> StoreResult<Receipted> {
        let Some(id) = self
            .by_provider_message(channel, provider_message_id)
            .await?
        else {
            return Ok(Receipted::Unknown);
        };
        for _ in 0..5 {
            let Some(d) = self.get_delivery(&id).await? else {
                return Ok(Receipted::Unknown);
            };
            let from = d.status;
            let Some(to) = from.apply_receipt(receipt) else {
                return Ok(Receipted::Ignored(d));
            };
            let mut expr = format!("SET #st = :to, updated_at = :now, {SET_INDEX}");
            let mut req = self
                .client
                .update_item()
                .table_name(&self.res.deliveries)
                .key("id", s(id.as_str()))
                .condition_expression("#st = :from")
                .expression_attribute_names("#st", "status")
                .expression_attribute_values(":to", s(to.as_str()))
                .expression_attribute_values(":from", s(from.as_str()))
                .expression_attribute_values(":now", s(now))
                .return_values(ReturnValue::AllNew);
            if to == DeliveryStatus::Failed {
                expr.push_str(", last_error = :err");
                req = req.expression_attribute_values(
                    ":err",
                    s(error.unwrap_or("failed by a provider receipt")),
                );
                expr.push_str(
                    " REMOVE lease_token, lease_until, due_shard, due_at, slot, in_backlog, \
                     bl_pk, bl_sk, handed_off",
                );
            }
            for (k, v) in index_keys(&d.tenant_id, &d.channel_id, &d.id, to, now) {
                req = req.expression_attribute_values(k, v);
            }
            match req.update_expression(expr).send().await {
                Ok(out) => {
                    let item = out
                        .attributes
                        .ok_or_else(|| StoreError::Corrupt("receipt returned no item".into()))?;
                    return Ok(Receipted::Applied {
                        from,
                        row: from_item(item)?,
                    });
                }
                // Another receipt moved it first: read it again and decide again.
                Err(e) if is_update_conditional(&e) => continue,
                Err(e) => return Err(sdk_err(e)),
            }
        }
        Err(StoreError::Conflict(format!(
            "delivery {id} kept changing while a receipt was applied"
        )))
    }

    async fn put_connection(&self, c: &Connection) -> StoreResult<()> {
        self.client
            .put_item()
            .table_name(&self.res.connections)
            .set_item(Some(to_item(c)?))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn delete_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.res.connections)
            .key("connection_id", s(connection_id))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(sdk_err)?;
        out.attributes
            .filter(|a| !a.is_empty())
            .map(from_item)
            .transpose()
    }

    async fn get_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>> {
        self.get(&self.res.connections, "connection_id", connection_id)
            .await
    }

    async fn channel_connections(&self, channel: &ChannelId) -> StoreResult<Vec<Connection>> {
        let out = self
            .client
            .query()
            .table_name(&self.res.connections)
            .index_name("by_channel")
            .key_condition_expression("channel_id = :c")
            .expression_attribute_values(":c", s(channel.as_str()))
            .limit(100)
            .send()
            .await
            .map_err(sdk_err)?;
        let now_s = converger_core::time::now_ms() / 1000;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(from_item::<Connection>)
            // TTL deletion lags: an expired record is not a connection.
            .filter(|c| c.as_ref().map_or(true, |c| c.expires_at > now_s))
            .collect()
    }
}
