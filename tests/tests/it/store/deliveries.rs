//! Deliveries claimed and settled: the lease, dead letters, the first try's listing, the
//! attempt log, an outcome written twice, hand-offs and receipts.

use super::*;
use converger_core::Timestamp;

pub(super) async fn a_lease_admits_one_attempt_at_a_time(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at.rfc3339());
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();

    let Claim::Claimed(held) = f
        .store
        .claim(&d.id, "tok-1", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!("first claim wins");
    };
    assert_eq!(held.lease_token.as_deref(), Some("tok-1"));
    assert_eq!(
        f.store
            .claim(&d.id, "tok-2", Timestamp::from_ms(now + 1), 60_000)
            .await
            .unwrap(),
        Claim::Busy
    );
    // A lease given back (the attempt could not start) can be claimed again at once.
    assert!(
        !f.store.release(&held, "tok-2").await.unwrap(),
        "only the holder releases"
    );
    assert!(f.store.release(&held, "tok-1").await.unwrap());
    let Claim::Claimed(held) = f
        .store
        .claim(&d.id, "tok-1", Timestamp::from_ms(now + 2), 60_000)
        .await
        .unwrap()
    else {
        panic!("claimable after release");
    };

    // A failed attempt, recorded under the lease, makes the delivery due later.
    let later = now + 5_000;
    assert!(
        !f.store
            .mark_attempt_failed(
                &held,
                "tok-2",
                "boom",
                RetryAt::at(later),
                &entry(1),
                Timestamp::now()
            )
            .await
            .unwrap(),
        "a stranger's token is refused"
    );
    assert!(
        f.store
            .mark_attempt_failed(
                &held,
                "tok-1",
                "boom",
                RetryAt::at(later),
                &entry(1),
                Timestamp::now()
            )
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.attempts, row.last_error.as_deref()),
        (DeliveryStatus::Pending, 1, Some("boom"))
    );
    assert_eq!(row.lease_token, None);
    assert_eq!(row.attempt_log.len(), 1);
    assert!(matches!(
        f.store
            .claim(&d.id, "tok-3", Timestamp::from_ms(now + 1_000), 60_000)
            .await
            .unwrap(),
        Claim::NotDue(_)
    ));

    // An expired lease can be taken over; the old holder then loses its write.
    let Claim::Claimed(first) = f
        .store
        .claim(&d.id, "tok-4", Timestamp::from_ms(later), 1_000)
        .await
        .unwrap()
    else {
        panic!("due now");
    };
    let Claim::Claimed(second) = f
        .store
        .claim(&d.id, "tok-5", Timestamp::from_ms(later + 2_000), 60_000)
        .await
        .unwrap()
    else {
        panic!("the expired lease is taken over");
    };
    assert!(
        !f.store
            .mark_sent(
                &first,
                "tok-4",
                &SentInfo::default(),
                &entry(2),
                Timestamp::now()
            )
            .await
            .unwrap()
    );
    let info = SentInfo {
        provider_message_id: Some("pm-1".into()),
        response_status: Some(202),
        handed_off: false,
    };
    assert!(
        f.store
            .mark_sent(&second, "tok-5", &info, &entry(2), Timestamp::now())
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Sent, 2));
    assert_eq!(row.provider_message_id.as_deref(), Some("pm-1"));
    assert_eq!(row.last_error, None);
    assert!(row.sent_at.is_some());
    assert!(matches!(
        f.store
            .claim(&d.id, "tok-6", Timestamp::from_ms(later + 3_000), 60_000)
            .await
            .unwrap(),
        Claim::Settled(_)
    ));
}

pub(super) async fn dead_letters_and_missing_rows(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at.rfc3339());
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let Claim::Claimed(held) = f
        .store
        .claim(&d.id, "tok", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!("claimed");
    };
    assert!(
        f.store
            .mark_dead(&held, "tok", "HTTP 400", &entry(1), Timestamp::now())
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Failed, 1));
    assert!(matches!(
        f.store
            .claim(&d.id, "tok", Timestamp::from_ms(now + 10), 60_000)
            .await
            .unwrap(),
        Claim::Settled(_)
    ));
    let missing = converger_core::DeliveryId::for_pair(&ActivityId::generate(), &f.channel.id);
    assert_eq!(
        f.store
            .claim(&missing, "tok", Timestamp::from_ms(now), 60_000)
            .await
            .unwrap(),
        Claim::Missing
    );
    assert_eq!(f.store.get_delivery(&missing).await.unwrap(), None);
}

pub(super) async fn a_first_try_joins_its_tenants_listing_when_its_attempt_ends(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let mut d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at.rfc3339());
    // As ingest writes a delivery it sends to its queue at once.
    d.unlisted = true;
    f.store
        .create_fresh_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let query = |status: Option<DeliveryStatus>, activity: Option<ActivityId>| {
        converger_ports::DeliveryQuery {
            tenant: f.tenant.id.clone(),
            status,
            channel: None,
            from_key: None,
            to_key: None,
            error_contains: None,
            event_type: None,
            activity,
            newest_first: true,
            limit: 10,
            after: None,
        }
    };
    let listed = |q: converger_ports::DeliveryQuery| {
        let store = f.store.clone();
        async move {
            store
                .list_deliveries(&q)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|x| x.id)
                .collect::<Vec<_>>()
        }
    };
    // Not listed while its first attempt runs: not pending, not in any status, not counted,
    // not in the due index (its message's watch copy covers it); read by id and through its
    // activity all the same.
    assert!(
        listed(query(Some(DeliveryStatus::Pending), None))
            .await
            .is_empty()
    );
    assert!(listed(query(None, None)).await.is_empty());
    assert_eq!(
        f.store
            .count_by_status(&f.tenant.id, DeliveryStatus::Pending, 100)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        listed(query(None, Some(a.id.clone()))).await,
        vec![d.id.clone()]
    );
    assert!(f.store.get_delivery(&d.id).await.unwrap().is_some());
    assert!(
        !in_due(&f.store, &d.id).await,
        "a first try in flight is in no due index"
    );
    // Its attempt fails: listed as pending from then on.
    let Claim::Claimed(c) = f
        .store
        .claim(&d.id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(
        listed(query(None, None)).await.is_empty(),
        "a claim lists nothing"
    );
    f.store
        .mark_attempt_failed(
            &c,
            "t",
            "503",
            RetryAt::at(now),
            &entry(1),
            Timestamp::now(),
        )
        .await
        .unwrap();
    assert_eq!(
        listed(query(Some(DeliveryStatus::Pending), None)).await,
        vec![d.id.clone()]
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert!(!row.unlisted);
    // Waiting for its retry: in the due index from then on.
    assert!(in_due(&f.store, &d.id).await, "a retry is due");
    // The next succeeds: listed as sent, once.
    let Claim::Claimed(c) = f
        .store
        .claim(&d.id, "u", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    f.store
        .mark_sent(&c, "u", &SentInfo::default(), &entry(2), Timestamp::now())
        .await
        .unwrap();
    assert!(
        listed(query(Some(DeliveryStatus::Pending), None))
            .await
            .is_empty()
    );
    assert_eq!(
        listed(query(Some(DeliveryStatus::Sent), None)).await,
        vec![d.id.clone()]
    );
    assert_eq!(listed(query(None, None)).await, vec![d.id.clone()]);
}

pub(super) async fn old_attempts_spill_out_of_the_item(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at.rfc3339());
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let Claim::Claimed(held) = f
        .store
        .claim(&d.id, "t", Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    else {
        panic!()
    };
    let current: Vec<AttemptEntry> = (1..=converger_ports::RECENT_ATTEMPTS as u32)
        .map(attempt)
        .collect();
    let log = LogUpdate::append(&current, attempt(current.len() as u32 + 1));
    assert_eq!(log.spill.len(), 1);
    assert_eq!(log.spill[0].attempt, 1);
    assert_eq!(log.recent.len(), converger_ports::RECENT_ATTEMPTS);
    let more = LogUpdate {
        recent: log.recent.clone(),
        spill: vec![attempt(0), log.spill[0].clone()],
    };
    f.store
        .mark_attempt_failed(&held, "t", "x", RetryAt::at(now), &more, Timestamp::now())
        .await
        .unwrap();
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!(row.attempt_log.first().unwrap().attempt, 2);
    let older = f.store.older_attempts(&d.id, Some(2), 10).await.unwrap();
    assert_eq!(
        older.iter().map(|e| e.attempt).collect::<Vec<_>>(),
        vec![1, 0],
        "newest first"
    );
    let older = f.store.older_attempts(&d.id, Some(1), 10).await.unwrap();
    assert_eq!(older.iter().map(|e| e.attempt).collect::<Vec<_>>(), vec![0]);
    // Each entry keeps its outcome, in the item and spilled.
    assert!(
        row.attempt_log
            .iter()
            .chain(&older)
            .all(|e| e.outcome == Some(converger_ports::AttemptOutcome::Failed)),
        "{row:?}"
    );
}

/// A recording write the SDK sends again after the first one landed (a storage stall, a lost
/// answer) finds the lease gone, but the row settled by its own attempt: done, applied once.
pub(super) async fn a_recorded_outcome_written_again_is_recognised_as_its_own(b: Backend) {
    let f = fixture(b).await;
    let info = SentInfo::default();
    let d = claimed(&f, "tok-a").await;
    assert!(
        f.store
            .mark_sent(&d, "tok-a", &info, &entry(1), Timestamp::now())
            .await
            .unwrap()
    );
    assert!(
        f.store
            .mark_sent(&d, "tok-a", &info, &entry(1), Timestamp::now())
            .await
            .unwrap(),
        "the same attempt's write again"
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.attempts),
        (DeliveryStatus::Sent, 1),
        "applied once"
    );
    assert!(
        !f.store
            .mark_sent(&d, "tok-b", &info, &entry(1), Timestamp::now())
            .await
            .unwrap(),
        "another attempt's lease is still lost"
    );
    assert!(
        !f.store
            .mark_dead(&d, "tok-b", "x", &entry(1), Timestamp::now())
            .await
            .unwrap()
    );

    let d = claimed(&f, "tok-c").await;
    let later = RetryAt::at(time::now_ms() + 60_000);
    assert!(
        f.store
            .mark_attempt_failed(&d, "tok-c", "boom", later, &entry(1), Timestamp::now())
            .await
            .unwrap()
    );
    assert!(
        f.store
            .mark_attempt_failed(&d, "tok-c", "boom", later, &entry(1), Timestamp::now())
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 1));
}

/// A new pending delivery of the fixture's channel, overdue by 10 s, claimed under `token`.
/// A failed attempt's row gives its window slot back (its retry takes one again when it is
/// due): the rule that keeps a retrying delivery from holding its channel back.
pub(super) async fn a_failed_attempt_gives_its_slot_back(b: Backend) {
    let f = fixture(b).await;
    let held = claimed_with(&f, "tok", |d| {
        d.slot = true;
        d.slot_item = 3;
    })
    .await;
    assert!((held.slot, held.slot_item) == (true, 3), "{held:?}");
    let next = time::now_ms() + 60_000;
    assert!(
        f.store
            .mark_attempt_failed(
                &held,
                "tok",
                "HTTP 503",
                RetryAt::at(next),
                &entry(1),
                Timestamp::now(),
            )
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&held.id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.slot, row.slot_item, row.next_attempt_at),
        (DeliveryStatus::Pending, false, 0, next)
    );
}

pub(super) async fn claimed(f: &Fixture, token: &str) -> Delivery {
    claimed_with(f, token, |_| {}).await
}

/// A due delivery, written as `edit` leaves it, and claimed with `token`.
pub(super) async fn claimed_with(
    f: &Fixture,
    token: &str,
    edit: impl FnOnce(&mut Delivery),
) -> Delivery {
    let now = time::now_ms();
    let a = activity(f);
    let mut d = new_delivery(
        &a,
        &f.channel,
        Tier::Bulk,
        now - 10_000,
        &a.created_at.rfc3339(),
    );
    edit(&mut d);
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    match f
        .store
        .claim(&d.id, token, Timestamp::from_ms(now), 60_000)
        .await
        .unwrap()
    {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    }
}

pub(super) async fn a_handed_off_delivery_waits_for_its_ack(b: Backend) {
    let f = fixture(b).await;
    let d = claimed(&f, "t").await;
    let now = Timestamp::now();
    assert!(
        f.store
            .mark_sent(
                &d,
                "t",
                &SentInfo {
                    handed_off: true,
                    ..SentInfo::default()
                },
                &entry(1),
                now
            )
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!(row.status, DeliveryStatus::Pending);
    assert!(row.handed_off);
    assert_eq!(row.attempts, 1);
    assert_eq!(row.lease_token, None);
    // Not retried: no claim takes it, and the sweeper's index does not hold it.
    assert!(matches!(
        f.store
            .claim(&d.id, "u", Timestamp::from_ms(time::now_ms() + 1), 60_000)
            .await
            .unwrap(),
        Claim::Settled(_)
    ));
    assert!(!in_due(&f.store, &d.id).await, "out of the due index");
    // Its channel lists it as waiting for an ack; a pending delivery not handed off is not.
    let other = claimed(&f, "v").await;
    async fn waiting(f: &Fixture, d: &Delivery) -> Vec<DeliveryId> {
        f.store
            .handed_off_deliveries(&d.tenant_id, &d.channel_id, 10, None)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| r.id)
            .collect()
    }
    assert_eq!(waiting(&f, &d).await, std::slice::from_ref(&d.id));

    // The ack: pending -> sent, once; again it reports Already.
    match f.store.acknowledge(&d, now).await.unwrap() {
        Ack::Acked(r) => {
            assert_eq!(r.status, DeliveryStatus::Sent);
            assert!(!r.handed_off);
            assert!(r.sent_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.store.acknowledge(&d, now).await.unwrap(),
        Ack::Already(_)
    ));
    assert!(
        waiting(&f, &d).await.is_empty(),
        "acknowledged: no longer waiting"
    );
    // A pending delivery that was not handed off is not waiting for an ack.
    assert!(matches!(
        f.store.acknowledge(&other, now).await.unwrap(),
        Ack::NotAwaiting(_)
    ));
    assert!(matches!(
        f.store
            .acknowledge(
                &Delivery {
                    id: DeliveryId::generate(),
                    ..d.clone()
                },
                now
            )
            .await
            .unwrap(),
        Ack::Missing
    ));
}

pub(super) async fn receipts_find_their_delivery_and_move_it_forward(b: Backend) {
    let f = fixture(b).await;
    let d = claimed(&f, "t").await;
    let now = Timestamp::now();
    let info = SentInfo {
        provider_message_id: Some("wamid.1".into()),
        response_status: Some(200),
        handed_off: false,
    };
    assert!(
        f.store
            .mark_sent(&d, "t", &info, &entry(1), now)
            .await
            .unwrap()
    );
    let ch = f.channel.id.clone();
    let apply = |st: DeliveryStatus, id: &'static str| {
        let (store, ch, now) = (f.store.clone(), ch.clone(), now);
        async move {
            store
                .apply_receipt(&ch, id, st, Some("undeliverable"), now)
                .await
                .unwrap()
        }
    };
    match apply(DeliveryStatus::Delivered, "wamid.1").await {
        Receipted::Applied { from, row } => {
            assert_eq!(from, DeliveryStatus::Sent);
            assert_eq!(row.status, DeliveryStatus::Delivered);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        apply(DeliveryStatus::Delivered, "wamid.1").await,
        Receipted::Ignored(_)
    ));
    assert!(matches!(
        apply(DeliveryStatus::Read, "wamid.1").await,
        Receipted::Applied { .. }
    ));
    assert!(matches!(
        apply(DeliveryStatus::Failed, "wamid.1").await,
        Receipted::Ignored(_)
    ));
    assert!(matches!(
        apply(DeliveryStatus::Read, "wamid.unknown").await,
        Receipted::Unknown
    ));
    // Another channel's id space: the same provider id is unknown there.
    assert!(matches!(
        f.store
            .apply_receipt(
                &converger_core::ChannelId::generate(),
                "wamid.1",
                DeliveryStatus::Read,
                None,
                now
            )
            .await
            .unwrap(),
        Receipted::Unknown
    ));
    // Failed from sent, with the provider's reason; the row lists as failed.
    let d2 = claimed(&f, "t2").await;
    let info2 = SentInfo {
        provider_message_id: Some("wamid.2".into()),
        response_status: Some(200),
        handed_off: false,
    };
    assert!(
        f.store
            .mark_sent(&d2, "t2", &info2, &entry(1), now)
            .await
            .unwrap()
    );
    let Receipted::Applied { row, .. } = apply(DeliveryStatus::Failed, "wamid.2").await else {
        panic!()
    };
    assert_eq!(row.status, DeliveryStatus::Failed);
    assert_eq!(row.last_error.as_deref(), Some("undeliverable"));
    let listed = f
        .store
        .list_deliveries(&converger_ports::DeliveryQuery {
            status: Some(DeliveryStatus::Failed),
            channel: Some(ch.clone()),
            ..converger_ports::DeliveryQuery::of_tenant(f.tenant.id.clone(), 10)
        })
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].id, d2.id);

    // Replayed (pending again, due now, with its provider id) and then a late receipt from
    // its earlier send: it leaves pending, and the due index with it.
    use converger_core::query::{Actor, ActorKind};
    use converger_ports::AuditEntry;
    let actor = Actor {
        kind: ActorKind::TenantApi,
        id: "key_1".into(),
    };
    let audit = AuditEntry::new(
        f.tenant.id.clone(),
        actor.clone(),
        "retry",
        "delivery",
        row.id.as_str(),
        json!({}),
        now,
    );
    let replayed = f
        .store
        .replay_many(
            std::slice::from_ref(&row),
            &actor,
            Timestamp::from_ms(time::now_ms()),
            &[audit],
        )
        .await
        .unwrap();
    assert_eq!(replayed[0].status, DeliveryStatus::Pending);
    assert!(in_due(&f.store, &d2.id).await);
    let Receipted::Applied { row, .. } = apply(DeliveryStatus::Delivered, "wamid.2").await else {
        panic!()
    };
    assert_eq!(row.status, DeliveryStatus::Delivered);
    assert!(
        !in_due(&f.store, &d2.id).await,
        "a receipt that settles a pending row takes it out of the due index"
    );
}

/// Whether `id` is in the due index, due within the next minute.
pub(super) async fn in_due(
    store: &std::sync::Arc<dyn Store>,
    id: &converger_core::DeliveryId,
) -> bool {
    store
        .overdue(
            DuePart::Waiting,
            converger_ports::due_shard(id),
            time::now_ms() + 60_000,
            100,
            None,
        )
        .await
        .unwrap()
        .items
        .iter()
        .any(|o| &o.id == id)
}

/// A delivery handed off by a version before the channel index held hand-offs has no entry
/// there: the upgrade's backfill puts it in (once: a second run moves nothing), so a replay
/// finds it; an acknowledged one is left alone.
#[tokio::test]
async fn the_upgrade_backfill_puts_earlier_hand_offs_in_their_channel_index() {
    let f = fixture(Backend::Dynamo).await;
    let t = f.t.as_ref().unwrap();
    let store = DynamoStore::new(t.dynamodb.clone(), t.resources.clone());
    let handed_off = SentInfo {
        handed_off: true,
        ..SentInfo::default()
    };
    let now = Timestamp::now();
    let (old, acked) = (claimed(&f, "t").await, claimed(&f, "u").await);
    for (d, token) in [(&old, "t"), (&acked, "u")] {
        assert!(
            f.store
                .mark_sent(d, token, &handed_off, &entry(1), now)
                .await
                .unwrap()
        );
    }
    assert!(matches!(
        f.store.acknowledge(&acked, now).await.unwrap(),
        Ack::Acked(_)
    ));
    // As an earlier version left it: no channel index entry.
    t.dynamodb
        .update_item()
        .table_name(&t.resources.deliveries)
        .key(
            "id",
            aws_sdk_dynamodb::types::AttributeValue::S(old.id.to_string()),
        )
        .update_expression("REMOVE cl_pk")
        .send()
        .await
        .unwrap();
    let waiting = || async {
        f.store
            .handed_off_deliveries(&f.tenant.id, &f.channel.id, 10, None)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    assert!(waiting().await.is_empty());
    assert_eq!(store.backfill_handoff_index().await.unwrap(), 1);
    assert_eq!(waiting().await, std::slice::from_ref(&old.id));
    assert_eq!(store.backfill_handoff_index().await.unwrap(), 0, "once");
}
