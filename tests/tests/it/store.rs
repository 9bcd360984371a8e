//! The store conformance suite: every test runs against the DynamoDB backend on the emulator
//! (over HTTP, with the real SDK) and against the in-process backend, so both keep the same
//! conditional semantics: the transitions that keep one delivery from being attempted twice at
//! once, the due index, the attempt log, listing and replays.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::CircuitState;
use converger_core::{ActivityId, ChannelType, DeliveryId, DeliveryStatus, TenantId, Tier, time};
use converger_memory::MemStore;
use converger_ports::{
    Ack, Activity, AttemptEntry, Channel, ChannelPatch, Claim, Connection, Created, Delivery,
    DuePart, LogUpdate, Mark, Outcome, Placement, Receipted, RetryAt, SecretRotation, SentInfo,
    Settle, SlotTake, Store, Tenant, Transition,
};
use converger_store::dynamo::DynamoStore;
use converger_tests::TestStack;
use serde_json::{Map, json};
use std::sync::Arc;

#[derive(Clone, Copy)]
enum Backend {
    Dynamo,
    Memory,
}

struct Fixture {
    t: Option<TestStack>,
    store: Arc<dyn Store>,
    tenant: Tenant,
    channel: Channel,
}

impl Fixture {
    async fn stop(self) {
        if let Some(t) = self.t {
            t.stop().await;
        }
    }
}

/// Runs each named test against both backends.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod dynamo {
            $( #[tokio::test] async fn $name() { super::$name(super::Backend::Dynamo).await } )*
        }
        mod memory {
            $( #[tokio::test] async fn $name() { super::$name(super::Backend::Memory).await } )*
        }
    };
}

conformance!(
    tenants_channels_and_activities_round_trip,
    a_fresh_activity_is_written_whole_and_is_due,
    a_lease_admits_one_attempt_at_a_time,
    a_recorded_outcome_written_again_is_recognised_as_its_own,
    dead_letters_and_missing_rows,
    only_pending_deliveries_are_in_the_due_index,
    the_due_index_has_the_deployments_shard_count,
    a_first_try_joins_its_tenants_listing_when_its_attempt_ends,
    old_attempts_spill_out_of_the_item,
    listing_pages_in_order_and_replays_are_disjoint,
    sharded_listings_page_every_row_once_across_shards_and_ties,
    replay_jobs_save_with_a_version,
    window_slots_are_capped_idempotent_and_closed_only,
    breaker_transitions_have_one_winner,
    backlog_and_parking_move_rows_between_indexes,
    rate_schedules_allow_a_burst_then_the_rate,
    a_handed_off_delivery_waits_for_its_ack,
    receipts_find_their_delivery_and_move_it_forward,
    connections_are_found_by_channel,
    users_tenants_and_keys,
    rows_past_their_retention_read_as_absent,
    scoped_reads_see_only_their_tenant,
    channel_lifecycle_lists_rotates_and_deletes,
    a_conversation_lists_its_activities_in_seq_order,
    idempotency_keys_are_held_once_answered_freed_and_taken_over,
);

async fn fixture(backend: Backend) -> Fixture {
    let (t, store): (Option<TestStack>, Arc<dyn Store>) = match backend {
        Backend::Dynamo => {
            let t = TestStack::on_emulator().await;
            let store =
                DynamoStore::new(t.aws().clients.dynamodb.clone(), t.aws().resources.clone())
                    .with_serial_transactions(true);
            (Some(t), Arc::new(store))
        }
        Backend::Memory => (None, Arc::new(MemStore::new())),
    };
    let now = time::now_rfc3339();
    let tenant = Tenant {
        id: TenantId::generate(),
        name: "store test".into(),
        tier: Tier::Bulk,
        created_at: now.clone(),
        alert_webhook_url: None,
        alert_channel_id: None,
        api_rate_limit: None,
        delivery_shards: None,
        email_senders: Vec::new(),
        ses_tenant: None,
    };
    store.create_tenant(&tenant, "hash-1").await.unwrap();
    let channel = Channel::new(
        tenant.id.clone(),
        ChannelType::Echo,
        "echo",
        Map::new(),
        &now,
    );
    store.create_channel(&channel).await.unwrap();
    Fixture {
        t,
        store,
        tenant,
        channel,
    }
}

fn activity(f: &Fixture) -> Activity {
    Activity {
        event_type: None,
        id: ActivityId::generate(),
        tenant_id: f.tenant.id.clone(),
        conversation_id: "c".into(),
        seq: 1,
        payload: json!({"a": [1, 2.5, "x", null, {"b": true}]}),
        channel_ids: vec![f.channel.id.clone()],
        created_at: time::now_rfc3339(),
        expires_at: None,
    }
}

/// A delivery of the fixture's tenant, in one of its listing shards as ingest places it (the
/// tenant is a bulk one: 8 shards), so that every listing test reads across shards.
fn new_delivery(a: &Activity, c: &Channel, tier: Tier, due_ms: i64, now: &str) -> Delivery {
    Delivery::new(a, c, tier, due_ms, now).in_shards(8)
}

fn entry(n: u32) -> LogUpdate {
    LogUpdate::append(&[], attempt(n))
}

fn attempt(n: u32) -> AttemptEntry {
    AttemptEntry {
        attempt: n,
        started_at: time::now_rfc3339(),
        duration_ms: 3,
        status_code: Some(503),
        response_snippet: None,
        error: Some("boom".into()),
        next_retry_at: None,
        trigger: "auto".into(),
        expires_at: None,
    }
}

async fn tenants_channels_and_activities_round_trip(b: Backend) {
    let f = fixture(b).await;
    assert_eq!(
        f.store.get_tenant(&f.tenant.id).await.unwrap(),
        Some(f.tenant.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-1").await.unwrap(),
        Some(f.tenant.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-2").await.unwrap(),
        None
    );
    assert!(
        f.store.create_channel(&f.channel).await.is_err(),
        "ids are unique"
    );

    let patched = f
        .store
        .update_channel(
            &f.tenant.id,
            &f.channel.id,
            &ChannelPatch {
                active: Some(false),
                ..Default::default()
            },
            "2030-01-01T00:00:00.000000Z",
        )
        .await
        .unwrap()
        .unwrap();
    assert!(!patched.active);
    assert_eq!(
        patched.signing_secret, f.channel.signing_secret,
        "a patch leaves other fields alone"
    );
    // Middleware steps are kept as written, and an empty list removes them.
    let steps = converger_core::middleware::parse(&serde_json::json!([
        {"type": "halt", "if": "payload.x == 1", "reason": "x is one"},
        {"type": "transform", "script": "payload.y = 2;"},
    ]))
    .unwrap();
    for want in [steps, Vec::new()] {
        let patched = f
            .store
            .update_channel(
                &f.tenant.id,
                &f.channel.id,
                &ChannelPatch {
                    middleware: Some(want.clone()),
                    ..Default::default()
                },
                "2030-01-01T00:00:00.000000Z",
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(patched.middleware, want);
        let read = f.store.get_channel(&f.channel.id).await.unwrap().unwrap();
        assert_eq!(read.middleware, want);
    }
    let other = TenantId::generate();
    assert_eq!(
        f.store
            .update_channel(&other, &f.channel.id, &ChannelPatch::default(), "x")
            .await
            .unwrap(),
        None,
        "another tenant cannot update the channel"
    );

    assert_eq!(f.store.next_seq(&f.tenant.id, "conv").await.unwrap(), 1);
    assert_eq!(f.store.next_seq(&f.tenant.id, "conv").await.unwrap(), 2);
    assert_eq!(f.store.next_seq(&f.tenant.id, "other").await.unwrap(), 1);

    let a = activity(&f);
    let d = new_delivery(&a, &f.channel, Tier::Bulk, time::now_ms(), &a.created_at);
    assert_eq!(
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap(),
        Created::New
    );
    assert_eq!(
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap(),
        Created::Duplicate
    );
    assert_eq!(
        f.store.get_activity(&a.tenant_id, &a.id).await.unwrap(),
        Some(a.clone())
    );
    // Activity ids are per tenant: another tenant reads nothing under the id, and may use it.
    assert_eq!(f.store.get_activity(&other, &a.id).await.unwrap(), None);
    let theirs = Activity {
        tenant_id: other.clone(),
        channel_ids: vec![],
        ..a.clone()
    };
    assert_eq!(
        f.store.create_activity(&theirs, &[]).await.unwrap(),
        Created::New
    );
    assert_eq!(
        f.store.get_activity(&other, &a.id).await.unwrap(),
        Some(theirs)
    );
    assert_eq!(
        f.store.get_activity(&a.tenant_id, &a.id).await.unwrap(),
        Some(a.clone())
    );
    assert_eq!(f.store.get_delivery(&d.id).await.unwrap(), Some(d.clone()));
    assert_eq!(
        f.store
            .get_deliveries(std::slice::from_ref(&d.id))
            .await
            .unwrap(),
        vec![d]
    );
    f.stop().await;
}

async fn a_fresh_activity_is_written_whole_and_is_due(b: Backend) {
    use converger_ports::due_shard;
    let f = fixture(b).await;
    let second = Channel::new(
        f.tenant.id.clone(),
        ChannelType::Echo,
        "echo 2",
        Map::new(),
        &time::now_rfc3339(),
    );
    f.store.create_channel(&second).await.unwrap();
    let mut a = activity(&f);
    a.channel_ids.push(second.id.clone());
    let now = time::now_ms();
    let ds: Vec<Delivery> = [&f.channel, &second]
        .iter()
        .map(|c| new_delivery(&a, c, Tier::Bulk, now - 10_000, &a.created_at))
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
            f.store.claim(&d.id, "tok", now, 60_000).await.unwrap(),
            Claim::Claimed(_)
        ));
    }
    f.stop().await;
}

async fn scoped_reads_see_only_their_tenant(b: Backend) {
    use converger_ports::Scope;
    let f = fixture(b).await;
    let a = activity(&f);
    let d = new_delivery(&a, &f.channel, Tier::Default, time::now_ms(), &a.created_at);
    f.store
        .create_fresh_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let other = TenantId::generate();
    let own = Scope::Tenant(&f.tenant.id);
    for (scope, seen) in [
        (own, true),
        (Scope::Tenant(&other), false),
        (Scope::Operator, true),
    ] {
        assert_eq!(
            f.store
                .channel_in(scope, &f.channel.id)
                .await
                .unwrap()
                .is_some(),
            seen
        );
        assert_eq!(
            f.store.delivery_in(scope, &d.id).await.unwrap().is_some(),
            seen
        );
    }
    f.stop().await;
}

/// DynamoDB deletes an expired row up to two days after its TTL: until then reads must not
/// see it.
async fn rows_past_their_retention_read_as_absent(b: Backend) {
    let f = fixture(b).await;
    let now = time::now_ms();
    let mut old = activity(&f);
    old.expires_at = Some(now / 1000 - 1);
    let mut kept = activity(&f);
    kept.expires_at = Some(now / 1000 + 3600);
    let d_old = new_delivery(&old, &f.channel, Tier::Default, now, &old.created_at);
    let d_kept = new_delivery(&kept, &f.channel, Tier::Default, now, &kept.created_at);
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
            tenant: f.tenant.id.clone(),
            status: Some(DeliveryStatus::Pending),
            channel: None,
            from_key: None,
            to_key: None,
            error_contains: None,
            activity: None,
            newest_first: true,
            limit: 10,
            after: None,
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
            .claim(&d_old.id, "tok", later, 60_000)
            .await
            .unwrap(),
        Claim::Missing
    ));
    assert!(matches!(
        f.store
            .claim(&d_kept.id, "tok", later, 60_000)
            .await
            .unwrap(),
        Claim::Claimed(_)
    ));
    f.stop().await;
}

async fn a_lease_admits_one_attempt_at_a_time(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at);
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();

    let Claim::Claimed(held) = f.store.claim(&d.id, "tok-1", now, 60_000).await.unwrap() else {
        panic!("first claim wins");
    };
    assert_eq!(held.lease_token.as_deref(), Some("tok-1"));
    assert_eq!(
        f.store
            .claim(&d.id, "tok-2", now + 1, 60_000)
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
        .claim(&d.id, "tok-1", now + 2, 60_000)
        .await
        .unwrap()
    else {
        panic!("claimable after release");
    };

    // A failed attempt, recorded under the lease, makes the delivery due later.
    let later = now + 5_000;
    assert!(
        !f.store
            .mark_attempt_failed(&held, "tok-2", "boom", RetryAt::at(later), &entry(1), "t")
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
                &time::now_rfc3339()
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
            .claim(&d.id, "tok-3", now + 1_000, 60_000)
            .await
            .unwrap(),
        Claim::NotDue(_)
    ));

    // An expired lease can be taken over; the old holder then loses its write.
    let Claim::Claimed(first) = f.store.claim(&d.id, "tok-4", later, 1_000).await.unwrap() else {
        panic!("due now");
    };
    let Claim::Claimed(second) = f
        .store
        .claim(&d.id, "tok-5", later + 2_000, 60_000)
        .await
        .unwrap()
    else {
        panic!("the expired lease is taken over");
    };
    assert!(
        !f.store
            .mark_sent(&first, "tok-4", &SentInfo::default(), &entry(2), "t")
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
            .mark_sent(&second, "tok-5", &info, &entry(2), &time::now_rfc3339())
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
            .claim(&d.id, "tok-6", later + 3_000, 60_000)
            .await
            .unwrap(),
        Claim::Settled(_)
    ));
    f.stop().await;
}

async fn dead_letters_and_missing_rows(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at);
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let Claim::Claimed(held) = f.store.claim(&d.id, "tok", now, 60_000).await.unwrap() else {
        panic!("claimed");
    };
    assert!(
        f.store
            .mark_dead(&held, "tok", "HTTP 400", &entry(1), &time::now_rfc3339())
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Failed, 1));
    assert!(matches!(
        f.store.claim(&d.id, "tok", now + 10, 60_000).await.unwrap(),
        Claim::Settled(_)
    ));
    let missing = converger_core::DeliveryId::for_pair(&ActivityId::generate(), &f.channel.id);
    assert_eq!(
        f.store.claim(&missing, "tok", now, 60_000).await.unwrap(),
        Claim::Missing
    );
    assert_eq!(f.store.get_delivery(&missing).await.unwrap(), None);
    f.stop().await;
}

async fn a_first_try_joins_its_tenants_listing_when_its_attempt_ends(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let mut d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at);
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
    // Not listed while its first attempt runs: not pending, not in any status, not counted;
    // read by id, through its activity and by the sweeper all the same.
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
    let page = f
        .store
        .overdue(
            DuePart::Waiting,
            converger_ports::due_shard(&d.id),
            now + 1,
            100,
            None,
        )
        .await
        .unwrap();
    assert!(page.items.iter().any(|o| o.id == d.id), "in the due index");
    // Its attempt fails: listed as pending from then on.
    let Claim::Claimed(c) = f.store.claim(&d.id, "t", now, 60_000).await.unwrap() else {
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
            &time::now_rfc3339(),
        )
        .await
        .unwrap();
    assert_eq!(
        listed(query(Some(DeliveryStatus::Pending), None)).await,
        vec![d.id.clone()]
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert!(!row.unlisted);
    // The next succeeds: listed as sent, once.
    let Claim::Claimed(c) = f.store.claim(&d.id, "u", now, 60_000).await.unwrap() else {
        panic!()
    };
    f.store
        .mark_sent(
            &c,
            "u",
            &SentInfo::default(),
            &entry(2),
            &time::now_rfc3339(),
        )
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
    f.stop().await;
}

async fn the_due_index_has_the_deployments_shard_count(b: Backend) {
    use converger_ports::due_shard_of;
    let f = fixture(b).await;
    // The same tables through a store of a deployment that raised its count to 64.
    let store: Arc<dyn Store> = match (&f.t, b) {
        (Some(t), Backend::Dynamo) => {
            let mut res = t.aws().resources.clone();
            res.due_shards = 64;
            Arc::new(
                DynamoStore::new(t.aws().clients.dynamodb.clone(), res)
                    .with_serial_transactions(true),
            )
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
    let mut rows = Vec::new();
    for _ in 0..24 {
        let a = activity(&f);
        let d = new_delivery(&a, &f.channel, Tier::Bulk, now - 10_000, &a.created_at);
        store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap();
        rows.push(d);
    }
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
    let Claim::Claimed(c) = store.claim(&d.id, "t", now, 60_000).await.unwrap() else {
        panic!()
    };
    store
        .mark_attempt_failed(
            &c,
            "t",
            "503",
            RetryAt::at(now - 6_000),
            &entry(1),
            &time::now_rfc3339(),
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
    f.stop().await;
}

async fn only_pending_deliveries_are_in_the_due_index(b: Backend) {
    use converger_ports::due_shard;
    let f = fixture(b).await;
    let now = time::now_ms();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let a = activity(&f);
        let d = new_delivery(&a, &f.channel, Tier::Bulk, now - 10_000, &a.created_at);
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap();
        ids.push(d);
    }
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
    let Claim::Claimed(a) = f.store.claim(&ids[0].id, "t", now, 60_000).await.unwrap() else {
        panic!()
    };
    f.store
        .mark_sent(
            &a,
            "t",
            &SentInfo::default(),
            &entry(1),
            &time::now_rfc3339(),
        )
        .await
        .unwrap();
    let Claim::Claimed(b) = f.store.claim(&ids[1].id, "t", now, 60_000).await.unwrap() else {
        panic!()
    };
    f.store
        .mark_dead(&b, "t", "x", &entry(1), &time::now_rfc3339())
        .await
        .unwrap();
    let Claim::Claimed(c) = f.store.claim(&ids[2].id, "t", now, 60_000).await.unwrap() else {
        panic!()
    };
    f.store
        .mark_attempt_failed(
            &c,
            "t",
            "x",
            RetryAt::at(now + 60_000),
            &entry(1),
            &time::now_rfc3339(),
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
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now - 10_000, &a.created_at);
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
    let Claim::Claimed(held) = f.store.claim(&d.id, "t", now, 1_000).await.unwrap() else {
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
    let Claim::Claimed(_) = f.store.claim(&d.id, "t2", now, 1_000).await.unwrap() else {
        panic!()
    };
    assert!(
        !f.store
            .requeue_expired(&d.id, now + 999, now + 2_000)
            .await
            .unwrap()
    );
    assert!(
        f.store
            .requeue_expired(&d.id, now + 1_000, now + 2_000)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .requeue_expired(&d.id, now + 1_000, now + 2_000)
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
    f.stop().await;
}

async fn old_attempts_spill_out_of_the_item(b: Backend) {
    let f = fixture(b).await;
    let a = activity(&f);
    let now = time::now_ms();
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now, &a.created_at);
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let Claim::Claimed(held) = f.store.claim(&d.id, "t", now, 60_000).await.unwrap() else {
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
        .mark_attempt_failed(
            &held,
            "t",
            "x",
            RetryAt::at(now),
            &more,
            &time::now_rfc3339(),
        )
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
    f.stop().await;
}

fn failed_row(f: &Fixture, updated_at: &str) -> Delivery {
    let a = activity(f);
    let mut d = new_delivery(&a, &f.channel, Tier::Bulk, 0, updated_at);
    d.status = DeliveryStatus::Failed;
    d.attempts = 3;
    d.last_error = Some("webhook: HTTP 503".into());
    d
}

async fn listing_pages_in_order_and_replays_are_disjoint(b: Backend) {
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
                    &time::now_rfc3339(),
                )
            })
            .collect()
    };
    let (x, y) = (&rows[0..5], &rows[2..7]);
    let now = time::now_ms();
    let (ax, ay) = (audits(x), audits(y));
    let (rx, ry) = tokio::join!(
        f.store.replay_many(x, &actor, now, &ax),
        f.store.replay_many(y, &actor, now, &ay),
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
        .replay_many(&rows[0..1], &actor, now, &audits(&rows[0..1]))
        .await
        .unwrap();
    assert!(again.is_empty(), "a pending delivery is not replayed");
    let audit = f.store.list_audit(&f.tenant.id, 100, None).await.unwrap();
    assert_eq!(audit.items.len(), 7, "one audit entry per replay");
    let page = f.store.list_audit(&f.tenant.id, 4, None).await.unwrap();
    let rest = f
        .store
        .list_audit(&f.tenant.id, 4, page.next.as_ref())
        .await
        .unwrap();
    assert_eq!(page.items.len() + rest.items.len(), 7);
    f.stop().await;
}

/// The tenant listing is spread over the tenant's shards (and a channel's dead letters over
/// the channel index's): a listing reads them all and merges them, so that paging gives every
/// row once, in order, across shard boundaries and ties of `updated_at`, in both directions,
/// for each filter the indexes serve.
async fn sharded_listings_page_every_row_once_across_shards_and_ties(b: Backend) {
    use converger_ports::DeliveryQuery;
    let f = fixture(b).await;
    let other_channel = Channel::new(
        f.tenant.id.clone(),
        ChannelType::Webhook,
        "second",
        Map::new(),
        &time::now_rfc3339(),
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
    let pages = |q: DeliveryQuery| {
        let store = f.store.clone();
        async move {
            let mut seen = Vec::new();
            let mut after = None;
            for _ in 0..100 {
                let page = store
                    .list_deliveries(&DeliveryQuery {
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
    };
    let base = DeliveryQuery {
        tenant: f.tenant.id.clone(),
        status: None,
        channel: None,
        from_key: None,
        to_key: None,
        error_contains: None,
        activity: None,
        newest_first: true,
        limit: 4,
        after: None,
    };
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
    f.stop().await;
}

async fn replay_jobs_save_with_a_version(b: Backend) {
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
        created_at: time::now_rfc3339(),
        updated_at: time::now_rfc3339(),
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
    f.stop().await;
}

async fn window_slots_are_capped_idempotent_and_closed_only(b: Backend) {
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
            f.store.take_slot(ch, id, 2, 1_000, false).await.unwrap(),
            SlotTake::Taken(_)
        ));
    }
    match f
        .store
        .take_slot(ch, &ids[0], 2, 2_000, false)
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
                .take_slot(ch, &ids[0], 3, 2_000, true)
                .await
                .unwrap(),
            SlotTake::Held(_)
        ),
        "an exclusive take of a held slot"
    );
    assert!(matches!(
        f.store.take_slot(ch, &ids[2], 2, 2_000, false).await.unwrap(),
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
                now_ms: 3_000,
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
                now_ms: 4_000,
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
                ..Settle::free(ids[1].clone(), 4_500)
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
                ..Settle::free(ids[2].clone(), 4_600)
            },
        )
        .await
        .unwrap();
    assert!(back.holds(&ids[1]) && !back.holds(&ids[2]));

    // The sweeper frees a slot only if it is still held as it saw it.
    assert_eq!(
        f.store
            .free_slots(
                ch,
                &[(ids[1].to_string(), 999), (ids[1].to_string(), 4_600)]
            )
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
            &Transition::new(&[CircuitState::Closed], CircuitState::Paused, 5_000),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paused.circuit_state, CircuitState::Paused);
    assert!(matches!(
        f.store
            .take_slot(ch, &ids[3], 10, 6_000, false)
            .await
            .unwrap(),
        SlotTake::NotClosed(_)
    ));
    f.stop().await;
}

async fn breaker_transitions_have_one_winner(b: Backend) {
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
                now_ms: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(first.circuit_state, CircuitState::Closed);
    assert_eq!(first.consecutive_failures, 1);
    let open = Transition::new(&[CircuitState::Closed], CircuitState::Open, 10_000).seen(0);
    let wins = futures::future::join_all((0..50).map(|_| f.store.transition(&ch, &open)))
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Some(_))))
        .count();
    assert_eq!(wins, 1, "the breaker opens exactly once");

    // Two probes claim half-open from the same open state: one wins.
    let claim = |p: &str| {
        Transition::new(&[CircuitState::Open], CircuitState::HalfOpen, 20_000)
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
        Transition::new(&[CircuitState::HalfOpen], CircuitState::Closed, 30_000)
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
    f.stop().await;
}

async fn backlog_and_parking_move_rows_between_indexes(b: Backend) {
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
        .leave_backlog(&rows[0].id, now_ms)
        .await
        .unwrap()
        .unwrap();
    assert!(live.slot && !live.in_backlog);
    assert!(
        f.store
            .leave_backlog(&rows[0].id, now_ms)
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
        .leave_backlog_leased(&extra.id, now_ms, "tok", now_ms + 8_000)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !leased.slot && !leased.in_backlog,
        "its slot comes with its giver's settle"
    );
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
            .claim(&extra.id, "other", now_ms, 8_000)
            .await
            .unwrap(),
        converger_ports::Claim::Busy
    ));
    assert!(
        f.store
            .leave_backlog_leased(&extra.id, now_ms, "again", now_ms + 8_000)
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
                &now
            )
            .await
            .unwrap(),
        "the lease is the taker's"
    );

    // Parking a backlog row; unparking it into the backlog again.
    assert!(f.store.park(&rows[1], None, &now).await.unwrap());
    assert!(
        !f.store.park(&rows[1], None, &now).await.unwrap(),
        "parked once"
    );
    let parked = f.store.parked(ch, 10).await.unwrap();
    assert_eq!(parked.len(), 2);
    for d in &parked {
        assert_eq!(d.status, DeliveryStatus::Paused);
    }
    let back = f
        .store
        .unpark(&rows[1], Placement::Backlog, now_ms, &now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.status, DeliveryStatus::Pending);
    assert!(back.in_backlog);
    assert!(
        f.store
            .unpark(&rows[1], Placement::Backlog, now_ms, &now)
            .await
            .unwrap()
            .is_none()
    );
    // The parked one goes straight to the queue's due index.
    let live = f
        .store
        .unpark(&rows[3], Placement::Live, now_ms, &now)
        .await
        .unwrap()
        .unwrap();
    assert!(!live.in_backlog);
    assert_eq!(f.store.waiting_counts(ch).await.unwrap(), (0, 2));

    // A claimed delivery moves into the backlog under its lease, and is parked under it.
    let token = "tok";
    let held = match f
        .store
        .claim(&rows[3].id, token, now_ms + 1, 60_000)
        .await
        .unwrap()
    {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    };
    assert!(
        !f.store
            .to_backlog(&held, "stranger", now_ms, &now)
            .await
            .unwrap()
    );
    assert!(
        f.store
            .to_backlog(&held, token, now_ms, &now)
            .await
            .unwrap()
    );
    assert_eq!(f.store.waiting_counts(ch).await.unwrap(), (0, 3));
    let again = f
        .store
        .leave_backlog(&rows[3].id, now_ms)
        .await
        .unwrap()
        .unwrap();
    let held = match f
        .store
        .claim(&again.id, "tok2", now_ms + 2, 60_000)
        .await
        .unwrap()
    {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    };
    assert!(f.store.park(&held, Some("tok2"), &now).await.unwrap());
    assert_eq!(
        f.store
            .get_delivery(&held.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        DeliveryStatus::Paused
    );
    f.stop().await;
}

async fn rate_schedules_allow_a_burst_then_the_rate(b: Backend) {
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
    f.stop().await;
}

/// A new pending delivery of the fixture's channel, overdue by 10 s, claimed under `token`.
/// A recording write the SDK sends again after the first one landed (a storage stall, a lost
/// answer) finds the lease gone, but the row settled by its own attempt: done, applied once.
async fn a_recorded_outcome_written_again_is_recognised_as_its_own(b: Backend) {
    let f = fixture(b).await;
    let info = SentInfo::default();
    let d = claimed(&f, "tok-a").await;
    assert!(
        f.store
            .mark_sent(&d, "tok-a", &info, &entry(1), "t1")
            .await
            .unwrap()
    );
    assert!(
        f.store
            .mark_sent(&d, "tok-a", &info, &entry(1), "t1")
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
            .mark_sent(&d, "tok-b", &info, &entry(1), "t2")
            .await
            .unwrap(),
        "another attempt's lease is still lost"
    );
    assert!(
        !f.store
            .mark_dead(&d, "tok-b", "x", &entry(1), "t2")
            .await
            .unwrap()
    );

    let d = claimed(&f, "tok-c").await;
    let later = RetryAt::at(time::now_ms() + 60_000);
    assert!(
        f.store
            .mark_attempt_failed(&d, "tok-c", "boom", later, &entry(1), "t")
            .await
            .unwrap()
    );
    assert!(
        f.store
            .mark_attempt_failed(&d, "tok-c", "boom", later, &entry(1), "t")
            .await
            .unwrap()
    );
    let row = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 1));
    f.stop().await;
}

async fn claimed(f: &Fixture, token: &str) -> Delivery {
    let now = time::now_ms();
    let a = activity(f);
    let d = new_delivery(&a, &f.channel, Tier::Bulk, now - 10_000, &a.created_at);
    f.store
        .create_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    match f.store.claim(&d.id, token, now, 60_000).await.unwrap() {
        Claim::Claimed(d) => d,
        other => panic!("{other:?}"),
    }
}

async fn a_handed_off_delivery_waits_for_its_ack(b: Backend) {
    use converger_ports::due_shard;
    let f = fixture(b).await;
    let d = claimed(&f, "t").await;
    let now = time::now_rfc3339();
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
                &now
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
            .claim(&d.id, "u", time::now_ms() + 1, 60_000)
            .await
            .unwrap(),
        Claim::Settled(_)
    ));
    let page = f
        .store
        .overdue(
            DuePart::Waiting,
            due_shard(&d.id),
            time::now_ms() + 1_000,
            100,
            None,
        )
        .await
        .unwrap();
    assert!(
        page.items.iter().all(|o| o.id != d.id),
        "out of the due index"
    );

    // The ack: pending -> sent, once; again it reports Already.
    match f.store.acknowledge(&d, &now).await.unwrap() {
        Ack::Acked(r) => {
            assert_eq!(r.status, DeliveryStatus::Sent);
            assert!(!r.handed_off);
            assert!(r.sent_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.store.acknowledge(&d, &now).await.unwrap(),
        Ack::Already(_)
    ));
    // A pending delivery that was not handed off is not waiting for an ack.
    let other = claimed(&f, "v").await;
    assert!(matches!(
        f.store.acknowledge(&other, &now).await.unwrap(),
        Ack::NotAwaiting(_)
    ));
    assert!(matches!(
        f.store
            .acknowledge(
                &Delivery {
                    id: DeliveryId::generate(),
                    ..d.clone()
                },
                &now
            )
            .await
            .unwrap(),
        Ack::Missing
    ));
    f.stop().await;
}

async fn receipts_find_their_delivery_and_move_it_forward(b: Backend) {
    let f = fixture(b).await;
    let d = claimed(&f, "t").await;
    let now = time::now_rfc3339();
    let info = SentInfo {
        provider_message_id: Some("wamid.1".into()),
        response_status: Some(200),
        handed_off: false,
    };
    assert!(
        f.store
            .mark_sent(&d, "t", &info, &entry(1), &now)
            .await
            .unwrap()
    );
    let ch = f.channel.id.clone();
    let apply = |st: DeliveryStatus, id: &'static str| {
        let (store, ch, now) = (f.store.clone(), ch.clone(), now.clone());
        async move {
            store
                .apply_receipt(&ch, id, st, Some("undeliverable"), &now)
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
                &now
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
            .mark_sent(&d2, "t2", &info2, &entry(1), &now)
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
            tenant: f.tenant.id.clone(),
            status: Some(DeliveryStatus::Failed),
            channel: Some(ch.clone()),
            from_key: None,
            to_key: None,
            error_contains: None,
            activity: None,
            newest_first: true,
            limit: 10,
            after: None,
        })
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].id, d2.id);

    // Replayed (pending again, due now, with its provider id) and then a late receipt from
    // its earlier send: it leaves pending, and the due index with it.
    use converger_core::query::{Actor, ActorKind};
    use converger_ports::{AuditEntry, due_shard};
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
        &now,
    );
    let replayed = f
        .store
        .replay_many(std::slice::from_ref(&row), &actor, time::now_ms(), &[audit])
        .await
        .unwrap();
    assert_eq!(replayed[0].status, DeliveryStatus::Pending);
    let in_due = |store: std::sync::Arc<dyn Store>, id: converger_core::DeliveryId| async move {
        store
            .overdue(
                DuePart::Waiting,
                due_shard(&id),
                time::now_ms() + 60_000,
                100,
                None,
            )
            .await
            .unwrap()
            .items
            .iter()
            .any(|o| o.id == id)
    };
    assert!(in_due(f.store.clone(), d2.id.clone()).await);
    let Receipted::Applied { row, .. } = apply(DeliveryStatus::Delivered, "wamid.2").await else {
        panic!()
    };
    assert_eq!(row.status, DeliveryStatus::Delivered);
    assert!(
        !in_due(f.store.clone(), d2.id.clone()).await,
        "a receipt that settles a pending row takes it out of the due index"
    );
    f.stop().await;
}

async fn connections_are_found_by_channel(b: Backend) {
    let f = fixture(b).await;
    let conn = |id: &str, ch: &converger_core::ChannelId| Connection {
        connection_id: id.into(),
        channel_id: ch.clone(),
        tenant_id: f.tenant.id.clone(),
        connected_at: time::now_rfc3339(),
        expires_at: time::now_ms() / 1000 + 3600,
        token_fp: None,
    };
    let other = converger_core::ChannelId::generate();
    for c in [
        conn("A1=", &f.channel.id),
        conn("B2=", &f.channel.id),
        conn("C3=", &other),
    ] {
        f.store.put_connection(&c).await.unwrap();
    }
    let mut ids: Vec<String> = f
        .store
        .channel_connections(&f.channel.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.connection_id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["A1=", "B2="]);
    assert_eq!(
        f.store
            .get_connection("C3=")
            .await
            .unwrap()
            .unwrap()
            .channel_id,
        other
    );
    let gone = f.store.delete_connection("A1=").await.unwrap();
    assert_eq!(gone.map(|c| c.connection_id).as_deref(), Some("A1="));
    assert_eq!(f.store.delete_connection("A1=").await.unwrap(), None);
    assert_eq!(
        f.store
            .channel_connections(&f.channel.id)
            .await
            .unwrap()
            .len(),
        1
    );
    f.stop().await;
}

async fn users_tenants_and_keys(b: Backend) {
    use converger_core::web::{Realm, Role};
    use converger_ports::{StoreError, User};
    let f = fixture(b).await;
    let user = User {
        realm: Realm::Admin,
        email: "ops@example.com".into(),
        role: Role::Viewer,
        tenant_id: None,
        password_hash: "hash-a".into(),
        created_at: time::now_rfc3339(),
        sessions_after: None,
    };
    f.store.create_user(&user).await.unwrap();
    assert!(matches!(
        f.store.create_user(&user).await,
        Err(StoreError::Conflict(_))
    ));
    // Emails are found whatever their case; realms are apart.
    assert_eq!(
        f.store
            .get_user(Realm::Admin, "OPS@example.com")
            .await
            .unwrap(),
        Some(user.clone())
    );
    assert_eq!(
        f.store
            .get_user(Realm::Portal, "ops@example.com")
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .set_password(Realm::Admin, "ops@example.com", "hash-b")
            .await
            .unwrap()
    );
    let changed = f
        .store
        .get_user(Realm::Admin, "ops@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.password_hash, "hash-b");
    assert!(
        changed.sessions_after.is_some(),
        "a password change ends the sessions"
    );
    assert!(
        f.store
            .end_sessions(Realm::Admin, "ops@example.com", 42)
            .await
            .unwrap()
    );
    assert_eq!(
        f.store
            .get_user(Realm::Admin, "ops@example.com")
            .await
            .unwrap()
            .unwrap()
            .sessions_after,
        Some(42)
    );
    assert!(
        !f.store
            .end_sessions(Realm::Admin, "nobody@example.com", 42)
            .await
            .unwrap()
    );
    // Sign-in counts: written only over the revision read (parallel attempts count one
    // each), for any key (known email or not), cleared to nothing.
    let key = converger_ports::sign_in_account_key(Realm::Admin, "ops@example.com", "203.0.113.9");
    let now_s = converger_core::time::now_ms() / 1000;
    let later = now_s + 3_600;
    let once = converger_core::web::SignInState::default().after_failure(now_s, 5);
    assert_eq!(
        f.store.sign_in_count(&key).await.unwrap(),
        (Default::default(), 0)
    );
    assert!(
        f.store
            .put_sign_in_count(&key, 0, &once, later)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, 0, &once, later)
            .await
            .unwrap(),
        "a second writer of revision 0 loses"
    );
    let (read, rev) = f.store.sign_in_count(&key).await.unwrap();
    assert_eq!(read, once);
    let twice = read.after_failure(now_s + 1, 5);
    assert!(
        f.store
            .put_sign_in_count(&key, rev, &twice, later)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, rev, &twice, later)
            .await
            .unwrap()
    );
    assert_eq!(f.store.sign_in_count(&key).await.unwrap().0.failures, 2);
    f.store.clear_sign_in_count(&key).await.unwrap();
    assert_eq!(
        f.store.sign_in_count(&key).await.unwrap(),
        (Default::default(), 0)
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, rev + 1, &twice, later)
            .await
            .unwrap(),
        "a writer that read before the clear loses"
    );
    let unknown = converger_ports::sign_in_source_key("2001:db8::/64");
    assert!(
        f.store
            .put_sign_in_count(&unknown, 0, &once, i64::MAX / 2)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .set_password(Realm::Admin, "nobody@example.com", "x")
            .await
            .unwrap()
    );

    // Tenants only (not their key and user items); the tenant's channels.
    let tenants = f.store.list_tenants().await.unwrap();
    assert_eq!(
        tenants.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        vec![f.tenant.id.clone()]
    );
    let channels = f.store.list_channels(&f.tenant.id).await.unwrap();
    assert_eq!(
        channels.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![f.channel.id.clone()]
    );
    assert!(
        f.store
            .list_channels(&TenantId::generate())
            .await
            .unwrap()
            .is_empty()
    );

    // A rotated key: the new one finds the tenant, the old one nothing.
    assert!(
        f.store
            .rotate_api_key(&f.tenant.id, "hash-2")
            .await
            .unwrap()
    );
    assert_eq!(
        f.store
            .tenant_by_api_key_hash("hash-2")
            .await
            .unwrap()
            .map(|t| t.id),
        Some(f.tenant.id.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-1").await.unwrap(),
        None
    );
    assert!(
        !f.store
            .rotate_api_key(&TenantId::generate(), "hash-3")
            .await
            .unwrap()
    );
    f.stop().await;
}

async fn channel_lifecycle_lists_rotates_and_deletes(backend: Backend) {
    use converger_core::signing::RetiringSecret;
    use converger_ports::{ChannelQuery, Scope};
    let f = fixture(backend).await;
    let now = time::now_rfc3339();
    // Five more channels: webhooks, one inactive; another tenant's channel is never listed.
    let mut ids = vec![f.channel.id.clone()];
    for i in 0..5 {
        let mut c = Channel::new(
            f.tenant.id.clone(),
            ChannelType::Webhook,
            &format!("hook {i}"),
            Map::new(),
            &now,
        );
        c.active = i != 4;
        c.event_types = vec!["order.paid".into()];
        f.store.create_channel(&c).await.unwrap();
        ids.push(c.id);
    }
    let foreign = Channel::new(
        TenantId::generate(),
        ChannelType::Webhook,
        "x",
        Map::new(),
        &now,
    );
    f.store.create_channel(&foreign).await.unwrap();
    ids.sort();
    let query = |kind, active, limit, after| ChannelQuery {
        tenant: f.tenant.id.clone(),
        kind,
        active,
        limit,
        after,
    };
    // Pages of two, in id order, cover every channel once.
    let (mut seen, mut after) = (Vec::new(), None);
    loop {
        let (page, more) = f
            .store
            .list_channel_page(&query(None, None, 2, after))
            .await
            .unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|c| c.id.clone()));
        after = page.last().map(|c| c.id.clone());
        if !more {
            break;
        }
    }
    assert_eq!(seen, ids);
    let (webhooks, _) = f
        .store
        .list_channel_page(&query(Some(ChannelType::Webhook), Some(true), 100, None))
        .await
        .unwrap();
    assert_eq!(webhooks.len(), 4);
    assert!(
        webhooks
            .iter()
            .all(|c| c.kind == ChannelType::Webhook && c.active)
    );
    assert_eq!(webhooks[0].event_types, ["order.paid"]);
    let (inactive, more) = f
        .store
        .list_channel_page(&query(None, Some(false), 100, None))
        .await
        .unwrap();
    assert_eq!((inactive.len(), more), (1, false));

    // A rotation replaces the secret it names, and only that one.
    let old = f.channel.signing_secret.clone();
    let retiring = vec![RetiringSecret {
        secret: old.clone(),
        until_ms: time::now_ms() + 60_000,
    }];
    let rotation = SecretRotation {
        replaces: old.clone(),
        secret: "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldw==".into(),
        retiring: retiring.clone(),
    };
    let rotated = f
        .store
        .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, &now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.signing_secret, rotation.secret);
    assert_eq!(rotated.retiring_secrets, retiring);
    let again = f
        .store
        .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, &now)
        .await
        .unwrap();
    assert_eq!(again, None, "the secret it replaces is no longer current");
    assert_eq!(
        f.store
            .rotate_secret(&TenantId::generate(), &f.channel.id, &rotation, &now)
            .await
            .unwrap(),
        None
    );
    let stored = f.store.get_channel(&f.channel.id).await.unwrap().unwrap();
    assert_eq!(stored.signing_secret, rotation.secret);
    assert_eq!(stored.retiring_secrets, retiring);

    // Deleting: once, by its tenant; then gone from the tenant's reads, lists and writes,
    // kept for an operator and for the history of its deliveries.
    assert_eq!(
        f.store
            .delete_channel(&TenantId::generate(), &f.channel.id, &now, 1)
            .await
            .unwrap(),
        None
    );
    let expires = time::now_ms() / 1000 + 86_400;
    let deleted = f
        .store
        .delete_channel(&f.tenant.id, &f.channel.id, &now, expires)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.deleted_at.as_deref(), Some(now.as_str()));
    assert!(!deleted.active);
    assert_eq!(deleted.expires_at, Some(expires));
    assert_eq!(
        f.store
            .delete_channel(&f.tenant.id, &f.channel.id, &now, expires)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        f.store
            .channel_in(Scope::Tenant(&f.tenant.id), &f.channel.id)
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .channel_in(Scope::Operator, &f.channel.id)
            .await
            .unwrap()
            .is_some()
    );
    let patch = ChannelPatch {
        name: Some("renamed".into()),
        ..Default::default()
    };
    assert_eq!(
        f.store
            .update_channel(&f.tenant.id, &f.channel.id, &patch, &now)
            .await
            .unwrap(),
        None
    );
    let rotation = SecretRotation {
        replaces: stored.signing_secret.clone(),
        ..rotation
    };
    assert_eq!(
        f.store
            .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, &now)
            .await
            .unwrap(),
        None
    );
    let (left, _) = f
        .store
        .list_channel_page(&query(None, None, 100, None))
        .await
        .unwrap();
    assert!(left.iter().all(|c| c.id != f.channel.id));
    assert_eq!(left.len(), 5);
    assert!(
        f.store
            .list_channels(&f.tenant.id)
            .await
            .unwrap()
            .iter()
            .all(|c| c.id != f.channel.id)
    );
    f.stop().await;
}

async fn a_conversation_lists_its_activities_in_seq_order(backend: Backend) {
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
    f.stop().await;
}

fn conv_activity(f: &Fixture, conversation: &str) -> Activity {
    Activity {
        conversation_id: conversation.into(),
        channel_ids: vec![],
        ..activity(f)
    }
}

async fn idempotency_keys_are_held_once_answered_freed_and_taken_over(backend: Backend) {
    use converger_ports::KeyRecord;
    let f = fixture(backend).await;
    let now = time::now_ms();
    let record = |fp: &str, locked_until: i64| KeyRecord {
        fingerprint: fp.into(),
        locked_until,
        status: None,
        body: None,
        expires_at: now / 1000 + 86_400,
    };
    let t = &f.tenant.id;
    // One holder; the others see it, running.
    assert_eq!(
        f.store
            .take_key(t, "k1", &record("a", now + 60_000), now)
            .await
            .unwrap(),
        None
    );
    let held = f
        .store
        .take_key(t, "k1", &record("a", now + 60_000), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((held.fingerprint.as_str(), held.answer()), ("a", None));
    // Another tenant's key of the same name is another key.
    let other = TenantId::generate();
    assert_eq!(
        f.store
            .take_key(&other, "k1", &record("b", now + 60_000), now)
            .await
            .unwrap(),
        None
    );
    // Answered: kept, and given to whoever asks; an answer by another fingerprint is ignored.
    f.store.answer_key(t, "k1", "zzz", 500, "{}").await.unwrap();
    f.store
        .answer_key(t, "k1", "a", 201, r#"{"id":1}"#)
        .await
        .unwrap();
    let held = f.store.get_key(t, "k1").await.unwrap().unwrap();
    assert_eq!(held.answer(), Some((201, r#"{"id":1}"#)));
    let later = now + 120_000;
    let held = f
        .store
        .take_key(t, "k1", &record("a", later + 60_000), later)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        held.answer(),
        Some((201, r#"{"id":1}"#)),
        "an answer outlives the lock"
    );
    // An answered key is not freed.
    f.store.free_key(t, "k1", "a").await.unwrap();
    assert!(f.store.get_key(t, "k1").await.unwrap().is_some());

    // Freed without an answer: taken again at once.
    assert_eq!(
        f.store
            .take_key(t, "k2", &record("c", now + 60_000), now)
            .await
            .unwrap(),
        None
    );
    f.store.free_key(t, "k2", "other").await.unwrap();
    assert!(
        f.store.get_key(t, "k2").await.unwrap().is_some(),
        "only its holder frees it"
    );
    f.store.free_key(t, "k2", "c").await.unwrap();
    assert_eq!(f.store.get_key(t, "k2").await.unwrap(), None);
    assert_eq!(
        f.store
            .take_key(t, "k2", &record("d", now + 60_000), now)
            .await
            .unwrap(),
        None
    );

    // A holder that never answered is taken over once its lock ends.
    assert_eq!(
        f.store
            .take_key(t, "k3", &record("e", now + 1_000), now)
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .take_key(t, "k3", &record("e", now + 61_000), now + 500)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        f.store
            .take_key(t, "k3", &record("e", now + 62_000), now + 2_000)
            .await
            .unwrap(),
        None
    );
    // An expired record is absent, and its key free.
    let gone = KeyRecord {
        expires_at: now / 1000 - 1,
        status: Some(201),
        body: Some("{}".into()),
        ..record("g", now + 60_000)
    };
    assert_eq!(f.store.take_key(t, "k4", &gone, now).await.unwrap(), None);
    assert_eq!(f.store.get_key(t, "k4").await.unwrap(), None);
    assert_eq!(
        f.store
            .take_key(t, "k4", &record("h", now + 60_000), now)
            .await
            .unwrap(),
        None
    );
    f.stop().await;
}
