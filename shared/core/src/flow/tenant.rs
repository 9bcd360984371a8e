//! A tenant's share of its tier over all its channels. Each channel is held to
//! [`tier_share`](super::tier_share) on its own; a tenant with several busy channels (each
//! with a backlog: a channel that keeps up never holds more than its endpoint needs) shares
//! that same amount among them. The busy channels are listed on one item per tenant, each
//! with the window it last reported; a channel's window is bounded by an equal part of the
//! share and by what the others' windows leave of it.

/// How long a channel's entry in its tenant's busy set counts without being renewed (an
/// entry a crashed instance left behind stops counting after this).
pub const BUSY_TTL_MS: i64 = 60_000;

/// How often a busy channel renews its entry while its window moved by less than a quarter.
pub const BUSY_BEAT_MS: i64 = 15_000;

/// A channel's entry in its tenant's busy set: when it was written (ms) and the window the
/// channel had then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyEntry {
    pub at: i64,
    pub window: u32,
}

impl BusyEntry {
    /// Whether the entry still counts at `now`.
    pub fn live(&self, now: i64) -> bool {
        now.saturating_sub(self.at) < BUSY_TTL_MS
    }

    /// Whether a channel whose window is `window` at `now` writes its entry again: the
    /// window moved by a quarter or more (a window growing by one a success would otherwise
    /// write the tenant's item at every growth write of every instance), or the entry is due
    /// for renewal.
    pub fn stale_for(&self, window: u32, now: i64) -> bool {
        let moved = self.window.abs_diff(window);
        moved.saturating_mul(4) >= self.window.max(window).max(1)
            || now.saturating_sub(self.at) >= BUSY_BEAT_MS
    }
}

/// The most a channel may hold in flight because of its tenant's other busy channels, whose
/// live entries' windows are `others`; `None` when there are none (the channel's own bound
/// is all). An equal part of `share` among the busy channels, this one included, and never
/// more than the others' windows leave; at least one, so that every busy channel's own
/// attempts keep feeding its backlog.
pub fn tenant_window_bound(share: u32, others: impl IntoIterator<Item = u32>) -> Option<u32> {
    let (mut count, mut held) = (0u32, 0u32);
    for w in others {
        count = count.saturating_add(1);
        held = held.saturating_add(w);
    }
    if count == 0 {
        return None;
    }
    let equal = share / count.saturating_add(1);
    Some(equal.min(share.saturating_sub(held)).max(1))
}

/// [`tenant_window_bound`] for channel `me` among its tenant's busy-set `entries` at `now`:
/// the others' live entries count, its own and expired ones do not.
pub fn tenant_window_bound_beside(
    share: u32,
    me: &crate::ChannelId,
    entries: &std::collections::BTreeMap<crate::ChannelId, BusyEntry>,
    now: i64,
) -> Option<u32> {
    tenant_window_bound(
        share,
        entries
            .iter()
            .filter(|(c, e)| *c != me && e.live(now))
            .map(|(_, e)| e.window),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_second_busy_channel_gets_what_the_first_leaves_then_an_equal_part() {
        // Alone: no bound beyond the channel's own.
        assert_eq!(tenant_window_bound(50, []), None);
        // The first holds the whole share: the second keeps one slot.
        assert_eq!(tenant_window_bound(50, [50]), Some(1));
        // The first, seeing the second: half.
        assert_eq!(tenant_window_bound(50, [1]), Some(25));
        // The second, once the first came down to its half: the other half.
        assert_eq!(tenant_window_bound(50, [25]), Some(25));
        // A congested neighbour with a small window leaves the equal part, no more.
        assert_eq!(tenant_window_bound(50, [3]), Some(25));
        assert_eq!(tenant_window_bound(50, [16, 16]), Some(16));
        // More busy channels than the share: one each.
        assert_eq!(tenant_window_bound(4, [1; 9]), Some(1));
    }

    #[test]
    fn a_channel_is_bounded_by_the_others_live_entries_only() {
        let (me, other, gone) = (
            crate::ChannelId::generate(),
            crate::ChannelId::generate(),
            crate::ChannelId::generate(),
        );
        let entries = std::collections::BTreeMap::from([
            (me.clone(), BusyEntry { at: 0, window: 40 }),
            (other, BusyEntry { at: 0, window: 10 }),
            (
                gone,
                BusyEntry {
                    at: -BUSY_TTL_MS,
                    window: 40,
                },
            ),
        ]);
        assert_eq!(tenant_window_bound_beside(50, &me, &entries, 1), Some(25));
        assert_eq!(
            tenant_window_bound_beside(50, &me, &entries, BUSY_TTL_MS),
            None
        );
    }

    #[test]
    fn entries_expire_and_are_renewed_when_the_window_moves() {
        let e = BusyEntry { at: 0, window: 10 };
        assert!(e.live(BUSY_TTL_MS - 1));
        assert!(!e.live(BUSY_TTL_MS));
        assert!(!e.stale_for(10, BUSY_BEAT_MS - 1));
        assert!(e.stale_for(10, BUSY_BEAT_MS));
        // A quarter's move is written; less waits for the renewal.
        assert!(!e.stale_for(9, 1) && !e.stale_for(12, 1));
        assert!(e.stale_for(7, 1) && e.stale_for(14, 1));
        let small = BusyEntry { at: 0, window: 1 };
        assert!(
            small.stale_for(2, 1),
            "a small window's every step is a quarter"
        );
    }

    proptest! {
        /// Channels that each take what their bound allows, in turn, end with equal parts
        /// that add up to at most the share (one each when there are more channels than
        /// the share), however large each started.
        #[test]
        fn busy_windows_settle_on_equal_parts_within_the_share(
            share in 1u32..2000,
            start in proptest::collection::vec(1u32..2000, 2..40),
        ) {
            let n = start.len();
            let mut w = start;
            for _ in 0..3 {
                for i in 0..n {
                    let others = w.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, v)| *v);
                    w[i] = tenant_window_bound(share, others).unwrap_or(share);
                }
            }
            let part = (share / n as u32).max(1);
            prop_assert!(w.iter().all(|v| *v == part), "{w:?}");
            prop_assert!(w.iter().sum::<u32>() <= share.max(n as u32));
        }
    }
}
