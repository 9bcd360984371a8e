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
