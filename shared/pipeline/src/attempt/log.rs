//! A delivery's attempt log as the API and the pages read it: the newest attempts from the
//! delivery item, older ones from the attempts table.

use super::Attempts;
use converger_ports::{AttemptEntry, Delivery, StoreResult};

impl Attempts<'_> {
    /// A delivery's attempt log, newest first: the attempts numbered below `before` (all when
    /// `None`), at most `limit`, and whether more follow. The newest attempts live in the
    /// delivery item and older ones in the attempts table; entries past their retention are
    /// left out.
    pub async fn attempt_log(
        &self,
        d: &Delivery,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<(Vec<AttemptEntry>, bool)> {
        let below = |a: u32| before.is_none_or(|b| a < b);
        let mut entries: Vec<AttemptEntry> = d
            .attempt_log
            .iter()
            .rev()
            .filter(|e| below(e.attempt))
            .cloned()
            .collect();
        let oldest_kept = d.attempt_log.first().map_or(u32::MAX, |e| e.attempt);
        if entries.len() <= limit && oldest_kept > 1 && !d.attempt_log.is_empty() {
            let from = before.map_or(oldest_kept, |b| b.min(oldest_kept));
            let older = self
                .listings
                .older_attempts(&d.id, Some(from), limit + 1 - entries.len())
                .await?;
            entries.extend(older);
        }
        let now_s = self.clock.now().secs();
        entries.retain(|e| e.expires_at.is_none_or(|x| x > now_s));
        entries.dedup_by_key(|e| e.attempt);
        let more = entries.len() > limit;
        entries.truncate(limit);
        Ok((entries, more))
    }
}
