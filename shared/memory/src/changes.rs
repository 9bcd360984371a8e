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
            CounterAdd::Usage { key, counts } => self.add_usage(key, counts).await?,
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
        self.with(|s| s.marks.insert(at, mark.last.clone()))?;
        // The counter as the write left it, as DynamoDB returns it with the write (no read).
        let created = match add {
            CounterAdd::Usage { key, counts } if counts.created != 0 => {
                self.with(|s| s.usage.get(&key.key()).map(|c| c.created))?
            }
            _ => None,
        };
        Ok(Marked::Applied { created })
    }
}
