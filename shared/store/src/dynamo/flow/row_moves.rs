//! The moves of a delivery's row (`ports::moves`), rendered: each [`RowMove`]'s guards as
//! the update's condition and its sets as the attributes, and the index keys that follow from
//! them, it sets or removes. The in-memory backend applies the same moves to its rows.

use super::super::*;
use converger_ports::{RowMove, RowPlace, RowSet};

impl DynamoStore {
    /// Makes move `m` on row `id` outside any lease (`row`: the row as its caller read it,
    /// which a status set needs for the listings it moves the row in): the new row, `None`
    /// if it did not meet the guards.
    pub(in crate::dynamo) async fn row_move(
        &self,
        m: &RowMove,
        id: &DeliveryId,
        row: Option<&Delivery>,
    ) -> StoreResult<Option<Delivery>> {
        let u = self.row_sets(m, id, row).await?;
        self.row_update(id, guarded(u, &m.guards)).await
    }

    /// Makes move `m`, whose one guard is the lease of `token`, on `d`; whether it was made
    /// (`leased_update` adds the guard, with its own reading of a refusal).
    pub(in crate::dynamo) async fn leased_move(
        &self,
        m: &RowMove,
        d: &Delivery,
        token: &str,
    ) -> StoreResult<bool> {
        debug_assert_eq!(m.guards, [RowGuard::LeasedTo(token.to_owned())]);
        let u = self.row_sets(m, &d.id, Some(d)).await?;
        self.leased_update(d, token, u).await
    }

    /// `m`'s sets as an update of row `id`.
    async fn row_sets(
        &self,
        m: &RowMove,
        id: &DeliveryId,
        row: Option<&Delivery>,
    ) -> StoreResult<Update> {
        let needs_row =
            || row.ok_or_else(|| StoreError::Corrupt(format!("a move of {id} needs its row")));
        if m.sets
            .iter()
            .any(|x| matches!(x, RowSet::Place(RowPlace::Due(_))))
        {
            self.refresh_due_grants().await;
        }
        let mut u = Update::new();
        for set in &m.sets {
            u = match set {
                RowSet::Status(st, at) => {
                    let u = u
                        .set("status", s(st.as_str()))
                        .set("updated_at", s(at.rfc3339().as_str()));
                    listed(u, needs_row()?, *st, *at)
                }
                RowSet::Lease { token, until_ms } => u
                    .set("lease_token", s(token))
                    .set("lease_until", n(*until_ms)),
                RowSet::LeaseUntil(until_ms) => u.set("lease_until", n(*until_ms)),
                RowSet::Unleased => u.remove_each(LEASE),
                RowSet::NextAttemptAt(at) => u.set("next_attempt_at", n(*at)),
                RowSet::Slot(item) => u
                    .set("slot", AttributeValue::Bool(true))
                    .set("slot_item", n(*item)),
                RowSet::SlotItem(item) => u.set("slot_item", n(*item)),
                RowSet::NoSlot => u.remove_each(SLOT),
                RowSet::Place(RowPlace::Due(at)) => self
                    .placed_due(u.set("next_attempt_at", n(*at)), id, *at)
                    .remove_each(BACKLOG_PLACE),
                RowSet::Place(RowPlace::Backlog(at)) => into_backlog(
                    u.set("next_attempt_at", n(*at)),
                    &needs_row()?.channel_id,
                    *at,
                )
                .remove_each(DUE_PLACE),
                RowSet::Place(RowPlace::Nowhere) => u.remove_each(
                    DUE_PLACE
                        .into_iter()
                        .chain(BACKLOG_PLACE)
                        .chain(["watched"]),
                ),
            };
        }
        Ok(u)
    }
}

/// `u` with `guards` as its condition, in their order.
fn guarded(u: Update, guards: &[RowGuard]) -> Update {
    guards.iter().fold(u, guard)
}

fn guard(u: Update, g: &RowGuard) -> Update {
    match g {
        RowGuard::Status(st) => u.when_eq("status", s(st.as_str())),
        RowGuard::LeasedTo(t) => u.when_eq("lease_token", s(t)),
        RowGuard::Unleased => u.when_absent("lease_token"),
        RowGuard::InBacklog => u.when_exists("bl_pk"),
        RowGuard::DueBy(ms) => u.when_cmp("next_attempt_at", Cmp::Le, n(*ms), false),
        RowGuard::LeaseEndsAt(ms) => u.when_eq("lease_until", n(*ms)),
        RowGuard::AnyOf(any) => u.when_one_of(|u| any.iter().fold(u, guard)),
    }
}
