//! The moves of a delivery's row outside its outcomes (the lease given back, renewed or taken
//! back; park, unpark, into and out of the backlog), each declared once as data: what it asks of the row ([`RowGuard`]s) and what it sets
//! ([`RowSet`]s). The in-memory backend applies a [`RowMove`] to its row; the DynamoDB backend
//! renders the same move as one conditional update (the attributes, and the index keys that
//! follow from them), whose recorded requests are pinned. The two cannot drift apart.

use crate::model::Delivery;
use converger_core::{DeliveryStatus, Timestamp};

/// One condition a flow move puts on a delivery's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowGuard {
    /// Its status is this.
    Status(DeliveryStatus),
    /// Held by the attempt whose lease token this is.
    LeasedTo(String),
    /// Held by no attempt.
    Unleased,
    /// Waiting in its channel's backlog.
    InBacklog,
    /// Due by this time (`next_attempt_at <= ms`).
    DueBy(i64),
    /// Its lease ends at exactly this time (the lease a reader saw, not renewed since).
    LeaseEndsAt(i64),
    /// At least one of these.
    AnyOf(Vec<RowGuard>),
}

impl RowGuard {
    /// Whether `row` meets it.
    pub fn admits(&self, row: &Delivery) -> bool {
        match self {
            RowGuard::Status(s) => row.status == *s,
            RowGuard::LeasedTo(t) => row.lease_token.as_deref() == Some(t.as_str()),
            RowGuard::Unleased => row.lease_token.is_none(),
            RowGuard::InBacklog => row.in_backlog,
            RowGuard::DueBy(ms) => row.next_attempt_at <= *ms,
            RowGuard::LeaseEndsAt(ms) => row.lease_until == Some(*ms),
            RowGuard::AnyOf(any) => any.iter().any(|g| g.admits(row)),
        }
    }

    /// Whether `row` meets every one of `guards`.
    pub fn all_admit(guards: &[RowGuard], row: &Delivery) -> bool {
        guards.iter().all(|g| g.admits(row))
    }
}

/// Where a move leaves a pending row waiting. Each place drops the others, and a row in any
/// of them is carried by no message of its own (`Delivery::watched` cleared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowPlace {
    /// In the due index, due at this time (ms): `next_attempt_at` is set to it.
    Due(i64),
    /// In its channel's backlog, due at this time (ms): `next_attempt_at` is set to it.
    Backlog(i64),
    /// In neither (a row leaving `pending`).
    Nowhere,
}

/// One change a flow move makes to a delivery's row, in the model's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowSet {
    /// The status, with `updated_at` (the move's time) and the listings it moves the row in;
    /// the row is listed from then on.
    Status(DeliveryStatus, Timestamp),
    /// Held by the attempt with this lease token until `until_ms`.
    Lease { token: String, until_ms: i64 },
    /// Its lease renewed until this time.
    LeaseUntil(i64),
    /// Held by no attempt.
    Unleased,
    /// Due at this time (ms) without a move of its place: a row its messages carry stays
    /// carried by them.
    NextAttemptAt(i64),
    /// Holds a window slot in this slot item.
    Slot(u32),
    /// Will hold its slot in this slot item (the slot itself comes with a later write).
    SlotItem(u32),
    /// Holds no window slot.
    NoSlot,
    /// Where it waits.
    Place(RowPlace),
}

/// A flow move on a delivery's row: what it asks, what it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMove {
    pub guards: Vec<RowGuard>,
    pub sets: Vec<RowSet>,
}

impl RowMove {
    /// Whether `row` meets every guard.
    pub fn admits(&self, row: &Delivery) -> bool {
        RowGuard::all_admit(&self.guards, row)
    }

    /// `row` as the move leaves it (the guards are the caller's to test).
    pub fn apply(&self, row: &mut Delivery) {
        for set in &self.sets {
            match set {
                RowSet::Status(s, at) => {
                    row.status = *s;
                    row.updated_at = *at;
                    row.unlisted = false;
                }
                RowSet::Lease { token, until_ms } => {
                    row.lease_token = Some(token.clone());
                    row.lease_until = Some(*until_ms);
                }
                RowSet::LeaseUntil(until_ms) => row.lease_until = Some(*until_ms),
                RowSet::Unleased => {
                    row.lease_token = None;
                    row.lease_until = None;
                }
                RowSet::NextAttemptAt(at) => row.next_attempt_at = *at,
                RowSet::Slot(item) => {
                    row.slot = true;
                    row.slot_item = *item;
                }
                RowSet::SlotItem(item) => row.slot_item = *item,
                RowSet::NoSlot => {
                    row.slot = false;
                    row.slot_item = 0;
                }
                RowSet::Place(place) => {
                    row.watched = false;
                    row.in_backlog = matches!(place, RowPlace::Backlog(_));
                    if let RowPlace::Due(at) | RowPlace::Backlog(at) = place {
                        row.next_attempt_at = *at;
                    }
                }
            }
        }
    }
}

/// Each move on a delivery's row, for both backends.
pub mod moves {
    use super::{RowGuard, RowMove, RowPlace, RowSet};
    use crate::flow::Placement;
    use crate::model::Delivery;
    use converger_core::{DeliveryStatus, Timestamp};

    /// Where a row leaving its lease waits until `at_ms`: its messages carry a first try in
    /// flight or a watched retry (it stays in no index), the due index anything else.
    fn due_again(d: &Delivery, at_ms: i64) -> RowSet {
        if d.carried_by_messages() {
            RowSet::NextAttemptAt(at_ms)
        } else {
            RowSet::Place(RowPlace::Due(at_ms))
        }
    }

    /// The lease `token` holds on `d` given back without an attempt (the attempt could not
    /// start), due when it was.
    pub fn release(d: &Delivery, token: &str) -> RowMove {
        let mut sets = vec![RowSet::Unleased];
        if !d.carried_by_messages() {
            sets.push(RowSet::Place(RowPlace::Due(d.next_attempt_at)));
        }
        RowMove {
            guards: vec![RowGuard::LeasedTo(token.to_owned())],
            sets,
        }
    }

    /// The lease given back and `d` due at `at_ms`; with no `token`, a pending row no attempt
    /// holds made due then.
    pub fn reschedule(d: &Delivery, token: Option<&str>, at_ms: i64) -> RowMove {
        let guards = match token {
            Some(t) => vec![RowGuard::LeasedTo(t.to_owned())],
            None => vec![
                RowGuard::Status(DeliveryStatus::Pending),
                RowGuard::Unleased,
            ],
        };
        RowMove {
            guards,
            sets: vec![RowSet::Unleased, due_again(d, at_ms)],
        }
    }

    /// The lease `token` holds renewed until `until_ms`.
    pub fn extend_lease(token: &str, until_ms: i64) -> RowMove {
        RowMove {
            guards: vec![RowGuard::LeasedTo(token.to_owned())],
            sets: vec![RowSet::LeaseUntil(until_ms)],
        }
    }

    /// The lease that ended at `until_ms` taken back from an attempt that died: the row
    /// waits in the due index, due at `now_ms`.
    pub fn requeue_expired(until_ms: i64, now_ms: i64) -> RowMove {
        RowMove {
            guards: vec![
                RowGuard::Status(DeliveryStatus::Pending),
                RowGuard::LeaseEndsAt(until_ms),
            ],
            sets: vec![RowSet::Unleased, RowSet::Place(RowPlace::Due(now_ms))],
        }
    }

    /// Parked by its attempt (`token`), or, when no attempt holds it, from the backlog or
    /// while it waits for its due time: out of every place, its lease and slot dropped.
    pub fn park(token: Option<&str>, now: Timestamp) -> RowMove {
        let guards = match token {
            Some(t) => vec![RowGuard::LeasedTo(t.to_owned())],
            None => vec![
                RowGuard::Status(DeliveryStatus::Pending),
                RowGuard::AnyOf(vec![RowGuard::InBacklog, RowGuard::Unleased]),
            ],
        };
        RowMove {
            guards,
            sets: vec![
                RowSet::Status(DeliveryStatus::Paused, now),
                RowSet::Unleased,
                RowSet::NoSlot,
                RowSet::Place(RowPlace::Nowhere),
            ],
        }
    }

    /// Unparked (only a parked row), pending again and due `now`, in the backlog or the
    /// due index.
    pub fn unpark(to: Placement, now: Timestamp) -> RowMove {
        let place = match to {
            Placement::Backlog => RowPlace::Backlog(now.ms()),
            Placement::Live => RowPlace::Due(now.ms()),
        };
        RowMove {
            guards: vec![RowGuard::Status(DeliveryStatus::Paused)],
            sets: vec![
                RowSet::Status(DeliveryStatus::Pending, now),
                RowSet::Place(place),
            ],
        }
    }

    /// Into the backlog, due at `due_ms`, by the attempt that holds it (its lease and slot
    /// given up).
    pub fn to_backlog(token: &str, due_ms: i64) -> RowMove {
        RowMove {
            guards: vec![RowGuard::LeasedTo(token.to_owned())],
            sets: vec![
                RowSet::Unleased,
                RowSet::NoSlot,
                RowSet::Place(RowPlace::Backlog(due_ms)),
            ],
        }
    }

    /// Out of the backlog into a freed slot of slot item `slot_item`, due at `now_ms`.
    pub fn leave_backlog(now_ms: i64, slot_item: u32) -> RowMove {
        RowMove {
            guards: vec![
                RowGuard::Status(DeliveryStatus::Pending),
                RowGuard::InBacklog,
            ],
            sets: vec![
                RowSet::Slot(slot_item),
                RowSet::Place(RowPlace::Due(now_ms)),
            ],
        }
    }

    /// Out of the backlog and leased to `token` until `until_ms` at once, only once it is
    /// due (`now_ms`); its slot, in slot item `slot_item`, comes with its caller's settle
    /// write.
    pub fn leave_backlog_leased(
        now_ms: i64,
        token: &str,
        until_ms: i64,
        slot_item: u32,
    ) -> RowMove {
        RowMove {
            guards: vec![
                RowGuard::Status(DeliveryStatus::Pending),
                RowGuard::InBacklog,
                RowGuard::DueBy(now_ms),
            ],
            sets: vec![
                RowSet::Lease {
                    token: token.to_owned(),
                    until_ms,
                },
                RowSet::SlotItem(slot_item),
                RowSet::Place(RowPlace::Due(now_ms)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Placement;
    use crate::model::test_delivery as delivery;

    const T: Timestamp = Timestamp::from_ms(1_000_000);

    #[test]
    fn each_flow_move_admits_only_the_rows_it_names() {
        let now = 1_000_000;
        let mut d = delivery(now);
        let admits = |m: RowMove, d: &Delivery| m.admits(d);
        // Waiting for its due time, held by no attempt.
        assert!(admits(moves::park(None, T), &d));
        assert!(!admits(moves::park(Some("tok"), T), &d));
        assert!(!admits(moves::unpark(Placement::Live, T), &d));
        assert!(!admits(moves::leave_backlog(now, 0), &d));
        // Held by an attempt: only that attempt parks it or moves it to the backlog.
        d.lease_token = Some("tok".into());
        assert!(!admits(moves::park(None, T), &d));
        assert!(admits(moves::park(Some("tok"), T), &d));
        assert!(!admits(moves::park(Some("other"), T), &d));
        assert!(admits(moves::to_backlog("tok", now), &d));
        // In the backlog (a lease left on the row does not keep it from parking).
        d.in_backlog = true;
        assert!(admits(moves::park(None, T), &d));
        assert!(admits(moves::leave_backlog(now, 0), &d));
        d.next_attempt_at = now + 1;
        assert!(
            !admits(moves::leave_backlog_leased(now, "t", now, 0), &d),
            "not due yet"
        );
        assert!(admits(
            moves::leave_backlog_leased(now + 1, "t", now, 0),
            &d
        ));
        // Parked: only unparked.
        d.status = DeliveryStatus::Paused;
        assert!(admits(moves::unpark(Placement::Backlog, T), &d));
        assert!(!admits(moves::park(None, T), &d));
        assert!(!admits(moves::leave_backlog(now, 0), &d));
    }

    #[test]
    fn a_lease_given_back_leaves_a_carried_row_to_its_messages() {
        let now = Timestamp::from_ms(2_000_000);
        let mut d = delivery(1_000_000);
        d.unlisted = true;
        d.lease_token = Some("tok".into());
        assert!(d.carried_by_messages());
        let m = moves::release(&d, "tok");
        assert!(m.admits(&d) && !moves::release(&d, "other").admits(&d));
        assert_eq!(m.sets, [RowSet::Unleased]);
        m.apply(&mut d);
        assert!(d.lease_token.is_none() && d.carried_by_messages());

        d.unlisted = false;
        d.lease_token = Some("tok".into());
        d.lease_until = Some(1_900_000);
        let m = moves::reschedule(&d, Some("tok"), 2_500_000);
        assert_eq!(m.sets[1], RowSet::Place(RowPlace::Due(2_500_000)));
        assert!(
            !moves::requeue_expired(1_900_001, now.ms()).admits(&d),
            "renewed since"
        );
        assert!(moves::requeue_expired(1_900_000, now.ms()).admits(&d));
        m.apply(&mut d);
        assert_eq!((d.lease_until, d.next_attempt_at), (None, 2_500_000));
        assert!(moves::reschedule(&d, None, 0).admits(&d));
    }

    #[test]
    fn each_flow_move_leaves_the_row_in_one_place_and_carried_by_no_message() {
        let now = Timestamp::from_ms(2_000_000);
        let mut d = delivery(1_000_000);
        d.watched = true;
        d.lease_token = Some("tok".into());
        d.lease_until = Some(1_500_000);
        d.slot = true;
        d.slot_item = 3;
        moves::to_backlog("tok", 2_500_000).apply(&mut d);
        assert!(d.in_backlog && !d.watched && !d.slot && d.slot_item == 0);
        assert_eq!(
            (d.lease_token.as_deref(), d.next_attempt_at),
            (None, 2_500_000)
        );

        moves::leave_backlog_leased(2_600_000, "next", 2_700_000, 4).apply(&mut d);
        assert!(
            !d.in_backlog && !d.slot,
            "its slot comes with the settle write"
        );
        assert_eq!(
            (
                d.lease_token.as_deref(),
                d.lease_until,
                d.slot_item,
                d.next_attempt_at
            ),
            (Some("next"), Some(2_700_000), 4, 2_600_000)
        );

        d.watched = true;
        moves::park(Some("next"), now).apply(&mut d);
        assert_eq!((d.status, d.updated_at), (DeliveryStatus::Paused, now));
        assert!(!d.watched && !d.in_backlog && !d.slot && d.lease_token.is_none());

        d.unlisted = true;
        moves::unpark(Placement::Live, now).apply(&mut d);
        assert_eq!(
            (d.status, d.next_attempt_at),
            (DeliveryStatus::Pending, now.ms())
        );
        assert!(!d.unlisted && !d.in_backlog);

        d.in_backlog = true;
        moves::leave_backlog(now.ms() + 1, 2).apply(&mut d);
        assert!(!d.in_backlog && d.slot && d.slot_item == 2);
        assert_eq!(d.next_attempt_at, now.ms() + 1);
    }
}
