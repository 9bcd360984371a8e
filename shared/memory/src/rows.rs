//! The deliveries "table" of the in-process backend, with its change stream: every write of a
//! row is recorded with the row before and after it, in the order the writes happened, as
//! DynamoDB Streams records them for the deliveries table (`NEW_AND_OLD_IMAGES`). The feed
//! keeps [`RETAINED`] records at most (the stream's 24 hours stand-in): a consumer that
//! falls that far behind loses the oldest, as it would on AWS.

use converger_core::DeliveryId;
use converger_ports::{Delivery, RowChange};
use std::collections::{HashMap, VecDeque};

/// Records the feed keeps.
pub const RETAINED: usize = 200_000;

/// The in-process stream's one shard.
pub const SHARD: &str = "shardId-memory-0";

#[derive(Default)]
pub(crate) struct Rows {
    map: HashMap<DeliveryId, Delivery>,
    feed: VecDeque<(u64, Option<Delivery>, Option<Delivery>)>,
    next: u64,
}

fn record(
    feed: &mut VecDeque<(u64, Option<Delivery>, Option<Delivery>)>,
    next: &mut u64,
    old: Option<Delivery>,
    new: Option<Delivery>,
) {
    if old == new {
        return;
    }
    *next += 1;
    feed.push_back((*next, old, new));
    while feed.len() > RETAINED {
        feed.pop_front();
    }
}

impl Rows {
    pub(crate) fn get(&self, id: &DeliveryId) -> Option<&Delivery> {
        self.map.get(id)
    }

    pub(crate) fn contains_key(&self, id: &DeliveryId) -> bool {
        self.map.contains_key(id)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Delivery> {
        self.map.values()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Writes a row (a new one, or in place of the one there).
    pub(crate) fn insert(&mut self, id: DeliveryId, row: Delivery) -> Option<Delivery> {
        let new = Some(row.clone());
        let old = self.map.insert(id, row);
        record(&mut self.feed, &mut self.next, old.clone(), new);
        old
    }

    /// The row to change in place: the change is recorded when the guard goes.
    pub(crate) fn get_mut(&mut self, id: &DeliveryId) -> Option<RowMut<'_>> {
        let row = self.map.get_mut(id)?;
        Some(RowMut {
            old: Some(row.clone()),
            row,
            feed: &mut self.feed,
            next: &mut self.next,
        })
    }

    /// The records after `after`, at most `max`, oldest first.
    pub(crate) fn changes(&self, after: u64, max: usize) -> Vec<RowChange> {
        let start = self.feed.partition_point(|(n, _, _)| *n <= after);
        self.feed
            .iter()
            .skip(start)
            .take(max)
            .map(|(n, old, new)| RowChange {
                event_id: format!("mem-{n}"),
                seq: converger_ports::seq_key(&n.to_string()),
                old: old.clone(),
                new: new.clone(),
            })
            .collect()
    }
}

/// A row being changed in place; its change is recorded when it is dropped.
pub(crate) struct RowMut<'a> {
    row: &'a mut Delivery,
    old: Option<Delivery>,
    feed: &'a mut VecDeque<(u64, Option<Delivery>, Option<Delivery>)>,
    next: &'a mut u64,
}

impl std::ops::Deref for RowMut<'_> {
    type Target = Delivery;
    fn deref(&self) -> &Delivery {
        self.row
    }
}

impl std::ops::DerefMut for RowMut<'_> {
    fn deref_mut(&mut self) -> &mut Delivery {
        self.row
    }
}

impl Drop for RowMut<'_> {
    fn drop(&mut self) {
        let new = Some(self.row.clone());
        record(self.feed, self.next, self.old.take(), new);
    }
}
