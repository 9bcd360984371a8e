//! A tenant's event-type catalog (`core::schema` has the rules of a payload schema).

use crate::error::StoreResult;
use async_trait::async_trait;
use converger_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One event type of a tenant's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantEventType {
    pub tenant_id: TenantId,
    /// Its name, as activities and channel subscriptions give it (`order.paid`).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema (draft 2020-12) every payload of this type must fit, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Kept for the activities that still use it, marked for producers and receivers to move
    /// off it; its payloads are still checked.
    #[serde(default)]
    pub deprecated: bool,
    /// Grows by one with each change: a change is written only over the version it read.
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[async_trait]
pub trait EventTypeStore: Send + Sync + 'static {
    /// Stores a new type: `false` (nothing written) when its tenant has one of that name.
    async fn create_event_type(&self, t: &TenantEventType) -> StoreResult<bool>;
    async fn get_event_type(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> StoreResult<Option<TenantEventType>>;
    /// Replaces the stored type with `t` if the stored one is at `t.version - 1`: `false`
    /// (nothing written) when it changed meanwhile or is gone.
    async fn replace_event_type(&self, t: &TenantEventType) -> StoreResult<bool>;
    /// Up to `limit` of the tenant's types in name order, after `after`; and whether more
    /// follow.
    async fn list_event_types(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<(Vec<TenantEventType>, bool)>;
}
