//! The in-process backend of [`LaneStore`].

use super::*;
use converger_core::Timestamp;

/// A lane as this backend keeps it: its head, and its waiting entries by entry key.
type Lane = (
    Option<LaneHead>,
    std::collections::BTreeMap<String, LaneEntry>,
);

fn key_of(entry: &LaneEntry) -> String {
    converger_core::lanes::entry_key(entry.seq, entry.delivery_id.as_str())
}

/// Whether `lane` meets a move's guards (`ports::lane_moves`).
fn admits(guards: &[LaneGuard], lane: &Lane) -> bool {
    LaneGuard::all_admit(guards, lane.0.as_ref(), |e| lane.1.contains_key(&key_of(e)))
}

#[async_trait]
impl LaneStore for MemStore {
    async fn join_lane(&self, lane: &str, entry: &LaneEntry, _expires_at: i64) -> StoreResult<()> {
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "lanes",
                        "<channel>#<conversation>",
                        lane,
                        120,
                    )]
                })?;
                s.lanes
                    .entry(lane.to_owned())
                    .or_default()
                    .1
                    .insert(key_of(entry), entry.clone());
                Ok(())
            },
        )
        .await
    }

    async fn leave_lane(&self, lane: &str, entry: &LaneEntry) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if let Some(l) = s.lanes.get_mut(lane) {
                l.1.remove(&key_of(entry));
            }
        })
    }

    async fn lane_head(&self, lane: &str) -> StoreResult<Option<LaneHead>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.lanes.get(lane).and_then(|l| l.0.clone()))
    }

    async fn lane_entries(&self, lane: &str, limit: usize) -> StoreResult<Vec<LaneEntry>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            s.lanes
                .get(lane)
                .map(|l| l.1.values().take(limit.max(1)).cloned().collect())
                .unwrap_or_default()
        })
    }

    async fn promote(
        &self,
        lane: &str,
        entry: &LaneEntry,
        now: Timestamp,
        _expires_at: i64,
    ) -> StoreResult<bool> {
        self.charged(
            |m| m.write,
            |s, meter| {
                // A transaction of two items: twice the units of each.
                meter.write(|| {
                    vec![
                        converger_ports::capacity::item_write(
                            "lanes",
                            "<channel>#<conversation>",
                            lane,
                            240,
                        ),
                        converger_ports::capacity::item_write(
                            "lanes",
                            "<channel>#<conversation>",
                            lane,
                            240,
                        ),
                    ]
                })?;
                let l = s.lanes.entry(lane.to_owned()).or_default();
                if !admits(&lane_moves::promote(entry), l) {
                    return Ok(false);
                }
                l.1.remove(&key_of(entry));
                l.0 = Some(LaneHead {
                    holder: entry.delivery_id.clone(),
                    seq: entry.seq,
                    held: false,
                    since: now.rfc3339(),
                });
                Ok(true)
            },
        )
        .await
    }

    async fn let_go(&self, lane: &str, holder: &DeliveryId) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.lanes.get_mut(lane) {
            Some(l) if admits(&lane_moves::by_holder(holder), l) => {
                l.0 = None;
                true
            }
            _ => false,
        })
    }

    async fn set_held(&self, lane: &str, holder: &DeliveryId, held: bool) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.lanes.get_mut(lane) {
            Some(l) if admits(&lane_moves::by_holder(holder), l) => {
                if let Some(h) = l.0.as_mut() {
                    h.held = held;
                }
                true
            }
            _ => false,
        })
    }
}
