//! The in-process backend of [`FlowStore`], with the DynamoDB backend's conditions.

use super::*;
use converger_core::Timestamp;

fn flow<'a>(s: &'a mut State, ch: &ChannelId) -> &'a mut Flow {
    s.flows
        .entry(ch.clone())
        .or_insert_with(|| Flow::new(ch.clone()))
}

/// The write of a channel's flow item (breaker, window and its slots).
fn flow_write(f: &Flow) -> converger_ports::capacity::Charge {
    converger_ports::capacity::item_write(
        "flow",
        "<channel>",
        f.channel_id.to_string(),
        converger_ports::capacity::item_size(f),
    )
}

/// The write of slot item `item` of a channel (its slots as they are written).
fn slot_item_write(
    channel: &ChannelId,
    item: u32,
    slots: &BTreeMap<String, i64>,
) -> converger_ports::capacity::Charge {
    converger_ports::capacity::item_write(
        "flow",
        "<channel>#slots#<n>",
        slot_item_key(channel, item),
        converger_ports::capacity::item_size(&serde_json::json!({
            "key": slot_item_key(channel, item),
            "slots": slots,
        })),
    )
}

/// The item of a tenant's busy channels, as the DynamoDB backend writes it.
fn busy_item(
    tenant: &TenantId,
    entries: &BTreeMap<ChannelId, converger_core::flow::BusyEntry>,
) -> (String, usize) {
    let key = converger_ports::keys::tenant_busy_key(tenant);
    let attrs: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(c, e)| {
            (
                format!("c_{c}"),
                serde_json::json!({"at": e.at, "w": e.window}),
            )
        })
        .collect();
    let size = converger_ports::capacity::item_size(&serde_json::json!({"key": key, "c": attrs}));
    (key, size)
}

/// The read of a channel's flow item (strongly consistent, as the DynamoDB backend's).
fn flow_read(f: &Flow) -> converger_ports::capacity::Charge {
    item_read_of("flow", "<channel>", f.channel_id.to_string(), Some(f), true)
}

impl MemStore {
    /// Makes move `m` on row `id` if the row meets its guards: the row as it leaves it,
    /// else `None`. Charged as DynamoDB charges the one conditional update (a refused one
    /// costs the item's units all the same).
    pub(crate) async fn row_move(
        &self,
        id: &DeliveryId,
        m: &RowMove,
    ) -> StoreResult<Option<Delivery>> {
        self.moved(id, m, true).await
    }

    /// [`Self::row_move`] for a flow move (park, unpark, the backlog's), not charged: the
    /// capacity model leaves them out, as it always has. Charged, a rate-limited channel
    /// offered 5,000 a second at a hundredth of the limits puts its backlog index key
    /// (`bl_pk`, the channel) at six times a partition's limit, and the hot-tenant scenario
    /// then runs minutes where it ran seconds: a limit of the backlog's key layout that the
    /// scenario does not report yet (docs/scaling.md).
    async fn flow_move(&self, id: &DeliveryId, m: &RowMove) -> StoreResult<Option<Delivery>> {
        self.moved(id, m, false).await
    }

    async fn moved(
        &self,
        id: &DeliveryId,
        m: &RowMove,
        charge: bool,
    ) -> StoreResult<Option<Delivery>> {
        let shards = self.due_write_shards();
        self.charged(
            |l| l.write,
            |s, meter| {
                let Some(row) = s.deliveries.get(id) else {
                    return Ok(None);
                };
                let after = m.admits(row).then(|| {
                    let mut after = row.clone();
                    m.apply(&mut after);
                    after
                });
                if charge {
                    let written = after.as_ref().unwrap_or(row);
                    meter.write(|| delivery_write(Some(row), Some(written), shards))?;
                }
                if let Some(after) = &after {
                    s.deliveries.insert(id.clone(), after.clone());
                    s.reindex(id);
                }
                Ok(after)
            },
        )
        .await
    }
}

#[async_trait]
impl FlowStore for MemStore {
    async fn get_flow(&self, channel: &ChannelId) -> StoreResult<Flow> {
        self.charged(
            |m| m.get,
            |s, meter| {
                let f = s
                    .flows
                    .get(channel)
                    .cloned()
                    .unwrap_or_else(|| Flow::new(channel.clone()));
                meter.read(|| vec![flow_read(&f)])?;
                Ok(f)
            },
        )
        .await
    }

    async fn take_slot(
        &self,
        channel: &ChannelId,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<SlotTake> {
        self.charged(
            |m| m.write,
            |s, meter| {
                let f = flow(s, channel);
                // Charged whether its condition holds or not.
                meter.write(|| vec![flow_write(f)])?;
                if let Some(refused) = SlotTake::refused(f, delivery, cap, exclusive) {
                    return Ok(refused);
                }
                f.slots.entry(delivery.to_string()).or_insert(now.ms());
                Ok(SlotTake::Taken(f.clone()))
            },
        )
        .await
    }

    async fn settle(&self, channel: &ChannelId, st: &Settle) -> StoreResult<Flow> {
        self.charged(
            |m| m.write,
            |s, meter| {
                if st.free.is_some() && !s.flows.contains_key(channel) {
                    return Ok(Flow::new(channel.clone()));
                }
                let f = flow(s, channel);
                meter.write(|| vec![flow_write(f)])?;
                st.apply(f);
                Ok(f.clone())
            },
        )
        .await
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
        self.charged(
            |m| m.write,
            |s, meter| {
                let slots = s.slot_items.entry((channel.clone(), item)).or_default();
                meter.write(|| vec![slot_item_write(channel, item, slots)])?;
                let held = slots.contains_key(delivery.as_str());
                if exclusive && held {
                    return Ok(ItemTake::Held);
                }
                if !held && slots.len() >= cap.max(1) as usize {
                    return Ok(ItemTake::Full);
                }
                slots.entry(delivery.to_string()).or_insert(now.ms());
                Ok(ItemTake::Taken)
            },
        )
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
        self.charged(
            |m| m.write,
            |s, meter| {
                let Some(slots) = s.slot_items.get_mut(&(channel.clone(), item)) else {
                    return Ok(());
                };
                meter.write(|| vec![slot_item_write(channel, item, slots)])?;
                if slots.remove(delivery.as_str()).is_some()
                    && let Some(next) = pass_to
                {
                    slots.entry(next.to_string()).or_insert(now.ms());
                }
                Ok(())
            },
        )
        .await
    }

    async fn held_slots(&self, channel: &ChannelId, items: u32) -> StoreResult<Vec<HeldSlot>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            (1..items)
                .filter_map(|i| s.slot_items.get(&(channel.clone(), i)).map(|m| (i, m)))
                .flat_map(|(item, m)| {
                    m.iter().map(move |(d, at)| HeldSlot {
                        item,
                        delivery: d.clone(),
                        taken_at: *at,
                    })
                })
                .collect()
        })
    }

    async fn free_slots(&self, channel: &ChannelId, slots: &[HeldSlot]) -> StoreResult<usize> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let mut freed = 0;
            for h in slots {
                let held = if h.item == 0 {
                    s.flows.get_mut(channel).map(|f| &mut f.slots)
                } else {
                    s.slot_items.get_mut(&(channel.clone(), h.item))
                };
                if let Some(m) = held
                    && m.get(&h.delivery) == Some(&h.taken_at)
                {
                    m.remove(&h.delivery);
                    freed += 1;
                }
            }
            freed
        })
    }

    async fn transition(&self, channel: &ChannelId, t: &Transition) -> StoreResult<Option<Flow>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let f = flow(s, channel);
            if !t.allows(f) {
                return None;
            }
            t.apply(f);
            Some(f.clone())
        })
    }

    async fn mark(
        &self,
        channel: &ChannelId,
        mark: Mark,
        set_at: Option<i64>,
        clear_if: Option<i64>,
    ) -> StoreResult<Flow> {
        wait(&self.latency, |m| m.write).await;
        if self.mark_fails() {
            return Err(StoreError::Unavailable(
                "ProvisionedThroughputExceededException: flow mark (injected)".into(),
            ));
        }
        self.with(|s| {
            let f = flow(s, channel);
            mark.apply(f, set_at, clear_if);
            f.clone()
        })
    }

    async fn busy_channels(
        &self,
        tenant: &TenantId,
    ) -> StoreResult<BTreeMap<ChannelId, converger_core::flow::BusyEntry>> {
        self.charged(
            |m| m.get,
            |s, meter| {
                let entries = s.busy.get(tenant).cloned().unwrap_or_default();
                let (key, size) = busy_item(tenant, &entries);
                meter.read(|| {
                    vec![converger_ports::capacity::item_read(
                        "flow",
                        "busy#<tenant>",
                        key.clone(),
                        if entries.is_empty() { 0 } else { size },
                        false,
                    )]
                })?;
                Ok(entries)
            },
        )
        .await
    }

    async fn set_busy(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        entry: Option<converger_core::flow::BusyEntry>,
    ) -> StoreResult<()> {
        self.charged(
            |m| m.write,
            |s, meter| {
                let entries = s.busy.entry(tenant.clone()).or_default();
                let (key, before) = busy_item(tenant, entries);
                let mut after = entries.clone();
                match entry {
                    Some(e) => after.insert(channel.clone(), e),
                    None => after.remove(channel),
                };
                let (_, size) = busy_item(tenant, &after);
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "flow",
                        "busy#<tenant>",
                        key.clone(),
                        size.max(before),
                    )]
                })?;
                *entries = after;
                Ok(())
            },
        )
        .await
    }

    async fn scan_flows(&self, limit: usize, from: Option<String>) -> StoreResult<Page<Flow>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let mut all: Vec<&Flow> = s
                .flows
                .values()
                .filter(|f| from.as_deref().is_none_or(|k| f.channel_id.as_str() > k))
                .collect();
            all.sort_by(|a, b| a.channel_id.as_str().cmp(b.channel_id.as_str()));
            let limit = limit.max(1);
            let next = (all.len() > limit).then(|| all[limit - 1].channel_id.to_string());
            Page {
                items: all.into_iter().take(limit).cloned().collect(),
                next,
            }
        })
    }

    async fn rate_take_n(
        &self,
        key: &str,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>> {
        self.schedule_write(key, |tat| {
            limit.decide_n(tat, now_us, n).map(|next| (next, ()))
        })
        .await
    }

    async fn rate_reserve(
        &self,
        channel: &ChannelId,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>> {
        let n = n.clamp(1, limit.count.max(1));
        self.schedule_write(&converger_ports::rate_key(channel), |tat| {
            limit.reserve_n(tat, now_us, n)
        })
        .await
    }

    async fn park(&self, d: &Delivery, token: Option<&str>, now: Timestamp) -> StoreResult<bool> {
        Ok(self
            .flow_move(&d.id, &moves::park(token, now))
            .await?
            .is_some())
    }

    async fn unpark(
        &self,
        d: &Delivery,
        to: Placement,
        now: Timestamp,
    ) -> StoreResult<Option<Delivery>> {
        self.flow_move(&d.id, &moves::unpark(to, now)).await
    }

    async fn to_backlog(
        &self,
        d: &Delivery,
        token: &str,
        due_ms: i64,
        _now: Timestamp,
    ) -> StoreResult<bool> {
        Ok(self
            .flow_move(&d.id, &moves::to_backlog(token, due_ms))
            .await?
            .is_some())
    }

    async fn leave_backlog(
        &self,
        id: &DeliveryId,
        now: Timestamp,
        slot_item: u32,
    ) -> StoreResult<Option<Delivery>> {
        self.flow_move(id, &moves::leave_backlog(now.ms(), slot_item))
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
        self.flow_move(id, &m).await
    }

    async fn backlog(
        &self,
        channel: &ChannelId,
        before_ms: i64,
        limit: usize,
    ) -> StoreResult<Vec<Waiting>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            s.backlog
                .range((channel.clone(), i64::MIN, DeliveryId::generate())..)
                .take_while(|(c, due, _)| c == channel && *due <= before_ms)
                .take(limit)
                .map(|(_, _, id)| Waiting { id: id.clone() })
                .collect()
        })
    }

    async fn parked(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Delivery>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            s.parked
                .iter()
                .skip_while(|(c, _)| c != channel)
                .take_while(|(c, _)| c == channel)
                .take(limit)
                .filter_map(|(_, id)| s.deliveries.get(id).cloned())
                .collect()
        })
    }

    async fn waiting_counts(&self, channel: &ChannelId) -> StoreResult<(u64, u64)> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let parked = s.parked.iter().filter(|(c, _)| c == channel).count();
            let backlog = s.backlog.iter().filter(|(c, _, _)| c == channel).count();
            (parked as u64, backlog as u64)
        })
    }
}

impl MemStore {
    /// One conditional write of the rate schedule `key` (charged as DynamoDB charges it, a
    /// refused one too): `decide` gets its arrival time and answers the new one with what
    /// the caller gets, or `Err` (nothing written).
    async fn schedule_write<T: Send>(
        &self,
        key: &str,
        decide: impl Fn(Option<i64>) -> Result<(i64, T), i64> + Send + Sync,
    ) -> StoreResult<Result<T, i64>> {
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "flow",
                        if key.starts_with("api#") {
                            "api#<key>"
                        } else {
                            "rate#<channel>"
                        },
                        key,
                        64,
                    )]
                })?;
                let tat = s.rates.get(key).copied();
                Ok(decide(tat).map(|(next, out)| {
                    s.rates.insert(key.to_owned(), next);
                    out
                }))
            },
        )
        .await
    }
}
