//! Ordered lanes (`core::lanes`, ADR 0067): the deliveries of an ordered channel to one
//! conversation reach the endpoint one at a time, in `seq` order. Each lane has a head, the
//! only one of its deliveries that may be attempted; the others wait, due only at a late
//! look at their lane, with no message. When the head ends (sent, handed off, or dead and
//! the channel skips), the next entry becomes the head, is made due and enqueued.
//!
//! Every step survives a crash. A delivery is written due at its first look (five minutes
//! on), so one that never joined its lane, or whose promotion was cut short, is found by the
//! sweeper and joins or takes the lane at its gate. A head that ended without letting go is
//! seen as ended by the next look at its lane, whoever looks.

use converger_core::lanes::{self, HeadState, LaneStep, OnDeadLetter};
use converger_core::{DeliveryId, DeliveryStatus};
use converger_ports::{
    Delivery, DeliveryMessage, DeliveryStore, LaneEntry, LaneStore, Queue, StoreError, StoreResult,
};

/// Lanes one look goes through at most before it leaves the rest to the next.
const MAX_STEPS: usize = 20;

/// What the gate decided for a delivery of an ordered channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneGate {
    /// It is its lane's head: attempt it.
    Go,
    /// Another delivery holds the lane: it waits (made due at a later look).
    Wait,
}

/// Where a delivery stands in its lane (the delivery view's `lane`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanePosition {
    /// The delivery that holds the lane (itself when it is the head).
    pub head: Option<DeliveryId>,
    /// The head was dead-lettered and the lane waits for its replay or a release.
    pub held: bool,
}

/// What a release of a held lane did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// The dead head no longer holds the lane; the next delivery goes.
    Past(DeliveryId),
    /// The lane is not held (no head, or a head that is not dead).
    NotHeld,
}

/// The lanes component: the narrow ports it moves deliveries with.
#[derive(Clone, Copy)]
pub struct Lanes<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) lanes: &'p dyn LaneStore,
    pub(crate) deliveries: &'p dyn DeliveryStore,
    pub(crate) queue: &'p dyn Queue,
    /// The first sleep of a waiting delivery (`LANE_RECHECK_MS`), in ms.
    pub(crate) recheck_ms: i64,
}

fn entry(d: &Delivery) -> Option<(String, LaneEntry)> {
    Some((
        d.lane()?,
        LaneEntry {
            seq: d.lane_seq?,
            delivery_id: d.id.clone(),
        },
    ))
}

/// A head's state, from its row (`core::lanes::HeadState::of`).
fn head_state(row: Option<&Delivery>) -> HeadState {
    HeadState::of(row.map(|r| r.status), row.is_some_and(|r| r.handed_off))
}

impl Lanes<'_> {
    /// When a new delivery of an ordered channel first looks at its lane (written with it).
    pub(crate) fn first_look(&self, now: converger_core::Timestamp) -> i64 {
        now.ms() + self.recheck_ms
    }

    /// New deliveries of ordered channels join their lanes, which then move (one of them
    /// may be the head at once). Failures are logged: the rows are due at their first look,
    /// when their gate does what was not done here.
    pub(crate) async fn joined(&self, rows: &[(&Delivery, OnDeadLetter)]) {
        for (d, on_dead) in rows {
            let Some((lane, e)) = entry(d) else { continue };
            let r = async {
                self.lanes.join_lane(&lane, &e, self.expiry(d)).await?;
                self.advance(&lane, *on_dead, None).await
            };
            if let Err(e) = r.await {
                tracing::warn!(delivery_id = %d.id, error = %e, "lane not joined; the delivery joins at its first look");
            }
        }
    }

    fn expiry(&self, d: &Delivery) -> i64 {
        d.expires_at
            .unwrap_or_else(|| self.clock.now().secs() + 30 * 86_400)
    }

    /// Moves a lane: a head that ended lets go (or holds the lane, by the channel's
    /// choice), and the first waiting delivery becomes the head, made due and enqueued.
    /// `ended`: a delivery whose end the caller has just written, and how it ended (its row
    /// is not read again).
    pub(crate) async fn advance(
        &self,
        lane: &str,
        on_dead: OnDeadLetter,
        mut ended: Option<(&DeliveryId, HeadState)>,
    ) -> StoreResult<()> {
        for _ in 0..MAX_STEPS {
            if let Some(h) = self.lanes.lane_head(lane).await? {
                let state = match ended.take() {
                    Some((id, state)) if *id == h.holder => state,
                    _ => head_state(self.deliveries.get_delivery(&h.holder).await?.as_ref()),
                };
                // Held while its head is a dead letter; a head replayed meanwhile keeps the
                // lane as any busy head, and one expired with its rows lets go.
                if h.held && state == HeadState::Dead {
                    return Ok(());
                }
                match lanes::step(state, on_dead) {
                    LaneStep::Wait => return Ok(()),
                    LaneStep::Hold => {
                        self.lanes.set_held(lane, &h.holder, true).await?;
                        tracing::info!(lane, head = %h.holder, "lane held behind its dead head");
                        return Ok(());
                    }
                    LaneStep::Advance => {
                        self.lanes.let_go(lane, &h.holder).await?;
                        continue;
                    }
                }
            }
            let Some(next) = self.lanes.lane_entries(lane, 1).await?.into_iter().next() else {
                return Ok(());
            };
            let row = self.deliveries.get_delivery(&next.delivery_id).await?;
            let Some(row) = row.filter(|r| {
                matches!(r.status, DeliveryStatus::Pending | DeliveryStatus::Paused)
                    && !r.handed_off
            }) else {
                // Ended (or expired) without being the head: it no longer waits.
                self.lanes.leave_lane(lane, &next).await?;
                continue;
            };
            let now = self.clock.now();
            // Due now before it is the head: a crash in between leaves it due, and its own
            // gate finishes the promotion. (A row an attempt holds keeps its lease.)
            if row.status == DeliveryStatus::Pending && row.lease_token.is_none() {
                self.deliveries.reschedule(&row, None, now.ms()).await?;
            }
            if !self
                .lanes
                .promote(lane, &next, now, self.expiry(&row))
                .await?
            {
                // Another look promoted first: see what it did.
                continue;
            }
            tracing::debug!(lane, head = %row.id, "lane head");
            // A paused head waits for its release like any parked delivery.
            if row.status == DeliveryStatus::Pending {
                self.enqueue(&row).await?;
            }
            return Ok(());
        }
        Ok(())
    }

    /// The gate of a claimed delivery of an ordered channel: the head goes; another waits,
    /// after its lane was looked at (a head that ended lets go here too).
    pub(crate) async fn admit(&self, d: &Delivery, on_dead: OnDeadLetter) -> StoreResult<LaneGate> {
        let Some((lane, e)) = entry(d) else {
            return Ok(LaneGate::Go);
        };
        if let Some(h) = self.lanes.lane_head(&lane).await?
            && h.holder == d.id
        {
            // A held head runs again only as a replay: the lane is no longer held.
            if h.held {
                self.lanes.set_held(&lane, &d.id, false).await?;
            }
            return Ok(LaneGate::Go);
        }
        self.lanes.join_lane(&lane, &e, self.expiry(d)).await?;
        self.advance(&lane, on_dead, None).await?;
        Ok(match self.lanes.lane_head(&lane).await? {
            Some(h) if h.holder == d.id => LaneGate::Go,
            _ => LaneGate::Wait,
        })
    }

    /// A claimed delivery that waits in its lane: its lease given back, due at its next
    /// look. `false` when the lease was lost.
    pub(crate) async fn wait(&self, d: &Delivery, token: &str) -> StoreResult<bool> {
        let now = self.clock.now();
        let created = d.created_at.ms();
        let at = now.ms() + lanes::recheck_ms(now.ms() - created, self.recheck_ms);
        if !self.deliveries.reschedule(d, Some(token), at).await? {
            return Ok(false);
        }
        // The lane may have been handed to it while it held its lease (the promotion could not
        // make a leased row due): due now, and on its way, instead of at its next look.
        if let Some(lane) = d.lane()
            && let Some(h) = self.lanes.lane_head(&lane).await?
            && h.holder == d.id
            && self.deliveries.reschedule(d, None, now.ms()).await?
        {
            self.enqueue(d).await?;
        }
        Ok(true)
    }

    /// Sends a lane's new head to its queue.
    async fn enqueue(&self, d: &Delivery) -> StoreResult<()> {
        let msg = DeliveryMessage::new(d.id.clone(), d.tier, None).of(d);
        self.queue.send(&msg, 0).await.map_err(StoreError::from)
    }

    /// After a delivery of an ordered channel ended its attempt (sent or handed off: `dead`
    /// false; dead-lettered: true): its lane moves. Failures are logged: the next look at the
    /// lane moves it.
    pub(crate) async fn after_outcome(&self, d: &Delivery, on_dead: OnDeadLetter, dead: bool) {
        let Some(lane) = d.lane() else { return };
        let state = if dead {
            HeadState::Dead
        } else {
            HeadState::Done
        };
        if let Err(e) = self.advance(&lane, on_dead, Some((&d.id, state))).await {
            tracing::warn!(delivery_id = %d.id, error = %e, "lane not moved; its next look moves it");
        }
    }

    /// Where a delivery stands in its lane, if it is in one and still waiting or running.
    pub async fn position(&self, d: &Delivery) -> StoreResult<Option<LanePosition>> {
        let Some(lane) = d.lane() else {
            return Ok(None);
        };
        if !matches!(
            d.status,
            DeliveryStatus::Pending | DeliveryStatus::Paused | DeliveryStatus::Failed
        ) {
            return Ok(None);
        }
        let head = self.lanes.lane_head(&lane).await?;
        Ok(Some(LanePosition {
            held: head.as_ref().is_some_and(|h| h.held),
            head: head.map(|h| h.holder),
        }))
    }

    /// Releases a lane held by its dead head: the head lets go and the next delivery goes.
    pub(crate) async fn release(&self, lane: &str, on_dead: OnDeadLetter) -> StoreResult<Released> {
        let Some(h) = self.lanes.lane_head(lane).await? else {
            return Ok(Released::NotHeld);
        };
        if !h.held || !self.lanes.let_go(lane, &h.holder).await? {
            return Ok(Released::NotHeld);
        }
        self.advance(lane, on_dead, None).await?;
        Ok(Released::Past(h.holder))
    }
}
