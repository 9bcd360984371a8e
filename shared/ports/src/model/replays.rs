//! Replays of dead letters: their batches, jobs, messages and audit entries.

use super::*;
use crate::keys::audit_partition_of;

/// Most deliveries one replay transaction moves (two items each, the row and its audit entry;
/// DynamoDB takes 100 items per transaction).
pub const REPLAY_BATCH: usize = 50;

/// The arguments every backend's `replay_many` accepts: one audit entry per row, at most
/// [`REPLAY_BATCH`] rows.
pub fn check_replay_batch(
    rows: &[Delivery],
    audits: &[AuditEntry],
) -> Result<(), crate::error::StoreError> {
    if rows.len() != audits.len() || rows.len() > REPLAY_BATCH {
        return Err(crate::error::StoreError::Corrupt(format!(
            "replay_many takes up to {REPLAY_BATCH} rows, one audit entry each"
        )));
    }
    Ok(())
}

/// One audited action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: String,
    pub tenant_id: TenantId,
    pub actor: Actor,
    /// e.g. `retry`.
    pub action: String,
    /// e.g. `delivery`.
    pub resource_type: String,
    pub resource_id: String,
    pub changes: Value,
    pub at: Timestamp,
}

/// Partitions of a tenant's audit log: entries go to one by their id's stable hash, and a
/// page of the log reads all of them and merges (`merge_pages`). A bulk replay writes an
/// entry per delivery; on one partition a replay of 10,000 would take at least 10 s of its
/// 1,000 write units a second, on eight about 1.3 s.
pub const AUDIT_SHARDS: u32 = 8;

/// The audit log's partition of an entry of `tenant` with id `id`.
pub fn audit_partition(tenant: &TenantId, id: &str) -> String {
    audit_partition_of(tenant, converger_core::ids::stable_hash(id) % AUDIT_SHARDS)
}

impl AuditEntry {
    /// Its sort key in the audit table ([`crate::keys::audit_sort_key`]).
    pub fn sort_key(&self) -> String {
        crate::keys::audit_sort_key(self.at, &self.id)
    }

    pub fn new(
        tenant_id: TenantId,
        actor: Actor,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        changes: Value,
        at: Timestamp,
    ) -> Self {
        Self {
            id: format!("aud_{}", uuid::Uuid::new_v4().simple()),
            tenant_id,
            actor,
            action: action.into(),
            resource_type: resource_type.into(),
            resource_id: resource_id.into(),
            changes,
            at,
        }
    }
}

/// A bulk replay that runs as a job, one chunk per `replay` queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayJob {
    /// `rpl_...`
    pub id: String,
    pub tenant_id: TenantId,
    pub channel_id: ChannelId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_key: Option<String>,
    /// Upper bound on `upd_sk`: never later than the job's start.
    pub to_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_id: Option<ActivityId>,
    pub limit: usize,
    pub actor: Actor,
    /// `running`, `done` or `failed`.
    pub status: String,
    pub retried: usize,
    pub has_more: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bumped by every progress write (optimistic concurrency).
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When the job record is deleted (seconds since the epoch).
    pub expires_at: i64,
}

/// What a `replay` queue message says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayMessage {
    pub job_id: String,
}
