//! The DynamoDB backend of [`HandoffStore`]: acknowledgements as one conditional update of
//! the delivery item (the hand-off itself is `mark_sent`), receipts found through the sparse `by_provider_message`
//! index, connections in their own table.

use super::*;
use converger_core::Timestamp;

impl DynamoStore {
    /// The delivery of `channel` its provider knows as `pmid`, as the index holds it (the
    /// index projects the whole item; a receipt's conditional write catches a stale copy).
    async fn by_provider_message(
        &self,
        channel: &ChannelId,
        pmid: &str,
    ) -> StoreResult<Option<Delivery>> {
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
        // The index holds keys only (a receipt's status change would rewrite a full copy).
        match out.items.unwrap_or_default().first() {
            Some(item) => self.get_delivery(&entry_id(item, "provider index")?).await,
            None => Ok(None),
        }
    }
}

/// What an acknowledgement finds in a row it could not move.
fn not_acked(d: Delivery) -> Ack {
    if d.status.is_accepted() {
        Ack::Already(d)
    } else {
        Ack::NotAwaiting(d)
    }
}

/// Pages of a channel's connection records read at most, passing over expired ones.
const CONNECTION_PAGES: usize = 5;

#[async_trait]
impl HandoffStore for DynamoStore {
    async fn acknowledge(&self, d: &Delivery, now: Timestamp) -> StoreResult<Ack> {
        let at = now.rfc3339();
        let u = Update::new()
            .set("status", s(DeliveryStatus::Sent.as_str()))
            .set("sent_at", s(at.as_str()))
            .set("updated_at", s(at.as_str()))
            .remove("handed_off")
            .when_eq("status", s(DeliveryStatus::Pending.as_str()))
            .when_eq("handed_off", AttributeValue::Bool(true));
        let req = listed(u, d, DeliveryStatus::Sent, now)
            .apply(self.delivery_update(&d.id))
            .return_values(ReturnValue::AllNew);
        match self.update_or_old(req, self.get_delivery(&d.id)).await? {
            Conditional::Applied(item) => {
                let item =
                    item.ok_or_else(|| StoreError::Corrupt("ack returned no item".into()))?;
                Ok(Ack::Acked(from_item(item)?))
            }
            Conditional::Refused(old) => Ok(old.map_or(Ack::Missing, not_acked)),
        }
    }

    async fn apply_receipt(
        &self,
        channel: &ChannelId,
        provider_message_id: &str,
        receipt: DeliveryStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Receipted> {
        let Some(mut d) = self
            .by_provider_message(channel, provider_message_id)
            .await?
        else {
            return Ok(Receipted::Unknown);
        };
        for _ in 0..5 {
            let from = d.status;
            let Some(to) = from.apply_receipt(receipt) else {
                return Ok(Receipted::Ignored(d));
            };
            let at = now.rfc3339();
            let mut u = Update::new()
                .set("status", s(to.as_str()))
                .set("updated_at", s(at.as_str()))
                .when_eq("status", s(from.as_str()));
            if to == DeliveryStatus::Failed {
                u = u.set(
                    "last_error",
                    s(error.unwrap_or("failed by a provider receipt")),
                );
            }
            // Out of pending: out of the due index (waiting or leased) and the backlog too, as
            // every other outcome write leaves them.
            if to != DeliveryStatus::Pending {
                u = u.remove_each(lease_and_places()).remove("handed_off");
            }
            let req = listed(u, &d, to, now)
                .apply(self.delivery_update(&d.id))
                .return_values(ReturnValue::AllNew);
            match req.send().await {
                Ok(out) => {
                    let item = out
                        .attributes
                        .ok_or_else(|| StoreError::Corrupt("receipt returned no item".into()))?;
                    return Ok(Receipted::Applied {
                        from,
                        row: from_item(item)?,
                    });
                }
                // The index's copy was stale, or another receipt moved it first: read it
                // and decide again.
                Err(e) if is_update_conditional(&e) => match self.get_delivery(&d.id).await? {
                    Some(now_row) => d = now_row,
                    None => return Ok(Receipted::Unknown),
                },
                Err(e) => return Err(sdk_err(e)),
            }
        }
        Err(StoreError::Conflict(format!(
            "delivery {} kept changing while a receipt was applied",
            d.id
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

    async fn begin_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<Option<i64>> {
        // `policy::socket_replay_wait_ms`, as the update's condition; a refusal says when the
        // last replay began.
        let since = now_ms.saturating_sub(converger_core::policy::SOCKET_REPLAY_INTERVAL_MS);
        let key = replay_turn_key(channel);
        let u = Update::new()
            .set(
                "replay_at",
                n(now_ms + converger_core::policy::SOCKET_REPLAY_RUN_MS),
            )
            .set("expires_at", n(replay_turn_expiry(now_ms)))
            .when_cmp("replay_at", Cmp::Le, n(since), true);
        let req = u.apply(
            self.client
                .update_item()
                .table_name(&self.res.connections)
                .key("connection_id", s(&key)),
        );
        let found = self.update_or_old::<ReplayTurn>(
            req,
            self.get(&self.res.connections, "connection_id", &key),
        );
        Ok(match found.await? {
            Conditional::Applied(_) => None,
            Conditional::Refused(t) => Some(t.and_then(|t| t.replay_at).unwrap_or(now_ms)),
        })
    }

    async fn end_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<()> {
        Update::new()
            .set("replay_at", n(now_ms))
            .set("expires_at", n(replay_turn_expiry(now_ms)))
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.connections)
                    .key("connection_id", s(replay_turn_key(channel))),
            )
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn channel_connections(&self, channel: &ChannelId) -> StoreResult<Vec<Connection>> {
        // Up to 100 live connections: TTL deletion lags, so expired records (clients gone
        // without a `$disconnect`) are passed over, a few pages at most.
        let now_s = converger_core::time::now_ms() / 1000;
        let mut live = Vec::new();
        let mut from = None;
        for _ in 0..CONNECTION_PAGES {
            let out = self
                .client
                .query()
                .table_name(&self.res.connections)
                .index_name("by_channel")
                .key_condition_expression("channel_id = :c")
                .expression_attribute_values(":c", s(channel.as_str()))
                .set_exclusive_start_key(from)
                .limit(100)
                .send()
                .await
                .map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                let c = from_item::<Connection>(item)?;
                if c.expires_at > now_s {
                    live.push(c);
                }
            }
            from = out.last_evaluated_key;
            if live.len() >= 100 || from.is_none() {
                break;
            }
        }
        live.truncate(100);
        Ok(live)
    }
}

/// A websocket channel's replay turn: an item of the connections table beside its
/// connections (no `channel_id`, so in no index), gone a day after its last replay.
#[derive(serde::Deserialize)]
struct ReplayTurn {
    replay_at: Option<i64>,
}

fn replay_turn_key(channel: &ChannelId) -> String {
    format!("replay#{channel}")
}

/// When TTL may remove a turn last touched at `now_ms` (seconds): a day on.
fn replay_turn_expiry(now_ms: i64) -> i64 {
    now_ms / 1000 + 86_400
}
