//! Rows written straight into the store for tests and benchmarks: what ingest leaves behind for
//! a channel whose window is full (backlog) or whose breaker is open (parked). The emulator's
//! transactions copy whole tables (and its memory grows with every copy), so thousands of
//! ingests there take minutes and gigabytes; batch writes of the same rows take seconds.

use converger_core::{ActivityId, DeliveryStatus, time};
use converger_ports::{Activity, Channel, Delivery, Mark, Tenant};
use converger_stack::Stack;
use serde_json::json;

/// How seeded deliveries are left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedAs {
    /// Waiting in the channel's backlog for a window slot.
    Backlog,
    /// Parked (`paused`).
    Parked,
    /// Already sent (rows that only take up room, as a control for emulator costs that grow
    /// with table size).
    Sent,
}

/// `n` activities of `channel` with their deliveries, left as `how` says.
pub fn rows(
    tenant: &Tenant,
    channel: &Channel,
    n: usize,
    how: SeedAs,
) -> (Vec<Activity>, Vec<Delivery>) {
    let now = converger_core::Timestamp::now();
    let mut activities = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let a = Activity {
            id: ActivityId::generate(),
            tenant_id: tenant.id.clone(),
            conversation_id: "conv-seed".into(),
            seq: i as u64 + 1,
            event_type: None,
            payload_ref: None,
            payload: json!({"text": "seeded", "n": i}),
            channel_ids: vec![channel.id.clone()],
            created_at: now,
            expires_at: None,
            trace: None,
        };
        let mut d = Delivery::new(&a, channel, tenant.tier, now).placed(tenant, now.ms());
        match how {
            SeedAs::Backlog => d.in_backlog = true,
            SeedAs::Parked => d.status = DeliveryStatus::Paused,
            SeedAs::Sent => d.status = DeliveryStatus::Sent,
        }
        activities.push(a);
        rows.push(d);
    }
    (activities, rows)
}

/// Writes [`rows`] with batch writes ([`Stack::seed_rows`]) and sets the channel's matching flow mark (so the feed or
/// the release finds them). Returns the delivery ids.
pub async fn write(
    stack: &Stack,
    tenant: &Tenant,
    channel: &Channel,
    n: usize,
    how: SeedAs,
) -> Result<Vec<String>, String> {
    let (activities, rows) = rows(tenant, channel, n, how);
    stack.seed_rows(&activities, &rows).await?;
    let mark = match how {
        SeedAs::Backlog => Some(Mark::Backlog),
        SeedAs::Parked => Some(Mark::Parked),
        SeedAs::Sent => None,
    };
    if let Some(mark) = mark {
        stack
            .store
            .mark(&channel.id, mark, Some(time::now_ms()), None)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(rows.into_iter().map(|d| d.id.to_string()).collect())
}
