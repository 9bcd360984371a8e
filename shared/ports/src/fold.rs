//! The usage log: a quiet channel's usage counted once a minute instead of once per stream
//! batch (ADR 0089).
//!
//! The changes function writes a batch's usage as one [`UsageLogEntry`] (a row per tenant,
//! channel and minute of count), once per record: the entry is written with its stream
//! shard's log mark, in one transaction. The retry scheduler folds each closed period: it
//! reads the period's entries from every part, sums them per counter and writes each counter
//! once, marked with the period so that a fold run again adds only what it had not.

use crate::changes::{CounterAdd, Marked};
use crate::error::StoreResult;
use crate::usage::UsageKey;
use async_trait::async_trait;
use converger_core::usage::{Counts, LATENCY_BUCKETS};
use converger_core::{ChannelId, TenantId};

/// One tenant's channel's counts of one minute: its usage, and its health counter's adds
/// (deliveries created and failed, by the minute they were created in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub tenant: TenantId,
    pub channel: ChannelId,
    /// The minute the counts belong to (milliseconds since the epoch / 60,000).
    pub minute: i64,
    pub counts: Counts,
    pub health_created: i64,
    pub health_failed: i64,
    /// Entries its changes wrote to the deliveries' due index (added or moved): the load the
    /// fold grants due shards by (ADR 0093). No counter keeps it.
    pub due_writes: i64,
}

impl UsageRow {
    /// A row of usage counts alone.
    pub fn usage(tenant: TenantId, channel: ChannelId, minute: i64, counts: Counts) -> Self {
        Self {
            tenant,
            channel,
            minute,
            counts,
            health_created: 0,
            health_failed: 0,
            due_writes: 0,
        }
    }

    /// A row of due-index writes alone.
    pub fn due_writes(tenant: TenantId, channel: ChannelId, minute: i64, n: i64) -> Self {
        Self {
            due_writes: n,
            ..Self::usage(tenant, channel, minute, Counts::default())
        }
    }

    /// The counters the row adds to: the five usage counters (in part 0) when it has usage,
    /// the channel's health counter of the minute when it has health adds.
    pub fn adds(&self) -> Vec<CounterAdd> {
        let mut out = Vec::new();
        if !self.counts.is_zero() {
            out.extend(
                UsageKey::of_count(&self.tenant, &self.channel, self.minute * 60_000).map(|key| {
                    CounterAdd::Usage {
                        key,
                        part: 0,
                        counts: self.counts,
                    }
                }),
            );
        }
        if self.health_created != 0 || self.health_failed != 0 {
            out.push(CounterAdd::Health {
                channel: self.channel.clone(),
                minute: self.minute,
                created: self.health_created,
                failed: self.health_failed,
            });
        }
        out
    }

    /// Adds nothing, and wrote nothing to the due index.
    pub fn is_zero(&self) -> bool {
        self.counts.is_zero()
            && self.health_created == 0
            && self.health_failed == 0
            && self.due_writes == 0
    }

    /// The row as the log keeps it: `[tenant, channel, minute, [counts…]]`, the counts in
    /// [`Counts`]' field order with the latency buckets last, trailing zeros left out, then
    /// `health_created, health_failed` when either (or the due writes) is not zero, then
    /// `due_writes` when it is not zero.
    pub fn encode(&self) -> serde_json::Value {
        let c = &self.counts;
        let mut n: Vec<i64> = vec![
            c.created,
            c.sent,
            c.attempts,
            c.failed_attempts,
            c.dead_letters,
            c.breaker_opened,
            c.filtered,
        ];
        n.extend(c.latency);
        while n.last() == Some(&0) {
            n.pop();
        }
        let mut v = vec![
            serde_json::json!(self.tenant.as_str()),
            serde_json::json!(self.channel.as_str()),
            serde_json::json!(self.minute),
            serde_json::json!(n),
        ];
        if self.health_created != 0 || self.health_failed != 0 || self.due_writes != 0 {
            v.push(serde_json::json!(self.health_created));
            v.push(serde_json::json!(self.health_failed));
        }
        if self.due_writes != 0 {
            v.push(serde_json::json!(self.due_writes));
        }
        serde_json::Value::Array(v)
    }

    /// A row from [`Self::encode`]'s form; `None` for anything else.
    pub fn decode(v: &serde_json::Value) -> Option<Self> {
        let a = v.as_array()?;
        let (tenant, channel, minute, n, health, due_writes) = match a.as_slice() {
            [t, c, m, n] => (t, c, m, n, (0, 0), 0),
            [t, c, m, n, hc, hf] => (t, c, m, n, (hc.as_i64()?, hf.as_i64()?), 0),
            [t, c, m, n, hc, hf, dw] => (t, c, m, n, (hc.as_i64()?, hf.as_i64()?), dw.as_i64()?),
            _ => return None,
        };
        let n: Vec<i64> = n
            .as_array()?
            .iter()
            .map(serde_json::Value::as_i64)
            .collect::<Option<_>>()?;
        if n.len() > 7 + LATENCY_BUCKETS {
            return None;
        }
        let at = |i: usize| n.get(i).copied().unwrap_or(0);
        let mut counts = Counts {
            created: at(0),
            sent: at(1),
            attempts: at(2),
            failed_attempts: at(3),
            dead_letters: at(4),
            breaker_opened: at(5),
            filtered: at(6),
            ..Counts::default()
        };
        for (i, l) in counts.latency.iter_mut().enumerate() {
            *l = at(7 + i);
        }
        Some(Self {
            tenant: TenantId::parse(tenant.as_str()?).ok()?,
            channel: ChannelId::parse(channel.as_str()?).ok()?,
            minute: minute.as_i64()?,
            counts,
            health_created: health.0,
            health_failed: health.1,
            due_writes,
        })
    }

    /// Rows of one tenant, channel and minute summed into one, in a stable order. Due-index
    /// writes stay in rows of their own ([`Self::due_writes`]): a usage row keeps the shape
    /// an earlier version reads, so a rollback loses at most the due writes, never usage.
    pub fn merged(rows: impl IntoIterator<Item = UsageRow>) -> Vec<UsageRow> {
        let mut by: std::collections::BTreeMap<(String, String, i64, bool), UsageRow> =
            std::collections::BTreeMap::new();
        for r in rows {
            let k = (
                r.tenant.as_str().to_owned(),
                r.channel.as_str().to_owned(),
                r.minute,
                r.due_writes != 0,
            );
            match by.get_mut(&k) {
                Some(have) => {
                    have.counts.add(&r.counts);
                    have.health_created += r.health_created;
                    have.health_failed += r.health_failed;
                    have.due_writes += r.due_writes;
                }
                None => {
                    by.insert(k, r);
                }
            }
        }
        by.into_values().filter(|r| !r.is_zero()).collect()
    }
}

/// One stream batch's usage, logged once: the rows of the shard's records from `first` to
/// `last` (as [`crate::seq_key`] gives them), in the log's `period` (the minute it is
/// written in) and `part` ([`converger_core::usage::part_of`] the shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLogEntry {
    pub shard: String,
    pub first: String,
    pub last: String,
    pub period: i64,
    pub rows: Vec<UsageRow>,
}

impl UsageLogEntry {
    /// The entry's rows as stored, in pieces of at most `max_bytes` of text each (a DynamoDB
    /// item holds 400 KB).
    pub fn pieces(&self, max_bytes: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::from("[");
        for r in &self.rows {
            let one = r.encode().to_string();
            if cur.len() > 1 && cur.len() + one.len() + 2 > max_bytes {
                cur.push(']');
                out.push(std::mem::replace(&mut cur, String::from("[")));
            }
            if cur.len() > 1 {
                cur.push(',');
            }
            cur.push_str(&one);
        }
        cur.push(']');
        out.push(cur);
        out
    }

    /// The rows of a stored piece ([`Self::pieces`]); a row that cannot be read is left out
    /// and counted in the second value.
    pub fn rows_of(piece: &str) -> (Vec<UsageRow>, usize) {
        let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(piece)
        else {
            return (Vec::new(), 1);
        };
        let mut bad = 0;
        let rows = items
            .iter()
            .filter_map(|v| {
                let r = UsageRow::decode(v);
                bad += usize::from(r.is_none());
                r
            })
            .collect();
        (rows, bad)
    }
}

/// Largest piece of an entry's rows, in bytes of text.
pub const LOG_PIECE_BYTES: usize = 256 * 1024;

#[async_trait]
pub trait UsageLog: Send + Sync + 'static {
    /// Logs `entry` once: written only if its shard's log mark is before `entry.first`
    /// (or the shard has none); the mark is then `entry.last`, in the same transaction.
    /// `Behind` says how far the shard's log got.
    async fn log_usage(&self, entry: &UsageLogEntry) -> StoreResult<Marked>;

    /// Every row logged in `period` in `part`, as logged (rows of one counter apart).
    async fn logged_usage(&self, period: i64, part: u32) -> StoreResult<Vec<UsageRow>>;

    /// The last period folded, if any.
    async fn usage_folded_to(&self) -> StoreResult<Option<i64>>;

    /// Records that every period up to `period` is folded.
    async fn set_usage_folded_to(&self, period: i64) -> StoreResult<()>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row(minute: i64, created: i64, latency: usize) -> UsageRow {
        let mut counts = Counts {
            created,
            attempts: 2,
            ..Counts::default()
        };
        counts.latency[latency] = 3;
        UsageRow::usage(TenantId::generate(), ChannelId::generate(), minute, counts)
    }

    #[test]
    fn a_row_reads_back_as_written_and_leaves_trailing_zeros_out() {
        let r = row(29_000_000, 1, 2);
        let v = r.encode();
        assert_eq!(v[3].as_array().unwrap().len(), 10, "{v}");
        assert_eq!(UsageRow::decode(&v), Some(r.clone()));
        let last = row(1, 0, LATENCY_BUCKETS - 1);
        assert_eq!(UsageRow::decode(&last.encode()), Some(last));
        let health = UsageRow {
            health_created: 1,
            health_failed: -1,
            ..row(3, 0, 0)
        };
        assert_eq!(health.encode().as_array().unwrap().len(), 6);
        assert_eq!(UsageRow::decode(&health.encode()), Some(health.clone()));
        assert_eq!(
            health.adds().len(),
            6,
            "five usage counters and the health counter"
        );
        let only_health = UsageRow {
            counts: Counts::default(),
            ..health.clone()
        };
        assert!(matches!(
            only_health.adds().as_slice(),
            [CounterAdd::Health { .. }]
        ));
        // Due-index writes are logged for the fold and added to no counter.
        let due = UsageRow::due_writes(TenantId::generate(), ChannelId::generate(), 4, 3);
        assert_eq!(due.encode().as_array().unwrap().len(), 7);
        assert_eq!(UsageRow::decode(&due.encode()), Some(due.clone()));
        assert!(due.adds().is_empty() && !due.is_zero());
        // Merged apart from the usage of the same minute, which keeps its six elements.
        let used = UsageRow {
            tenant: due.tenant.clone(),
            channel: due.channel.clone(),
            ..health.clone()
        };
        let merged = UsageRow::merged([due.clone(), used.clone(), due.clone()]);
        assert_eq!(merged.len(), 2, "{merged:?}");
        assert!(
            merged
                .iter()
                .any(|r| r.due_writes == 6 && r.counts.is_zero())
        );
        let usage = merged.iter().find(|r| r.due_writes == 0).unwrap();
        assert_eq!(usage.encode().as_array().unwrap().len(), 6);
        assert_eq!(
            UsageRow::decode(&serde_json::json!(["x", "y", 1, []])),
            None
        );
    }

    #[test]
    fn rows_of_one_counter_merge_and_pieces_stay_under_their_size() {
        let a = row(5, 1, 0);
        let mut b = a.clone();
        b.counts.created = 4;
        let merged = UsageRow::merged([a.clone(), b, row(5, 1, 1)]);
        assert_eq!(merged.len(), 2);
        let m = merged.iter().find(|r| r.channel == a.channel).unwrap();
        assert_eq!((m.counts.created, m.counts.attempts), (5, 4));
        let entry = UsageLogEntry {
            shard: "s".into(),
            first: "1".into(),
            last: "9".into(),
            period: 7,
            rows: (0..50).map(|i| row(i, 1, 0)).collect(),
        };
        let pieces = entry.pieces(1_000);
        assert!(pieces.len() > 3);
        assert!(pieces.iter().all(|p| p.len() <= 1_000), "{pieces:?}");
        let back: Vec<UsageRow> = pieces
            .iter()
            .flat_map(|p| UsageLogEntry::rows_of(p).0)
            .collect();
        assert_eq!(back, entry.rows);
        assert_eq!(UsageLogEntry::rows_of("nope").1, 1);
    }
}
