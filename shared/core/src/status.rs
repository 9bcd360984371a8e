//! The delivery status machine.
//!
//! Rank: `pending` = `paused` < `sent` < `delivered` < `read`. `failed` is the dead letter.
//! Provider receipts only move a delivery forward; a late `delivered` after `read` is ignored;
//! a `failed` receipt applies from any status except `read`; nothing leaves `failed` but a
//! replay. `filtered` is off the path too: the channel's filter did not want the delivery, no
//! request was made, and nothing but a retry by hand leaves it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Paused,
    Sent,
    Delivered,
    Read,
    Failed,
    /// Its channel's filter did not want it: never attempted.
    Filtered,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 7] = [
        Self::Pending,
        Self::Paused,
        Self::Sent,
        Self::Delivered,
        Self::Read,
        Self::Failed,
        Self::Filtered,
    ];

    /// Position on the forward path; `None` for `failed`, which is off the path.
    pub fn rank(self) -> Option<u8> {
        match self {
            Self::Pending | Self::Paused => Some(0),
            Self::Sent => Some(1),
            Self::Delivered => Some(2),
            Self::Read => Some(3),
            Self::Failed | Self::Filtered => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Paused => "paused",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
            Self::Filtered => "filtered",
        }
    }

    /// Already accepted by the provider: a delivery in one of these states is never sent again.
    pub fn is_accepted(self) -> bool {
        matches!(self, Self::Sent | Self::Delivered | Self::Read)
    }

    /// Waiting for an attempt (or parked, which ranks like waiting).
    pub fn is_waiting(self) -> bool {
        matches!(self, Self::Pending | Self::Paused)
    }

    /// The status a provider receipt moves a delivery to, or `None` when the receipt must be
    /// ignored. Only `sent`, `delivered`, `read` and `failed` are receipts.
    pub fn apply_receipt(self, receipt: DeliveryStatus) -> Option<DeliveryStatus> {
        if self == Self::Filtered {
            // Never sent: no receipt can be about it.
            return None;
        }
        match receipt {
            Self::Failed => match self {
                Self::Read | Self::Failed => None,
                _ => Some(Self::Failed),
            },
            Self::Sent | Self::Delivered | Self::Read => {
                let (Some(cur), Some(new)) = (self.rank(), receipt.rank()) else {
                    // Nothing leaves `failed` but a replay.
                    return None;
                };
                (new > cur).then_some(receipt)
            }
            Self::Pending | Self::Paused | Self::Filtered => None,
        }
    }
}

/// What the change stream's consumer reads of a delivery row to tell what one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowFacts {
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub handed_off: bool,
    pub retry_count: u32,
}

/// What one write of a delivery row did (`old` `None`: the row is new), as the events and counts
/// that follow from it see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transition {
    /// A new row: a delivery created.
    pub created: bool,
    /// Announced as a status change: a new status, an attempt made (a failed one whose retry
    /// is to come included), or a hand-off to a client. A new row is announced only when it
    /// does not start as a plain pending delivery.
    pub announced: bool,
    /// Attempts the write recorded.
    pub tried: u32,
    /// Accepted by its endpoint for the first time (`sent`, or straight to a receipt's status).
    pub sent: bool,
    /// Dead-lettered (it became `failed`).
    pub dead_lettered: bool,
    /// A dead letter no more (a replay, or a release of a failed row).
    pub revived: bool,
    /// Replayed by someone (its `retry_count` grew).
    pub replayed: bool,
    /// Recorded `filtered` (only ever at its creation: a filter decides at ingest).
    pub filtered: bool,
    /// Filtered no more: retried by hand, to be attempted.
    pub unfiltered: bool,
}

impl Transition {
    pub fn of(old: Option<RowFacts>, new: RowFacts) -> Self {
        let was = |f: fn(&RowFacts) -> bool| old.as_ref().is_some_and(f);
        let tried = new.attempts.saturating_sub(old.map_or(0, |o| o.attempts));
        let changed = old.map(|o| o.status) != Some(new.status)
            || tried > 0
            || (new.handed_off && !was(|o| o.handed_off));
        let failed = |r: &RowFacts| r.status == DeliveryStatus::Failed;
        let filtered = |r: &RowFacts| r.status == DeliveryStatus::Filtered;
        let revived = was(failed) && !failed(&new);
        let unfiltered = was(filtered) && !filtered(&new);
        Self {
            created: old.is_none(),
            announced: changed && !(old.is_none() && new.status == DeliveryStatus::Pending),
            tried,
            sent: new.status.is_accepted() && !was(|o| o.status.is_accepted()),
            dead_lettered: failed(&new) && !was(failed),
            revived,
            replayed: (revived || unfiltered) && new.retry_count > old.map_or(0, |o| o.retry_count),
            filtered: filtered(&new) && !was(filtered),
            unfiltered,
        }
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown delivery status `{0}` (pending, paused, sent, delivered, read, failed, filtered)")]
pub struct UnknownStatus(pub String);

impl FromStr for DeliveryStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::DeliveryStatus::*;
    use super::*;
    use proptest::prelude::*;

    fn facts(status: DeliveryStatus, attempts: u32) -> RowFacts {
        RowFacts {
            status,
            attempts,
            handed_off: false,
            retry_count: 0,
        }
    }

    #[test]
    fn a_write_is_told_apart_by_what_it_changed() {
        let new = Transition::of(None, facts(Pending, 0));
        assert!(new.created && !new.announced);
        assert!(Transition::of(None, facts(Paused, 0)).announced);
        // A claim, a lease renewal, a slot taken: nothing to tell.
        assert_eq!(
            Transition::of(Some(facts(Pending, 0)), facts(Pending, 0)),
            Transition::default()
        );
        let retry = Transition::of(Some(facts(Pending, 0)), facts(Pending, 1));
        assert!(retry.announced && retry.tried == 1 && !retry.sent);
        let sent = Transition::of(Some(facts(Pending, 1)), facts(Sent, 2));
        assert!(sent.sent && sent.tried == 1);
        assert!(!Transition::of(Some(facts(Sent, 1)), facts(Read, 1)).sent);
        let dead = Transition::of(Some(facts(Pending, 2)), facts(Failed, 3));
        assert!(dead.dead_lettered && dead.announced);
        let mut again = facts(Pending, 0);
        again.retry_count = 1;
        let replay = Transition::of(Some(facts(Failed, 3)), again);
        assert!(replay.revived && replay.replayed && !replay.dead_lettered);
        let mut handed = facts(Pending, 1);
        handed.handed_off = true;
        assert!(Transition::of(Some(facts(Pending, 0)), handed).announced);
    }

    #[test]
    fn a_filtered_row_is_announced_counted_and_retried_by_hand() {
        let new = Transition::of(None, facts(Filtered, 0));
        assert!(new.created && new.announced && new.filtered);
        assert!(!new.dead_lettered && new.tried == 0);
        let mut again = facts(Pending, 0);
        again.retry_count = 1;
        let retried = Transition::of(Some(facts(Filtered, 0)), again);
        assert!(retried.unfiltered && retried.replayed && !retried.revived);
        for receipt in DeliveryStatus::ALL {
            assert_eq!(Filtered.apply_receipt(receipt), None);
        }
    }

    #[test]
    fn receipts_follow_the_reference_rules() {
        assert_eq!(Pending.apply_receipt(Delivered), Some(Delivered));
        assert_eq!(Sent.apply_receipt(Delivered), Some(Delivered));
        assert_eq!(Delivered.apply_receipt(Read), Some(Read));
        assert_eq!(
            Read.apply_receipt(Delivered),
            None,
            "late delivered after read"
        );
        assert_eq!(Delivered.apply_receipt(Sent), None);
        assert_eq!(Sent.apply_receipt(Failed), Some(Failed));
        assert_eq!(Delivered.apply_receipt(Failed), Some(Failed));
        assert_eq!(Read.apply_receipt(Failed), None);
        assert_eq!(Failed.apply_receipt(Read), None);
        assert_eq!(Paused.apply_receipt(Sent), Some(Sent));
    }

    #[test]
    fn parse_round_trips() {
        for s in DeliveryStatus::ALL {
            assert_eq!(s.as_str().parse::<DeliveryStatus>().unwrap(), s);
        }
        assert!("done".parse::<DeliveryStatus>().is_err());
    }

    fn any_status() -> impl Strategy<Value = DeliveryStatus> {
        proptest::sample::select(DeliveryStatus::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn receipts_never_move_backwards(cur in any_status(), receipt in any_status()) {
            if let Some(new) = cur.apply_receipt(receipt) {
                prop_assert_eq!(new, receipt);
                match (cur.rank(), new.rank()) {
                    (Some(a), Some(b)) => prop_assert!(b > a),
                    (Some(_), None) => prop_assert_ne!(cur, Read),
                    (None, _) => prop_assert!(false, "left failed"),
                }
            }
        }

        #[test]
        fn any_receipt_sequence_is_monotone(seq in proptest::collection::vec(any_status(), 0..12)) {
            let mut cur = Pending;
            for r in seq {
                let before = cur;
                if let Some(n) = cur.apply_receipt(r) { cur = n; }
                if before == Failed { prop_assert_eq!(cur, Failed); }
                if before == Read { prop_assert_eq!(cur, Read); }
            }
        }
    }
}
