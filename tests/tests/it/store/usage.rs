//! Usage counters: added up by key, read back in the order asked, zeros where none.

use super::*;
use converger_core::usage::{Counts, Grain};
use converger_ports::{UsageKey, UsageOf};

pub(super) async fn usage_counters_add_up_per_key_and_read_in_order(b: Backend) {
    let f = fixture(b).await;
    let ch = UsageOf::Channel(f.channel.id.clone());
    let tn = UsageOf::Tenant(f.tenant.id.clone());
    let minute = Grain::Minute.bucket(time::now_ms());
    let k = |of: &UsageOf, g: Grain, b: i64| UsageKey::new(of.clone(), g, b);
    let mut sent = Counts::sent_after(300);
    sent.attempts = 1;
    let failed = Counts {
        attempts: 2,
        failed_attempts: 2,
        dead_letters: 1,
        ..Counts::default()
    };
    f.store
        .add_usage(&k(&ch, Grain::Minute, minute), &sent)
        .await
        .unwrap();
    f.store
        .add_usage(&k(&ch, Grain::Minute, minute), &failed)
        .await
        .unwrap();
    f.store
        .add_usage(&k(&tn, Grain::Day, minute / 1440), &sent)
        .await
        .unwrap();
    // Nothing to add writes nothing.
    f.store
        .add_usage(&k(&ch, Grain::Hour, minute / 60), &Counts::default())
        .await
        .unwrap();
    let asked = [
        k(&ch, Grain::Minute, minute - 1),
        k(&ch, Grain::Minute, minute),
        k(&ch, Grain::Hour, minute / 60),
        k(&tn, Grain::Day, minute / 1440),
        // The same key twice reads twice.
        k(&ch, Grain::Minute, minute),
    ];
    let got = f.store.read_usage(&asked).await.unwrap();
    let mut both = sent;
    both.add(&failed);
    assert_eq!(
        got,
        vec![Counts::default(), both, Counts::default(), sent, both]
    );
    assert_eq!(got[1].attempts, 3);
    assert_eq!(got[1].latency_quantile_ms(0.5), Some(500));
    // A channel's counter is not its tenant's, nor another grain's.
    let other = f
        .store
        .read_usage(&[
            k(&tn, Grain::Minute, minute),
            k(&ch, Grain::Day, minute / 1440),
        ])
        .await
        .unwrap();
    assert_eq!(other, vec![Counts::default(); 2]);
    // More than one batch read's worth of keys.
    let many: Vec<UsageKey> = (minute - 149..=minute)
        .map(|m| k(&ch, Grain::Minute, m))
        .collect();
    let got = f.store.read_usage(&many).await.unwrap();
    assert_eq!(got.len(), 150);
    assert_eq!(got[149], both);
    assert!(got[..149].iter().all(Counts::is_zero));
}

pub(super) async fn a_weeks_health_history_reads_past_one_page(b: Backend) {
    let f = fixture(b).await;
    let now = time::now_ms();
    let checks: Vec<converger_ports::HealthCheck> = (0..620)
        .map(|i| converger_ports::HealthCheck {
            channel_id: f.channel.id.clone(),
            tenant_id: f.tenant.id.clone(),
            status: converger_core::health::HealthStatus::Healthy,
            previous_status: None,
            failure_rate: 0.0,
            total_deliveries: i,
            failed_deliveries: 0,
            checked_at: converger_core::Timestamp::from_ms(
                now - i64::try_from(i).unwrap() * 300_000,
            ),
            expires_at: now / 1000 + 86_400,
        })
        .collect();
    f.store.record_health(&checks).await.unwrap();
    let now_ts = Timestamp::from_ms(now);
    let all = f
        .store
        .health_history(&f.channel.id, 1_000, now_ts)
        .await
        .unwrap();
    assert_eq!(all.len(), 620, "more than one query page of 500");
    assert_eq!(all[0].total_deliveries, 0, "newest first");
    assert_eq!(all[619].total_deliveries, 619);
    let some = f
        .store
        .health_history(&f.channel.id, 501, now_ts)
        .await
        .unwrap();
    assert_eq!(some.len(), 501);
}

/// A counter write of the change stream, marked with its shard's records, adds once: a batch
/// handed out again is refused and says how far the counter got, one starting past it adds.
pub(super) async fn a_marked_counter_write_adds_each_record_once(b: Backend) {
    use converger_ports::{CounterAdd, Marked, StreamMark, seq_key};
    let f = fixture(b).await;
    let key = UsageKey::new(
        UsageOf::Channel(f.channel.id.clone()),
        Grain::Hour,
        Grain::Hour.bucket(time::now_ms()),
    );
    let add = CounterAdd::Usage {
        key: key.clone(),
        part: 0,
        counts: Counts {
            created: 2,
            ..Counts::default()
        },
    };
    let mark = |first: u32, last: u32| StreamMark {
        shard: "shardId-0001".into(),
        first: seq_key(&first.to_string()),
        last: seq_key(&last.to_string()),
    };
    assert_eq!(
        f.store.add_marked(&add, &mark(1, 5)).await.unwrap(),
        Marked::Applied { created: Some(2) },
        "the counter's created count after the add"
    );
    // Handed out again, whole or from inside what was added.
    for again in [mark(1, 5), mark(3, 9)] {
        assert_eq!(
            f.store.add_marked(&add, &again).await.unwrap(),
            Marked::Behind { to: seq_key("5") }
        );
    }
    assert_eq!(
        f.store.add_marked(&add, &mark(6, 9)).await.unwrap(),
        Marked::Applied { created: Some(4) },
        "the counter's created count after the add"
    );
    // Another shard's records are its own.
    let other = StreamMark {
        shard: "shardId-0002".into(),
        ..mark(1, 2)
    };
    assert_eq!(
        f.store.add_marked(&add, &other).await.unwrap(),
        Marked::Applied { created: Some(6) },
        "the counter's created count after the add"
    );
    // Another part of the counter is its own item, with its own count; a read adds up
    // every part.
    let part = CounterAdd::Usage {
        key: key.clone(),
        part: converger_core::usage::PARTS - 1,
        counts: Counts {
            created: 1,
            ..Counts::default()
        },
    };
    assert_ne!(part.counter_key(), add.counter_key());
    assert_eq!(
        f.store.add_marked(&part, &mark(1, 5)).await.unwrap(),
        Marked::Applied { created: Some(1) },
        "the part's own count"
    );
    let read = f.store.read_usage(&[key]).await.unwrap();
    assert_eq!(read[0].created, 7);
}
