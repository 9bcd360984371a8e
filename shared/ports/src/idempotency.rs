//! The records behind `Idempotency-Key` (`core::idempotency` has the rules).

use crate::error::StoreResult;
use async_trait::async_trait;
use converger_core::TenantId;
use converger_core::Timestamp;
use serde::{Deserialize, Serialize};

/// One key's record: which request holds it, and its answer once it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The request's fingerprint (`core::idempotency::fingerprint`).
    pub fingerprint: String,
    /// Until when (ms) the holder keeps the key without an answer; after that another
    /// request with the key may take it over.
    pub locked_until: i64,
    /// The answer's status and body, once answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// TTL (seconds since the epoch); an expired record is absent.
    pub expires_at: i64,
}

impl KeyRecord {
    /// The answer, if the request was answered.
    pub fn answer(&self) -> Option<(u16, &str)> {
        Some((self.status?, self.body.as_deref()?))
    }
}

#[async_trait]
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Takes `key` of `tenant` for the request `record` describes: `None` when this request
    /// holds it now (the key was free, expired, or held without an answer past its lock),
    /// else the record that holds it.
    async fn take_key(
        &self,
        tenant: &TenantId,
        key: &str,
        record: &KeyRecord,
        now: Timestamp,
    ) -> StoreResult<Option<KeyRecord>>;
    /// The key's record (absent when free or expired).
    async fn get_key(&self, tenant: &TenantId, key: &str) -> StoreResult<Option<KeyRecord>>;
    /// Records the answer of the request holding `key` with `fingerprint`.
    async fn answer_key(
        &self,
        tenant: &TenantId,
        key: &str,
        fingerprint: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()>;
    /// Frees `key` held by `fingerprint` without an answer (the request failed): the same
    /// key may be used again at once.
    async fn free_key(&self, tenant: &TenantId, key: &str, fingerprint: &str) -> StoreResult<()>;
}
