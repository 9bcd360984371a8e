//! Writing deliveries: a fresh activity's, rows past their retention, and the due index the
//! sweeper reads.

use super::*;
use converger_core::Timestamp;

pub(super) async fn a_fresh_activity_is_written_whole_and_is_due(b: Backend) {
    use converger_ports::due_shard;
    let f = fixture(b).await;
    let second = Channel::new(
        f.tenant.id.clone(),
        ChannelType::Echo,
        "echo 2",
        Map::new(),
        converger_core::Timestamp::now(),
    );
    f.store.create_channel(&second).await.unwrap();
    let mut a = activity(&f);
    a.channel_ids.push(second.id.clone());
    let now = time::now_ms();
    let ds: Vec<Delivery> = [&f.channel, &second]
        .iter()
        .map(|c| new_delivery(&a, c, Tier::Bulk, now - 10_000, &a.created_at.rfc3339()))
        .collect();
    f.store.create_fresh_activity(&a, &ds).await.unwrap();
    assert_eq!(
        f.store.get_activity(&a.tenant_id, &a.id).await.unwrap(),
        Some(a.clone())
    );
    let ids: Vec<DeliveryId> = ds.iter().map(|d| d.id.clone()).collect();
    let mut stored = f.store.get_deliveries(&ids).await.unwrap();
    stored.sort_by(|x, y| x.id.as_str().cmp(y.id.as_str()));
    let mut want = ds.clone();
    want.sort_by(|x, y| x.id.as_str().cmp(y.id.as_str()));
    assert_eq!(stored, want);
    // Written with their index attributes: due for the sweeper, and claimable.
    for d in &ds {
        let page = f
            .store
            .overdue(DuePart::Waiting, due_shard(&d.id), now - 5_000, 100, None)
            .await
            .unwrap();
        assert!(page.items.iter().any(|o| o.id == d.id), "in the due index");
        assert!(matches!(
            f.store
                .claim(&d.id, "tok", Timestamp::from_ms(now), 60_000)
                .await
                .unwrap(),
            Claim::Claimed(_)
        ));
    }
}

/// DynamoDB deletes an expired row up to two days after its TTL: until then reads must not
/// see it.
pub(super) async fn rows_past_their_retention_read_as_absent(b: Backend) {
    let f = fixture(b).await;
    let now = time::now_ms();
    let mut old = activity(&f);
    old.expires_at = Some(now / 1000 - 1);
    let mut kept = activity(&f);
    kept.expires_at = Some(now / 1000 + 3600);
    let d_old = new_delivery(
        &old,
        &f.channel,
        Tier::Default,
        now,
        &old.created_at.rfc3339(),
    );
    let d_kept = new_delivery(
        &kept,
        &f.channel,
        Tier::Default,
        now,
        &kept.created_at.rfc3339(),
    );
    assert_eq!(
        d_old.expires_at, old.expires_at,
        "a delivery expires with its activity"
    );
    f.store
        .create_fresh_activity(&old, std::slice::from_ref(&d_old))
        .await
        .unwrap();
    f.store
        .create_fresh_activity(&kept, std::slice::from_ref(&d_kept))
        .await
        .unwrap();
    assert_eq!(
        f.store.get_activity(&old.tenant_id, &old.id).await.unwrap(),
        None
    );
    assert_eq!(f.store.get_delivery(&d_old.id).await.unwrap(), None);
    assert_eq!(
        f.store
            .get_activity(&kept.tenant_id, &kept.id)
            .await
            .unwrap(),
        Some(kept.clone())
    );
    assert!(f.store.get_delivery(&d_kept.id).await.unwrap().is_some());
    let both = f
        .store
        .get_deliveries(&[d_old.id.clone(), d_kept.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        both.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        vec![d_kept.id.clone()]
    );
    let listed = f
        .store
        .list_deliveries(&converger_ports::DeliveryQuery {
            status: Some(DeliveryStatus::Pending),
            ..converger_ports::DeliveryQuery::of_tenant(f.tenant.id.clone(), 10)
        })
        .await
        .unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(|d| d.id.clone())
            .collect::<Vec<_>>(),
        vec![d_kept.id.clone()]
    );
    // Nor is it swept again or attempted.
    let later = now + 1_000;
    for (d, listed) in [(&d_old, false), (&d_kept, true)] {
        let page = f
            .store
            .overdue(
                DuePart::Waiting,
                converger_ports::due_shard(&d.id),
                later,
                100,
                None,
            )
            .await
            .unwrap();
        assert_eq!(page.items.iter().any(|o| o.id == d.id), listed);
    }
    assert!(matches!(
        f.store
            .claim(&d_old.id, "tok", Timestamp::from_ms(later), 60_000)
            .await
            .unwrap(),
        Claim::Missing
    ));
    assert!(matches!(
        f.store
            .claim(&d_kept.id, "tok", Timestamp::from_ms(later), 60_000)
            .await
            .unwrap(),
        Claim::Claimed(_)
    ));
}

pub(super) async fn the_due_index_has_the_deployments_shard_count(b: Backend) {
    use converger_ports::due_shard_of;
    let f = fixture(b).await;
    // The same tables through a store of a deployment that raised its count to 64.
    let store: Arc<dyn Store> = match (&f.t, b) {
        (Some(t), Backend::Dynamo) => {
            let mut res = t.resources.clone();
            res.due_shards = 64;
            Arc::new(DynamoStore::new(t.dynamodb.clone(), res).with_serial_transactions(true))
        }
        _ => Arc::new(MemStore::new().with_due_shards(64)),
    };
    assert_eq!(f.store.due_shards(), converger_ports::DUE_SHARDS);
    assert_eq!(store.due_shards(), 64);
    if matches!(b, Backend::Memory) {
        // A store of its own: the fixture's tenant and channel written there too.
        store.create_tenant(&f.tenant, "hash-64").await.unwrap();
        store.create_channel(&f.channel).await.unwrap();
    }
    let now = time::now_ms();
    let rows = due_rows(&f, &*store, 24, now - 10_000).await;
    // Spread past the default's 16 shards, each row in the one shard its id gives for 64.
    assert!(
        rows.iter().any(|d| due_shard_of(&d.id, 64) >= 16),
        "24 ids all hashed below 16"
    );
    for d in &rows {
        let mine = due_shard_of(&d.id, 64);
        for shard in [mine, (mine + 1) % 64] {
            let page = store
                .overdue(DuePart::Waiting, shard, now - 5_000, 100, None)
                .await
                .unwrap();
            assert_eq!(
                page.items.iter().any(|o| o.id == d.id),
                shard == mine,
                "shard {shard} of {}",
                d.id
            );
        }
    }
    // A retry is written to the shard of the count at the time: an entry leaves by its
    // attributes, wherever it was.
    let d = &rows[0];
    let Claim::Claimed(c) = store
        .claim(&d.id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    store
        .mark_attempt_failed(
            &c,
            "t",
            "503",
            RetryAt::at(now - 6_000),
            &entry(1),
            Timestamp::now(),
        )
        .await
        .unwrap();
    let page = store
        .overdue(
            DuePart::Waiting,
            due_shard_of(&d.id, 64),
            now - 5_000,
            100,
            None,
        )
        .await
        .unwrap();
    assert!(page.items.iter().any(|o| o.id == d.id));
}

pub(super) async fn only_pending_deliveries_are_in_the_due_index(b: Backend) {
    use converger_ports::due_shard;
    let f = fixture(b).await;
    let now = time::now_ms();
    let ids = due_rows(&f, &*f.store, 3, now - 10_000).await;
    let overdue = |d: &Delivery| {
        let store = f.store.clone();
        let id = d.id.clone();
        async move {
            let page = store
                .overdue(DuePart::Waiting, due_shard(&id), now - 5_000, 100, None)
                .await
                .unwrap();
            page.items.iter().any(|o| o.id == id)
        }
    };
    for d in &ids {
        assert!(overdue(d).await, "pending and overdue: in the index");
    }
    // Settled deliveries leave the index; a retried one moves to its new due time.
    let Claim::Claimed(a) = f
        .store
        .claim(&ids[0].id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    f.store
        .mark_sent(&a, "t", &SentInfo::default(), &entry(1), Timestamp::now())
        .await
        .unwrap();
    let Claim::Claimed(b) = f
        .store
        .claim(&ids[1].id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    f.store
        .mark_dead(&b, "t", "x", &entry(1), Timestamp::now())
        .await
        .unwrap();
    let Claim::Claimed(c) = f
        .store
        .claim(&ids[2].id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    f.store
        .mark_attempt_failed(
            &c,
            "t",
            "x",
            RetryAt::at(now + 60_000),
            &entry(1),
            Timestamp::now(),
        )
        .await
        .unwrap();
    for d in &ids {
        assert!(!overdue(d).await, "{} left the overdue range", d.id);
    }
    let later = f
        .store
        .overdue(
            DuePart::Waiting,
            due_shard(&ids[2].id),
            now + 61_000,
            100,
            None,
        )
        .await
        .unwrap();
    assert!(
        later
            .items
            .iter()
            .any(|o| o.id == ids[2].id && o.tier == Tier::Bulk)
    );

    // A claimed row stays in the due index where it was (the claim writes only the row); it
    // is found as leased once its lease ends (a crashed attempt's, at once, without the
    // waiting part's grace); a release gives the lease back.
    let a = activity(&f);
    let d = new_delivery(
        &a,
        &f.channel,
        Tier::Bulk,
        now - 10_000,
        &a.created_at.rfc3339(),
    );
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let leased = |before: i64| {
        let store = f.store.clone();
        let id = d.id.clone();
        async move {
            store
                .overdue(DuePart::Leased, due_shard(&id), before, 100, None)
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|o| o.id == id)
        }
    };
    assert!(leased(now + 10_000).await.is_none(), "not claimed yet");
    let Claim::Claimed(held) = f
        .store
        .claim(&d.id, "t", Timestamp::from_ms(now), 1_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(
        overdue(&d).await,
        "claimed: still in the index, at its due time"
    );
    assert_eq!(
        f.store
            .overdue(DuePart::Waiting, due_shard(&d.id), now - 5_000, 100, None)
            .await
            .unwrap()
            .items
            .iter()
            .find(|o| o.id == d.id)
            .and_then(|o| o.lease_until),
        Some(now + 1_000),
        "with the lease the sweep skips while it is live"
    );
    assert!(leased(now + 500).await.is_none(), "the lease is live");
    let found = leased(now + 1_001).await.expect("an ended lease is found");
    assert_eq!(found.channel_id.as_ref(), Some(&f.channel.id));
    assert_eq!(found.lease_until, Some(now + 1_000));
    assert!(f.store.release(&held, "t").await.unwrap());
    assert!(
        leased(now + 10_000).await.is_none(),
        "released: no lease to take back"
    );
    assert!(overdue(&d).await, "released: waiting again at its due time");

    // A lease that ended without an outcome is taken back once: the row waits again, due
    // at the time given; a second pass (or a stale read of the lease) changes nothing.
    let Claim::Claimed(_) = f
        .store
        .claim(&d.id, "t2", Timestamp::from_ms(now), 1_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(
        !f.store
            .requeue_expired(&d.id, now + 999, Timestamp::from_ms(now + 2_000))
            .await
            .unwrap()
    );
    assert!(
        f.store
            .requeue_expired(&d.id, now + 1_000, Timestamp::from_ms(now + 2_000))
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .requeue_expired(&d.id, now + 1_000, Timestamp::from_ms(now + 2_000))
            .await
            .unwrap()
    );
    assert!(
        leased(now + 10_000).await.is_none(),
        "taken back: out of the leased part"
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.lease_until, row.next_attempt_at), (None, now + 2_000));
    let waiting = f
        .store
        .overdue(DuePart::Waiting, due_shard(&d.id), now + 2_001, 100, None)
        .await
        .unwrap();
    assert!(
        waiting.items.iter().any(|o| o.id == d.id),
        "waiting, due now"
    );
}

/// A grant of more due shards (`core::shards::due`): one of two writers that read the same
/// wins; entries written while it holds spread over its shards, and the sweep reads each
/// of them once until every entry placed there can have come due.
pub(super) async fn a_due_grant_spreads_new_entries_over_the_shards_the_sweep_reads(b: Backend) {
    use converger_core::shards::due;
    let f = fixture(b).await;
    let now = time::now_ms();
    let own = f.store.due_shards();
    let seen = f.store.due_grants().await.unwrap();
    assert_eq!(seen, converger_ports::ShardGrants::default());
    assert_eq!(f.store.due_read_shards(now).await.unwrap(), own);
    let g = due::next(None, own, 10_000.0, now).unwrap();
    assert_eq!(g.shards, 64);
    let granted = seen.with(g, now, due::LINGER_MS);
    assert!(f.store.grant_due_shards(&granted).await.unwrap());
    let other = due::next(None, own, 40_000.0, now).unwrap();
    assert!(
        !f.store
            .grant_due_shards(&seen.with(other, now, due::LINGER_MS))
            .await
            .unwrap(),
        "a writer that read the grants before the first one's write"
    );
    assert_eq!(f.store.due_grants().await.unwrap(), granted);
    assert_eq!(f.store.due_read_shards(now).await.unwrap(), 64);
    let gone = g.until_ms + due::LINGER_MS + 1;
    assert_eq!(f.store.due_read_shards(gone).await.unwrap(), own);

    let rows = due_rows(&f, &*f.store, 24, now - 10_000).await;
    // Each row in exactly one of the shards the sweep reads, some past the own ones.
    let mut found: std::collections::HashMap<DeliveryId, Vec<u32>> = Default::default();
    for shard in 0..64 {
        let page = f
            .store
            .overdue(DuePart::Waiting, shard, now - 5_000, 100, None)
            .await
            .unwrap();
        for o in page.items {
            found.entry(o.id).or_default().push(shard);
        }
    }
    for d in &rows {
        assert_eq!(
            found.get(&d.id).map(Vec::len),
            Some(1),
            "{}: {found:?}",
            d.id
        );
    }
    assert!(
        rows.iter().any(|d| found[&d.id][0] >= own),
        "24 rows all below the own {own} shards"
    );
}

/// `n` deliveries of the fixture's channel, each in an activity of its own written through
/// `store`, due at `due_ms`.
/// A retry whose message and watch copy carry it is in no due index while it waits; one
/// past a hop is. A move out of pending (parking) drops the mark, so the row is back in the
/// due index when it is unparked: both backends keep the index the same way.
pub(super) async fn a_retry_that_rides_its_messages_is_in_no_due_index(b: Backend) {
    let f = fixture(b).await;
    let next = time::now_ms() + 30_000;
    let failed = |d: Delivery, token: &'static str, retry: RetryAt| {
        let store = f.store.clone();
        async move {
            assert!(
                store
                    .mark_attempt_failed(&d, token, "HTTP 503", retry, &entry(1), Timestamp::now())
                    .await
                    .unwrap()
            );
            store.get_delivery(&d.id).await.unwrap().unwrap()
        }
    };
    let riding = failed(claimed(&f, "tok-a").await, "tok-a", RetryAt::watched(next)).await;
    assert!(riding.watched && riding.carried_by_messages(), "{riding:?}");
    assert!(!in_due(&f.store, &riding.id).await);
    let waiting = failed(claimed(&f, "tok-b").await, "tok-b", RetryAt::at(next)).await;
    assert!(!waiting.watched, "{waiting:?}");
    assert!(in_due(&f.store, &waiting.id).await);
    // Parked while it waits, then unparked to its queue: in the due index again.
    assert!(f.store.park(&riding, None, Timestamp::now()).await.unwrap());
    let parked = f.store.get_delivery(&riding.id).await.unwrap().unwrap();
    assert!(!parked.watched, "{parked:?}");
    let back = f
        .store
        .unpark(&parked, Placement::Live, Timestamp::now())
        .await
        .unwrap()
        .expect("unparked");
    assert!(!back.watched, "{back:?}");
    assert!(in_due(&f.store, &riding.id).await);
}

async fn due_rows(f: &Fixture, store: &dyn Store, n: usize, due_ms: i64) -> Vec<Delivery> {
    let mut rows = Vec::new();
    for _ in 0..n {
        let a = activity(f);
        let d = new_delivery(&a, &f.channel, Tier::Bulk, due_ms, &a.created_at.rfc3339());
        store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap();
        rows.push(d);
    }
    rows
}
