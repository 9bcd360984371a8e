//! What the changes function logs with the usage log (ADR 0089): a batch's rows, once per
//! record, and the rates of the tenants busy in the batch.

use super::{CountError, Counted, Derived};
use converger_core::usage::fold::BUSY_CREATED;
use converger_core::usage::{Counts, Grain};
use converger_ports::{
    CounterAdd, Marked, RowChange, UsageKey, UsageLog, UsageLogEntry, UsageOf, UsageRow,
};
use std::collections::{BTreeMap, HashSet};

impl super::Changes<'_> {
    /// The batch's logged rows in one entry, written once (twice when a repeat's write says
    /// how far the shard's log got, and the second write logs the rest).
    pub(crate) async fn log_rows(
        &self,
        log: &dyn UsageLog,
        shard: &str,
        records: &[RowChange],
        rows: &[(&str, &[UsageRow])],
    ) -> Result<Counted, CountError> {
        let mut c = Counted::default();
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Ok(c);
        };
        let mut after: Option<String> = None;
        for _ in 0..2 {
            let mut entry = UsageLogEntry {
                shard: shard.to_owned(),
                first: first.seq.clone(),
                last: last.seq.clone(),
                period: converger_core::usage::fold::period_of(self.clock.now_ms()),
                rows: UsageRow::merged(
                    rows.iter()
                        .filter(|(seq, _)| after.as_deref().is_none_or(|a| *seq > a))
                        .flat_map(|(_, r)| r.iter().cloned()),
                ),
            };
            if let Some(a) = &after {
                // The records past the mark: the entry starts after it.
                let Some(next) = records.iter().find(|r| r.seq.as_str() > a.as_str()) else {
                    break;
                };
                entry.first.clone_from(&next.seq);
            }
            if entry.rows.is_empty() {
                break;
            }
            match log.log_usage(&entry).await {
                Ok(Marked::Applied { .. }) => {
                    c.writes += 1;
                    break;
                }
                Ok(Marked::Behind { to }) => {
                    c.repeats += 1;
                    if to < entry.first || after.as_ref().is_some_and(|a| to <= *a) {
                        return Err(CountError::Refused {
                            mark: to,
                            first: entry.first,
                        });
                    }
                    after = Some(to);
                }
                Err(e) => return Err(CountError::Store(e)),
            }
        }
        Ok(c)
    }
}

/// The tenants busy in a batch: at least [`BUSY_CREATED`] deliveries created by its
/// records.
pub(crate) fn busy_tenants(derived: &[Derived]) -> HashSet<&str> {
    let mut created: BTreeMap<&str, i64> = BTreeMap::new();
    for row in derived.iter().flat_map(|d| &d.rows) {
        *created.entry(row.tenant.as_str()).or_default() += row.counts.created;
    }
    created
        .into_iter()
        .filter(|(_, n)| *n >= BUSY_CREATED)
        .map(|(t, _)| t)
        .collect()
}

/// A row's add to its tenant's minute [`UsageOf::TenantRate`] counter, where the tenant is
/// busy and the row created some.
pub(crate) fn rate_of(row: &UsageRow, busy: &HashSet<&str>) -> Option<CounterAdd> {
    (row.counts.created > 0 && busy.contains(row.tenant.as_str())).then(|| CounterAdd::Usage {
        key: UsageKey::new(
            UsageOf::TenantRate(row.tenant.clone()),
            Grain::Minute,
            row.minute,
        ),
        part: 0,
        counts: Counts {
            created: row.counts.created,
            ..Counts::default()
        },
    })
}
