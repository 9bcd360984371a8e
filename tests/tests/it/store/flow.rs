//! Flow control: window slots, the breaker, the backlog and parking, rate schedules.

use super::*;
use converger_core::Timestamp;

pub(super) async fn window_slots_are_capped_idempotent_and_closed_only(b: Backend) {
    let f = fixture(b).await;
    let ch = &f.channel.id;
    let ids: Vec<converger_core::DeliveryId> = (0..4)
        .map(|_| converger_core::DeliveryId::generate())
        .collect();
    let fresh = f.store.get_flow(ch).await.unwrap();
    assert_eq!(fresh.circuit_state, CircuitState::Closed);
    assert!(fresh.slots.is_empty());

    // Two slots under a cap of 2; the same delivery asking again keeps its one slot.
    for id in &ids[..2] {
        assert!(matches!(
            f.store
                .take_slot(ch, id, 2, Timestamp::from_ms(1_000), false)
                .await
                .unwrap(),
            SlotTake::Taken(_)
        ));
    }
    match f
        .store
        .take_slot(ch, &ids[0], 2, Timestamp::from_ms(2_000), false)
        .await
        .unwrap()
    {
        SlotTake::Taken(fl) => {
            assert_eq!(fl.slots.len(), 2);
            assert_eq!(fl.slots[ids[0].as_str()], 1_000, "taken_at is kept");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            f.store
                .take_slot(ch, &ids[0], 3, Timestamp::from_ms(2_000), true)
                .await
                .unwrap(),
            SlotTake::Held(_)
        ),
        "an exclusive take of a held slot"
    );
    assert!(matches!(
        f.store.take_slot(ch, &ids[2], 2, Timestamp::from_ms(2_000), false).await.unwrap(),
        SlotTake::Full(fl) if fl.slots.len() == 2
    ));

    // Settling frees a slot and keeps the breaker's counters.
    let after = f
        .store
        .settle(
            ch,
            &Settle {
                free: Some(ids[0].clone()),
                pass_to: None,
                outcome: Outcome::Transient,
                failed: true,
                window: Some(7),
                now: Timestamp::from_ms(3_000),
            },
        )
        .await
        .unwrap();
    assert_eq!(after.slots.len(), 1);
    assert_eq!((after.consecutive_failures, after.window), (1, 7));
    let after = f
        .store
        .settle(
            ch,
            &Settle {
                free: None,
                pass_to: None,
                outcome: Outcome::Success,
                failed: false,
                window: None,
                now: Timestamp::from_ms(4_000),
            },
        )
        .await
        .unwrap();
    assert_eq!(after.consecutive_failures, 0);
    assert_eq!(after.last_success_at, Some(4_000));
    // A finishing attempt hands its slot to the row it runs next, in the same write.
    let handed = f
        .store
        .settle(
            ch,
            &Settle {
                pass_to: Some(ids[2].clone()),
                outcome: Outcome::Success,
                ..Settle::free(ids[1].clone(), Timestamp::from_ms(4_500))
            },
        )
        .await
        .unwrap();
    assert!(
        !handed.holds(&ids[1]) && handed.holds(&ids[2]),
        "{handed:?}"
    );
    assert_eq!(handed.slots.len(), 1);
    // And back, for what follows.
    let back = f
        .store
        .settle(
            ch,
            &Settle {
                pass_to: Some(ids[1].clone()),
                ..Settle::free(ids[2].clone(), Timestamp::from_ms(4_600))
            },
        )
        .await
        .unwrap();
    assert!(back.holds(&ids[1]) && !back.holds(&ids[2]));

    // The sweeper frees a slot only if it is still held as it saw it.
    assert_eq!(
        f.store
            .free_slots(ch, &[held(0, &ids[1], 999), held(0, &ids[1], 4_600)])
            .await
            .unwrap(),
        1
    );
    assert!(f.store.get_flow(ch).await.unwrap().slots.is_empty());

    // No slot while the breaker is not closed.
    let paused = f
        .store
        .transition(
            ch,
            &Transition::new(
                &[CircuitState::Closed],
                CircuitState::Paused,
                Timestamp::from_ms(5_000),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paused.circuit_state, CircuitState::Paused);
    assert!(matches!(
        f.store
            .take_slot(ch, &ids[3], 10, Timestamp::from_ms(6_000), false)
            .await
            .unwrap(),
        SlotTake::NotClosed(_)
    ));
}

fn held(item: u32, id: &converger_core::DeliveryId, taken_at: i64) -> HeldSlot {
    HeldSlot {
        item,
        delivery: id.to_string(),
        taken_at,
    }
}

/// Held slots in the order `held_slots` answers: by item, then delivery id.
fn in_order(mut v: Vec<HeldSlot>) -> Vec<HeldSlot> {
    v.sort_by(|a, b| (a.item, &a.delivery).cmp(&(b.item, &b.delivery)));
    v
}

/// A window of several slot items: an item of its own is capped, idempotent and exclusive as
/// the flow item is, hands a freed slot on in one write, and is read and reconciled by item.
pub(super) async fn slot_items_hold_their_share_and_are_reconciled_by_item(b: Backend) {
    let f = fixture(b).await;
    let ch = &f.channel.id;
    let ids: Vec<converger_core::DeliveryId> = (0..4)
        .map(|_| converger_core::DeliveryId::generate())
        .collect();
    // The first take creates the item.
    for id in &ids[..2] {
        assert_eq!(
            f.store
                .take_item_slot(ch, 3, id, 2, Timestamp::from_ms(1_000), false)
                .await
                .unwrap(),
            ItemTake::Taken
        );
    }
    assert_eq!(
        f.store
            .take_item_slot(ch, 3, &ids[0], 2, Timestamp::from_ms(2_000), false)
            .await
            .unwrap(),
        ItemTake::Taken,
        "a delivery asking again keeps its one slot"
    );
    assert_eq!(
        f.store
            .take_item_slot(ch, 3, &ids[0], 3, Timestamp::from_ms(2_000), true)
            .await
            .unwrap(),
        ItemTake::Held
    );
    assert_eq!(
        f.store
            .take_item_slot(ch, 3, &ids[2], 2, Timestamp::from_ms(2_000), false)
            .await
            .unwrap(),
        ItemTake::Full
    );
    // Another item has its own share; the flow item holds none of these.
    assert_eq!(
        f.store
            .take_item_slot(ch, 1, &ids[2], 1, Timestamp::from_ms(2_500), false)
            .await
            .unwrap(),
        ItemTake::Taken
    );
    assert!(f.store.get_flow(ch).await.unwrap().slots.is_empty());
    assert_eq!(
        f.store.held_slots(ch, 5).await.unwrap(),
        in_order(vec![
            held(1, &ids[2], 2_500),
            held(3, &ids[0], 1_000),
            held(3, &ids[1], 1_000)
        ])
    );
    assert!(
        f.store.held_slots(ch, 1).await.unwrap().is_empty(),
        "item 0 is the flow item's"
    );

    // A freed slot handed on in the same write; a slot the item does not hold hands nothing.
    f.store
        .free_item_slot(ch, 3, &ids[0], Some(&ids[3]), Timestamp::from_ms(3_000))
        .await
        .unwrap();
    f.store
        .free_item_slot(ch, 3, &ids[0], Some(&ids[2]), Timestamp::from_ms(3_100))
        .await
        .unwrap();
    f.store
        .free_item_slot(ch, 7, &ids[0], None, Timestamp::from_ms(3_100))
        .await
        .unwrap();
    assert_eq!(
        f.store.held_slots(ch, 5).await.unwrap(),
        in_order(vec![
            held(1, &ids[2], 2_500),
            held(3, &ids[1], 1_000),
            held(3, &ids[3], 3_000)
        ])
    );

    // The reconciliation frees by item, only what is still held as it was seen.
    assert_eq!(
        f.store
            .free_slots(
                ch,
                &[
                    held(3, &ids[1], 999),
                    held(3, &ids[1], 1_000),
                    held(1, &ids[3], 3_000)
                ]
            )
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        f.store.held_slots(ch, 5).await.unwrap(),
        in_order(vec![held(1, &ids[2], 2_500), held(3, &ids[3], 3_000)])
    );
}

pub(super) async fn breaker_transitions_have_one_winner(b: Backend) {
    let f = fixture(b).await;
    let ch = f.channel.id.clone();
    // A channel's first counted failure creates its flow item (closed); then fifty openers
    // race: one wins. (As in the pipeline, where failures are counted before the breaker
    // opens. The emulator does not serialize conditional writes that create a missing item,
    // so the race runs on an existing one, which is what production does too.)
    let first = f
        .store
        .settle(
            &ch,
            &Settle {
                free: None,
                pass_to: None,
                outcome: Outcome::Transient,
                failed: true,
                window: None,
                now: Timestamp::from_ms(1),
            },
        )
        .await
        .unwrap();
    assert_eq!(first.circuit_state, CircuitState::Closed);
    assert_eq!(first.consecutive_failures, 1);
    let open = Transition::new(
        &[CircuitState::Closed],
        CircuitState::Open,
        Timestamp::from_ms(10_000),
    )
    .seen(0);
    let wins = futures::future::join_all((0..50).map(|_| f.store.transition(&ch, &open)))
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Some(_))))
        .count();
    assert_eq!(wins, 1, "the breaker opens exactly once");

    // Two probes claim half-open from the same open state: one wins.
    let claim = |p: &str| {
        Transition::new(
            &[CircuitState::Open],
            CircuitState::HalfOpen,
            Timestamp::from_ms(20_000),
        )
        .seen(10_000)
        .probe(p)
    };
    let (ca, cb) = (claim("dlv_a"), claim("dlv_b"));
    let (a, b2) = tokio::join!(f.store.transition(&ch, &ca), f.store.transition(&ch, &cb));
    let won: Vec<_> = [a.unwrap(), b2.unwrap()].into_iter().flatten().collect();
    assert_eq!(won.len(), 1, "one probe at a time");
    let probe = won[0].probe.clone().unwrap();

    // Only the probe closes it; closing resets the counters and restarts the window.
    let close = |p: &str| {
        Transition::new(
            &[CircuitState::HalfOpen],
            CircuitState::Closed,
            Timestamp::from_ms(30_000),
        )
        .probed_by(p)
        .reset()
    };
    let other = if probe == "dlv_a" { "dlv_b" } else { "dlv_a" };
    assert!(
        f.store
            .transition(&ch, &close(other))
            .await
            .unwrap()
            .is_none()
    );
    let closed = f
        .store
        .transition(&ch, &close(&probe))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.circuit_state, CircuitState::Closed);
    assert_eq!(closed.probe, None);
    assert_eq!(closed.consecutive_failures, 0);
    assert_eq!(closed.window, converger_core::flow::INITIAL_WINDOW);

    // Marks: the backlog mark takes the newest time, so a feeder that saw an older one
    // (and found the backlog empty before a new row went in) cannot clear it; the parked
    // mark keeps the first time (parked deliveries are released by age).
    let m = f
        .store
        .mark(&ch, Mark::Backlog, Some(1), None)
        .await
        .unwrap();
    assert_eq!(m.backlog_at, Some(1));
    let m = f
        .store
        .mark(&ch, Mark::Backlog, Some(2), None)
        .await
        .unwrap();
    assert_eq!(m.backlog_at, Some(2));
    let m = f
        .store
        .mark(&ch, Mark::Backlog, None, Some(1))
        .await
        .unwrap();
    assert_eq!(m.backlog_at, Some(2), "a newer mark is not cleared");
    let m = f
        .store
        .mark(&ch, Mark::Backlog, None, Some(2))
        .await
        .unwrap();
    assert_eq!(m.backlog_at, None);
    for at in [1, 2] {
        f.store
            .mark(&ch, Mark::Parked, Some(at), None)
            .await
            .unwrap();
    }
    let m = f.store.get_flow(&ch).await.unwrap();
    assert_eq!(m.parked_at, Some(1), "the parked mark keeps the first time");

    // The sweeper sees every flow item.
    let page = f.store.scan_flows(10, None).await.unwrap();
    assert!(page.items.iter().any(|x| x.channel_id == ch));
}

pub(super) async fn backlog_and_parking_move_rows_between_indexes(b: Backend) {
    let f = fixture(b).await;
    let ch = &f.channel.id;
    let now_ms = time::now_ms();
    let now = time::now_rfc3339();
    // Three deliveries written into the backlog, due at different times, one parked.
    let mut rows = Vec::new();
    for i in 0..4 {
        let a = activity(&f);
        let mut d = new_delivery(&a, &f.channel, Tier::Bulk, now_ms - 3_000 + i * 1_000, &now);
        if i == 3 {
            d.status = DeliveryStatus::Paused;
        } else {
            d.in_backlog = true;
        }
        assert_eq!(
            f.store
                .create_activity(&a, std::slice::from_ref(&d))
                .await
                .unwrap(),
            Created::New
        );
        rows.push(d);
    }
    let waiting = f.store.backlog(ch, now_ms, 10).await.unwrap();
    let ids: Vec<_> = waiting.iter().map(|w| w.id.clone()).collect();
    assert_eq!(
        ids,
        vec![rows[0].id.clone(), rows[1].id.clone(), rows[2].id.clone()],
        "oldest due first"
    );
    assert_eq!(
        f.store.backlog(ch, now_ms - 2_500, 10).await.unwrap().len(),
        1,
        "only due ones"
    );
    assert_eq!(f.store.waiting_counts(ch).await.unwrap(), (1, 3));
    // A backlog row is not claimable by a stray message's sweep: it is not in the due index.
    let overdue: usize = {
        let mut n = 0;
        for shard in 0..converger_ports::DUE_SHARDS {
            n += f
                .store
                .overdue(DuePart::Waiting, shard, now_ms + 10_000, 100, None)
                .await
                .unwrap()
                .items
                .len();
        }
        n
    };
    assert_eq!(overdue, 0);

    // Out of the backlog once: the second taker finds nothing.
    let live = f
        .store
        .leave_backlog(&rows[0].id, Timestamp::from_ms(now_ms), 4)
        .await
        .unwrap()
        .unwrap();
    assert!(live.slot && !live.in_backlog);
    assert_eq!(
        live.slot_item, 4,
        "the row says which slot item its slot is in"
    );
    assert!(
        f.store
            .leave_backlog(&rows[0].id, Timestamp::from_ms(now_ms), 0)
            .await
            .unwrap()
            .is_none()
    );
    // Out of the backlog leased to its taker (a finishing attempt that runs it itself): in
    // the leased part of the due index, not claimable by anyone else until the lease ends.
    let (extra_a, mut extra) = {
        let a = activity(&f);
        let d = new_delivery(&a, &f.channel, Tier::Bulk, now_ms - 500, &now);
        (a, d)
    };
    extra.in_backlog = true;
    f.store
        .create_activity(&extra_a, std::slice::from_ref(&extra))
        .await
        .unwrap();
    let leased = f
        .store
        .leave_backlog_leased(
            &extra.id,
            Timestamp::from_ms(now_ms),
            "tok",
            now_ms + 8_000,
            2,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        !leased.slot && !leased.in_backlog,
        "its slot comes with its giver's settle"
    );
    assert_eq!(leased.slot_item, 2, "in its giver's slot item");
    assert_eq!(leased.lease_token.as_deref(), Some("tok"));
    assert!(
        matches!(
            leased.sparse_index(),
            converger_ports::SparseIndex::Due { .. }
        ),
        "out of the backlog into the due index"
    );
    assert!(matches!(
        f.store
            .claim(&extra.id, "other", Timestamp::from_ms(now_ms), 8_000)
            .await
            .unwrap(),
        converger_ports::Claim::Busy
    ));
    assert!(
        f.store
            .leave_backlog_leased(
                &extra.id,
                Timestamp::from_ms(now_ms),
                "again",
                now_ms + 8_000,
                0
            )
            .await
            .unwrap()
            .is_none(),
        "out once"
    );
    assert!(
        f.store
            .mark_sent(
                &leased,
                "tok",
                &converger_ports::SentInfo::default(),
                &converger_ports::LogUpdate::default(),
                Timestamp::parse(&now).unwrap()
            )
            .await
            .unwrap(),
        "the lease is the taker's"
    );

    // Parking a backlog row; unparking it into the backlog again.
    assert!(
        f.store
            .park(&rows[1], None, Timestamp::parse(&now).unwrap())
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .park(&rows[1], None, Timestamp::parse(&now).unwrap())
            .await
            .unwrap(),
        "parked once"
    );
    let parked = f.store.parked(ch, 10).await.unwrap();
    assert_eq!(parked.len(), 2);
    for d in &parked {
        assert_eq!(d.status, DeliveryStatus::Paused);
    }
    let back = f
        .store
        .unpark(&rows[1], Placement::Backlog, Timestamp::from_ms(now_ms))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.status, DeliveryStatus::Pending);
    assert!(back.in_backlog);
    assert!(
        f.store
            .unpark(&rows[1], Placement::Backlog, Timestamp::from_ms(now_ms))
            .await
            .unwrap()
            .is_none()
    );
    // The parked one goes straight to the queue's due index.
    let live = f
        .store
        .unpark(&rows[3], Placement::Live, Timestamp::from_ms(now_ms))
        .await
        .unwrap()
        .unwrap();
    assert!(!live.in_backlog);
    assert_eq!(f.store.waiting_counts(ch).await.unwrap(), (0, 2));

    // A claimed delivery moves into the backlog under its lease, and is parked under it.
    let token = "tok";
    let held = match f
        .store
        .claim(&rows[3].id, token, Timestamp::from_ms(now_ms + 1), 60_000)
        .await
        .unwrap()
    {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    };
    assert!(
        !f.store
            .to_backlog(&held, "stranger", now_ms, Timestamp::parse(&now).unwrap())
            .await
            .unwrap()
    );
    assert!(
        f.store
            .to_backlog(&held, token, now_ms, Timestamp::parse(&now).unwrap())
            .await
            .unwrap()
    );
    assert_eq!(f.store.waiting_counts(ch).await.unwrap(), (0, 3));
    let again = f
        .store
        .leave_backlog(&rows[3].id, Timestamp::from_ms(now_ms), 0)
        .await
        .unwrap()
        .unwrap();
    let held = match f
        .store
        .claim(&again.id, "tok2", Timestamp::from_ms(now_ms + 2), 60_000)
        .await
        .unwrap()
    {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    };
    assert!(
        f.store
            .park(&held, Some("tok2"), Timestamp::parse(&now).unwrap())
            .await
            .unwrap()
    );
    assert_eq!(
        f.store
            .get_delivery(&held.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        DeliveryStatus::Paused
    );
}

pub(super) async fn rate_schedules_allow_a_burst_then_the_rate(b: Backend) {
    let f = fixture(b).await;
    let ch = &f.channel.id;
    let limit: converger_core::RateLimit = "5/s".parse().unwrap();
    let t0 = 1_000_000_000_000i64;
    let mut allowed = 0;
    for _ in 0..8 {
        if f.store.rate_take(ch, &limit, t0).await.unwrap().is_ok() {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 5, "a burst of the count");
    assert_eq!(
        f.store.rate_take(ch, &limit, t0 + 100_000).await.unwrap(),
        Err(t0 + 200_000),
        "the next one is due one interval later"
    );
    assert!(
        f.store
            .rate_take(ch, &limit, t0 + 200_000)
            .await
            .unwrap()
            .is_ok()
    );
    // Twenty concurrent takers at one instant: five pass.
    let other: converger_core::ChannelId = converger_core::ChannelId::generate();
    let passed = futures::future::join_all((0..20).map(|_| f.store.rate_take(&other, &limit, t0)))
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Ok(()))))
        .count();
    assert_eq!(passed, 5);
}

pub(super) async fn rate_reservations_queue_requests_in_the_schedule(b: Backend) {
    let f = fixture(b).await;
    let ch = &f.channel.id;
    let limit: converger_core::RateLimit = "5/s".parse().unwrap();
    let t0 = 1_000_000_000_000i64;
    // An idle schedule starts now; a batch of three advances it by three intervals.
    assert_eq!(
        f.store.rate_reserve(ch, &limit, 3, t0).await.unwrap(),
        Ok(t0)
    );
    assert_eq!(
        f.store.rate_reserve(ch, &limit, 2, t0).await.unwrap(),
        Ok(t0 + 600_000),
        "the next batch follows the first"
    );
    // The burst is used up: the next place is one interval after now, not a refusal.
    let start = f
        .store
        .rate_reserve(ch, &limit, 1, t0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(limit.place_us(start, 0, t0), t0 + 200_000);
    // Twenty concurrent reservations at one instant get twenty distinct places in order.
    let other = converger_core::ChannelId::generate();
    let mut places: Vec<i64> =
        futures::future::join_all((0..20).map(|_| f.store.rate_reserve(&other, &limit, 1, t0)))
            .await
            .into_iter()
            .map(|r| limit.place_us(r.unwrap().unwrap(), 0, t0))
            .collect();
    places.sort_unstable();
    let expected: Vec<i64> = (0..20)
        .map(|i: i64| t0 + (i - 4).max(0) * 200_000)
        .collect();
    assert_eq!(places, expected, "five at once, then one per interval");
    // Beyond the horizon: no place, and when to come back. At 1/h the second request's
    // place is an hour away, past the ten minutes a place may be reserved ahead.
    let hourly: converger_core::RateLimit = "1/h".parse().unwrap();
    let slow = converger_core::ChannelId::generate();
    assert_eq!(
        f.store.rate_reserve(&slow, &hourly, 1, t0).await.unwrap(),
        Ok(t0)
    );
    assert_eq!(
        f.store.rate_reserve(&slow, &hourly, 1, t0).await.unwrap(),
        Err(t0 + 3_600_000_000 - converger_core::flow::RATE_RESERVE_HORIZON_US),
        "an hour ahead is beyond the horizon"
    );
    // The refused reservation took nothing: a minute before the place, it is granted.
    let later = t0 + 3_540_000_000;
    assert_eq!(
        f.store
            .rate_reserve(&slow, &hourly, 1, later)
            .await
            .unwrap(),
        Ok(t0 + 3_600_000_000)
    );
}

/// A tenant's busy set (`core::flow::tenant_window_bound`): channels write their entries side
/// by side (concurrently too), renew and remove their own, and no other tenant sees them.
pub(super) async fn a_tenants_busy_channels_are_written_renewed_and_removed_one_by_one(b: Backend) {
    use converger_core::ChannelId;
    use converger_core::flow::BusyEntry;
    let f = fixture(b).await;
    let t = &f.tenant.id;
    assert!(f.store.busy_channels(t).await.unwrap().is_empty());
    let (a, c) = (ChannelId::generate(), ChannelId::generate());
    let e = |at, window| BusyEntry { at, window };
    let (ra, rc) = futures::join!(
        f.store.set_busy(t, &a, Some(e(1, 10))),
        f.store.set_busy(t, &c, Some(e(2, 3))),
    );
    ra.unwrap();
    rc.unwrap();
    let seen = f.store.busy_channels(t).await.unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[&a], seen[&c]), (e(1, 10), e(2, 3)));
    f.store.set_busy(t, &a, Some(e(5, 7))).await.unwrap();
    f.store.set_busy(t, &c, None).await.unwrap();
    // Removing an entry that is not there is no error.
    f.store.set_busy(t, &c, None).await.unwrap();
    let seen = f.store.busy_channels(t).await.unwrap();
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        vec![(a.clone(), e(5, 7))]
    );
    assert!(
        f.store
            .busy_channels(&TenantId::generate())
            .await
            .unwrap()
            .is_empty()
    );
}
