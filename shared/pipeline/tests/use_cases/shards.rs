//! Listing shards that follow a tenant's load: the changes consumer grants a busy tenant
//! more shards from the minute counter it writes, new deliveries are placed in them while
//! the grant holds, and the grant lapses by itself.

use crate::common::*;
use converger_core::ActivityId;
use converger_core::shards::{GRANT_MS, RENEW_BEFORE_MS};
use converger_ports::{Activity, Delivery, RowChange, seq_key};

/// `n` new rows of `t`'s channel `c` created at the clock's time, as the stream hands them out.
pub(crate) fn created(
    t: &Tenant,
    c: &Channel,
    clock: &ManualClock,
    n: usize,
    from: usize,
) -> Vec<RowChange> {
    let now = clock.now();
    (0..n)
        .map(|i| {
            let a = Activity {
                id: ActivityId::generate(),
                tenant_id: t.id.clone(),
                conversation_id: "c".into(),
                seq: i as u64,
                event_type: None,
                payload_ref: None,
                payload: json!({}),
                channel_ids: vec![c.id.clone()],
                created_at: now,
                expires_at: None,
                trace: None,
            };
            // Each a first try in flight, as ingest writes it: in no due index.
            let mut d = Delivery::new(&a, c, t.tier, now).placed(t, now.ms());
            d.unlisted = true;
            RowChange {
                event_id: format!("e{}", from + i),
                seq: seq_key(&(from + i + 1).to_string()),
                old: None,
                new: Some(d),
            }
        })
        .collect()
}

fn advance(clock: &ManualClock, ms: i64) {
    clock.advance(std::time::Duration::from_millis(u64::try_from(ms).unwrap()));
}

#[tokio::test]
async fn a_busy_tenant_is_granted_listing_shards_that_lapse_by_themselves() {
    let start = converger_core::time::now_ms();
    // Ten seconds into a minute.
    let clock = Arc::new(ManualClock::at(start - start.rem_euclid(60_000) + 10_000));
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let quiet = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let qc = webhook(&f, &quiet).await;
    assert_eq!(t.delivery_shards(), 2);
    let changes = f.pipeline.changes();

    // 400 a second over those ten seconds: two shards carry it, nothing is read or written.
    let done = changes
        .apply("s", &created(&t, &c, &clock, 4_000, 0))
        .await
        .unwrap();
    assert_eq!(done.grants, 0);
    // 700 a second (and a quiet tenant beside it): four shards for the busy one only.
    let mut batch = created(&t, &c, &clock, 3_000, 4_000);
    batch.extend(created(&quiet, &qc, &clock, 5, 7_000));
    assert_eq!(changes.apply("s", &batch).await.unwrap().grants, 1);
    let busy = f.store.get_tenant(&t.id).await.unwrap().unwrap();
    let g = busy.shard_grants.latest.expect("a grant");
    assert_eq!((g.shards, g.from_ms), (4, clock.now_ms()));
    assert_eq!(g.until_ms, clock.now_ms() + GRANT_MS);
    let still_quiet = f.store.get_tenant(&quiet.id).await.unwrap().unwrap();
    assert!(
        still_quiet.shard_grants.is_none(),
        "a quiet tenant pays no fan-out"
    );

    // Its new deliveries are placed over the four; those in the granted two move back to
    // its own when they change after the grant.
    let placed: Vec<Delivery> = created(&busy, &c, &clock, 200, 8_000)
        .into_iter()
        .filter_map(|r| r.new)
        .collect();
    let shards: std::collections::BTreeSet<u32> = placed.iter().map(|d| d.shard).collect();
    assert_eq!(shards.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    let after = converger_core::Timestamp::from_ms(g.until_ms);
    for d in &placed {
        assert!(d.listing_shard(d.updated_at) < 4);
        assert!(d.listing_shard(after) < 2, "{d:?}");
    }

    // The same rate again within the grant: nothing written (this instance remembers it).
    let more = created(&busy, &c, &clock, 1_000, 9_000);
    assert_eq!(changes.apply("s", &more).await.unwrap().grants, 0);

    // Near its end with the rate still there: renewed from then.
    advance(&clock, GRANT_MS - RENEW_BEFORE_MS + 5_000);
    let now = clock.now_ms();
    let minute = now - now.rem_euclid(60_000);
    advance(&clock, minute + 20_000 - now);
    let busy_again = created(&busy, &c, &clock, 12_000, 10_000);
    assert_eq!(changes.apply("s", &busy_again).await.unwrap().grants, 1);
    let renewed = f.store.get_tenant(&t.id).await.unwrap().unwrap();
    let r = renewed.shard_grants.latest.unwrap();
    assert_eq!((r.shards, r.from_ms), (4, g.from_ms));
    assert_eq!(r.until_ms, clock.now_ms() + GRANT_MS);
    assert_eq!(renewed.shard_grants.span.unwrap().from_ms, g.from_ms);

    // Past it, no load: new deliveries are in its own two shards, with nothing written.
    advance(&clock, GRANT_MS + 1);
    let lapsed: Vec<Delivery> = created(&renewed, &c, &clock, 100, 30_000)
        .into_iter()
        .filter_map(|r| r.new)
        .collect();
    assert!(
        lapsed
            .iter()
            .all(|d| d.shard < 2 && d.shard_lease.is_none())
    );
    // A listing still reads the granted shards over the grant's times, and only there.
    let before = converger_core::Timestamp::from_ms(g.from_ms - 3_600_000).rfc3339();
    assert_eq!(renewed.listing_shards(None, Some(&before)), vec![0, 1]);
    assert_eq!(renewed.listing_shards(None, None), vec![0, 1, 2, 3]);
}

/// A busy tenant's records come from every stream shard, each shard's batches adding to one
/// part of its minute counter: a grant follows the sum of the parts, never one part's guess.
#[tokio::test]
async fn a_grant_follows_every_part_of_the_minute_counter() {
    use converger_core::usage::{Grain, PARTS, part_of};
    let start = converger_core::time::now_ms();
    let clock = Arc::new(ManualClock::at(start - start.rem_euclid(60_000) + 10_000));
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let changes = f.pipeline.changes();
    // Four stream shards whose batches add to four different parts.
    const { assert!(PARTS >= 4) };
    let mut shards: Vec<String> = Vec::new();
    for i in 0.. {
        let s = format!("shardId-{i:04}");
        if shards.iter().all(|o| part_of(o) != part_of(&s)) {
            shards.push(s);
        }
        if shards.len() == 4 {
            break;
        }
    }
    // One shard's 1,000 in ten seconds: its part, times the parts, looks like 800 a second,
    // but the tenant's 100 a second need nothing.
    let one = created(&t, &c, &clock, 1_000, 0);
    assert_eq!(changes.apply(&shards[0], &one).await.unwrap().grants, 0);
    // 1,250 more from each of the four: 6,000 in ten seconds, no part past 2,250, granted
    // four shards once the parts together say 600 a second.
    let mut grants = 0;
    for (i, s) in shards.iter().enumerate() {
        let batch = created(&t, &c, &clock, 1_250, 1_000 + i * 1_250);
        grants += changes.apply(s, &batch).await.unwrap().grants;
    }
    assert_eq!(grants, 1);
    let g = f.store.get_tenant(&t.id).await.unwrap().unwrap();
    assert_eq!(g.shard_grants.latest.map(|g| g.shards), Some(4));
    let key = converger_ports::UsageKey::new(
        converger_ports::UsageOf::Tenant(t.id.clone()),
        Grain::Minute,
        Grain::Minute.bucket(clock.now_ms()),
    );
    assert_eq!(f.store.read_usage(&[key]).await.unwrap()[0].created, 6_000);
}

/// The deployment's due shards granted while retries call for them (ADR 0093): the sweep
/// reads the granted shards, so a delivery placed in one of them is found and enqueued.
#[tokio::test]
async fn the_sweep_reads_the_due_shards_a_grant_gives() {
    use converger_core::shards::due;
    use converger_ports::DeliveryQueries;
    let f = fixture();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let now = converger_core::time::now_ms();
    let seen = f.store.due_grants().await.unwrap();
    let grant = due::next(None, f.store.due_shards(), 10_000.0, now).unwrap();
    let granted = seen.with(grant, now, due::LINGER_MS);
    assert!(f.store.grant_due_shards(&granted).await.unwrap());
    // Forty retries overdue past the sweep's grace, in the due index.
    let due_at = now - 600_000;
    for i in 0..40 {
        let a = Activity {
            id: ActivityId::generate(),
            tenant_id: t.id.clone(),
            conversation_id: "c".into(),
            seq: i,
            event_type: None,
            payload_ref: None,
            payload: json!({}),
            channel_ids: vec![c.id.clone()],
            created_at: converger_core::Timestamp::from_ms(due_at),
            expires_at: None,
            trace: None,
        };
        let mut d = Delivery::new(&a, &c, t.tier, converger_core::Timestamp::from_ms(due_at));
        d.attempts = 1;
        f.store.create_activity(&a, &[d]).await.unwrap();
    }
    let report = f.pipeline.sweeper().sweep().await.unwrap();
    // The crash watch's pass and the sweep's: a query a shard each, over all 64.
    assert_eq!(report.queries, 128, "{report:?}");
    assert_eq!(report.enqueued, 40, "{report:?}");
}
