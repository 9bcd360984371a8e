//! The in-process backend of [`StreamCounters`]: the counters' own writes, each applied once
//! per stream record as DynamoDB's conditional write on the counter's mark applies it.

use super::*;
use converger_ports::{CounterAdd, Marked, StreamCounters, StreamMark};

#[async_trait]
impl StreamCounters for MemStore {
    async fn add_marked(&self, add: &CounterAdd, mark: &StreamMark) -> StoreResult<Marked> {
        let at = (add.counter_key(), mark.attribute());
        if let Some(to) = self.with(|s| s.marks.get(&at).cloned())?
            && to >= mark.first
        {
            // Refused writes are charged as DynamoDB charges a failed condition.
            wait(&self.latency, |m| m.write).await;
            return Ok(Marked::Behind { to });
        }
        match add {
            CounterAdd::Usage { counts, .. } => {
                // The item as DynamoDB sizes it: its counts and every shard's mark.
                let marks = self.with(|s| {
                    s.marks_on.get(&at.0).copied().unwrap_or(0)
                        + usize::from(!s.marks.contains_key(&at))
                })?;
                self.add_usage_item(
                    at.0.clone(),
                    counts,
                    super::usage::COUNTER_BYTES + marks * super::usage::MARK_BYTES,
                )
                .await?
            }
            CounterAdd::Health {
                channel,
                minute,
                created,
                failed,
            } => {
                self.count_deliveries(channel, *minute, *created, *failed)
                    .await?
            }
            CounterAdd::DeadLetters {
                channel,
                day,
                delta,
                expires_at,
            } => {
                self.count_dead_letters(channel, *day, *delta, *expires_at)
                    .await?
            }
        }
        self.with(|s| {
            if s.marks.insert(at.clone(), mark.last.clone()).is_none() {
                *s.marks_on.entry(at.0).or_default() += 1;
            }
        })?;
        // The counter as the write left it, as DynamoDB returns it with the write (no read).
        let created = match add {
            CounterAdd::Usage { counts, .. } if counts.created != 0 => {
                self.with(|s| s.usage.get(&add.counter_key()).map(|c| c.created))?
            }
            _ => None,
        };
        Ok(Marked::Applied { created })
    }
}
