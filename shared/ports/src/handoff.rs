//! Deliveries that leave the attempt pipeline's hands: websocket hand-offs waiting for a
//! client's acknowledgement, provider receipts that move a sent delivery on, and the
//! websocket connections of a channel and the port that pushes frames to them.

use crate::error::StoreResult;
use crate::model::Delivery;
use async_trait::async_trait;
use converger_core::Timestamp;
use converger_core::{ChannelId, DeliveryStatus, TenantId};
use serde::{Deserialize, Serialize};

/// How long a connection record lives without a `$disconnect` (API Gateway closes a
/// WebSocket connection after two hours at most).
pub const CONNECTION_TTL_S: i64 = 3 * 3600;

/// A client connected to a websocket channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub connection_id: String,
    pub channel_id: ChannelId,
    pub tenant_id: TenantId,
    pub connected_at: Timestamp,
    /// TTL (seconds since the epoch).
    pub expires_at: i64,
    /// The fingerprint of the token the client connected with (`core::secret::
    /// token_fingerprint`); `None` for connections made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_fp: Option<String>,
}

/// What an acknowledgement found.
#[derive(Debug, Clone, PartialEq)]
pub enum Ack {
    /// Handed off and now `sent`: the row as it now is.
    Acked(Delivery),
    /// Already accepted (sent, delivered or read): nothing to do.
    Already(Delivery),
    /// Not waiting for an acknowledgement (not handed off, or failed).
    NotAwaiting(Delivery),
    Missing,
}

/// What a provider receipt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Receipted {
    /// The delivery moved from `from` to the row's status.
    Applied { from: DeliveryStatus, row: Delivery },
    /// The rules leave the delivery as it is (late, duplicate, or after `failed`/`read`).
    Ignored(Delivery),
    /// No delivery of this channel has that provider message id.
    Unknown,
}

#[async_trait]
pub trait HandoffStore: Send + Sync + 'static {
    /// A client's acknowledgement of `d` (the row the caller read, for its keys): a
    /// handed-off delivery becomes `sent`, in one conditional write.
    async fn acknowledge(&self, d: &Delivery, now: Timestamp) -> StoreResult<Ack>;

    /// Applies a provider receipt to the delivery of `channel` that the provider knows as
    /// `provider_message_id`, by the rules of `DeliveryStatus::apply_receipt`, as one
    /// conditional write (a concurrent receipt makes it read and decide again).
    async fn apply_receipt(
        &self,
        channel: &ChannelId,
        provider_message_id: &str,
        receipt: DeliveryStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Receipted>;

    async fn put_connection(&self, c: &Connection) -> StoreResult<()>;
    /// Removes a connection; the record it had, if any.
    async fn delete_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>>;
    async fn get_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>>;
    /// Begins a replay on a channel (whichever of its connections asked) at `now_ms` unless
    /// `core::policy::socket_replay_wait_ms` says to wait: `None` when it began (holding the
    /// channel's turn until `now_ms + SOCKET_REPLAY_RUN_MS`), else the time the wait runs
    /// from.
    async fn begin_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<Option<i64>>;
    /// The replay that began on a channel ended at `now_ms`: the next may begin an interval
    /// after it.
    async fn end_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<()>;
    /// A channel's connections (at most 100).
    async fn channel_connections(&self, channel: &ChannelId) -> StoreResult<Vec<Connection>>;
}

/// What pushing a frame to a connection did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Sent,
    /// The connection no longer exists (HTTP 410 from the management API).
    Gone,
    /// The message is larger than the WebSocket API carries (HTTP 413,
    /// `PayloadTooLargeException`): it never will be pushed, to this connection or another.
    TooLarge,
}

/// A push that failed for another reason than a gone connection (retryable): the management
/// API's error as the source where it answered with one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SocketError {
    pub message: String,
    #[source]
    pub source: Option<crate::error::Source>,
}

impl SocketError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }
}

/// The WebSocket API's management endpoint (`PostToConnection`).
#[async_trait]
pub trait Sockets: Send + Sync + 'static {
    async fn post(&self, connection_id: &str, data: &[u8]) -> Result<Pushed, SocketError>;
    /// Closes a connection (one already gone is closed).
    async fn close(&self, _connection_id: &str) -> Result<(), SocketError> {
        Ok(())
    }
}

/// No WebSocket API configured: every push fails (retryable), so deliveries wait.
pub struct NoSockets;

#[async_trait]
impl Sockets for NoSockets {
    async fn post(&self, _connection_id: &str, _data: &[u8]) -> Result<Pushed, SocketError> {
        Err(SocketError::new(
            "no WebSocket management endpoint configured",
        ))
    }
}
