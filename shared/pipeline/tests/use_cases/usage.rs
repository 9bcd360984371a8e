//! Usage: the counts every delivery feeds, what the charts and the usage page read of them,
//! and the estimate of their cost.

use crate::common::*;
use converger_core::usage::{CostModel, Grain, Range, Usage};
use converger_ports::UsageOf;
use std::time::Duration;

/// A clock at noon (UTC) of the current day: a scenario's minutes of retries stay within one
/// day whenever the test runs.
fn noon_today() -> ManualClock {
    let now = converger_core::time::now_ms();
    ManualClock::at(now - now.rem_euclid(86_400_000) + 43_200_000)
}

#[tokio::test]
async fn usage_totals_match_the_deliveries_of_a_scenario() {
    let clock = Arc::new(noon_today());
    let f = fixture_on_with(clock.clone(), |c| c.usage_flush = Duration::ZERO);
    let t = tenant(&f).await;
    let ok = Responder::start(200).await;
    let bad = Responder::start(503).await;
    let quiet = json!({"retry_policy": {"max_attempts": 3, "backoff": "fixed", "base_ms": 30000},
                       "circuit_breaker": {"failure_threshold": 1000}});
    let good = hook_to(&f, &t, &ok.url, quiet.clone()).await;
    let failing = hook_to(&f, &t, &bad.url, quiet).await;
    let tripping = hook_to(
        &f,
        &t,
        &bad.url,
        json!({"retry_policy": {"max_attempts": 1},
               "circuit_breaker": {"failure_threshold": 1}}),
    )
    .await;
    for _ in 0..4 {
        assert_eq!(
            one(&f, &clock, &t, &good).await.status,
            DeliveryStatus::Sent
        );
    }
    for _ in 0..2 {
        let d = settled(&f, &clock, &t, &failing).await;
        assert_eq!((d.status, d.attempts), (DeliveryStatus::Failed, 3));
    }
    assert_eq!(
        one(&f, &clock, &t, &tripping).await.status,
        DeliveryStatus::Failed
    );

    let today = Grain::Day.bucket(clock.now_ms());
    let usage = f
        .pipeline
        .usage()
        .tenant_usage(&t.id, today - 1, today)
        .await
        .unwrap();
    let expected = Usage {
        deliveries: 7,
        attempts: 4 + 2 * 3 + 1,
        dead_letters: 3,
        filtered: 0,
    };
    assert_eq!(usage.total, expected);
    assert_eq!(usage.days.len(), 2);
    assert_eq!(usage.days[0].usage, Usage::default(), "yesterday");
    assert_eq!(usage.days[1].usage, expected);
    assert_eq!(usage.estimate, CostModel::default().estimate(&expected));
    assert!(usage.estimate.total_usd > 0.0);

    let sum = |points: &[converger_pipeline::usage::Point]| {
        let mut c = converger_core::usage::Counts::default();
        points.iter().for_each(|p| c.add(&p.counts));
        c
    };
    let good_hour = series(&f, UsageOf::Channel(good.id.clone()), Range::Hour).await;
    assert_eq!(good_hour.len(), 60);
    assert!(
        good_hour
            .windows(2)
            .all(|w| w[1].at_ms - w[0].at_ms == 60_000)
    );
    let g = sum(&good_hour);
    assert_eq!(
        (g.created, g.sent, g.attempts, g.failed_attempts),
        (4, 4, 4, 0)
    );
    assert_eq!(
        g.latency_quantile_ms(0.95),
        Some(100),
        "sent within the clock's instant"
    );
    let b = sum(&series(&f, UsageOf::Channel(failing.id.clone()), Range::Day).await);
    assert_eq!(
        (
            b.created,
            b.sent,
            b.attempts,
            b.failed_attempts,
            b.dead_letters
        ),
        (2, 0, 6, 6, 2)
    );
    assert_eq!(b.latency_quantile_ms(0.5), None);
    let trip = sum(&series(&f, UsageOf::Channel(tripping.id.clone()), Range::Week).await);
    assert_eq!(trip.breaker_opened, 1, "the breaker's opening is marked");
    let tenant_week = sum(&series(&f, UsageOf::Tenant(t.id.clone()), Range::Week).await);
    assert_eq!(tenant_week.created, 7);
    assert_eq!(tenant_week.breaker_opened, 1);
    // The retries' backoffs moved the clock: the failing channel's attempts are spread over
    // minutes, and the hour chart shows each minute apart.
    let spread = series(&f, UsageOf::Channel(failing.id.clone()), Range::Hour).await;
    assert!(spread.iter().filter(|p| p.counts.attempts > 0).count() >= 2);

    let top = f
        .pipeline
        .usage()
        .top_tenants(today, today, 10)
        .await
        .unwrap();
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].tenant_id, t.id);
}

/// Whether a partition holds a counter: usage and queue-depth counters, a channel's
/// per-minute health counter, the usage log and its fold, the dead-letter gauge.
fn counter(p: &converger_ports::capacity::Partition) -> bool {
    p.table == "usage"
        || p.family.starts_with("hc#")
        || p.family.starts_with("fold")
        || p.family.contains("#dl#")
}

/// Ingest and the attempts write rows and flow items only: every count (usage, health, the
/// dead-letter gauge) follows from the rows' changes, so a process that dies after a write
/// loses no count, and the deliver path pays for none.
#[tokio::test]
async fn the_deliver_path_writes_no_counter() {
    let clock = Arc::new(noon_today());
    let store = MemStore::new().with_capacity(converger_memory::CapacityModel::dynamodb());
    let f = fixture_on_store(clock.clone(), store, |c| c.usage_flush = Duration::ZERO);
    let t = tenant(&f).await;
    let ok = Responder::start(200).await;
    let bad = Responder::start(503).await;
    let quiet = json!({"retry_policy": {"max_attempts": 2, "backoff": "fixed", "base_ms": 30000},
                       "circuit_breaker": {"failure_threshold": 1000}});
    let good = hook_to(&f, &t, &ok.url, quiet.clone()).await;
    let failing = hook_to(&f, &t, &bad.url, quiet).await;
    let meter = f.store.capacity().unwrap();
    meter.take();
    let mut ids = Vec::new();
    for c in [&good, &good, &good, &failing] {
        let done = f
            .pipeline
            .intake()
            .ingest(&t, activity(None, &[c]))
            .await
            .unwrap();
        ids.push(done.deliveries[0].id.clone());
    }
    // Every attempt, the retry after its backoff, without the changes' consumer.
    for _ in 0..3 {
        while run_due(&f, &clock).await > 0 {}
        for job in f.queue.take_flow_jobs(clock.now_ms()) {
            f.pipeline.flow_jobs().flow_job(&job).await.unwrap();
        }
        clock.advance(Duration::from_secs(31));
    }
    let mut ended = Vec::new();
    for id in &ids {
        ended.push(f.store.get_delivery(id).await.unwrap().unwrap().status);
    }
    assert_eq!(
        ended,
        [
            DeliveryStatus::Sent,
            DeliveryStatus::Sent,
            DeliveryStatus::Sent,
            DeliveryStatus::Failed
        ]
    );
    let written = meter.take().writes;
    assert!(
        written.keys().any(|p| p.table == "deliveries"),
        "{written:?}"
    );
    let counters: Vec<_> = written.keys().filter(|p| counter(p)).collect();
    assert!(
        counters.is_empty(),
        "counters written on the deliver path: {counters:?}"
    );
    // The counts come from the changes.
    f.consume_changes().await;
    assert!(meter.take().writes.keys().any(counter));
}

/// Usage comes from the rows' changes, one write per counter and stream batch; a batch
/// handed out again (whole, or from a record in the middle of one already counted) adds
/// nothing twice: each counter keeps the last record it added, per shard.
#[tokio::test]
async fn a_batch_handed_out_again_is_counted_once() {
    let clock = Arc::new(noon_today());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let ok = Responder::start(200).await;
    let c = hook_to(
        &f,
        &t,
        &ok.url,
        json!({"retry_policy": {}, "circuit_breaker": {}}),
    )
    .await;
    let today = Grain::Day.bucket(clock.now_ms());
    let total = async |f: &Fixture| {
        f.pipeline
            .usage()
            .tenant_usage(&t.id, today, today)
            .await
            .unwrap()
            .total
    };
    for _ in 0..3 {
        one(&f, &clock, &t, &c).await;
    }
    let counted = total(&f).await;
    assert_eq!((counted.deliveries, counted.attempts), (3, 3));
    let feed = f.store.row_changes(0, 1000).unwrap();
    assert!(feed.len() >= 6, "{} records", feed.len());
    let shard = converger_memory::CHANGES_SHARD;
    let again = f.pipeline.changes().apply(shard, &feed).await.unwrap();
    assert_eq!(again.counter_writes, 0, "{again:?}");
    assert!(again.repeats > 0, "{again:?}");
    let middle = &feed[feed.len() / 2..];
    f.pipeline.changes().apply(shard, middle).await.unwrap();
    assert_eq!(total(&f).await, counted);
    // A new record after them is counted.
    one(&f, &clock, &t, &c).await;
    let u = total(&f).await;
    assert_eq!((u.deliveries, u.attempts), (4, 4));
}

async fn series(f: &Fixture, of: UsageOf, r: Range) -> Vec<converger_pipeline::usage::Point> {
    f.pipeline.usage().series(&of, r).await.unwrap()
}

/// Ingests one activity to `c` and runs it, moving the clock on through its retries' backoffs
/// (31 s at a time), until it ends.
async fn settled(
    f: &Fixture,
    clock: &ManualClock,
    t: &Tenant,
    c: &Channel,
) -> converger_ports::Delivery {
    let mut d = one(f, clock, t, c).await;
    for _ in 0..20 {
        if d.status != DeliveryStatus::Pending {
            break;
        }
        clock.advance(Duration::from_secs(31));
        pump(f, clock).await;
        d = f.store.get_delivery(&d.id).await.unwrap().unwrap();
    }
    d
}

#[tokio::test]
async fn the_queues_are_sampled_each_minute_and_each_hour_keeps_its_highest() {
    let clock = Arc::new(ManualClock::at(10 * 3_600_000));
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let c = hook_to(
        &f,
        &t,
        &rx.url,
        json!({"retry_policy": {}, "circuit_breaker": {}}),
    )
    .await;
    let total = |d: &[converger_ports::QueueDepth], q: &str| {
        d.iter()
            .find(|d| d.queue == q)
            .map(converger_ports::QueueDepth::total)
    };
    // Activities waiting in the default queue, then sampled.
    for _ in 0..3 {
        f.pipeline
            .intake()
            .ingest(&t, activity(None, &[&c]))
            .await
            .unwrap();
    }
    let waiting = converger_ports::Queue::depths(&*f.queue).await.unwrap();
    let waiting = total(&waiting, "deliveries").unwrap();
    assert!(waiting > 0);
    f.pipeline.sweeper().sample_depths().await;
    // A minute on, delivered: the queue is empty.
    clock.advance(Duration::from_secs(60));
    pump(&f, &clock).await;
    f.pipeline.sweeper().sample_depths().await;
    let hour = f.pipeline.usage().depth_series(Range::Hour).await.unwrap();
    let sampled: Vec<Option<u64>> = hour
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(_, d)| total(d, "deliveries"))
        .collect();
    assert_eq!(sampled, vec![Some(waiting), Some(0)], "one sample a minute");
    assert_eq!(hour.iter().filter(|(_, d)| d.is_empty()).count(), 58);
    let day = f.pipeline.usage().depth_series(Range::Day).await.unwrap();
    let last = &day.last().unwrap().1;
    assert_eq!(
        total(last, "deliveries"),
        Some(waiting),
        "the hour keeps its highest"
    );
    assert_eq!(total(last, "deliveries-high"), Some(0));
}
