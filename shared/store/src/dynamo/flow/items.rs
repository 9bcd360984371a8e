//! Slot items of their own (a window wider than the flow item holds, `core::flow::slot_items`):
//! a take, a give-back with its hand-on, and the reconciliation's read and frees.

use super::super::*;
use super::{empty_map, slot_take};
use converger_core::Timestamp;

impl DynamoStore {
    pub(super) async fn item_take(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<ItemTake> {
        let key = slot_item_key(channel, item);
        for _ in 0..2 {
            let req = slot_take(Update::new(), delivery, cap, now, exclusive).apply(
                self.client
                    .update_item()
                    .table_name(&self.res.flow)
                    .key("key", s(&key)),
            );
            #[derive(serde::Deserialize)]
            struct Item {
                #[serde(default)]
                slots: std::collections::BTreeMap<String, i64>,
            }
            let reread = self.get::<Item>(&self.res.flow, "key", &key);
            match self.update_or_old(req, reread).await? {
                Conditional::Applied(_) => return Ok(ItemTake::Taken),
                Conditional::Refused(Some(old))
                    if exclusive && old.slots.contains_key(delivery.as_str()) =>
                {
                    return Ok(ItemTake::Held);
                }
                Conditional::Refused(Some(_)) => return Ok(ItemTake::Full),
                Conditional::Refused(None) => {
                    let item = HashMap::from([
                        ("key".to_owned(), s(&key)),
                        ("slots".to_owned(), empty_map()),
                    ]);
                    match self.put_new(&self.res.flow, "key", item).await {
                        Ok(()) | Err(StoreError::Conflict(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "slot item {key} could not be created"
        )))
    }

    pub(super) async fn item_free(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        pass_to: Option<&DeliveryId>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let held = format!("slots.{delivery}");
        let mut u = Update::new().remove(&held).when_exists(&held);
        if let Some(next) = pass_to {
            u = u.set_if_absent(&format!("slots.{next}"), n(now.ms()));
        }
        let req = u.apply(
            self.client
                .update_item()
                .table_name(&self.res.flow)
                .key("key", s(slot_item_key(channel, item))),
        );
        match req.send().await {
            Ok(_) => Ok(()),
            // Not held there (freed already, or never taken): nothing to give back.
            Err(e) if is_update_conditional(&e) => Ok(()),
            Err(e) => Err(sdk_err(e)),
        }
    }

    pub(super) async fn items_held(
        &self,
        channel: &ChannelId,
        items: u32,
    ) -> StoreResult<Vec<HeldSlot>> {
        if items <= 1 {
            return Ok(Vec::new());
        }
        let keys = (1..items)
            .map(|i| HashMap::from([("key".to_owned(), s(slot_item_key(channel, i)))]))
            .collect();
        let prefix = slot_items_prefix(channel);
        let mut held = Vec::new();
        for item in self.batch_get(&self.res.flow, keys, true).await? {
            let Some(i) = item
                .get("key")
                .and_then(|k| k.as_s().ok())
                .and_then(|k| k.strip_prefix(&prefix))
                .and_then(|i| i.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(AttributeValue::M(slots)) = item.get("slots") else {
                continue;
            };
            for (d, at) in slots {
                if let Some(at) = at.as_n().ok().and_then(|a| a.parse::<i64>().ok()) {
                    held.push(HeldSlot {
                        item: i,
                        delivery: d.clone(),
                        taken_at: at,
                    });
                }
            }
        }
        held.sort_by(|a, b| (a.item, &a.delivery).cmp(&(b.item, &b.delivery)));
        Ok(held)
    }

    pub(super) async fn held_free(
        &self,
        channel: &ChannelId,
        slots: &[HeldSlot],
    ) -> StoreResult<usize> {
        let mut freed = 0;
        for h in slots {
            let key = if h.item == 0 {
                channel.to_string()
            } else {
                slot_item_key(channel, h.item)
            };
            let held = format!("slots.{}", h.delivery);
            let r = Update::new()
                .remove(&held)
                .when_eq(&held, n(h.taken_at))
                .apply(
                    self.client
                        .update_item()
                        .table_name(&self.res.flow)
                        .key("key", s(&key)),
                )
                .send()
                .await;
            match r {
                Ok(_) => freed += 1,
                Err(e) if is_update_conditional(&e) => {}
                Err(e) => return Err(sdk_err(e)),
            }
        }
        Ok(freed)
    }
}
