//! Flow control state and its port: the breaker, the window's slots, the backlog and parking
//! marks of a channel (its flow item), rate-limit counters, and the delivery transitions flow
//! control makes (park, unpark, into and out of the backlog).

use crate::error::StoreResult;
use crate::keys::rate_key;
use crate::model::{Delivery, Page};
use async_trait::async_trait;
use converger_core::Timestamp;
use converger_core::flow::{BusyEntry, INITIAL_WINDOW};
use converger_core::{ChannelId, CircuitState, DeliveryId, TenantId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A channel's flow item. An absent item reads as a closed breaker with an empty window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub channel_id: ChannelId,
    #[serde(default)]
    pub circuit_state: CircuitState,
    /// When the breaker last changed state (ms since the epoch).
    #[serde(default)]
    pub circuit_changed_at: i64,
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The delivery running as the half-open probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// Window slots: delivery id -> when the slot was taken (ms). Queued or in flight.
    #[serde(default)]
    pub slots: BTreeMap<String, i64>,
    /// The adaptive window (never above the channel's `max_in_flight`).
    #[serde(default = "initial_window")]
    pub window: u32,
    /// Set while deliveries may wait in the channel's backlog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_at: Option<i64>,
    /// Set while deliveries of the channel may be parked (`paused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_at: Option<i64>,
    /// When the next probe is due (its message is on the probe queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_due: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success_at: Option<i64>,
    /// Consecutive failed attempts of any kind (auto-disable counts these).
    #[serde(default)]
    pub failed_attempts: u32,
    /// The latest health check's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_status: Option<converger_core::health::HealthStatus>,
}

fn initial_window() -> u32 {
    INITIAL_WINDOW
}

impl Flow {
    /// The state of a channel that has no flow item yet.
    pub fn new(channel_id: ChannelId) -> Self {
        Self {
            channel_id,
            circuit_state: CircuitState::Closed,
            circuit_changed_at: 0,
            consecutive_failures: 0,
            probe: None,
            slots: BTreeMap::new(),
            window: INITIAL_WINDOW,
            backlog_at: None,
            parked_at: None,
            probe_due: None,
            last_success_at: None,
            failed_attempts: 0,
            health_status: None,
        }
    }

    /// Slots free under `cap` (the window bounded by `max_in_flight`). A window spread over
    /// several slot items (`core::flow::slot_items`) is not known from this item alone: it
    /// answers the whole window, and the takes (item by item) decide.
    pub fn free_slots(&self, max: u32) -> usize {
        let cap = self.window.min(max).max(1);
        if converger_core::flow::slot_items(max) > 1 {
            return cap as usize;
        }
        (cap as usize).saturating_sub(self.slots.len())
    }

    pub fn holds(&self, id: &DeliveryId) -> bool {
        self.slots.contains_key(id.as_str())
    }
}

/// The result of asking for a window slot.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotTake {
    /// Taken (or, unless exclusive, already held by this delivery).
    Taken(Flow),
    /// Exclusive take: another taker already holds this delivery's slot.
    Held(Flow),
    /// The window is full.
    Full(Flow),
    /// The breaker is not closed: no slot is handed out.
    NotClosed(Flow),
}

impl SlotTake {
    /// The rule of a take of a slot on `f` for `delivery` under `cap`, which both backends
    /// follow (the DynamoDB condition is this, spelled as an expression): `None` if it takes
    /// one, else the answer. An exclusive take refuses a delivery that holds a slot already;
    /// nothing is handed out unless the breaker is closed; and a delivery without a slot finds
    /// the window full at `cap` (at least 1).
    pub fn refused(f: &Flow, delivery: &DeliveryId, cap: u32, exclusive: bool) -> Option<Self> {
        if exclusive && f.holds(delivery) {
            return Some(SlotTake::Held(f.clone()));
        }
        if f.circuit_state != CircuitState::Closed {
            return Some(SlotTake::NotClosed(f.clone()));
        }
        if !f.holds(delivery) && f.slots.len() >= cap.max(1) as usize {
            return Some(SlotTake::Full(f.clone()));
        }
        None
    }
}

/// The result of asking for a slot in a slot item of its own (a window of several items,
/// `core::flow::slot_items`; item 0 is the flow item, asked with [`FlowStore::take_slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemTake {
    /// Taken (or, unless exclusive, already held by this delivery).
    Taken,
    /// Exclusive take: another taker already holds this delivery's slot in the item.
    Held,
    /// The item holds its share of the window.
    Full,
}

/// A slot held in one of a channel's slot items, as the reconciliation reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSlot {
    /// The slot item (0: the flow item).
    pub item: u32,
    pub delivery: String,
    /// When the slot was taken (ms).
    pub taken_at: i64,
}

/// How an attempt ended, for the breaker's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Any success: resets `consecutive_failures`.
    Success,
    /// A transport error, 5xx, 408/425/429 or timeout: counts.
    Transient,
    /// A permanent error or an attempt that did not reach the endpoint: does not count.
    Neutral,
    /// Handed off to a client that has not confirmed it yet (websocket): the push went
    /// through, nothing is known of the delivery. Neither a success nor a failure.
    HandedOff,
    /// The channel's middleware stopped the delivery before any request: about the message,
    /// not the endpoint. Neither the breaker nor auto-disable counts it.
    Halted,
}

impl Outcome {
    /// Whether the attempt failed (of any kind): what auto-disable counts.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Transient | Self::Neutral)
    }
}

/// One write on a flow item after an attempt: the slot it frees, the breaker counters, the
/// window's new size.
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    pub free: Option<DeliveryId>,
    /// The delivery the freed slot goes to, in the same write (a finishing attempt handing
    /// its slot to the backlog row it runs next).
    pub pass_to: Option<DeliveryId>,
    pub outcome: Outcome,
    /// The attempt failed (of any kind): counts toward auto-disable.
    pub failed: bool,
    pub window: Option<u32>,
    pub now: Timestamp,
}

/// A conditional breaker transition: applies only if the breaker is in one of `from` (and,
/// when given, changed at `changed_at` / probes `probe`).
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from: Vec<CircuitState>,
    pub changed_at: Option<i64>,
    pub probe_is: Option<String>,
    pub to: CircuitState,
    /// The new probe (for `half_open`).
    pub probe: Option<String>,
    /// Reset `consecutive_failures` and restart the window small (on close).
    pub reset: bool,
    pub now: Timestamp,
}

impl Settle {
    /// What it writes on the flow item, the rule both backends follow: the slot given back
    /// (and handed on to `pass_to`, which keeps a slot it holds already), the counters of the
    /// outcome (a success resets both and is the last success; a transient failure counts one
    /// consecutive failure; `failed` counts one failed attempt), and the window. Giving a slot
    /// back needs the item: without one nothing was held, and nothing is written.
    pub fn apply(&self, f: &mut Flow) {
        if let Some(d) = &self.free {
            f.slots.remove(d.as_str());
            if let Some(next) = &self.pass_to {
                f.slots.entry(next.to_string()).or_insert(self.now.ms());
            }
        }
        match self.outcome {
            Outcome::Success => {
                f.consecutive_failures = 0;
                f.failed_attempts = 0;
                f.last_success_at = Some(self.now.ms());
            }
            Outcome::Transient => f.consecutive_failures += 1,
            Outcome::Neutral | Outcome::HandedOff | Outcome::Halted => {}
        }
        if self.failed {
            f.failed_attempts += 1;
        }
        if let Some(w) = self.window {
            f.window = w;
        }
    }

    /// Gives one delivery's slot back, nothing else.
    pub fn free(id: DeliveryId, now: Timestamp) -> Self {
        Self {
            free: Some(id),
            pass_to: None,
            outcome: Outcome::Neutral,
            failed: false,
            window: None,
            now,
        }
    }
}

impl Transition {
    /// From any of `from` to `to`, with no other condition and nothing else set.
    pub fn new(from: &[CircuitState], to: CircuitState, now: Timestamp) -> Self {
        Self {
            from: from.to_vec(),
            changed_at: None,
            probe_is: None,
            to,
            probe: None,
            reset: false,
            now,
        }
    }

    /// Only if the breaker last changed at `at` (nobody moved it since it was read).
    pub fn seen(mut self, at: i64) -> Self {
        self.changed_at = Some(at);
        self
    }

    /// Only if `probe` is the running probe.
    pub fn probed_by(mut self, probe: &str) -> Self {
        self.probe_is = Some(probe.to_owned());
        self
    }

    /// Names the new probe (for `half_open`).
    pub fn probe(mut self, probe: &str) -> Self {
        self.probe = Some(probe.to_owned());
        self
    }

    /// Resets the failure count and restarts the window small.
    pub fn reset(mut self) -> Self {
        self.reset = true;
        self
    }

    /// Whether it applies to `f` as stored now: the rule both backends follow (DynamoDB's
    /// condition is this, spelled as an expression; an item created by a mark has no change
    /// time yet and reads as 0).
    pub fn allows(&self, f: &Flow) -> bool {
        self.from.contains(&f.circuit_state)
            && self.changed_at.is_none_or(|c| c == f.circuit_changed_at)
            && self
                .probe_is
                .as_ref()
                .is_none_or(|p| f.probe.as_ref() == Some(p))
    }

    /// What it writes, on an item it [`allows`](Self::allows): the new state and its time,
    /// the probe (named, or gone), the probe's due mark gone, and on a reset the failure count
    /// and the window restarted.
    pub fn apply(&self, f: &mut Flow) {
        f.circuit_state = self.to;
        f.circuit_changed_at = self.now.ms();
        f.probe = self.probe.clone();
        f.probe_due = None;
        if self.reset {
            f.consecutive_failures = 0;
            f.window = converger_core::flow::INITIAL_WINDOW;
        }
    }
}

/// A mark on the flow item the sweeper looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Deliveries may wait in the backlog.
    Backlog,
    /// Deliveries may be parked.
    Parked,
    /// A probe message is scheduled for this time.
    ProbeDue,
}

impl Mark {
    /// The flow item's attribute that holds it.
    pub fn attribute(self) -> &'static str {
        match self {
            Mark::Backlog => "backlog_at",
            Mark::Parked => "parked_at",
            Mark::ProbeDue => "probe_due",
        }
    }

    /// Whether setting it again keeps the earliest time: the parked mark does (parked
    /// deliveries are released by their age); a probe's due time and the backlog mark take
    /// the newest.
    pub fn keeps_earliest(self) -> bool {
        self == Mark::Parked
    }

    fn slot(self, f: &mut Flow) -> &mut Option<i64> {
        match self {
            Mark::Backlog => &mut f.backlog_at,
            Mark::Parked => &mut f.parked_at,
            Mark::ProbeDue => &mut f.probe_due,
        }
    }

    /// A mark write on `f`, the rule both backends follow: set at `set_at` (see
    /// [`keeps_earliest`](Self::keeps_earliest)), or else cleared if it still reads `clear_if`.
    pub fn apply(self, f: &mut Flow, set_at: Option<i64>, clear_if: Option<i64>) {
        let keeps_earliest = self.keeps_earliest();
        let slot = self.slot(f);
        match (set_at, clear_if) {
            (Some(at), _) if keeps_earliest => {
                slot.get_or_insert(at);
            }
            (Some(at), _) => *slot = Some(at),
            (None, Some(seen)) if *slot == Some(seen) => *slot = None,
            _ => {}
        }
    }
}

/// Where an unparked delivery goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Into the backlog, fed as window slots free.
    Backlog,
    /// Straight to the queue (a probe, or a channel without a window).
    Live,
}

/// A delivery waiting in a backlog or parked, as the indexes return it.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub id: DeliveryId,
}

#[async_trait]
pub trait FlowStore: Send + Sync + 'static {
    /// The channel's flow item (strongly consistent); a default one when absent.
    async fn get_flow(&self, channel: &ChannelId) -> StoreResult<Flow>;

    /// Takes a window slot for `delivery` if the breaker is closed and fewer than `cap` slots
    /// are taken. Idempotent per delivery, unless `exclusive` (a feeder racing another for
    /// the same backlog row): then a slot already held answers `Held`.
    async fn take_slot(
        &self,
        channel: &ChannelId,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<SlotTake>;

    /// Records an attempt's end on the flow item; returns the item as it now is.
    async fn settle(&self, channel: &ChannelId, s: &Settle) -> StoreResult<Flow>;

    /// Takes a slot for `delivery` in slot item `item` (1 or more) if it holds fewer than
    /// `cap`. The breaker is not part of its condition (the flow item holds it): the caller
    /// decided on its view of the breaker. Idempotent per delivery, unless `exclusive`.
    async fn take_item_slot(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        cap: u32,
        now: Timestamp,
        exclusive: bool,
    ) -> StoreResult<ItemTake>;

    /// Gives `delivery`'s slot in slot item `item` (1 or more) back, handing it to `pass_to`
    /// in the same write when given. Nothing happens if the item does not hold it.
    async fn free_item_slot(
        &self,
        channel: &ChannelId,
        item: u32,
        delivery: &DeliveryId,
        pass_to: Option<&DeliveryId>,
        now: Timestamp,
    ) -> StoreResult<()>;

    /// The slots held in slot items 1 to `items - 1` of a channel (item 0's are the flow
    /// item's `slots`).
    async fn held_slots(&self, channel: &ChannelId, items: u32) -> StoreResult<Vec<HeldSlot>>;

    /// Frees the slots that are still held as they were (the sweeper's reconciliation), in
    /// whichever slot item each is. Returns how many were freed.
    async fn free_slots(&self, channel: &ChannelId, slots: &[HeldSlot]) -> StoreResult<usize>;

    /// A conditional breaker transition; `None` if another writer changed the breaker first.
    async fn transition(&self, channel: &ChannelId, t: &Transition) -> StoreResult<Option<Flow>>;

    /// Sets a mark (the parked mark keeps an earlier time; the others take the new one), or
    /// clears it if it still holds `clear_if`.
    async fn mark(
        &self,
        channel: &ChannelId,
        mark: Mark,
        set_at: Option<i64>,
        clear_if: Option<i64>,
    ) -> StoreResult<Flow>;

    /// The entries of a tenant's busy channels (`core::flow::tenant_window_bound`), live or
    /// not; eventually consistent.
    async fn busy_channels(&self, tenant: &TenantId)
    -> StoreResult<BTreeMap<ChannelId, BusyEntry>>;

    /// Writes `channel`'s entry in its tenant's busy set, or removes it (`None`).
    async fn set_busy(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        entry: Option<BusyEntry>,
    ) -> StoreResult<()>;

    /// Every flow item, a page at a time (the sweeper).
    async fn scan_flows(&self, limit: usize, from: Option<String>) -> StoreResult<Page<Flow>>;

    /// Takes one request from a channel's rate schedule (GCRA: `limit.count` at once, then
    /// one per interval, shared by every instance); `Err(retry_at_us)` when over the limit.
    async fn rate_take(
        &self,
        channel: &ChannelId,
        limit: &converger_core::RateLimit,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>> {
        self.rate_take_n(&rate_key(channel), limit, 1, now_us).await
    }

    /// Takes `n` requests at once (at most `limit.count`) from the rate schedule named `key`
    /// (`rate#<channel>`, `api#<API key id>`); `Err(retry_at_us)` when they do not fit.
    async fn rate_take_n(
        &self,
        key: &str,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>>;

    /// Reserves `n` places (at most `limit.count`) in a channel's rate schedule
    /// (`core::flow::RateLimit::reserve_n`): `Ok(start)`, the schedule's arrival time the
    /// places follow (at least `now_us`), or `Err(retry_at_us)` when they lie beyond the
    /// reservation horizon.
    async fn rate_reserve(
        &self,
        channel: &ChannelId,
        limit: &converger_core::RateLimit,
        n: u32,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>>;

    /// Parks a pending delivery: held under `token` (an attempt's lease), or, when `token` is
    /// `None`, one that no attempt holds (in the backlog or waiting for its message). `false`
    /// if it was neither.
    async fn park(&self, d: &Delivery, token: Option<&str>, now: Timestamp) -> StoreResult<bool>;

    /// Moves a parked delivery back to pending, due now; `None` if it is not parked.
    async fn unpark(
        &self,
        d: &Delivery,
        to: Placement,
        now: Timestamp,
    ) -> StoreResult<Option<Delivery>>;

    /// Moves a delivery held under `token` into its channel's backlog, due at `due_ms`.
    async fn to_backlog(
        &self,
        d: &Delivery,
        token: &str,
        due_ms: i64,
        now: Timestamp,
    ) -> StoreResult<bool>;

    /// Takes a delivery out of the backlog onto the queue, holding a slot in slot item
    /// `slot_item`; `None` if it is no longer waiting there.
    async fn leave_backlog(
        &self,
        id: &DeliveryId,
        now: Timestamp,
        slot_item: u32,
    ) -> StoreResult<Option<Delivery>>;

    /// [`Self::leave_backlog`] for a row its caller runs itself rather than through the queue:
    /// it leaves the backlog due now (`next_attempt_at` = `now`, in the due index at that
    /// time) and leased to `token` until `lease_until_ms`, in one write; its slot comes with
    /// the caller's settle write
    /// (`Settle::pass_to`). `None` if it is no longer waiting there.
    /// The slot it gets is in slot item `slot_item` (the caller's own).
    async fn leave_backlog_leased(
        &self,
        id: &DeliveryId,
        now: Timestamp,
        token: &str,
        lease_until_ms: i64,
        slot_item: u32,
    ) -> StoreResult<Option<Delivery>>;

    /// The oldest backlog deliveries of a channel due before `before_ms`.
    async fn backlog(
        &self,
        channel: &ChannelId,
        before_ms: i64,
        limit: usize,
    ) -> StoreResult<Vec<Waiting>>;

    /// Up to `limit` parked deliveries of a channel (unparking removes them from the next
    /// read, so callers read again until none are left).
    async fn parked(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Delivery>>;

    /// How many deliveries of a channel are parked and how many wait in its backlog.
    async fn waiting_counts(&self, channel: &ChannelId) -> StoreResult<(u64, u64)>;
}
