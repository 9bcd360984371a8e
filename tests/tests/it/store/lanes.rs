//! Ordered lanes' storage: one head per lane taken by one promotion, entries in `seq` order,
//! a head let go or held only by its holder; and a waiting delivery rescheduled with or
//! without the lease.

use super::*;
use converger_ports::LaneEntry;

fn e(seq: u64) -> LaneEntry {
    LaneEntry {
        seq,
        delivery_id: DeliveryId::generate(),
    }
}

pub(super) async fn a_lane_has_one_head_taken_in_seq_order(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    let now = Timestamp::now();
    let lane = converger_ports::keys::lane_key(&f.channel.id, "conv");
    let other = converger_ports::keys::lane_key(&f.channel.id, "other");
    let (e9, e10, e2) = (e(9), e(10), e(2));
    for x in [&e10, &e9, &e2] {
        s.join_lane(&lane, x, now.secs() + 3600).await.unwrap();
    }
    // Joining again is the same entry.
    s.join_lane(&lane, &e9, now.secs() + 3600).await.unwrap();
    let first = s.lane_entries(&lane, 10).await.unwrap();
    assert_eq!(
        first,
        vec![e2.clone(), e9.clone(), e10.clone()],
        "numeric order"
    );
    assert!(s.lane_head(&lane).await.unwrap().is_none());
    assert!(s.lane_entries(&other, 10).await.unwrap().is_empty());

    // One promotion wins; a second, of another entry, finds the head taken.
    assert!(s.promote(&lane, &e2, now, now.secs() + 3600).await.unwrap());
    assert!(!s.promote(&lane, &e9, now, now.secs() + 3600).await.unwrap());
    let head = s.lane_head(&lane).await.unwrap().unwrap();
    assert_eq!(
        (head.holder.clone(), head.seq, head.held),
        (e2.delivery_id.clone(), 2, false)
    );
    assert_eq!(
        s.lane_entries(&lane, 10).await.unwrap(),
        vec![e9.clone(), e10.clone()]
    );

    // Only the holder lets go or holds.
    assert!(!s.set_held(&lane, &e9.delivery_id, true).await.unwrap());
    assert!(s.set_held(&lane, &e2.delivery_id, true).await.unwrap());
    assert!(s.lane_head(&lane).await.unwrap().unwrap().held);
    assert!(!s.let_go(&lane, &e9.delivery_id).await.unwrap());
    assert!(s.let_go(&lane, &e2.delivery_id).await.unwrap());
    assert!(!s.let_go(&lane, &e2.delivery_id).await.unwrap());
    assert!(s.lane_head(&lane).await.unwrap().is_none());

    // An entry that left cannot be promoted.
    s.leave_lane(&lane, &e9).await.unwrap();
    assert!(!s.promote(&lane, &e9, now, now.secs() + 3600).await.unwrap());
    assert!(s.lane_head(&lane).await.unwrap().is_none());
    assert!(
        s.promote(&lane, &e10, now, now.secs() + 3600)
            .await
            .unwrap()
    );
    assert!(s.lane_entries(&lane, 10).await.unwrap().is_empty());
}

pub(super) async fn a_waiting_delivery_is_rescheduled_with_or_without_its_lease(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    let a = activity(&f);
    let now = Timestamp::now();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now.ms(), &now.rfc3339());
    s.create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    // Claimed: the holder's token reschedules it, another's does not, nor does none.
    let Claim::Claimed(row) = s.claim(&d.id, "tok", now, 10_000).await.unwrap() else {
        panic!("claims")
    };
    assert!(!s.reschedule(&row, None, now.ms() + 5_000).await.unwrap());
    assert!(
        !s.reschedule(&row, Some("other"), now.ms() + 5_000)
            .await
            .unwrap()
    );
    assert!(
        s.reschedule(&row, Some("tok"), now.ms() + 5_000)
            .await
            .unwrap()
    );
    let got = s.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!(
        (got.next_attempt_at, got.lease_token.clone()),
        (now.ms() + 5_000, None)
    );
    // Not due before its time; unleased, it is made due now.
    assert!(matches!(
        s.claim(&d.id, "t2", now, 10_000).await.unwrap(),
        Claim::NotDue(_)
    ));
    assert!(s.reschedule(&got, None, now.ms()).await.unwrap());
    assert!(matches!(
        s.claim(&d.id, "t3", now, 10_000).await.unwrap(),
        Claim::Claimed(_)
    ));
}
