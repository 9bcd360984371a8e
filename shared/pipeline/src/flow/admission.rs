//! Admission: where a new delivery starts (live with a window slot, in the backlog, or
//! parked), and taking a slot.

use super::*;
use crate::outcome::FlowError;
use converger_core::flow::RateBatch;
use converger_core::flow::{active_slot_items, slot_item_choices, slot_item_share, slot_items};
use converger_core::ids::stable_hash;
use converger_core::{CircuitState, Tier};
use converger_ports::{
    Channel, Delivery, FlowJobKind, ItemTake, Mark, Settle, SlotTake, StoreResult,
};
use std::collections::HashMap;
use std::sync::Mutex;

/// How often one instance writes a channel's grown window: a success adds one slot, and the
/// successes of this long are written together, so that a window growing toward a large cap
/// does not write the flow item once per delivery.
const GROWTH_WRITE_MS: i64 = 250;

/// How often one instance sends a channel a feed job at most.
const FEED_JOB_EVERY: Duration = Duration::from_secs(2);

pub(super) type RefillLock = std::sync::Arc<tokio::sync::Mutex<()>>;

/// What this instance remembers for the window, reached from this file only.
pub(super) struct WindowCaches {
    /// Uncounted admissions per channel in the current second: (second, count).
    bursts: Mutex<HashMap<ChannelId, (i64, u32)>>,
    /// Places this instance reserved together in each channel's rate schedule.
    rate_batches: Mutex<HashMap<ChannelId, RateBatch>>,
    /// One reservation at a time per channel from this instance: the requests that find the
    /// batch used up wait for the one reserving rather than each writing the schedule.
    rate_refills: Mutex<HashMap<ChannelId, RefillLock>>,
    /// When this instance last sent a channel a feed job (`FlowJobKind::Feed`).
    feed_jobs: TtlCache<ChannelId, ()>,
    /// The window's growth this instance has not written yet, per channel: (when it last
    /// wrote a grown window, successes since).
    growth: Mutex<HashMap<ChannelId, (i64, u32)>>,
}

impl WindowCaches {
    pub(super) fn new() -> Self {
        Self {
            bursts: Default::default(),
            rate_batches: Default::default(),
            rate_refills: Default::default(),
            feed_jobs: TtlCache::new(FEED_JOB_EVERY),
            growth: Default::default(),
        }
    }
}

/// The answer to a slot request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Taken (or, unless exclusive, already held) in this slot item.
    Taken(u32),
    /// Exclusive take: another taker holds this delivery's slot.
    Held,
    /// The window is full.
    Full,
    /// The breaker is not closed.
    NotClosed,
}

impl Window<'_> {
    /// Takes a slot for `id` under the cap `cap`, asking again once when the window turned
    /// out larger than this instance knew. A window spread over several slot items
    /// (`core::flow::slot_items`) is asked item by item, each for its share of the window:
    /// the item the id's hash names among those with a share, then the next. The flow item
    /// (item 0) checks the breaker in the same write; the others are taken on this
    /// instance's view of it. `exclusive`: a feeder racing another for the same backlog row.
    ///
    /// The window is bounded by the tenant's share as well (`share.rs`): with other busy
    /// channels, by what they leave of it.
    pub(super) async fn take(
        &self,
        channel: &Channel,
        tier: Tier,
        id: &DeliveryId,
        cap: u32,
        exclusive: bool,
    ) -> StoreResult<Slot> {
        let now = self.clock.now();
        let most = self.share().most(channel, tier, cap).await;
        let mut ask = self.window_cap(channel, most);
        let items = slot_items(cap);
        if items > 1 && self.flow_state(&channel.id).await?.circuit_state != CircuitState::Closed {
            return Ok(Slot::NotClosed);
        }
        for _ in 0..2 {
            let active = active_slot_items(ask, items);
            let mut seen = None;
            for item in slot_item_choices(stable_hash(id.as_str()), active) {
                let item_cap = slot_item_share(ask, cap, item);
                if item == 0 {
                    let r = self
                        .flows
                        .take_slot(&channel.id, id, item_cap, now, exclusive)
                        .await?;
                    match r {
                        SlotTake::Taken(f) => {
                            self.remember_flow(&f);
                            return Ok(Slot::Taken(0));
                        }
                        SlotTake::Held(f) => {
                            self.remember_flow(&f);
                            return Ok(Slot::Held);
                        }
                        SlotTake::NotClosed(f) => {
                            self.remember_flow(&f);
                            return Ok(Slot::NotClosed);
                        }
                        SlotTake::Full(f) => {
                            self.remember_flow(&f);
                            seen = Some(f);
                        }
                    }
                } else {
                    match self
                        .flows
                        .take_item_slot(&channel.id, item, id, item_cap, now, exclusive)
                        .await?
                    {
                        ItemTake::Taken => return Ok(Slot::Taken(item)),
                        ItemTake::Held => return Ok(Slot::Held),
                        ItemTake::Full => {}
                    }
                }
            }
            // Full where it asked: unless the window is larger than it knew.
            if ask >= most {
                return Ok(Slot::Full);
            }
            // The flow item as the refused take returned it, else this instance's view (read
            // at most once per `flow_cache_ttl`: a window of several items is written rarely,
            // and a take that finds it full must not read it every time).
            let f = match seen {
                Some(f) => f,
                None => self.flow_state(&channel.id).await?,
            };
            let actual = f.window.min(most).max(1);
            if actual <= ask {
                return Ok(Slot::Full);
            }
            ask = actual;
        }
        Ok(Slot::Full)
    }

    /// Gives `id`'s slot in slot item `item` back (handing it to `pass_to` when given), with
    /// nothing else written: on the flow item for item 0, on the slot item otherwise.
    pub(crate) async fn free_slot(
        &self,
        channel: &ChannelId,
        id: &DeliveryId,
        item: u32,
    ) -> StoreResult<()> {
        let now = self.clock.now();
        if item == 0 {
            let f = self
                .flows
                .settle(channel, &Settle::free(id.clone(), now))
                .await?;
            self.remember_flow(&f);
        } else {
            self.flows
                .free_item_slot(channel, item, id, None, now)
                .await?;
        }
        Ok(())
    }

    /// Where a new delivery of `channel` goes; sets its row fields accordingly.
    pub(crate) async fn admit_new(
        &self,
        channel: &Channel,
        d: &mut Delivery,
    ) -> StoreResult<Admission> {
        let limits = self.limits(channel, d.tier);
        let Some(cap) = limits.cap else {
            let f = self.flow_state(&channel.id).await?;
            return Ok(if f.circuit_state == CircuitState::Closed {
                Admission::Live
            } else {
                d.status = converger_core::DeliveryStatus::Paused;
                Admission::Parked
            });
        };
        // An endpoint that keeps up (`core::flow::uncounted`) costs no slot write: the delivery
        // goes straight to the queue, up to a window's worth per second from this instance.
        // Beyond that a burst is counted: the window caps it, the backlog takes the rest.
        let f = self.flow_state(&channel.id).await?;
        if f.circuit_state == CircuitState::Closed
            && !self.counted(&limits, &f)
            && self.within_burst(&channel.id, cap)
        {
            return Ok(Admission::Live);
        }
        Ok(match self.take(channel, d.tier, &d.id, cap, false).await? {
            Slot::Taken(item) => {
                d.slot = true;
                d.slot_item = item;
                Admission::Live
            }
            Slot::Held | Slot::Full => {
                d.in_backlog = true;
                Admission::Backlog
            }
            Slot::NotClosed => {
                d.status = converger_core::DeliveryStatus::Paused;
                Admission::Parked
            }
        })
    }

    /// [`FlowControl::after_admission`] for rows already written: when its writes fail (the
    /// flow item throttled or the store down), the rows are safe but nothing may know of a
    /// backlog, so a feed job comes in a second (a queue send, not a store write) and comes
    /// back while rows wait. Parked rows wait for the breaker's probe, which the sweeper
    /// schedules for a parked channel it finds.
    pub(crate) async fn after_admission_or_feed_later(
        &self,
        channel: &Channel,
        tier: Tier,
        admission: Admission,
    ) {
        let Err(e) = self.after_admission(channel, tier, admission).await else {
            return;
        };
        tracing::warn!(channel_id = %channel.id, error = %e, ?admission, "flow marks not written");
        if admission == Admission::Backlog
            && let Err(e) = self
                .breaker()
                .send_flow_job(&channel.id, FlowJobKind::Feed, 1)
                .await
        {
            tracing::warn!(channel_id = %channel.id, error = %e, "feed job not sent: the sweeper feeds the backlog");
        }
    }

    /// After new deliveries were written into a backlog or parked: the marks the sweeper and
    /// the feed look for, and a feed if a slot freed meanwhile.
    pub(crate) async fn after_admission(
        &self,
        channel: &Channel,
        tier: Tier,
        admission: Admission,
    ) -> Result<(), FlowError> {
        match admission {
            Admission::Live | Admission::Lane | Admission::Filtered => Ok(()),
            Admission::Parked => {
                let (f, _) = self.ensure_mark(&channel.id, Mark::Parked).await?;
                self.breaker().ensure_probe(channel, &f).await
            }
            Admission::Backlog => {
                let (f, fresh) = self.ensure_mark(&channel.id, Mark::Backlog).await?;
                if let Some(cap) = self.limits(channel, tier).cap {
                    let most = self.share().most(channel, tier, cap).await;
                    self.share().busy(channel, f.window.min(most).max(1)).await;
                }
                // A slot freed between the full window and the mark finds no backlog flag:
                // feed now so that nothing waits for the sweeper (which also feeds every
                // marked backlog). A view that shows no free slot may be an instance's
                // cached one: the window as it is decides.
                if let Some(cap) = self.limits(channel, tier).cap {
                    let f = if fresh || f.free_slots(cap) > 0 {
                        f
                    } else {
                        let fresh = self.flows.get_flow(&channel.id).await?;
                        self.remember_flow(&fresh);
                        fresh
                    };
                    if f.free_slots(cap) > 0 {
                        let most = converger_core::flow::rows_to_feed_on_backlog(cap)
                            .unwrap_or(BACKLOG_PREFETCH);
                        self.backlog().feed(channel, tier, f, most).await?;
                    }
                    // The attempts that end hand their slots on, each from the item it was
                    // in, on their view of the backlog; a feed job in a second makes sure no
                    // row is left behind by views that missed it.
                    if slot_items(cap) > 1
                        && self.caches.window.feed_jobs.get(&channel.id).is_none()
                    {
                        self.caches.window.feed_jobs.insert(channel.id.clone(), ());
                        self.breaker()
                            .send_flow_job(&channel.id, FlowJobKind::Feed, 1)
                            .await?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl Window<'_> {
    /// Whether the channel's deliveries take window slots now (`core::flow::uncounted`).
    pub(super) fn counted(&self, limits: &Limits, flow: &Flow) -> bool {
        limits.cap.is_some_and(|cap| {
            !converger_core::flow::uncounted(
                limits.breaker.max_in_flight,
                flow.window,
                cap,
                flow.backlog_at.is_some(),
            )
        })
    }

    /// Counts one uncounted admission of `channel` in this second; `false` once this
    /// instance admitted `cap` of them (the rest of the second's burst is counted).
    pub(super) fn within_burst(&self, channel: &ChannelId, cap: u32) -> bool {
        let second = self.clock.now_ms() / 1000;
        let Ok(mut bursts) = self.caches.window.bursts.lock() else {
            return false;
        };
        if bursts.len() > 4096 {
            bursts.retain(|_, (s, _)| *s == second);
        }
        let entry = bursts.entry(channel.clone()).or_insert((second, 0));
        if entry.0 != second {
            *entry = (second, 0);
        }
        entry.1 += 1;
        entry.1 <= cap
    }

    /// The window to write after a success that grows `known` to `grown` (by one): the
    /// successes this instance saw since it last wrote a grown window, once
    /// [`GROWTH_WRITE_MS`] passed (or when the flow item is written anyway: `writes`);
    /// otherwise nothing now (the growth is kept for the next write).
    pub(super) fn grown_window(
        &self,
        channel: &ChannelId,
        known: u32,
        cap: u32,
        now: i64,
        writes: bool,
    ) -> Option<u32> {
        let Ok(mut growth) = self.caches.window.growth.lock() else {
            return Some(known.saturating_add(1).min(cap));
        };
        if growth.len() > 4096 {
            growth.retain(|_, (at, _)| now - *at < 60_000);
        }
        let entry = growth.entry(channel.clone()).or_insert((i64::MIN, 0));
        entry.1 = entry.1.saturating_add(1);
        if writes || now.saturating_sub(entry.0) >= GROWTH_WRITE_MS {
            let w = known.saturating_add(entry.1).min(cap);
            *entry = (now, 0);
            Some(w)
        } else {
            None
        }
    }

    /// A place in a channel's rate schedule for a request now (its time, µs): the next of the
    /// places this instance holds, else one of a batch reserved in the shared schedule (one
    /// write for up to [`RateLimit::batch_most`] requests; `core::flow::RateBatch`), one
    /// reservation at a time per channel. A busy schedule gives a later place, not a refusal;
    /// `Err(retry_at_us)` only when the place would lie beyond the reservation horizon.
    pub(crate) async fn rate_place(
        &self,
        channel: &ChannelId,
        rate: &RateLimit,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>> {
        if let Some(at) = self.held_place(channel, rate, now_us) {
            return Ok(Ok(at));
        }
        let refill = self.refill_lock(channel);
        let _one = refill.lock().await;
        // Another request of this instance may have reserved while this one waited.
        let now_us = now_us.max(self.clock.now_ms().saturating_mul(1000));
        if let Some(at) = self.held_place(channel, rate, now_us) {
            return Ok(Ok(at));
        }
        let n = match self.caches.window.rate_batches.lock() {
            Ok(mut batches) => batches
                .entry(channel.clone())
                .or_default()
                .next_size(rate.batch_most()),
            Err(_) => 1,
        };
        let start = match self.flows.rate_reserve(channel, rate, n, now_us).await? {
            Ok(start) => start,
            Err(retry_at) => return Ok(Err(retry_at)),
        };
        let Ok(mut batches) = self.caches.window.rate_batches.lock() else {
            return Ok(Ok(rate.place_us(start, 0, now_us)));
        };
        let b = batches.entry(channel.clone()).or_default();
        b.filled(n, start, now_us);
        Ok(Ok(b
            .take(rate, now_us)
            .unwrap_or_else(|| rate.place_us(start, 0, now_us))))
    }

    /// The next place this instance holds in the channel's schedule, if any.
    pub(super) fn held_place(
        &self,
        channel: &ChannelId,
        rate: &RateLimit,
        now_us: i64,
    ) -> Option<i64> {
        let mut batches = self.caches.window.rate_batches.lock().ok()?;
        if batches.len() > 4096 {
            batches.clear();
        }
        batches.get_mut(channel)?.take(rate, now_us)
    }

    pub(super) fn refill_lock(&self, channel: &ChannelId) -> RefillLock {
        match self.caches.window.rate_refills.lock() {
            Ok(mut locks) => {
                if locks.len() > 4096 {
                    locks.retain(|_, l| std::sync::Arc::strong_count(l) > 1);
                }
                locks.entry(channel.clone()).or_default().clone()
            }
            Err(_) => RefillLock::default(),
        }
    }

    /// The window size to ask for: the latest known window (however old), bounded by the cap.
    pub(super) fn window_cap(&self, channel: &Channel, cap: u32) -> u32 {
        self.caches
            .flows
            .get_stale(&channel.id)
            .map(|f| f.window)
            .unwrap_or(converger_core::flow::INITIAL_WINDOW)
            .min(cap)
            .max(1)
    }
}
