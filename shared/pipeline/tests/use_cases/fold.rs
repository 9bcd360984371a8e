//! The usage log (ADR 0089): with `usage_fold`, a batch's usage waits in the log, once per
//! record however often the batch is handed out, and the scheduler's fold writes each
//! counter once a closed period; a busy tenant's rate is counted at once for its shards.

use crate::common::*;
use crate::shards::created;
use converger_core::usage::Grain;
use converger_core::usage::fold::{GRACE_PERIODS, PERIOD_MS};
use converger_ports::{UsageKey, UsageOf};

/// A clock ten seconds into a minute.
fn clock() -> Arc<ManualClock> {
    let now = converger_core::time::now_ms();
    Arc::new(ManualClock::at(now - now.rem_euclid(60_000) + 10_000))
}

async fn created_in(f: &Fixture, of: UsageOf, grain: Grain, at_ms: i64) -> i64 {
    f.store
        .read_usage(&[UsageKey::new(of, grain, grain.bucket(at_ms))])
        .await
        .unwrap()[0]
        .created
}

#[tokio::test]
async fn a_quiet_tenants_usage_is_folded_once_after_its_period_closes() {
    let clock = clock();
    let f = fixture_on_with(clock.clone(), |c| c.usage_fold = true);
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let at = clock.now_ms();
    let changes = f.pipeline.changes();
    let batch = created(&t, &c, &clock, 5, 0);
    let done = changes.apply("s", &batch).await.unwrap();
    // One log entry, the health counter's adds in it.
    assert_eq!((done.counter_writes, done.repeats), (1, 0));
    // Handed out again whole, then from inside with three more: only the three are logged.
    assert_eq!(changes.apply("s", &batch).await.unwrap().repeats, 1);
    let mut more = batch[3..].to_vec();
    more.extend(created(&t, &c, &clock, 3, 5));
    let done = changes.apply("s", &more).await.unwrap();
    assert_eq!((done.counter_writes, done.repeats), (1, 1));
    // Nothing is counted yet, and a fold before the period closes reads nothing of it.
    let tenant_minute = || created_in(&f, UsageOf::Tenant(t.id.clone()), Grain::Minute, at);
    assert_eq!(tenant_minute().await, 0);
    let minute = Grain::Minute.bucket(at);
    let health = || f.store.health_inputs(&c.id, minute - 1, minute);
    assert_eq!(health().await.unwrap().created, 0);
    let early = f.pipeline.usage_fold().run().await.unwrap();
    assert_eq!(early.rows, 0);
    // Past its grace: every counter written once, with what each record added once.
    clock.advance(std::time::Duration::from_millis(
        u64::try_from((GRACE_PERIODS + 1) * PERIOD_MS).unwrap(),
    ));
    let folded = f.pipeline.usage_fold().run().await.unwrap();
    assert_eq!(
        folded.rows, 2,
        "an entry's usage and health of a minute in one row"
    );
    assert_eq!(
        folded.counter_writes, 6,
        "five usage counters of one tenant and channel, and the channel's health counter"
    );
    assert_eq!(tenant_minute().await, 8);
    assert_eq!(health().await.unwrap().created, 8);
    assert_eq!(
        created_in(&f, UsageOf::Channel(c.id.clone()), Grain::Hour, at).await,
        8
    );
    assert_eq!(
        created_in(&f, UsageOf::Tenant(t.id.clone()), Grain::Day, at).await,
        8
    );
    // Folded periods are not read again.
    let again = f.pipeline.usage_fold().run().await.unwrap();
    assert_eq!((again.periods, again.rows), (0, 0));
    assert_eq!(tenant_minute().await, 8);
}

#[tokio::test]
async fn a_busy_tenant_is_counted_at_once_for_its_shards_and_folded_for_its_usage() {
    let clock = clock();
    let f = fixture_on_with(clock.clone(), |c| c.usage_fold = true);
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let at = clock.now_ms();
    let changes = f.pipeline.changes();
    // As `shards`: 400 a second for ten seconds, then 700: four shards.
    assert_eq!(
        changes
            .apply("s", &created(&t, &c, &clock, 4_000, 0))
            .await
            .unwrap()
            .grants,
        0
    );
    assert_eq!(
        changes
            .apply("s", &created(&t, &c, &clock, 3_000, 4_000))
            .await
            .unwrap()
            .grants,
        1
    );
    let busy = f.store.get_tenant(&t.id).await.unwrap().unwrap();
    assert_eq!(busy.shard_grants.latest.map(|g| g.shards), Some(4));
    // Its usage waits for the fold like any other's.
    let usage = || created_in(&f, UsageOf::Tenant(t.id.clone()), Grain::Minute, at);
    assert_eq!(usage().await, 0);
    let last = converger_core::usage::fold::period_of(clock.now_ms());
    let folded = f.pipeline.usage_fold().run_to(last).await.unwrap();
    assert_eq!(folded.counter_writes, 6);
    assert_eq!(usage().await, 7_000);
}

#[tokio::test]
async fn a_deployment_that_turns_the_fold_off_still_folds_what_its_log_holds() {
    let clock = clock();
    let f = fixture_on_with(clock.clone(), |c| c.usage_fold = true);
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let at = clock.now_ms();
    // A fold ran (its cursor is written), then a batch is logged.
    f.pipeline.usage_fold().run().await.unwrap();
    f.pipeline
        .changes()
        .apply("s", &created(&t, &c, &clock, 2, 0))
        .await
        .unwrap();
    // The same store and clock, `USAGE_FOLD` now off: the scheduler goes on folding.
    let off = Pipeline::new(
        f.store.clone(),
        f.queue.clone(),
        f.events.clone(),
        Adapters::standard(converger_core::net::Allowlist::loopback()).unwrap(),
        PipelineConfig {
            usage_fold: false,
            ..PipelineConfig::default()
        },
    )
    .with_clock(clock.clone());
    clock.advance(std::time::Duration::from_millis(
        u64::try_from((GRACE_PERIODS + 1) * PERIOD_MS).unwrap(),
    ));
    let report = off
        .sweeper()
        .sweep_and_watch(std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(report.folded.is_some_and(|f| f.rows == 1), "{report:?}");
    assert_eq!(
        created_in(&f, UsageOf::Tenant(t.id.clone()), Grain::Minute, at).await,
        2
    );
}

#[tokio::test]
async fn a_deployment_that_never_folded_does_not_read_the_log() {
    let f = fixture_on(clock());
    let report = f
        .pipeline
        .sweeper()
        .sweep_and_watch(std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(report.folded, None);
}
