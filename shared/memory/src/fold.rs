//! The in-process backend of [`UsageLog`]: the log's entries by period and part, each shard's
//! log mark and the fold's cursor, charged as the DynamoDB backend's items in the health
//! table (a transaction's items twice).

use super::*;
use converger_ports::{LOG_PIECE_BYTES, Marked, UsageLog, UsageLogEntry, UsageRow};

/// The log as the in-process backend keeps it.
#[derive(Debug, Default)]
pub(crate) struct Log {
    /// (period, part) -> each entry's stored pieces, by `<shard>#<first>`.
    entries: BTreeMap<(i64, u32), BTreeMap<String, Vec<String>>>,
    /// Each shard's log mark.
    marks: HashMap<String, String>,
    folded_to: Option<i64>,
}

/// A log mark's or the cursor's item, in bytes.
const MARK_ITEM_BYTES: usize = 120;

fn log_partition(period: i64, part: u32) -> String {
    format!(
        "fold#{}#{part}",
        converger_core::usage::fold::period_key(period)
    )
}

#[async_trait]
impl UsageLog for MemStore {
    async fn log_usage(&self, entry: &UsageLogEntry) -> StoreResult<Marked> {
        let part = converger_core::usage::fold::log_part_of(&entry.shard);
        let pieces = entry.pieces(LOG_PIECE_BYTES);
        let partition = log_partition(entry.period, part);
        self.charged(
            |m| m.transact,
            |s, meter| {
                // A transaction: every item's units twice, a refused one's too.
                meter.write(|| {
                    let mut charges: Vec<_> = pieces
                        .iter()
                        .map(|p| {
                            converger_ports::capacity::item_write(
                                "health",
                                "fold#<period>#<part>",
                                partition.clone(),
                                p.len() + 64,
                            )
                        })
                        .collect();
                    charges.push(converger_ports::capacity::item_write(
                        "health",
                        "fold#mark#<shard>",
                        format!("fold#mark#{}", entry.shard),
                        MARK_ITEM_BYTES,
                    ));
                    for c in &mut charges {
                        c.units *= 2.0;
                    }
                    charges
                })?;
                if let Some(to) = s.log.marks.get(&entry.shard)
                    && *to >= entry.first
                {
                    return Ok(Marked::Behind { to: to.clone() });
                }
                s.log
                    .entries
                    .entry((entry.period, part))
                    .or_default()
                    .insert(format!("{}#{}", entry.shard, entry.first), pieces.clone());
                s.log.marks.insert(entry.shard.clone(), entry.last.clone());
                Ok(Marked::Applied { created: None })
            },
        )
        .await
    }

    async fn logged_usage(&self, period: i64, part: u32) -> StoreResult<Vec<UsageRow>> {
        let partition = log_partition(period, part);
        self.charged(
            |m| m.query,
            |s, meter| {
                let pieces: Vec<&String> = s
                    .log
                    .entries
                    .get(&(period, part))
                    .into_iter()
                    .flat_map(|e| e.values().flatten())
                    .collect();
                meter.read(|| {
                    let bytes = pieces.iter().map(|p| p.len() + 64).sum();
                    vec![converger_ports::capacity::item_read(
                        "health",
                        "fold#<period>#<part>",
                        partition.clone(),
                        bytes,
                        true,
                    )]
                })?;
                Ok(pieces
                    .iter()
                    .flat_map(|p| UsageLogEntry::rows_of(p).0)
                    .collect())
            },
        )
        .await
    }

    async fn usage_folded_to(&self) -> StoreResult<Option<i64>> {
        self.charged(
            |m| m.get,
            |s, meter| {
                meter.read(|| {
                    vec![converger_ports::capacity::item_read(
                        "health",
                        "fold",
                        "fold",
                        MARK_ITEM_BYTES,
                        true,
                    )]
                })?;
                Ok(s.log.folded_to)
            },
        )
        .await
    }

    async fn set_usage_folded_to(&self, period: i64) -> StoreResult<()> {
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "health",
                        "fold",
                        "fold",
                        MARK_ITEM_BYTES,
                    )]
                })?;
                s.log.folded_to = Some(s.log.folded_to.map_or(period, |f| f.max(period)));
                Ok(())
            },
        )
        .await
    }
}
