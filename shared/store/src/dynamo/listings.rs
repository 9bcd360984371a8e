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
                        .map(|c| a.delivery_id(c))
                        .collect();
                    self.get_deliveries(&ids).await?
                }
                None => Vec::new(),
            };
            return Ok(q.page(&rows));
        }
        // The partitions that serve the filter: a channel's dead letters or parked deliveries
        // from the channel index (its shards), anything else from the tenant's listing (its
        // shards, for each status asked for), filtered by channel when one is given.
        let (index, hash_attr, parts) = match (q.status, &q.channel) {
            (Some(st), Some(ch)) if channel_indexed(st) => (
                "by_channel_status_s",
                "cl_pk",
                (0..CHANNEL_SHARDS)
                    .map(|i| channel_listing_key(ch, st, i))
                    .collect::<Vec<_>>(),
            ),
            (status, _) => {
                // The tenant's own shards, and those granted to it whose times meet the page.
                let (lo, hi) = q.key_range();
                let shards = self.tenant_listing_shards(&q.tenant, lo, hi).await?;
                let statuses: Vec<DeliveryStatus> = match status {
                    Some(st) => vec![st],
                    None => DeliveryStatus::ALL.to_vec(),
                };
                let keys = statuses
                    .into_iter()
                    .flat_map(|st| {
                        shards
                            .iter()
                            .map(move |i| tenant_listing_key(&q.tenant, st, *i))
                    })
                    .collect::<Vec<_>>();
                ("by_tenant_status_s", "tl_pk", keys)
            }
        };
        self.list_from(index, hash_attr, &parts, q).await
    }
    async fn handed_off_deliveries(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        limit: usize,
        after: Option<converger_core::query::Cursor>,
    ) -> StoreResult<Listed<Delivery>> {
        // The channel index's `pending` entries are the handed-off deliveries only.
        let parts: Vec<String> = (0..CHANNEL_SHARDS)
            .map(|i| channel_listing_key(channel, DeliveryStatus::Pending, i))
            .collect();
        let q = DeliveryQuery {
            status: Some(DeliveryStatus::Pending),
            channel: Some(channel.clone()),
            newest_first: false,
            after,
            ..DeliveryQuery::of_tenant(tenant.clone(), limit)
        };
        let mut page = self
            .list_from("by_channel_status_s", "cl_pk", &parts, &q)
            .await?;
        page.items
            .retain(|d| d.handed_off && d.status == DeliveryStatus::Pending);
        Ok(page)
    }
    async fn count_by_status(
        &self,
        tenant: &TenantId,
        status: DeliveryStatus,
        cap: u64,
    ) -> StoreResult<u64> {
        let shards = self.tenant_listing_shards(tenant, None, None).await?;
        let counts = futures::future::try_join_all(shards.into_iter().map(|i| {
            self.count_upto(
                "by_tenant_status_s",
                "tl_pk",
                tenant_listing_key(tenant, status, i),
                cap,
            )
        }))
        .await?;
        Ok(counts.into_iter().sum::<u64>().min(cap.max(1)))
    }
    fn due_shards(&self) -> u32 {
        self.res.due_shards
    }
    async fn due_grants(&self) -> StoreResult<converger_ports::ShardGrants> {
        self.due_grants_now().await
    }
    async fn grant_due_shards(&self, grants: &converger_ports::ShardGrants) -> StoreResult<bool> {
        self.put_due_grants(grants).await
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
            .expression_attribute_values(":sh", s(due_partition(shard)))
            .expression_attribute_values(":before", s(due_key(before_ms)))
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000));
        if let Some(from) = from {
            let start: HashMap<String, String> = serde_json::from_str(&from)
                .map_err(|e| StoreError::Corrupt(format!("bad continuation: {e}")))?;
            req = req
                .set_exclusive_start_key(Some(start.into_iter().map(|(k, v)| (k, s(v))).collect()));
        }
        let out = req.send().await.map_err(sdk_err)?;
        // The index holds keys (and tier and channel); whether an attempt holds the row is
        // read from the row: the lease is not projected, so a claim never writes the index.
        let ids = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|item| entry_id(&item, "due"))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut rows: HashMap<DeliveryId, Delivery> = self
            .get_deliveries(&ids)
            .await?
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
        let now = now_ms();
        let mut items = Vec::new();
        for id in ids {
            let Some(d) = rows.remove(&id) else {
                continue;
            };
            // Past its retention (read as absent above), or no longer pending in the index.
            if d.status != DeliveryStatus::Pending
                || converger_ports::expired(d.expires_at, before_ms.max(now))
            {
                continue;
            }
            if part == DuePart::Leased && d.lease_until.is_none_or(|u| u >= before_ms) {
                continue;
            }
            items.push(Overdue {
                id: d.id,
                tier: d.tier,
                channel_id: Some(d.channel_id),
                lease_until: d.lease_until,
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

impl DynamoStore {
    /// The listing shards of `tenant` that may hold an entry within `lo..=hi` (shard 0 for a
    /// tenant that does not exist: its rows, if any, were written without).
    pub(super) async fn tenant_listing_shards(
        &self,
        tenant: &TenantId,
        lo: Option<&str>,
        hi: Option<&str>,
    ) -> StoreResult<Vec<u32>> {
        Ok(self
            .get_tenant(tenant)
            .await?
            .map_or_else(|| vec![0], |t| t.listing_shards(lo, hi)))
    }

    /// Counts the entries of one partition of a deliveries index (`hash_attr` = `key`),
    /// stopping once `cap` are counted: one `Select: COUNT` query per MB of entries.
    pub(super) async fn count_upto(
        &self,
        index: &str,
        hash_attr: &str,
        key: String,
        cap: u64,
    ) -> StoreResult<u64> {
        let mut n: u64 = 0;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name(index)
                .key_condition_expression("#h = :h")
                .expression_attribute_names("#h", hash_attr)
                .expression_attribute_values(":h", s(key.as_str()))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            n += u64::try_from(out.count()).unwrap_or(0);
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() && n < cap => start = Some(k),
                _ => return Ok(n),
            }
        }
    }

    /// One partition's part of a listing page: at most `want` entries after the query's
    /// cursor and within its bounds, in its order, and how far it was read when it stopped
    /// short (a filter that drops rows reads at most ten pages of up to 1 MB per call, so
    /// one call cannot read a whole partition; the cursor continues where it stopped).
    async fn listing_partition(
        &self,
        index: &str,
        hash_attr: &str,
        key: &str,
        q: &DeliveryQuery,
        want: usize,
    ) -> StoreResult<PartitionPage<DeliveryId>> {
        let after = q.after.as_ref().map(|c| c.sort_key.as_str());
        let (lo, hi) = q.key_range();
        let key_cond = match (lo, hi) {
            (Some(_), Some(_)) => "#h = :h AND upd_sk BETWEEN :lo AND :hi",
            (Some(_), None) => "#h = :h AND upd_sk >= :lo",
            (None, Some(_)) => "#h = :h AND upd_sk <= :hi",
            (None, None) => "#h = :h",
        };
        let mut filters = Vec::new();
        if hash_attr == "cl_pk" {
            filters.push("tenant_id = :t");
        } else if q.channel.is_some() {
            filters.push("channel_id = :c");
        }
        if q.error_contains.is_some() {
            filters.push("contains(last_error, :q)");
        }
        if q.event_type.is_some() {
            filters.push("event_type = :et");
        }
        let selective = q.error_contains.is_some()
            || q.event_type.is_some()
            || (hash_attr == "tl_pk" && q.channel.is_some());
        let mut rows: Vec<(String, DeliveryId)> = Vec::new();
        let mut start: Option<Item> = None;
        let mut read_up_to: Option<String> = None;
        for _ in 0..10 {
            let mut req = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name(index)
                .key_condition_expression(key_cond)
                .expression_attribute_names("#h", hash_attr)
                .expression_attribute_values(":h", s(key))
                .scan_index_forward(!q.newest_first)
                .limit(if selective {
                    1000
                } else {
                    i32::try_from(want + 1 - rows.len().min(want)).unwrap_or(1000)
                })
                .set_exclusive_start_key(start.take());
            if let Some(lo) = lo {
                req = req.expression_attribute_values(":lo", s(lo));
            }
            if let Some(hi) = hi {
                req = req.expression_attribute_values(":hi", s(hi));
            }
            if !filters.is_empty() {
                req = req.filter_expression(filters.join(" AND "));
            }
            if hash_attr == "cl_pk" {
                req = req.expression_attribute_values(":t", s(q.tenant.as_str()));
            } else if let Some(c) = &q.channel {
                req = req.expression_attribute_values(":c", s(c.as_str()));
            }
            if let Some(text) = &q.error_contains {
                req = req.expression_attribute_values(":q", s(text.as_str()));
            }
            if let Some(t) = &q.event_type {
                req = req.expression_attribute_values(":et", s(t.as_str()));
            }
            let out = req.send().await.map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                let Some(sk) = item.get("upd_sk").and_then(|v| v.as_s().ok()) else {
                    continue;
                };
                if Some(sk.as_str()) == after {
                    continue;
                }
                rows.push((sk.clone(), entry_id(&item, "listing")?));
            }
            let last = out.last_evaluated_key.filter(|k| !k.is_empty());
            if rows.len() > want {
                rows.truncate(want);
                read_up_to = rows.last().map(|(k, _)| k.clone());
                break;
            }
            match last {
                None => {
                    read_up_to = None;
                    break;
                }
                Some(k) => {
                    read_up_to = k.get("upd_sk").and_then(|v| v.as_s().ok()).cloned();
                    if rows.len() == want {
                        read_up_to = rows.last().map(|(k, _)| k.clone());
                        break;
                    }
                    start = Some(k);
                }
            }
        }
        Ok(PartitionPage { rows, read_up_to })
    }
}

impl DynamoStore {
    /// A page of the rows whose index entries are in `parts` of `index` (its hash key
    /// `hash_attr`), merged in `q`'s order after its cursor; the rows read by key.
    async fn list_from(
        &self,
        index: &str,
        hash_attr: &str,
        parts: &[String],
        q: &DeliveryQuery,
    ) -> StoreResult<Listed<Delivery>> {
        let limit = q.limit.clamp(1, 1000);
        let pages = futures::future::try_join_all(
            parts
                .iter()
                .map(|key| self.listing_partition(index, hash_attr, key, q, limit)),
        )
        .await?;
        let (ids, next) = merge_pages(pages, limit, q.newest_first);
        // The indexes hold keys (and what filters read); the rows themselves are read by key,
        // eventually consistent as the index itself is (half the read units).
        let rows = self.rows_by_id(&ids, false).await?;
        let mut by_id: HashMap<DeliveryId, Delivery> = rows
            .into_iter()
            .filter(|d| d.tenant_id == q.tenant)
            .map(|d| (d.id.clone(), d))
            .collect();
        let items = ids.iter().filter_map(|id| by_id.remove(id)).collect();
        let next = next.and_then(|sort_key| {
            let id = sort_key.rsplit_once('#')?.1.to_owned();
            Some(Cursor { sort_key, id })
        });
        Ok(Listed { items, next })
    }
}
