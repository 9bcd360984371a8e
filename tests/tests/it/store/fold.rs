//! The usage log (ADR 0089): a batch's entry logged once per record with its shard's mark,
//! read back by period and part, and the fold's cursor that never goes back.

use super::*;
use converger_core::usage::Counts;
use converger_ports::{Marked, UsageLogEntry, UsageRow, seq_key};

fn row(f: &Fixture, minute: i64, created: i64) -> UsageRow {
    UsageRow {
        health_created: created,
        ..UsageRow::usage(
            f.tenant.id.clone(),
            f.channel.id.clone(),
            minute,
            Counts {
                created,
                attempts: created,
                ..Counts::default()
            },
        )
    }
}

pub(super) async fn the_usage_log_takes_a_batch_once_and_reads_it_by_period(b: Backend) {
    let f = fixture(b).await;
    let period = converger_core::usage::fold::period_of(time::now_ms());
    let shard = "shardId-00000001700000000000-abc".to_owned();
    let entry = |first: u32, last: u32, rows: Vec<UsageRow>| UsageLogEntry {
        shard: shard.clone(),
        first: seq_key(&first.to_string()),
        last: seq_key(&last.to_string()),
        period,
        rows,
    };
    let first = entry(1, 5, vec![row(&f, period, 2), row(&f, period - 1, 1)]);
    assert_eq!(
        f.store.log_usage(&first).await.unwrap(),
        Marked::Applied { created: None }
    );
    // Handed out again, whole or from inside what was logged: refused, with the mark.
    for again in [
        entry(1, 5, vec![row(&f, period, 9)]),
        entry(3, 9, vec![row(&f, period, 9)]),
    ] {
        assert_eq!(
            f.store.log_usage(&again).await.unwrap(),
            Marked::Behind { to: seq_key("5") }
        );
    }
    // Past the mark: logged.
    let next = entry(6, 8, vec![row(&f, period, 3)]);
    assert_eq!(
        f.store.log_usage(&next).await.unwrap(),
        Marked::Applied { created: None }
    );
    // An entry too big for one item is kept in pieces and read whole.
    let many: Vec<UsageRow> = (0..4_000).map(|i| row(&f, period - 2 - i, 1)).collect();
    let big = entry(9, 20, many.clone());
    assert!(big.pieces(converger_ports::LOG_PIECE_BYTES).len() > 1);
    assert_eq!(
        f.store.log_usage(&big).await.unwrap(),
        Marked::Applied { created: None }
    );
    let part = converger_core::usage::fold::log_part_of(&shard);
    let mut read = f.store.logged_usage(period, part).await.unwrap();
    read.sort_by_key(|r| (std::cmp::Reverse(r.minute), r.counts.created));
    let mut want: Vec<UsageRow> = first
        .rows
        .iter()
        .chain(&next.rows)
        .chain(&many)
        .cloned()
        .collect();
    want.sort_by_key(|r| (std::cmp::Reverse(r.minute), r.counts.created));
    assert_eq!(read.len(), want.len());
    assert_eq!(read, want);
    // Another part and another period are apart.
    let other = (part + 1) % converger_core::usage::fold::LOG_PARTS;
    assert!(
        f.store
            .logged_usage(period, other)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        f.store
            .logged_usage(period + 1, part)
            .await
            .unwrap()
            .is_empty()
    );
    // Another shard's records have their own mark.
    let elsewhere = UsageLogEntry {
        shard: "shardId-2".into(),
        ..entry(1, 2, vec![row(&f, period, 1)])
    };
    assert_eq!(
        f.store.log_usage(&elsewhere).await.unwrap(),
        Marked::Applied { created: None }
    );
}

pub(super) async fn the_folds_cursor_only_goes_forward(b: Backend) {
    let f = fixture(b).await;
    assert_eq!(f.store.usage_folded_to().await.unwrap(), None);
    f.store.set_usage_folded_to(100).await.unwrap();
    // A slower run that ends at an earlier period leaves the later one.
    f.store.set_usage_folded_to(99).await.unwrap();
    assert_eq!(f.store.usage_folded_to().await.unwrap(), Some(100));
    f.store.set_usage_folded_to(101).await.unwrap();
    assert_eq!(f.store.usage_folded_to().await.unwrap(), Some(101));
}
