//! One-off repairs of rows an earlier version wrote: run once after an upgrade, idempotent.

use super::*;

impl DynamoStore {
    /// Puts every delivery handed off to a websocket client and still waiting for its ack
    /// into its channel's index (`cl_pk`, as a hand-off writes it from this version on), so a
    /// replay frame finds those handed off before the upgrade; how many it moved. A scan of
    /// the deliveries table, a page at a time; a row that moved on meanwhile is left as it is.
    pub async fn backfill_handoff_index(&self) -> StoreResult<usize> {
        let mut moved = 0;
        let mut from = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.res.deliveries)
                .filter_expression(
                    "#st = :pending AND handed_off = :yes AND attribute_not_exists(cl_pk)",
                )
                .expression_attribute_names("#st", "status")
                .expression_attribute_values(":pending", s(DeliveryStatus::Pending.as_str()))
                .expression_attribute_values(":yes", AttributeValue::Bool(true))
                .projection_expression("id, channel_id")
                .set_exclusive_start_key(from)
                .send()
                .await
                .map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                let (Some(AttributeValue::S(id)), Some(AttributeValue::S(channel))) =
                    (item.get("id"), item.get("channel_id"))
                else {
                    continue;
                };
                let (Ok(id), Ok(channel)) = (DeliveryId::parse(id), ChannelId::parse(channel))
                else {
                    continue;
                };
                let key =
                    channel_listing_key(&channel, DeliveryStatus::Pending, channel_shard(&id));
                let r = Update::new()
                    .set("cl_pk", s(key))
                    .when_eq("status", s(DeliveryStatus::Pending.as_str()))
                    .when_eq("handed_off", AttributeValue::Bool(true))
                    .apply(self.delivery_update(&id))
                    .send()
                    .await;
                match r {
                    Ok(_) => moved += 1,
                    Err(e) if is_update_conditional(&e) => {}
                    Err(e) => return Err(sdk_err(e)),
                }
            }
            from = out.last_evaluated_key;
            if from.is_none() {
                return Ok(moved);
            }
        }
    }
}
