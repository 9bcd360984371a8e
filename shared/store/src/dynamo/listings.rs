//! Reading deliveries back: listings and counts by status, older attempts, and the sweeper's overdue rows.

use super::*;

#[async_trait]
impl DeliveryQueries for DynamoStore {
    async fn older_attempts(
        &self,
        id: &DeliveryId,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<Vec<AttemptEntry>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.res.attempts)
            .scan_index_forward(false)
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .expression_attribute_values(":d", s(id.as_str()));
        req = match before {
            Some(b) => req
                .key_condition_expression("delivery_id = :d AND attempt_sk < :b")
                .expression_attribute_values(":b", s(format!("{b:010}"))),
            None => req.key_condition_expression("delivery_id = :d"),
        };
        let out = req.send().await.map_err(sdk_err)?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect()
    }
    async fn list_deliveries(&self, q: &DeliveryQuery) -> StoreResult<Listed<Delivery>> {
        // One activity's deliveries are read by key: their ids follow from the activity's
        // channels, at most 50 of them.
        if let Some(activity) = &q.activity {
            let rows = match self.get_activity(&q.tenant, activity).await? {
                Some(a) => {
                    let ids: Vec<DeliveryId> = a
                        .channel_ids
                        .iter()
                        .filter(|c| q.channel.as_ref().is_none_or(|x| x == *c))
                        .map(|c| DeliveryId::for_pair(&a.id, c))
                        .collect();
                    self.get_deliveries(&ids).await?
                }
                None => Vec::new(),
            };
            return Ok(q.page(&rows));
        }
        // The index that serves the filter; the tenant is always part of the key or a filter.
        let (index, hash_attr, hash_val) = match (q.status, &q.channel) {
            (Some(st), Some(ch)) => ("by_channel_status", "cs_pk", format!("{ch}#{st}")),
            (Some(st), None) => ("by_tenant_status", "ts_pk", format!("{}#{st}", q.tenant)),
            (None, _) => ("by_tenant", "tenant_id", q.tenant.to_string()),
        };
        let mut key_cond = "#h = :h".to_owned();
        match (&q.from_key, &q.to_key) {
            (Some(_), Some(_)) => key_cond.push_str(" AND upd_sk BETWEEN :lo AND :hi"),
            (Some(_), None) => key_cond.push_str(" AND upd_sk >= :lo"),
            (None, Some(_)) => key_cond.push_str(" AND upd_sk <= :hi"),
            (None, None) => {}
        }
        let mut filters = Vec::new();
        if hash_attr != "tenant_id" {
            filters.push("tenant_id = :t");
        }
        if q.status.is_none() && q.channel.is_some() {
            filters.push("channel_id = :c");
        }
        if q.error_contains.is_some() {
            filters.push("contains(last_error, :q)");
        }
        let limit = q.limit.clamp(1, 1000);
        // A filter that drops rows (error text; a channel without a status) reads whole
        // pages, up to 1 MB each, so one call can search thousands of rows; the tenant filter
        // on the status indexes never drops a row and does not count.
        let selective = q.error_contains.is_some() || (q.status.is_none() && q.channel.is_some());
        let mut items: Vec<Delivery> = Vec::with_capacity(limit);
        let now = now_ms();
        let mut start: Option<Item> = q.after.as_ref().map(|c| {
            HashMap::from([
                ("id".to_owned(), s(c.id.as_str())),
                (hash_attr.to_owned(), s(hash_val.as_str())),
                ("upd_sk".to_owned(), s(c.sort_key.as_str())),
            ])
        });
        let mut last_evaluated: Option<Item> = None;
        // A bounded number of pages per call, so a sparse filter cannot make one request
        // read a whole partition; the cursor continues where it stopped.
        for _ in 0..10 {
            let want = limit - items.len();
            let mut req = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name(index)
                .key_condition_expression(&key_cond)
                .expression_attribute_names("#h", hash_attr)
                .expression_attribute_values(":h", s(hash_val.as_str()))
                .scan_index_forward(!q.newest_first)
                .limit(i32::try_from(if selective { 1000 } else { want }).unwrap_or(1000))
                .set_exclusive_start_key(start.take());
            if let Some(lo) = &q.from_key {
                req = req.expression_attribute_values(":lo", s(lo.as_str()));
            }
            if let Some(hi) = &q.to_key {
                req = req.expression_attribute_values(":hi", s(hi.as_str()));
            }
            if !filters.is_empty() {
                req = req.filter_expression(filters.join(" AND "));
            }
            if hash_attr != "tenant_id" {
                req = req.expression_attribute_values(":t", s(q.tenant.as_str()));
            }
            if let (None, Some(c)) = (q.status, &q.channel) {
                req = req.expression_attribute_values(":c", s(c.as_str()));
            }
            if let Some(text) = &q.error_contains {
                req = req.expression_attribute_values(":q", s(text.as_str()));
            }
            let out = req.send().await.map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                if items.len() == limit {
                    break;
                }
                let d: Delivery = from_item(item)?;
                // Expired by TTL but not deleted yet: absent.
                if !converger_ports::expired(d.expires_at, now) {
                    items.push(d);
                }
            }
            last_evaluated = out.last_evaluated_key.filter(|k| !k.is_empty());
            if items.len() == limit || last_evaluated.is_none() {
                break;
            }
            start = last_evaluated.clone();
        }
        let next = if items.len() == limit {
            items.last().map(Delivery::cursor)
        } else {
            last_evaluated.and_then(|k| {
                Some(Cursor {
                    sort_key: k.get("upd_sk")?.as_s().ok()?.clone(),
                    id: k.get("id")?.as_s().ok()?.clone(),
                })
            })
        };
        Ok(Listed { items, next })
    }
    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        let mut n: u64 = 0;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name("by_tenant_status")
                .key_condition_expression("ts_pk = :h")
                .expression_attribute_values(":h", s(format!("{tenant}#{status}")))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            n += u64::try_from(out.count()).unwrap_or(0);
            match out.last_evaluated_key {
                Some(k) if n < cap => start = Some(k),
                _ => return Ok(n),
            }
        }
    }
    async fn overdue(
        &self,
        part: DuePart,
        shard: u32,
        before_ms: i64,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Overdue>> {
        let mut req = self
            .client
            .query()
            .table_name(&self.res.deliveries)
            .index_name("by_due")
            .key_condition_expression("due_shard = :sh AND due_at < :before")
            .expression_attribute_values(":sh", s(due_partition(part, shard)))
            .expression_attribute_values(":before", s(due_key(before_ms)))
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000));
        if let Some(from) = from {
            let start: HashMap<String, String> = serde_json::from_str(&from)
                .map_err(|e| StoreError::Corrupt(format!("bad continuation: {e}")))?;
            req = req
                .set_exclusive_start_key(Some(start.into_iter().map(|(k, v)| (k, s(v))).collect()));
        }
        let out = req.send().await.map_err(sdk_err)?;
        let mut items = Vec::new();
        for item in out.items.unwrap_or_default() {
            #[derive(serde::Deserialize)]
            struct Row {
                id: DeliveryId,
                tier: converger_core::Tier,
                #[serde(default)]
                channel_id: Option<ChannelId>,
                #[serde(default)]
                lease_until: Option<i64>,
                #[serde(default)]
                expires_at: Option<i64>,
            }
            let r: Row = from_item(item)?;
            // Past its retention: not enqueued again (the claim would drop it anyway).
            if converger_ports::expired(r.expires_at, before_ms.max(now_ms())) {
                continue;
            }
            items.push(Overdue {
                id: r.id,
                tier: r.tier,
                channel_id: r.channel_id,
                lease_until: r.lease_until,
            });
        }
        let next = out.last_evaluated_key.filter(|k| !k.is_empty()).map(|k| {
            let m: HashMap<String, String> = k
                .into_iter()
                .filter_map(|(k, v)| v.as_s().ok().map(|v| (k, v.clone())))
                .collect();
            serde_json::to_string(&m).unwrap_or_default()
        });
        Ok(Page { items, next })
    }
}
