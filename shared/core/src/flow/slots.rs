//! The layout of a channel's window slots: the flow item alone for a small window, slot items
//! of their own for a large one, which item a delivery takes its slot in, and how many backlog
//! rows a take may feed.

use super::MaxInFlight;
use crate::channel::{Tier, TierConcurrency};

/// Slot ids one slot item holds at most once a window spans several: a delivery id and the
/// time its slot was taken are about 40 bytes, so an item of 8 stays well under the 1 KB a
/// write unit buys.
pub const SLOTS_PER_ITEM: u32 = 8;

/// The largest window that lives on the flow item alone (one item, as small channels always
/// had): 16 slot ids, under 1 KB with the breaker's fields.
pub const SINGLE_ITEM_WINDOW: u32 = 16;

/// How many slot items the window of a channel whose cap (`max_in_flight`, resolved) is
/// `cap` is spread over. A cap of up to [`SINGLE_ITEM_WINDOW`] is the flow item's own slot
/// map, as small channels always had; a larger one is split into items of at most
/// [`SLOTS_PER_ITEM`] (item 0 is still the flow item, the others are items of their own), so
/// that no key is written by every delivery of a busy channel: at 2,000 deliveries a second,
/// a cap of 2,000 is 250 items, each written 16 times a second. The count follows the cap,
/// not the adaptive window, so a slot stays in the item it was taken in however the window
/// moves, and no item ever holds more than its share of the cap: the endpoint never sees
/// more than `max_in_flight` at once.
pub fn slot_items(cap: u32) -> u32 {
    if cap <= SINGLE_ITEM_WINDOW {
        1
    } else {
        cap.div_ceil(SLOTS_PER_ITEM)
    }
}

/// Item `item`'s part of `total` slots divided over `items` items as evenly as it goes (the
/// parts add up to `total`).
pub fn slot_item_cap(total: u32, items: u32, item: u32) -> u32 {
    let items = items.max(1);
    total / items + u32::from(item < total % items)
}

/// The items that share a window of `window` slots out of the `items` of the cap: all of
/// them once the window has a slot for each, else the first `window` (one slot each), so
/// that even a small window's takes are spread over as many keys as it has slots.
pub fn active_slot_items(window: u32, items: u32) -> u32 {
    window.clamp(1, items.max(1))
}

/// What slot item `item` may hold while the window is `window` under the cap `cap`: its part
/// of the window divided over the cap's items (the parts add up to the window). A part never
/// exceeds the item's part of the cap, however the window moves, so no item holds more than
/// that and the endpoint never sees more than `cap` at once.
pub fn slot_item_share(window: u32, cap: u32, item: u32) -> u32 {
    slot_item_cap(window.min(cap), slot_items(cap), item)
}

/// The slot items a delivery tries, in order, among the `active` ones: the one its id's
/// stable hash names, then the next (a full item does not send a delivery to the backlog
/// while its neighbour has room).
pub fn slot_item_choices(hash: u32, active: u32) -> Vec<u32> {
    let active = active.max(1);
    let first = hash % active;
    if active == 1 {
        vec![first]
    } else {
        vec![first, (first + 1) % active]
    }
}

/// The most slot items a channel whose in-flight setting is `max` may have slots in, over
/// every tier its tenant may be on: what the reconciliation reads.
pub fn slot_item_bound(max: MaxInFlight, consumers: TierConcurrency) -> u32 {
    Tier::ALL
        .into_iter()
        .filter_map(|t| max.resolve(t, consumers))
        .map(slot_items)
        .max()
        .unwrap_or(1)
}

/// How many backlog rows a finishing attempt of a window with cap `cap` feeds: a window of
/// several items cannot tell how many slots are free, so it feeds the slot it gave back (none
/// when it handed that slot to a row already) and the slots its write grew the window by
/// (`grew`: without them a backlog would be fed at the pace of the window it started with,
/// the growth used only by the feed jobs); `None` for a window of one item, whose slots say
/// how many are free.
pub fn rows_to_feed_after_attempt(cap: u32, handed_on: bool, grew: u32) -> Option<usize> {
    let grew = grew as usize;
    match slot_items(cap) {
        1 => None,
        _ if handed_on => Some(grew),
        _ => Some(1 + grew),
    }
}

/// How many full takes a feed of a window with cap `cap` tries past before it stops: none
/// for a window of one item (full is full), a few for one of several items, where a row is
/// refused when the two items its id names are full while others may have room.
pub fn full_takes_past(cap: u32) -> usize {
    if slot_items(cap) > 1 { 3 } else { 0 }
}

/// How many backlog rows a delivery that went into the backlog feeds: its own share for a
/// window of several items (the attempts that end feed the rest), `None` for one item.
pub fn rows_to_feed_on_backlog(cap: u32) -> Option<usize> {
    (slot_items(cap) > 1).then_some(1)
}

/// Whether a slot held in slot item `held_item` is the slot of a delivery row that still
/// holds one (`row_holds`: pending and not in the backlog). A row that records its slot
/// (`row_slot`) in another item holds a second one, taken after a crash lost the row's note
/// of the first: that one is stale. Item 0 is the flow item, where a slot is known by id.
pub fn slot_is_the_rows(row_holds: bool, row_slot: bool, row_item: u32, held_item: u32) -> bool {
    row_holds && (!row_slot || row_item == held_item || held_item == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_small_window_is_one_item_and_a_large_one_is_split_into_items_of_eight() {
        assert_eq!(slot_items(1), 1);
        assert_eq!(slot_items(SINGLE_ITEM_WINDOW), 1);
        assert_eq!(slot_items(SINGLE_ITEM_WINDOW + 1), 3);
        assert_eq!(slot_items(2000), 250);
        assert_eq!(active_slot_items(2, 250), 2);
        assert_eq!(active_slot_items(2000, 250), 250);
        assert_eq!(slot_item_share(20, 2000, 19), 1);
        assert_eq!(slot_item_share(20, 2000, 20), 0);
        assert_eq!(slot_item_share(300, 2000, 49), 2);
        assert_eq!(slot_item_share(300, 2000, 50), 1);
        assert_eq!(slot_item_choices(7, 1), vec![0]);
        assert_eq!(slot_item_choices(7, 5), vec![2, 3]);
        assert_eq!(slot_item_choices(9, 5), vec![4, 0]);
    }

    #[test]
    fn the_bound_feeds_and_stale_slots_follow_the_layout() {
        let local = TierConcurrency::default();
        // A channel's own cap is held to its tier's share (the default tier's 100 here).
        assert_eq!(slot_item_bound(MaxInFlight::Fixed(2000), local), 13);
        assert_eq!(slot_item_bound(MaxInFlight::Auto, local), 1);
        assert_eq!(
            slot_item_bound(MaxInFlight::Unbounded, local),
            13,
            "the default tier's 100"
        );
        // A deployment's larger tiers: their bound follows.
        let deployed = TierConcurrency::parse("high=100,default=200,bulk=50").unwrap();
        assert_eq!(slot_item_bound(MaxInFlight::Unbounded, deployed), 125);
        assert_eq!(slot_item_bound(MaxInFlight::Fixed(2000), deployed), 125);
        assert_eq!(rows_to_feed_after_attempt(16, false, 3), None);
        assert_eq!(rows_to_feed_after_attempt(24, false, 0), Some(1));
        assert_eq!(rows_to_feed_after_attempt(24, true, 0), Some(0));
        // The slots a success grew the window by are fed too.
        assert_eq!(rows_to_feed_after_attempt(24, false, 2), Some(3));
        assert_eq!(rows_to_feed_after_attempt(24, true, 2), Some(2));
        assert_eq!(full_takes_past(16), 0);
        assert_eq!(full_takes_past(24), 3);
        assert_eq!(rows_to_feed_on_backlog(10), None);
        assert_eq!(rows_to_feed_on_backlog(2000), Some(1));
        assert!(slot_is_the_rows(true, true, 3, 3));
        assert!(!slot_is_the_rows(true, true, 3, 4), "a second slot");
        assert!(slot_is_the_rows(true, false, 0, 4), "the row does not say");
        assert!(!slot_is_the_rows(false, true, 3, 3), "settled");
    }

    proptest! {
        #[test]
        fn the_items_shares_stay_within_the_window_and_their_part_of_the_cap(
            cap in 1u32..=10_000,
            window_part in 0.0f64..=1.0,
        ) {
            let items = slot_items(cap);
            let window = ((f64::from(cap) * window_part).round() as u32).clamp(1, cap);
            let shares: Vec<u32> = (0..items).map(|i| slot_item_share(window, cap, i)).collect();
            prop_assert_eq!(shares.iter().sum::<u32>(), window);
            let most = if items == 1 { SINGLE_ITEM_WINDOW } else { SLOTS_PER_ITEM };
            for (i, share) in shares.iter().enumerate() {
                prop_assert!(*share <= slot_item_share(cap, cap, i as u32));
                prop_assert!(slot_item_cap(cap, items, i as u32) <= most);
                prop_assert_eq!(*share >= 1, (i as u32) < active_slot_items(window, items));
            }
            // The whole cap is shared out at the cap.
            let full: u32 = (0..items).map(|i| slot_item_share(cap, cap, i)).sum();
            prop_assert_eq!(full, cap);
        }

        #[test]
        fn a_delivery_tries_items_of_the_window(hash in any::<u32>(), items in 1u32..=1250) {
            let c = slot_item_choices(hash, items);
            prop_assert!(c.iter().all(|i| *i < items));
            prop_assert_eq!(c.len(), if items == 1 { 1 } else { 2 });
        }
    }
}
