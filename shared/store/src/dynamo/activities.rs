//! Activities, written with their deliveries, and per-conversation sequence numbers.

use super::*;

#[async_trait]
impl ActivityStore for DynamoStore {
    async fn reserve_seqs(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        count: u64,
    ) -> StoreResult<u64> {
        let count = count.max(1);
        let out = Update::new()
            .add("seq", n(count))
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.activities)
                    .key("id", s(conversation_counter_key(tenant, conversation_id)))
                    .return_values(ReturnValue::UpdatedNew),
            )
            .send()
            .await
            .map_err(sdk_err)?;
        out.attributes
            .as_ref()
            .and_then(|a| a.get("seq"))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .and_then(|last| last.checked_sub(count - 1))
            .ok_or_else(|| StoreError::Corrupt("conversation counter without seq".into()))
    }
    async fn create_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<Created> {
        let put = |table: &str, item: Item| -> StoreResult<TransactWriteItem> {
            let p = Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(id)")
                .build()
                .map_err(StoreError::unreadable)?;
            Ok(TransactWriteItem::builder().put(p).build())
        };
        let mut req = self
            .client
            .transact_write_items()
            .transact_items(put(&self.res.activities, activity_item(activity)?)?);
        for d in deliveries {
            req = req.transact_items(put(&self.res.deliveries, self.delivery_item(d)?)?);
        }
        let sent = {
            let _serial = self.tx_guard().await;
            req.send().await
        };
        match sent {
            Ok(_) => Ok(Created::New),
            Err(e) if is_transaction_conditional(&e) => Ok(Created::Duplicate),
            Err(e) => Err(sdk_err(e)),
        }
    }
    async fn create_fresh_activities(&self, fresh: &[(&Activity, &[Delivery])]) -> StoreResult<()> {
        let mut activities = Vec::with_capacity(fresh.len());
        let mut deliveries = Vec::with_capacity(fresh.iter().map(|(_, ds)| ds.len()).sum());
        for (a, ds) in fresh {
            activities.push((self.res.activities.clone(), activity_item(a)?));
            for d in *ds {
                deliveries.push((self.res.deliveries.clone(), self.delivery_item(d)?));
            }
        }
        if activities.len() + deliveries.len() <= 25 {
            // One request, as a single activity's rows are: its puts are applied together
            // unless some come back unprocessed, which are sent again.
            activities.append(&mut deliveries);
            return self.batch_put_rows(activities).await;
        }
        // A batch of activities is several requests, each of which may fail on its own:
        // every activity is written before any delivery, so a write that fails part way
        // leaves activities without deliveries (answered 503; the producer's retry writes
        // them again), never a delivery whose activity is missing, which no attempt could
        // send and no replay could finish.
        self.batch_put_rows(activities).await?;
        self.batch_put_rows(deliveries).await
    }
    async fn get_activity(
        &self,
        tenant: &TenantId,
        id: &ActivityId,
    ) -> StoreResult<Option<Activity>> {
        let a = self
            .get_raw(&self.res.activities, "id", &activity_key(tenant, id))
            .await?
            .map(activity_from_item)
            .transpose()?;
        Ok(a.filter(|a| !converger_ports::expired(a.expires_at, now_ms())))
    }
    async fn conversation_activities(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        after: Option<&(u64, ActivityId)>,
        limit: usize,
    ) -> StoreResult<(Vec<Activity>, bool)> {
        let now = now_ms();
        let key = s(conversation_key(tenant, conversation_id));
        let query = || {
            self.client
                .query()
                .table_name(&self.res.activities)
                .index_name("by_conversation")
                .key_condition_expression("conv_key = :c")
                .expression_attribute_values(":c", key.clone())
        };
        // Ties of seq are in the order of the row key: the page goes on after the whole key.
        let start = after.map(|(seq, id)| {
            Item::from([
                ("conv_key".to_owned(), key.clone()),
                ("seq".to_owned(), n(seq)),
                ("id".to_owned(), s(activity_key(tenant, id))),
            ])
        });
        // The index holds keys only (a copy of every payload would double what an activity
        // costs to write); the rows are read by key, in the index's order.
        let (keys, more) = self
            .query_upto(limit, start, query, |item| {
                Ok(item
                    .get("id")
                    .cloned()
                    .map(|id| Item::from([("id".to_owned(), id)])))
            })
            .await?;
        let mut rows: HashMap<String, Activity> = HashMap::new();
        for item in self
            .batch_get(&self.res.activities, keys.clone(), false)
            .await?
        {
            let key = item
                .get("id")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default();
            rows.insert(key, activity_from_item(item)?);
        }
        let activities = keys
            .iter()
            .filter_map(|k| k.get("id").and_then(|v| v.as_s().ok()))
            .filter_map(|k| rows.remove(k))
            .filter(|a| !converger_ports::expired(a.expires_at, now))
            .collect();
        Ok((activities, more))
    }
}
