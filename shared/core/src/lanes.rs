//! Ordered lanes: a channel that asks for it (`ordering: {"by": "conversation"}`) delivers
//! the activities of one conversation one at a time, in the order they were accepted (their
//! `seq`). Each (channel, conversation) is a lane with one head, the only delivery of the lane
//! that may be attempted; the others wait for it to finish. A retrying head holds only its own
//! lane. What a dead head does to its lane is the channel's choice: `hold` the lane until it
//! is replayed or released, or `skip` it.

use crate::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a lane is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderBy {
    /// One lane per conversation of the channel.
    Conversation,
}

/// What a dead-lettered head does to its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadLetter {
    /// The lane waits until the dead letter is replayed (it goes first, then the rest in
    /// order) or the lane is released past it.
    #[default]
    Hold,
    /// The lane goes on without it.
    Skip,
}

/// A channel's ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ordering {
    pub by: OrderBy,
    #[serde(default)]
    pub on_dead_letter: OnDeadLetter,
}

impl Ordering {
    /// `{"by": "conversation", "on_dead_letter": "hold" | "skip"}` (the default `hold`).
    pub fn parse(v: &Value) -> Result<Self, Invalid> {
        serde_json::from_value(v.clone()).map_err(|e| {
            Invalid::new(format!(
                "ordering must be {{\"by\": \"conversation\", \"on_dead_letter\": \"hold\" | \"skip\"}}: {e}"
            ))
        })
    }
}

/// Where a lane's entries sort: by `seq`, then by delivery id (two activities a producer gave
/// the same `seq` go in id order), zero-padded so that text order is number order.
pub fn entry_key(seq: u64, delivery_id: &str) -> String {
    format!("{seq:020}#{delivery_id}")
}

/// What a waiting delivery's gate does when its lane's head is another delivery, given that
/// head's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadState {
    /// Waiting, retrying, parked or being attempted: the lane waits for it.
    Busy,
    /// Sent (or further), or gone: it no longer holds the lane.
    Done,
    /// Dead-lettered.
    Dead,
}

impl HeadState {
    /// A head's state from its delivery's status (`None`: its row is gone): a hand-off to a
    /// websocket client ends it (the frame reached the client in order), a dead letter is
    /// `Dead`, anything waiting or parked is `Busy`.
    pub fn of(status: Option<crate::DeliveryStatus>, handed_off: bool) -> Self {
        use crate::DeliveryStatus::*;
        match status {
            None => Self::Done,
            Some(Pending) if handed_off => Self::Done,
            Some(Pending | Paused) => Self::Busy,
            Some(Failed) => Self::Dead,
            Some(Sent | Delivered | Read | Filtered) => Self::Done,
        }
    }
}

/// What the lane does about a head in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneStep {
    /// The head keeps the lane.
    Wait,
    /// The head lets go: the next entry becomes the head.
    Advance,
    /// The head keeps the lane, held until a replay or a release.
    Hold,
}

/// The rule: a finished head advances its lane; a dead one holds it or not by the channel's
/// choice; any other keeps it.
pub fn step(state: HeadState, on_dead_letter: OnDeadLetter) -> LaneStep {
    match (state, on_dead_letter) {
        (HeadState::Busy, _) => LaneStep::Wait,
        (HeadState::Done, _) | (HeadState::Dead, OnDeadLetter::Skip) => LaneStep::Advance,
        (HeadState::Dead, OnDeadLetter::Hold) => LaneStep::Hold,
    }
}

/// How long a delivery waiting in its lane sleeps before it looks at its lane again (a
/// safety net: the head's end wakes the next one at once). It grows with how long it has
/// waited, from `first_ms` (`LANE_RECHECK_MS`, 5 minutes) to an hour, so a lane held for a
/// day costs a few dozen looks per delivery, not one per sweep.
pub fn recheck_ms(waited_ms: i64, first_ms: i64) -> i64 {
    (waited_ms / 2).clamp(first_ms, first_ms.max(3_600_000))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn ordering_parses_with_hold_by_default_and_refuses_the_rest() {
        let o = Ordering::parse(&json!({"by": "conversation"})).unwrap();
        assert_eq!(o.on_dead_letter, OnDeadLetter::Hold);
        let o = Ordering::parse(&json!({"by": "conversation", "on_dead_letter": "skip"})).unwrap();
        assert_eq!(o.on_dead_letter, OnDeadLetter::Skip);
        for bad in [
            json!({}),
            json!({"by": "channel"}),
            json!({"by": "conversation", "on_dead_letter": "drop"}),
            json!({"by": "conversation", "extra": 1}),
            json!("conversation"),
        ] {
            assert!(Ordering::parse(&bad).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_value(o).unwrap(),
            json!({"by": "conversation", "on_dead_letter": "skip"})
        );
    }

    #[test]
    fn entries_sort_by_seq_as_numbers_then_by_id() {
        let mut keys = vec![
            entry_key(10, "dlv_a"),
            entry_key(9, "dlv_z"),
            entry_key(10, "dlv_0"),
            entry_key(u64::MAX, "dlv_a"),
        ];
        keys.sort();
        assert_eq!(
            keys,
            vec![
                entry_key(9, "dlv_z"),
                entry_key(10, "dlv_0"),
                entry_key(10, "dlv_a"),
                entry_key(u64::MAX, "dlv_a"),
            ]
        );
    }

    #[test]
    fn a_head_advances_its_lane_when_done_and_a_dead_one_by_the_channels_choice() {
        use HeadState::*;
        use OnDeadLetter::*;
        assert_eq!(step(Busy, Skip), LaneStep::Wait);
        assert_eq!(step(Busy, Hold), LaneStep::Wait);
        assert_eq!(step(Done, Hold), LaneStep::Advance);
        assert_eq!(step(Dead, Skip), LaneStep::Advance);
        assert_eq!(step(Dead, Hold), LaneStep::Hold);
    }

    #[test]
    fn a_heads_state_follows_its_delivery() {
        use crate::DeliveryStatus::*;
        assert_eq!(HeadState::of(None, false), HeadState::Done);
        assert_eq!(HeadState::of(Some(Pending), false), HeadState::Busy);
        assert_eq!(HeadState::of(Some(Pending), true), HeadState::Done);
        assert_eq!(HeadState::of(Some(Paused), false), HeadState::Busy);
        assert_eq!(HeadState::of(Some(Failed), false), HeadState::Dead);
        for s in [Sent, Delivered, Read] {
            assert_eq!(HeadState::of(Some(s), false), HeadState::Done);
        }
    }

    #[test]
    fn a_waiting_delivery_looks_again_less_often_the_longer_it_waits() {
        assert_eq!(recheck_ms(0, 300_000), 300_000);
        assert_eq!(recheck_ms(1_200_000, 300_000), 600_000);
        assert_eq!(recheck_ms(86_400_000, 300_000), 3_600_000);
        assert_eq!(recheck_ms(0, 1_000), 1_000);
    }
}
