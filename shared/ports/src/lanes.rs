//! Ordered lanes' storage (`core::lanes`): one partition per lane, its head and its waiting
//! entries in `seq` order, read strongly consistent.

use crate::error::StoreResult;
use async_trait::async_trait;
use converger_core::{DeliveryId, Timestamp};

/// The delivery that holds a lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneHead {
    pub holder: DeliveryId,
    pub seq: u64,
    /// The holder was dead-lettered and the channel holds its lanes: the lane waits for a
    /// replay or a release.
    pub held: bool,
    /// When it became the head (RFC 3339).
    pub since: String,
}

/// A delivery waiting in its lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneEntry {
    pub seq: u64,
    pub delivery_id: DeliveryId,
}

/// One condition a lane move puts on the lane's items. Each move's list is declared once
/// ([`lane_moves`]): the in-process backend tests a lane with [`LaneGuard::admits`], DynamoDB
/// renders each guard as the condition of the item it names (its recorded requests are
/// pinned), so the two cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneGuard {
    /// The lane has no head.
    NoHead,
    /// Its head is this delivery.
    HeadedBy(DeliveryId),
    /// This entry waits in it.
    Waiting(LaneEntry),
}

impl LaneGuard {
    /// Whether a lane whose head is `head`, and in which `waits` tells which entries wait,
    /// meets it.
    pub fn admits(&self, head: Option<&LaneHead>, waits: impl Fn(&LaneEntry) -> bool) -> bool {
        match self {
            LaneGuard::NoHead => head.is_none(),
            LaneGuard::HeadedBy(d) => head.is_some_and(|h| &h.holder == d),
            LaneGuard::Waiting(e) => waits(e),
        }
    }

    /// Whether the lane meets every one of `guards`.
    pub fn all_admit(
        guards: &[LaneGuard],
        head: Option<&LaneHead>,
        waits: impl Fn(&LaneEntry) -> bool,
    ) -> bool {
        guards.iter().all(|g| g.admits(head, &waits))
    }
}

/// What each lane move asks of the lane, for both backends.
pub mod lane_moves {
    use super::{LaneEntry, LaneGuard};
    use converger_core::DeliveryId;

    /// An entry becomes the head: only of a lane without one, and only while it waits (two
    /// items in one transaction: the head put, the entry taken out).
    pub fn promote(entry: &LaneEntry) -> Vec<LaneGuard> {
        vec![LaneGuard::NoHead, LaneGuard::Waiting(entry.clone())]
    }

    /// The head let go, or its `held` set: only by the delivery that holds it.
    pub fn by_holder(holder: &DeliveryId) -> Vec<LaneGuard> {
        vec![LaneGuard::HeadedBy(holder.clone())]
    }
}

#[async_trait]
pub trait LaneStore: Send + Sync + 'static {
    /// Puts a delivery in its lane's waiting entries (again: the same entry).
    async fn join_lane(&self, lane: &str, entry: &LaneEntry, expires_at: i64) -> StoreResult<()>;
    /// Takes an entry out of the waiting ones (its delivery ended without becoming the head).
    async fn leave_lane(&self, lane: &str, entry: &LaneEntry) -> StoreResult<()>;
    /// The lane's head, if it has one.
    async fn lane_head(&self, lane: &str) -> StoreResult<Option<LaneHead>>;
    /// The first `limit` waiting entries, in order.
    async fn lane_entries(&self, lane: &str, limit: usize) -> StoreResult<Vec<LaneEntry>>;
    /// Makes `entry` the head of a lane that has none, and takes it out of the waiting
    /// entries, in one transaction; `false` when the lane has a head (or the entry is gone).
    async fn promote(
        &self,
        lane: &str,
        entry: &LaneEntry,
        now: Timestamp,
        expires_at: i64,
    ) -> StoreResult<bool>;
    /// Removes the head if `holder` holds it; whether it did.
    async fn let_go(&self, lane: &str, holder: &DeliveryId) -> StoreResult<bool>;
    /// Sets the head's `held` if `holder` holds it; whether it did.
    async fn set_held(&self, lane: &str, holder: &DeliveryId, held: bool) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_move_admits_only_the_lane_it_is_declared_for() {
        let entry = LaneEntry {
            seq: 2,
            delivery_id: DeliveryId::generate(),
        };
        let head = LaneHead {
            holder: DeliveryId::generate(),
            seq: 1,
            held: false,
            since: String::new(),
        };
        let waiting = |e: &LaneEntry| e == &entry;
        let gone = |_: &LaneEntry| false;
        // Promoted only into a lane without a head, and only while the entry waits.
        assert!(LaneGuard::all_admit(
            &lane_moves::promote(&entry),
            None,
            waiting
        ));
        assert!(!LaneGuard::all_admit(
            &lane_moves::promote(&entry),
            Some(&head),
            waiting
        ));
        assert!(!LaneGuard::all_admit(
            &lane_moves::promote(&entry),
            None,
            gone
        ));
        // Let go (or held) only by its holder.
        let by = |d: &DeliveryId, h: Option<&LaneHead>| {
            LaneGuard::all_admit(&lane_moves::by_holder(d), h, gone)
        };
        assert!(by(&head.holder, Some(&head)));
        assert!(!by(&entry.delivery_id, Some(&head)));
        assert!(!by(&head.holder, None));
    }
}
