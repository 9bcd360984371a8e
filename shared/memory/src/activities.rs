//! Activities, written with their deliveries, and per-conversation sequence numbers.

use super::*;

#[async_trait]
impl ActivityStore for MemStore {
    async fn reserve_seqs(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        count: u64,
    ) -> StoreResult<u64> {
        let count = count.max(1);
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let n = s
                .seqs
                .entry(conversation_counter_key(tenant, conversation_id))
                .or_insert(0);
            *n += count;
            *n - (count - 1)
        })
    }
    async fn create_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
    ) -> StoreResult<Created> {
        // A transaction (conditional puts): each write costs twice.
        self.insert_activity(activity, deliveries, 2.0, |m| m.transact)
            .await
    }
    async fn create_fresh_activities(&self, fresh: &[(&Activity, &[Delivery])]) -> StoreResult<()> {
        // Batch writes, as the DynamoDB backend's: a unit per item.
        for (activity, deliveries) in fresh {
            self.insert_activity(activity, deliveries, 1.0, |m| m.write)
                .await?;
        }
        Ok(())
    }
    async fn get_activity(
        &self,
        tenant: &TenantId,
        id: &ActivityId,
    ) -> StoreResult<Option<Activity>> {
        wait(&self.latency, |m| m.get).await;
        let now = converger_core::time::now_ms();
        self.with(|s| {
            s.activities
                .get(&(tenant.clone(), id.clone()))
                .filter(|a| !converger_ports::expired(a.expires_at, now))
                .cloned()
        })
    }

    async fn conversation_activities(
        &self,
        tenant: &TenantId,
        conversation_id: &str,
        after: Option<&(u64, ActivityId)>,
        limit: usize,
    ) -> StoreResult<(Vec<Activity>, bool)> {
        wait(&self.latency, |m| m.query).await;
        let now = converger_core::time::now_ms();
        let want = limit.clamp(1, 1000);
        self.with(|s| {
            let mut v: Vec<Activity> = s
                .activities
                .iter()
                .filter(|((t, _), a)| {
                    t == tenant
                        && a.conversation_id == conversation_id
                        && after.is_none_or(|(seq, id)| (a.seq, &a.id) > (*seq, id))
                        && !converger_ports::expired(a.expires_at, now)
                })
                .map(|(_, a)| a.clone())
                .collect();
            v.sort_by(|a, b| a.seq.cmp(&b.seq).then(a.id.cmp(&b.id)));
            let more = v.len() > want;
            v.truncate(want);
            (v, more)
        })
    }
}

impl MemStore {
    /// Writes an activity with its deliveries unless any of them exists, charging each
    /// item's units `factor` times (a transaction's two).
    async fn insert_activity(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
        factor: f64,
        pick: fn(&LatencyModel) -> Duration,
    ) -> StoreResult<Created> {
        let shards = self.due_write_shards();
        self.charged(pick, |s, meter| {
            meter.write(|| {
                let mut charges = converger_ports::capacity::activity_insert(activity);
                for d in deliveries {
                    charges.extend(delivery_write(None, Some(d), shards));
                }
                for c in &mut charges {
                    c.units *= factor;
                }
                charges
            })?;
            let key = (activity.tenant_id.clone(), activity.id.clone());
            if s.activities.contains_key(&key)
                || deliveries.iter().any(|d| s.deliveries.contains_key(&d.id))
            {
                return Ok(Created::Duplicate);
            }
            s.activities.insert(key, activity.row().into_owned());
            for d in deliveries {
                s.deliveries.insert(d.id.clone(), d.clone());
                s.reindex(&d.id);
            }
            Ok(Created::New)
        })
        .await
    }
}
