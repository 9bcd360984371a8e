//! Listings: a tenant's deliveries paged across shards, replay jobs, a conversation's activities.

use super::*;
use converger_core::Timestamp;

pub(super) fn failed_row(f: &Fixture, updated_at: &str) -> Delivery {
    let a = activity(f);
    let mut d = new_delivery(&a, &f.channel, Tier::Bulk, 0, updated_at);
    d.status = DeliveryStatus::Failed;
    d.attempts = 3;
    d.last_error = Some("webhook: HTTP 503".into());
    d
}

/// A delivery carries its activity's event type, and a listing filtered by it returns only
/// those deliveries: through the tenant's listing index and through the channel's (dead
/// letters), page after page.
pub(super) async fn listings_filter_by_event_type_on_both_indexes(b: Backend) {
    use converger_ports::DeliveryQuery;
    let f = fixture(b).await;
    let mut ids = std::collections::BTreeMap::<&str, Vec<DeliveryId>>::new();
    for i in 0..6 {
        let kind = if i % 3 == 0 {
            "order.paid"
        } else {
            "order.created"
        };
        let a = Activity {
            event_type: Some(kind.into()),
            ..activity(&f)
        };
        let mut d = failed_row(&f, &format!("2026-01-01T00:00:0{i}.000000Z"));
        d = Delivery {
            id: DeliveryId::for_pair(&a.id, &f.channel.id),
            activity_id: a.id.clone(),
            event_type: a.event_type.clone(),
            ..d
        };
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap();
        ids.entry(kind).or_default().push(d.id);
    }
    let read = |channel: Option<converger_core::ChannelId>, kind: &'static str| {
        let f = &f;
        async move {
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = f
                    .store
                    .list_deliveries(&DeliveryQuery {
                        tenant: f.tenant.id.clone(),
                        status: Some(DeliveryStatus::Failed),
                        channel: channel.clone(),
                        from_key: None,
                        to_key: None,
                        error_contains: None,
                        event_type: Some(kind.into()),
                        activity: None,
                        newest_first: false,
                        limit: 1,
                        after,
                    })
                    .await
                    .unwrap();
                for d in &page.items {
                    assert_eq!(d.event_type.as_deref(), Some(kind), "{d:?}");
                    seen.push(d.id.clone());
                }
                match page.next {
                    Some(c) => after = Some(c),
                    None => break,
                }
            }
            seen
        }
    };
    for channel in [None, Some(f.channel.id.clone())] {
        assert_eq!(read(channel.clone(), "order.paid").await, ids["order.paid"]);
        assert_eq!(
            read(channel.clone(), "order.created").await,
            ids["order.created"]
        );
        assert!(read(channel, "order.refunded").await.is_empty());
    }
}

pub(super) async fn listing_pages_in_order_and_replays_are_disjoint(b: Backend) {
    use converger_core::query::{Actor, ActorKind};
    use converger_ports::{AuditEntry, DeliveryQuery};
    let f = fixture(b).await;
    // Seven dead letters, one per second of an old minute.
    let rows: Vec<Delivery> = (0..7)
        .map(|i| failed_row(&f, &format!("2026-01-01T00:00:0{i}.000000Z")))
        .collect();
    for d in &rows {
        let a = Activity {
            event_type: None,
            id: d.activity_id.clone(),
            ..activity(&f)
        };
        f.store
            .create_activity(&a, std::slice::from_ref(d))
            .await
            .unwrap();
    }
    // Counts through the status index, up to a cap.
    let count = |st, cap| f.store.count_by_status(&f.tenant.id, st, cap);
    assert_eq!(count(DeliveryStatus::Failed, 100).await.unwrap(), 7);
    assert_eq!(count(DeliveryStatus::Sent, 100).await.unwrap(), 0);
    let capped = count(DeliveryStatus::Failed, 3).await.unwrap();
    assert!((3..=7).contains(&capped), "{capped}");
    assert_eq!(
        f.store
            .count_by_status(&TenantId::generate(), DeliveryStatus::Failed, 100)
            .await
            .unwrap(),
        0,
        "another tenant's count"
    );
    let query = |after| DeliveryQuery {
        tenant: f.tenant.id.clone(),
        status: Some(DeliveryStatus::Failed),
        channel: Some(f.channel.id.clone()),
        from_key: None,
        to_key: None,
        error_contains: Some("503".into()),
        event_type: None,
        activity: None,
        newest_first: false,
        limit: 3,
        after,
    };
    let mut seen = Vec::new();
    let mut after = None;
    for _ in 0..5 {
        let page = f.store.list_deliveries(&query(after)).await.unwrap();
        seen.extend(page.items.iter().map(|d| d.id.clone()));
        match page.next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    assert_eq!(
        seen,
        rows.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        "oldest first, each once"
    );
    let one = DeliveryQuery {
        activity: Some(rows[3].activity_id.clone()),
        ..query(None)
    };
    let found = f.store.list_deliveries(&one).await.unwrap();
    assert_eq!(
        found.items.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        vec![rows[3].id.clone()]
    );
    assert!(found.next.is_none());
    let other = DeliveryQuery {
        tenant: TenantId::generate(),
        after: None,
        ..query(None)
    };
    assert!(
        f.store
            .list_deliveries(&other)
            .await
            .unwrap()
            .items
            .is_empty(),
        "scoped to the tenant"
    );

    // Two overlapping replays: every row is replayed by exactly one of them.
    let actor = Actor {
        kind: ActorKind::System,
        id: "test".into(),
    };
    let audits = |rs: &[Delivery]| -> Vec<AuditEntry> {
        rs.iter()
            .map(|d| {
                AuditEntry::new(
                    d.tenant_id.clone(),
                    actor.clone(),
                    "retry",
                    "delivery",
                    d.id.as_str(),
                    json!({"bulk": true}),
                    converger_core::Timestamp::now(),
                )
            })
            .collect()
    };
    let (x, y) = (&rows[0..5], &rows[2..7]);
    let now = time::now_ms();
    let (ax, ay) = (audits(x), audits(y));
    let (rx, ry) = tokio::join!(
        f.store.replay_many(x, &actor, Timestamp::from_ms(now), &ax),
        f.store.replay_many(y, &actor, Timestamp::from_ms(now), &ay),
    );
    let (rx, ry) = (rx.unwrap(), ry.unwrap());
    assert_eq!(rx.len() + ry.len(), 7, "disjoint and complete");
    let back = f
        .store
        .get_deliveries(&rows.iter().map(|d| d.id.clone()).collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(
        back.iter()
            .all(|d| d.status == DeliveryStatus::Pending && d.retry_count == 1 && d.attempts == 0)
    );
    assert!(
        back.iter()
            .all(|d| d.retried_by.as_deref() == Some("system:test"))
    );
    let again = f
        .store
        .replay_many(
            &rows[0..1],
            &actor,
            Timestamp::from_ms(now),
            &audits(&rows[0..1]),
        )
        .await
        .unwrap();
    assert!(again.is_empty(), "a pending delivery is not replayed");
    // The same request sent again after it committed (its answer lost: the SDK retries a
    // transaction that timed out) reports what it replayed, and writes nothing twice.
    let resent = f
        .store
        .replay_many(x, &actor, Timestamp::from_ms(now), &ax)
        .await
        .unwrap();
    let rx_ids: Vec<_> = rx.iter().map(|d| d.id.clone()).collect();
    assert_eq!(
        resent.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        rx_ids,
        "the rows this request replayed, and only those"
    );
    let audit = f.store.list_audit(&f.tenant.id, 100, None).await.unwrap();
    assert_eq!(audit.items.len(), 7, "one audit entry per replay");
    let page = f.store.list_audit(&f.tenant.id, 4, None).await.unwrap();
    let rest = f
        .store
        .list_audit(&f.tenant.id, 4, page.next.as_ref())
        .await
        .unwrap();
    assert_eq!(page.items.len() + rest.items.len(), 7);
}

/// The tenant listing is spread over the tenant's shards (and a channel's dead letters over
/// the channel index's): a listing reads them all and merges them, so that paging gives every
/// row once, in order, across shard boundaries and ties of `updated_at`, in both directions,
/// for each filter the indexes serve.
pub(super) async fn sharded_listings_page_every_row_once_across_shards_and_ties(b: Backend) {
    use converger_ports::DeliveryQuery;
    let f = fixture(b).await;
    let other_channel = Channel::new(
        f.tenant.id.clone(),
        ChannelType::Webhook,
        "second",
        Map::new(),
        converger_core::Timestamp::now(),
    );
    f.store.create_channel(&other_channel).await.unwrap();
    // 36 rows, three statuses, two channels, and only three distinct times: most rows tie.
    let statuses = [
        DeliveryStatus::Failed,
        DeliveryStatus::Sent,
        DeliveryStatus::Paused,
    ];
    let mut rows = Vec::new();
    for i in 0..36usize {
        let channel = if i % 4 == 0 {
            &other_channel
        } else {
            &f.channel
        };
        let a = Activity {
            channel_ids: vec![channel.id.clone()],
            ..activity(&f)
        };
        let at = format!("2026-01-01T00:00:0{}.000000Z", i % 3);
        let mut d = new_delivery(&a, channel, Tier::Bulk, 0, &at);
        d.status = statuses[i % 3];
        d.last_error = Some(format!("error {}", i % 2));
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap();
        rows.push(d);
    }
    let shards: std::collections::BTreeSet<u32> = rows.iter().map(|d| d.shard).collect();
    assert!(shards.len() > 1, "rows in several shards: {shards:?}");
    let pages = |q: DeliveryQuery| every_page(&f, q);
    let base = tenant_query(&f, 4);
    let expected = |keep: &dyn Fn(&Delivery) -> bool, newest_first: bool| {
        let mut want: Vec<&Delivery> = rows.iter().filter(|d| keep(d)).collect();
        want.sort_by_key(|d| d.sort_key());
        if newest_first {
            want.reverse();
        }
        want.into_iter().map(|d| d.id.clone()).collect::<Vec<_>>()
    };
    for newest_first in [true, false] {
        // Every status at once, across all shards of every status.
        let q = DeliveryQuery {
            newest_first,
            ..base.clone()
        };
        assert_eq!(
            pages(q).await,
            expected(&|_| true, newest_first),
            "all, newest_first {newest_first}"
        );
        // One status.
        let q = DeliveryQuery {
            status: Some(DeliveryStatus::Sent),
            newest_first,
            ..base.clone()
        };
        assert_eq!(
            pages(q).await,
            expected(&|d| d.status == DeliveryStatus::Sent, newest_first),
            "sent, newest_first {newest_first}"
        );
        // A channel's dead letters (the channel index), with an error filter.
        let q = DeliveryQuery {
            status: Some(DeliveryStatus::Failed),
            channel: Some(f.channel.id.clone()),
            error_contains: Some("error 1".into()),
            newest_first,
            ..base.clone()
        };
        assert_eq!(
            pages(q).await,
            expected(
                &|d| d.status == DeliveryStatus::Failed
                    && d.channel_id == f.channel.id
                    && d.last_error.as_deref() == Some("error 1"),
                newest_first
            ),
            "a channel's dead letters, newest_first {newest_first}"
        );
        // A channel's sent rows (the tenant listing, filtered by channel).
        let q = DeliveryQuery {
            status: Some(DeliveryStatus::Sent),
            channel: Some(other_channel.id.clone()),
            newest_first,
            ..base.clone()
        };
        assert_eq!(
            pages(q).await,
            expected(
                &|d| d.status == DeliveryStatus::Sent && d.channel_id == other_channel.id,
                newest_first
            ),
            "a channel's sent rows, newest_first {newest_first}"
        );
    }
    // Bounded by a range of sort keys, the bounds included.
    let lo = rows[1].sort_key().min(rows[2].sort_key());
    let hi = rows[1].sort_key().max(rows[2].sort_key());
    let q = DeliveryQuery {
        from_key: Some(lo.clone()),
        to_key: Some(hi.clone()),
        ..base.clone()
    };
    assert_eq!(
        pages(q).await,
        expected(&|d| d.sort_key() >= lo && d.sort_key() <= hi, true),
        "a range"
    );
    // Counts add up the shards.
    for st in statuses {
        assert_eq!(
            f.store
                .count_by_status(&f.tenant.id, st, 1000)
                .await
                .unwrap(),
            rows.iter().filter(|d| d.status == st).count() as u64
        );
    }
    // A parked delivery of each shard is found for its release.
    let parked = f.store.parked(&f.channel.id, 100).await.unwrap();
    let mut got: Vec<_> = parked.iter().map(|d| d.id.clone()).collect();
    got.sort();
    let mut want: Vec<_> = rows
        .iter()
        .filter(|d| d.status == DeliveryStatus::Paused && d.channel_id == f.channel.id)
        .map(|d| d.id.clone())
        .collect();
    want.sort();
    assert_eq!(got, want);
}

pub(super) async fn replay_jobs_save_with_a_version(b: Backend) {
    use converger_core::query::{Actor, ActorKind};
    use converger_ports::ReplayJob;
    let f = fixture(b).await;
    let mut job = ReplayJob {
        id: "rpl_test".into(),
        tenant_id: f.tenant.id.clone(),
        channel_id: f.channel.id.clone(),
        from_key: None,
        to_key: time::now_rfc3339(),
        activity_id: None,
        limit: 10,
        actor: Actor {
            kind: ActorKind::TenantApi,
            id: "key_x".into(),
        },
        status: "running".into(),
        retried: 0,
        has_more: false,
        cursor: None,
        error: None,
        version: 0,
        created_at: converger_core::Timestamp::now(),
        updated_at: converger_core::Timestamp::now(),
        expires_at: time::now_ms() / 1000 + 60,
    };
    f.store.create_replay_job(&job).await.unwrap();
    assert!(
        f.store.create_replay_job(&job).await.is_err(),
        "ids are unique"
    );
    job.version = 1;
    job.retried = 5;
    assert!(f.store.save_replay_job(&job).await.unwrap());
    assert!(
        !f.store.save_replay_job(&job).await.unwrap(),
        "a stale version loses"
    );
    assert_eq!(
        f.store
            .get_replay_job("rpl_test")
            .await
            .unwrap()
            .unwrap()
            .retried,
        5
    );
    assert_eq!(f.store.get_replay_job("rpl_nope").await.unwrap(), None);
}

pub(super) async fn a_conversation_lists_its_activities_in_seq_order(backend: Backend) {
    let f = fixture(backend).await;
    let now_ms = time::now_ms();
    // Seqs 0..7 written out of order, one in another conversation, one expired, one of
    // another tenant in the same conversation id.
    // Two with seq 3 (a producer may repeat one): a page ends between them.
    for seq in [3u64, 0, 6, 1, 5, 2, 4, 3] {
        let mut a = conv_activity(&f, "conv-list");
        a.seq = seq;
        a.event_type = Some("message.created".into());
        f.store.create_activity(&a, &[]).await.unwrap();
    }
    let mut other = conv_activity(&f, "conv-other");
    other.seq = 2;
    f.store.create_activity(&other, &[]).await.unwrap();
    let mut old = conv_activity(&f, "conv-list");
    old.seq = 7;
    old.expires_at = Some(now_ms / 1000 - 10);
    f.store.create_activity(&old, &[]).await.unwrap();
    let mut foreign = conv_activity(&f, "conv-list");
    foreign.tenant_id = TenantId::generate();
    foreign.seq = 8;
    f.store.create_activity(&foreign, &[]).await.unwrap();

    let (mut seqs, mut ids, mut after) = (Vec::new(), Vec::new(), None::<(u64, ActivityId)>);
    loop {
        let (page, more) = f
            .store
            .conversation_activities(&f.tenant.id, "conv-list", after.as_ref(), 4)
            .await
            .unwrap();
        assert!(page.len() <= 4);
        for a in &page {
            assert_eq!(a.conversation_id, "conv-list");
            assert_eq!(a.event_type.as_deref(), Some("message.created"));
            seqs.push(a.seq);
            ids.push(a.id.clone());
        }
        after = page.last().map(|a| (a.seq, a.id.clone()));
        if !more {
            break;
        }
    }
    assert_eq!(seqs, [0, 1, 2, 3, 3, 4, 5, 6]);
    ids.dedup();
    assert_eq!(ids.len(), 8, "each once");
    let (none, more) = f
        .store
        .conversation_activities(&f.tenant.id, "conv-none", None, 10)
        .await
        .unwrap();
    assert!(none.is_empty() && !more);
}

pub(super) fn conv_activity(f: &Fixture, conversation: &str) -> Activity {
    Activity {
        conversation_id: conversation.into(),
        channel_ids: vec![],
        ..activity(f)
    }
}

/// A tenant's audit log is spread over partitions by entry id: a page reads them all and
/// merges them newest first, so that paging gives every entry once, in order, across
/// partition boundaries and entries written in the same instant; another tenant's entries
/// never show.
pub(super) async fn the_audit_log_pages_every_entry_once_across_its_partitions_and_ties(
    b: Backend,
) {
    use converger_core::query::{Actor, ActorKind};
    use converger_ports::{AUDIT_SHARDS, AuditEntry, audit_partition};
    let f = fixture(b).await;
    let actor = Actor {
        kind: ActorKind::System,
        id: "test".into(),
    };
    // 40 entries at 10 instants, four at each: every partition holds some, ties everywhere.
    let mut written = Vec::new();
    for i in 0..40 {
        let at = format!("2026-12-03T10:00:{:02}.000000Z", i / 4);
        let e = AuditEntry::new(
            f.tenant.id.clone(),
            actor.clone(),
            "retry",
            "delivery",
            &format!("dlv_{i}"),
            json!({"bulk": true}),
            Timestamp::parse(&at).unwrap(),
        );
        f.store.add_audit(&e).await.unwrap();
        written.push(e);
    }
    let parts: std::collections::HashSet<String> = written
        .iter()
        .map(|e| audit_partition(&e.tenant_id, &e.id))
        .collect();
    assert!(parts.len() > 1 && parts.len() as u32 <= AUDIT_SHARDS);
    let other = converger_core::TenantId::generate();
    f.store
        .add_audit(&AuditEntry::new(
            other,
            actor.clone(),
            "retry",
            "delivery",
            "dlv_x",
            json!({}),
            Timestamp::parse("2026-12-03T10:00:05.000000Z").unwrap(),
        ))
        .await
        .unwrap();
    let mut expected: Vec<String> = written.iter().map(AuditEntry::sort_key).collect();
    expected.sort_unstable_by(|a, b| b.cmp(a));
    for page_size in [1, 3, 7, 40, 100] {
        let (mut got, mut cursor) = (Vec::new(), None);
        for _ in 0..100 {
            let page = f
                .store
                .list_audit(&f.tenant.id, page_size, cursor.as_ref())
                .await
                .unwrap();
            assert!(page.items.len() <= page_size);
            got.extend(page.items.iter().map(AuditEntry::sort_key));
            cursor = page.next;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(got, expected, "pages of {page_size}");
    }
}

/// Listing shards granted for a while (`converger_core::shards`): a tenant's listing pages
/// every row once whether it was created before, during or after the grant, or created
/// during it and changed after; a stale grant write is refused.
pub(super) async fn listings_stay_exact_across_granted_shards(b: Backend) {
    use converger_core::shards::Grant;
    use converger_ports::{DeliveryQuery, ShardGrants};
    let f = fixture(b).await;
    let ms = |t: &str| converger_core::time::rfc3339_to_ms(t).unwrap();
    let grant = Grant {
        shards: 64,
        from_ms: ms("2026-01-01T00:10:00.000000Z"),
        until_ms: ms("2026-01-01T00:20:00.000000Z"),
    };
    // Made, then renewed: each version is written once, a second write of it refused.
    let first = ShardGrants::default().with(grant, grant.from_ms, 86_400_000);
    let grants = first.with(grant, grant.from_ms + 60_000, 86_400_000);
    for g in [&first, &grants] {
        let written = [
            f.store.write_shard_grants(&f.tenant.id, g).await.unwrap(),
            f.store.write_shard_grants(&f.tenant.id, g).await.unwrap(),
        ];
        assert_eq!(written, [true, false], "version {}", g.v);
    }
    let tenant = f.store.get_tenant(&f.tenant.id).await.unwrap().unwrap();
    assert_eq!((tenant.shard_grants.clone(), grants.v), (grants.clone(), 2));
    assert_eq!(tenant.delivery_shards(), 8);
    // Created before, during and after the grant; the last group created during it and
    // changed after it.
    let groups = [
        ("2026-01-01T00:05:0", None),
        ("2026-01-01T00:12:0", None),
        ("2026-01-01T00:25:0", None),
        ("2026-01-01T00:15:0", Some("2026-01-01T00:40:0")),
    ];
    let statuses = [DeliveryStatus::Sent, DeliveryStatus::Failed];
    let mut rows = Vec::new();
    let mut granted = 0;
    for (g, (created, changed)) in groups.iter().enumerate() {
        for i in 0..12usize {
            let a = activity(&f);
            let at = format!("{created}{}.000000Z", i % 4);
            let mut d = new_delivery(&a, &f.channel, Tier::Bulk, 0, &at).placed(&tenant, ms(&at));
            if let Some(later) = changed {
                d.updated_at = Timestamp::parse(&format!("{later}{}.000000Z", i % 4)).unwrap();
            }
            d.status = statuses[(g + i) % 2];
            if d.listing_shard(d.updated_at) >= 8 {
                granted += 1;
            }
            f.store
                .create_activity(&a, std::slice::from_ref(&d))
                .await
                .unwrap();
            rows.push(d);
        }
    }
    assert!(granted > 4, "rows listed in granted shards: {granted}");
    let base = tenant_query(&f, 5);
    for newest_first in [true, false] {
        for status in [
            None,
            Some(DeliveryStatus::Sent),
            Some(DeliveryStatus::Failed),
        ] {
            let q = DeliveryQuery {
                newest_first,
                status,
                ..base.clone()
            };
            let seen = every_page(&f, q).await;
            let mut want: Vec<&Delivery> = rows
                .iter()
                .filter(|d| status.is_none_or(|s| d.status == s))
                .collect();
            want.sort_by_key(|d| d.sort_key());
            if newest_first {
                want.reverse();
            }
            let want: Vec<_> = want.into_iter().map(|d| d.id.clone()).collect();
            assert_eq!(seen, want, "status {status:?}, newest_first {newest_first}");
        }
    }
    for st in statuses {
        assert_eq!(
            f.store
                .count_by_status(&f.tenant.id, st, 1000)
                .await
                .unwrap(),
            rows.iter().filter(|d| d.status == st).count() as u64
        );
    }
    // A grant written between two pages (a tenant's rate rose while a client paged): the
    // listing goes on from its cursor over the shards the grants now name, every row once.
    let q = DeliveryQuery {
        newest_first: true,
        ..base.clone()
    };
    let first_page = f.store.list_deliveries(&q).await.unwrap();
    let later = Grant {
        shards: 16,
        from_ms: ms("2026-01-01T01:00:00.000000Z"),
        until_ms: ms("2026-01-01T01:10:00.000000Z"),
    };
    let more = grants.with(later, later.from_ms, 86_400_000);
    assert!(
        f.store
            .write_shard_grants(&f.tenant.id, &more)
            .await
            .unwrap()
    );
    let mut seen: Vec<DeliveryId> = first_page.items.iter().map(|d| d.id.clone()).collect();
    let mut after = first_page.next;
    while let Some(cursor) = after {
        let page = f
            .store
            .list_deliveries(&DeliveryQuery {
                after: Some(cursor),
                limit: 20,
                ..q.clone()
            })
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|d| d.id.clone()));
        after = page.next;
        assert!(seen.len() <= rows.len(), "a row listed twice");
    }
    let mut want: Vec<&Delivery> = rows.iter().collect();
    want.sort_by_key(|d| d.sort_key());
    want.reverse();
    let want: Vec<DeliveryId> = want.into_iter().map(|d| d.id.clone()).collect();
    assert_eq!(seen, want);
}

/// Every listing query of the fixture's tenant, newest first, `limit` a page.
fn tenant_query(f: &Fixture, limit: usize) -> converger_ports::DeliveryQuery {
    converger_ports::DeliveryQuery::of_tenant(f.tenant.id.clone(), limit)
}

/// The ids `q` lists, page after page by its cursor (each page within its limit).
async fn every_page(f: &Fixture, q: converger_ports::DeliveryQuery) -> Vec<DeliveryId> {
    let mut seen = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let page = f
            .store
            .list_deliveries(&converger_ports::DeliveryQuery {
                after: after.clone(),
                ..q.clone()
            })
            .await
            .unwrap();
        assert!(page.items.len() <= q.limit);
        seen.extend(page.items.iter().map(|d| d.id.clone()));
        match page.next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    seen
}
