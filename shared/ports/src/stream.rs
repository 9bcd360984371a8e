//! The live stream's storage: the connections of stream clients, the topics each follows,
//! and the short-lived tokens browsers connect with.

use crate::error::StoreResult;
use async_trait::async_trait;
use converger_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};

/// A client of the live stream (a WebSocket connection made with a tenant's API key or a
/// stream token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamConnection {
    pub connection_id: String,
    pub tenant_id: TenantId,
    pub connected_at: Timestamp,
    /// TTL (seconds since the epoch).
    pub expires_at: i64,
    /// The topics it follows (`core::stream::Topic` as text), at most
    /// `core::stream::MAX_TOPICS`.
    #[serde(default)]
    pub topics: Vec<String>,
    /// The only topics it may follow, when the token it connected with names some (`None`:
    /// any of its tenant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_topics: Option<Vec<String>>,
}

/// A stream token: who it admits and until when (seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamToken {
    pub tenant_id: TenantId,
    pub expires_at: i64,
    /// The hash of the API key it was asked for with: it admits only while that key is the
    /// tenant's (`None`: a token of the operators' pages).
    pub key_hash: Option<String>,
    /// The only topics a connection made with it may follow (`None`: any of its tenant's).
    pub topics: Option<Vec<String>>,
}

/// The tenants that may have a live stream client: those that made a connection today or
/// yesterday (UTC) that has not expired. A frame of any other tenant has no one to go to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveTenants {
    /// Every tenant counts (the day's list outgrew the one item that holds it).
    pub all: bool,
    pub tenants: std::collections::HashSet<TenantId>,
}

impl LiveTenants {
    /// Whether `tenant`'s frames may have a client.
    pub fn has(&self, tenant: &TenantId) -> bool {
        self.all || self.tenants.contains(tenant)
    }
}

/// What a subscribe did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscribed {
    /// Now followed (or already was).
    Yes,
    /// The connection follows the most topics it may.
    TooMany,
    /// No such connection (it went away).
    NoConnection,
}

#[async_trait]
pub trait StreamStore: Send + Sync + 'static {
    /// Keeps a connection, and marks its tenant live until the connection expires (see
    /// [`LiveTenants`]).
    async fn put_stream_connection(&self, c: &StreamConnection) -> StoreResult<()>;
    /// The tenants marked live and not expired at `now`.
    async fn live_tenants(&self, now: Timestamp) -> StoreResult<LiveTenants>;
    async fn get_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>>;
    /// Removes a connection and its subscriptions; the record it had, if any.
    async fn delete_stream_connection(
        &self,
        connection_id: &str,
    ) -> StoreResult<Option<StreamConnection>>;
    /// `connection` follows `topic` from now on, if it follows fewer than `max` topics: the
    /// topic is added to the connection's record (conditionally) and the subscription written.
    async fn subscribe(
        &self,
        connection_id: &str,
        topic: &str,
        max: usize,
        now: Timestamp,
    ) -> StoreResult<Subscribed>;
    /// `connection` no longer follows `topic`; whether it did.
    async fn unsubscribe(&self, connection_id: &str, topic: &str) -> StoreResult<bool>;
    /// The connections following `topic` of `tenant` (at most 100).
    async fn subscribers(&self, tenant: &TenantId, topic: &str) -> StoreResult<Vec<String>>;
    /// Forgets one subscription (its connection is gone).
    async fn drop_subscription(
        &self,
        tenant: &TenantId,
        topic: &str,
        connection_id: &str,
    ) -> StoreResult<()>;
    /// The connections of `tenant` (at most `limit`, any order).
    async fn tenant_connections(&self, tenant: &TenantId, limit: usize)
    -> StoreResult<Vec<String>>;
    /// Keeps a token (by its hash) until it expires.
    async fn put_stream_token(&self, hash: &str, token: &StreamToken) -> StoreResult<()>;
    /// The token with that hash, if it exists and has not expired at `now`.
    async fn stream_token(&self, hash: &str, now: Timestamp) -> StoreResult<Option<StreamToken>>;
}
