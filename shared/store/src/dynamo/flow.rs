//! The DynamoDB backend of [`FlowStore`]: the flow item of a channel (one small item, so its
//! frequent writes cost one write unit each), rate counters, and flow transitions of delivery
//! rows. Every transition is one conditional write.

use super::*;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use converger_core::CircuitState;
use converger_core::Timestamp;
use converger_core::flow::INITIAL_WINDOW;

pub(super) fn empty_map() -> AttributeValue {
    AttributeValue::M(HashMap::new())
}

/// `u` setting what every write that may create a flow item sets, so a created item is whole.
pub(super) fn whole(u: Update, channel: &ChannelId) -> Update {
    u.set("channel_id", s(channel.as_str()))
        .set_if_absent("slots", empty_map())
        .set_if_absent("window", n(INITIAL_WINDOW))
}

mod busy;
mod items;
mod rate;
mod row_moves;

/// A slot take on a map of slots (the flow item's or a slot item's): `delivery`'s slot set
/// where it has none, only if the map exists and has room under `cap`, and, for an exclusive
/// take, the delivery holds none already.
pub(super) fn slot_take(
    u: Update,
    delivery: &DeliveryId,
    cap: u32,
    now: Timestamp,
    exclusive: bool,
) -> Update {
    let held = format!("slots.{delivery}");
    let cap = n(cap.max(1));
    let u = u.set_if_absent(&held, n(now.ms())).when_exists("slots");
    if exclusive {
        u.when_absent(&held).when_size_lt("slots", cap)
    } else {
        u.when_one_of(|u| u.when_exists(&held).when_size_lt("slots", cap))
    }
}

impl DynamoStore {
    pub(super) fn flow_update(&self, channel: &ChannelId) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.res.flow)
            .key("key", s(channel.as_str()))
            .return_values(ReturnValue::AllNew)
    }

    async fn create_flow(&self, channel: &ChannelId) -> StoreResult<()> {
        let mut item = to_item(&Flow::new(channel.clone()))?;
        item.insert("key".into(), s(channel.as_str()));
        item.insert("slots".into(), empty_map());
        match self.put_new(&self.res.flow, "key", item).await {
            Ok(()) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A conditional update of a delivery row outside any lease: the new row, `None` if the
    /// condition failed.
    pub(super) async fn row_update(
        &self,
        id: &DeliveryId,
        u: Update,
    ) -> StoreResult<Option<Delivery>> {
        let req = u
            .apply(self.delivery_update(id))
            .return_values(ReturnValue::AllNew);
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }
}

#[async_trait]
impl FlowStore for DynamoStore {
    async fn get_flow(&self, channel: &ChannelId) -> StoreResult<Flow> {
        Ok(self
            .get(&self.res.flow, "key", channel.as_str())
            .await?
            .unwrap_or_else(|| Flow::new(channel.clone())))
    }

    async fn take_slot(
        &self,
        channel: &ChannelId,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<SlotTake> {
        // `SlotTake::refused`, as a condition: a closed breaker and room.
        for _ in 0..2 {
            let req = slot_take(
                Update::new().when_in("circuit_state", [s(CircuitState::Closed.as_str())], true),
                delivery,
                cap,
                now,
                exclusive,
            )
            .apply(self.flow_update(channel));
            let old = match self
                .update_or_old(
                    req,
                    self.get::<Flow>(&self.res.flow, "key", channel.as_str()),
                )
                .await?
            {
                Conditional::Applied(item) => {
                    let item = item
                        .ok_or_else(|| StoreError::Corrupt("slot take returned no item".into()))?;
                    return Ok(SlotTake::Taken(from_item(item)?));
                }
                Conditional::Refused(old) => old,
            };
            match old {
                // Refused by `SlotTake::refused`'s rule (a full window, if the item read
                // after the refusal allows the take: another taker's slot just came back).
                Some(f) => {
                    return Ok(SlotTake::refused(&f, delivery, cap, exclusive)
                        .unwrap_or(SlotTake::Full(f)));
                }
                // No flow item yet: create it and ask again.
                None => self.create_flow(channel).await?,
            }
        }
        Err(StoreError::Unavailable(format!(
            "flow item of {channel} could not be created"
        )))
    }

    async fn settle(&self, channel: &ChannelId, st: &Settle) -> StoreResult<Flow> {
        // `Settle::apply`, as one update.
        let mut u = Update::new();
        match st.outcome {
            Outcome::Success => {
                u = u
                    .set("consecutive_failures", n(0))
                    .set("failed_attempts", n(0))
                    .set("last_success_at", n(st.now.ms()));
            }
            Outcome::Transient => u = u.add("consecutive_failures", n(1)),
            Outcome::Neutral | Outcome::HandedOff | Outcome::Halted => {}
        }
        if st.failed {
            u = u.add("failed_attempts", n(1));
        }
        if let Some(w) = st.window {
            u = u.set("window", n(w));
        }
        u = match &st.free {
            // Nothing to give back: counting a failure of a channel without a window may
            // create the item.
            None if u.is_empty() => return self.get_flow(channel).await,
            None => {
                let u = u
                    .set("channel_id", s(channel.as_str()))
                    .set_if_absent("slots", empty_map());
                if st.window.is_none() {
                    u.set_if_absent("window", n(INITIAL_WINDOW))
                } else {
                    u
                }
            }
            // Giving a slot back needs the item the slot was taken on.
            Some(d) => {
                let u = u.remove(&format!("slots.{d}")).when_exists("slots");
                match &st.pass_to {
                    Some(next) => u.set_if_absent(&format!("slots.{next}"), n(st.now.ms())),
                    None => u,
                }
            }
        };
        let req = u.apply(self.flow_update(channel));
        match req.send().await {
            Ok(out) => out
                .attributes
                .map(from_item)
                .transpose()
                .map(|f| f.unwrap_or_else(|| Flow::new(channel.clone()))),
            // No flow item: nothing was held or counted.
            Err(e) if is_update_conditional(&e) => Ok(Flow::new(channel.clone())),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn take_item_slot(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<ItemTake> {
        self.item_take(channel, item, delivery, cap, now, exclusive)
            .await
    }

    async fn free_item_slot(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        pass_to: Option<&DeliveryId>,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.item_free(channel, item, delivery, pass_to, now).await
    }

    async fn held_slots(&self, channel: &ChannelId, items: u32) -> StoreResult<Vec<HeldSlot>> {
        self.items_held(channel, items).await
    }

    async fn free_slots(&self, channel: &ChannelId, slots: &[HeldSlot]) -> StoreResult<usize> {
        self.held_free(channel, slots).await
    }

    async fn transition(&self, channel: &ChannelId, t: &Transition) -> StoreResult<Option<Flow>> {
        // `Transition::allows` and `Transition::apply`, as one conditional update.
        let mut u = Update::new()
            .set("circuit_state", s(t.to.as_str()))
            .set("circuit_changed_at", n(t.now.ms()))
            .set("channel_id", s(channel.as_str()))
            .set_if_absent("slots", empty_map());
        u = if t.reset {
            u.set("consecutive_failures", n(0))
                .set("window", n(INITIAL_WINDOW))
        } else {
            u.set_if_absent("window", n(INITIAL_WINDOW))
        };
        u = u.remove("probe_due");
        u = match &t.probe {
            Some(p) => u.set("probe", s(p.as_str())),
            None => u.remove("probe"),
        };
        // An item a mark created has no breaker state yet: it reads as closed.
        u = u.when_in(
            "circuit_state",
            t.from.iter().map(|st| s(st.as_str())),
            t.from.contains(&CircuitState::Closed),
        );
        if let Some(c) = t.changed_at {
            // ... and no change time: it reads as 0.
            u = u.when_in("circuit_changed_at", [n(c)], c == 0);
        }
        if let Some(p) = &t.probe_is {
            u = u.when_eq("probe", s(p.as_str()));
        }
        let req = u.apply(self.flow_update(channel));
        // Breaker transitions must have one winner; an emulator that does not serialize
        // conditional writes gets them one at a time (production never sets the lock).
        let _serial = self.tx_guard().await;
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn mark(
        &self,
        channel: &ChannelId,
        mark: Mark,
        set_at: Option<i64>,
        clear_if: Option<i64>,
    ) -> StoreResult<Flow> {
        // `Mark::apply`, as one update.
        let attr = mark.attribute();
        let u = match (set_at, clear_if) {
            (Some(at), _) if mark.keeps_earliest() => {
                whole(Update::new(), channel).set_if_absent(attr, n(at))
            }
            (Some(at), _) => whole(Update::new(), channel).set(attr, n(at)),
            (None, Some(seen)) => Update::new().remove(attr).when_eq(attr, n(seen)),
            (None, None) => return self.get_flow(channel).await,
        };
        let req = u.apply(self.flow_update(channel));
        match req.send().await {
            Ok(out) => out
                .attributes
                .map(from_item)
                .transpose()
                .map(|f| f.unwrap_or_else(|| Flow::new(channel.clone()))),
            Err(e) if is_update_conditional(&e) => self.get_flow(channel).await,
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn busy_channels(
        &self,
        tenant: &TenantId,
    ) -> StoreResult<std::collections::BTreeMap<ChannelId, converger_core::flow::BusyEntry>> {
        self.busy_read(tenant).await
    }

    async fn set_busy(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        entry: Option<converger_core::flow::BusyEntry>,
    ) -> StoreResult<()> {
        self.busy_write(tenant, channel, entry).await
    }

    async fn scan_flows(&self, limit: usize, from: Option<String>) -> StoreResult<Page<Flow>> {
        let out = self
            .client
            .scan()
            .table_name(&self.res.flow)
            .filter_expression("attribute_exists(channel_id)")
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .set_exclusive_start_key(from.map(|k| HashMap::from([("key".to_owned(), s(k))])))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect::<StoreResult<Vec<Flow>>>()?;
        let next = out
            .last_evaluated_key
            .and_then(|k| k.get("key").and_then(|v| v.as_s().ok()).cloned());
        Ok(Page { items, next })
    }

    async fn rate_take_n(
        &self,
        key: &str,
        limit: &converger_core::RateLimit,
        count: u32,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>> {
        self.schedule_take(key, limit, count, now_us).await
    }

    async fn rate_reserve(
        &self,
        channel: &ChannelId,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>> {
        self.schedule_reserve(&converger_ports::rate_key(channel), limit, n, now_us)
            .await
    }

    async fn park(&self, d: &Delivery, token: Option<&str>, now: Timestamp) -> StoreResult<bool> {
        let m = moves::park(token, now);
        match token {
            Some(token) => self.leased_move(&m, d, token).await,
            None => Ok(self.row_move(&m, &d.id, Some(d)).await?.is_some()),
        }
    }

    async fn unpark(
        &self,
        d: &Delivery,
        to: Placement,
        now: Timestamp,
    ) -> StoreResult<Option<Delivery>> {
        self.row_move(&moves::unpark(to, now), &d.id, Some(d)).await
    }

    async fn to_backlog(
        &self,
        d: &Delivery,
        token: &str,
        due_ms: i64,
        _now: Timestamp,
    ) -> StoreResult<bool> {
        self.leased_move(&moves::to_backlog(token, due_ms), d, token)
            .await
    }

    async fn leave_backlog(
        &self,
        id: &DeliveryId,
        now: Timestamp,
        slot_item: u32,
    ) -> StoreResult<Option<Delivery>> {
        self.row_move(&moves::leave_backlog(now.ms(), slot_item), id, None)
            .await
    }

    async fn leave_backlog_leased(
        &self,
        id: &DeliveryId,
        now: Timestamp,
        token: &str,
        lease_until_ms: i64,
        slot_item: u32,
    ) -> StoreResult<Option<Delivery>> {
        let m = moves::leave_backlog_leased(now.ms(), token, lease_until_ms, slot_item);
        self.row_move(&m, id, None).await
    }

    async fn backlog(
        &self,
        channel: &ChannelId,
        before_ms: i64,
        limit: usize,
    ) -> StoreResult<Vec<Waiting>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let out = self
            .client
            .query()
            .table_name(&self.res.deliveries)
            .index_name("by_backlog")
            .key_condition_expression("bl_pk = :ch AND bl_sk <= :before")
            .expression_attribute_values(":ch", s(channel.as_str()))
            .expression_attribute_values(":before", s(due_key(before_ms)))
            .limit(i32::try_from(limit.min(1000)).unwrap_or(1000))
            .send()
            .await
            .map_err(sdk_err)?;
        out.items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                Ok(Waiting {
                    id: entry_id(&item, "backlog")?,
                })
            })
            .collect()
    }

    async fn parked(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Delivery>> {
        let limit = limit.clamp(1, 1000);
        let shards = futures::future::try_join_all((0..CHANNEL_SHARDS).map(|i| async move {
            let out = self
                .client
                .query()
                .table_name(&self.res.deliveries)
                .index_name("by_channel_status_s")
                .key_condition_expression("cl_pk = :pk")
                .expression_attribute_values(
                    ":pk",
                    s(channel_listing_key(channel, DeliveryStatus::Paused, i)),
                )
                .limit(i32::try_from(limit).unwrap_or(1000))
                .send()
                .await
                .map_err(sdk_err)?;
            out.items
                .unwrap_or_default()
                .into_iter()
                .map(|item| entry_id(&item, "parked"))
                .collect::<StoreResult<Vec<_>>>()
        }))
        .await?;
        let ids: Vec<DeliveryId> = shards.into_iter().flatten().take(limit).collect();
        Ok(self
            .get_deliveries(&ids)
            .await?
            .into_iter()
            .filter(|d| d.status == DeliveryStatus::Paused)
            .collect())
    }

    async fn waiting_counts(&self, channel: &ChannelId) -> StoreResult<(u64, u64)> {
        let parked = futures::future::try_join_all((0..CHANNEL_SHARDS).map(|i| {
            self.count_upto(
                "by_channel_status_s",
                "cl_pk",
                channel_listing_key(channel, DeliveryStatus::Paused, i),
                u64::MAX,
            )
        }))
        .await?
        .into_iter()
        .sum();
        let backlog = self
            .count_upto("by_backlog", "bl_pk", channel.to_string(), u64::MAX)
            .await?;
        Ok((parked, backlog))
    }
}
