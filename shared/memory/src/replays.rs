//! Replays: moving dead letters back to pending, and replay jobs.

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl ReplayStore for MemStore {
    async fn replay_many(
        &self,
        rows: &[Delivery],
        actor: &Actor,
        now: Timestamp,
        audits: &[AuditEntry],
    ) -> StoreResult<Vec<Delivery>> {
        check_replay_batch(rows, audits)?;
        wait(&self.latency, |m| m.transact).await;
        self.with(|s| {
            let mut done = Vec::new();
            for (d, audit) in rows.iter().zip(audits) {
                let Some(current) = s.deliveries.get(&d.id) else {
                    continue;
                };
                let key = (audit.tenant_id.to_string(), audit.sort_key());
                if current.status != d.status
                    || !matches!(d.status, DeliveryStatus::Failed | DeliveryStatus::Filtered)
                {
                    // The same request again after it committed (as the DynamoDB store reads
                    // a retried transaction whose fresh audit entry exists): replayed by it.
                    if s.audit.contains_key(&key) {
                        done.push(d.replayed(actor, now));
                        // (`d` carries the tier it was replayed to.)
                    }
                    continue;
                }
                let mut row = current.replayed(actor, now);
                row.tier = d.tier;
                s.deliveries.insert(row.id.clone(), row.clone());
                s.audit.insert(key, audit.clone());
                done.push(row);
            }
            done
        })
    }
    async fn create_replay_job(&self, job: &ReplayJob) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            if s.replays.contains_key(&job.id) {
                return Err(StoreError::Conflict("id exists".into()));
            }
            s.replays.insert(job.id.clone(), job.clone());
            Ok(())
        })?
    }
    async fn get_replay_job(&self, id: &str) -> StoreResult<Option<ReplayJob>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.replays.get(id).cloned())
    }
    async fn save_replay_job(&self, job: &ReplayJob) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| match s.replays.get(&job.id) {
            Some(cur) if cur.version + 1 == job.version => {
                s.replays.insert(job.id.clone(), job.clone());
                true
            }
            _ => false,
        })
    }
}
