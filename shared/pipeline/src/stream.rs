//! The live stream (`docs/stream.md`): a tenant's client connects to the WebSocket API with its
//! API key (or a short-lived token the tenant API gives a browser), subscribes to topics
//! (`conversation:<id>`, `channel_health`), and is sent a frame for every platform event of
//! its tenant on them. The `changes` function pushes a delivery's frames from the table's
//! stream, the `stream` function a channel's from the bus; nothing here is on a delivery's
//! path. Before it looks for a topic's subscribers, a push reads which tenants have made a
//! connection lately ([`LIVE_TENANTS_TTL`], one read per instance): a tenant that never
//! connects costs no query.

use converger_core::TenantId;
use converger_core::stream::{self, ClientFrame, MAX_TOPICS, StreamFrame, TOKEN_TTL_S, Topic};
use converger_ports::{
    LiveTenants, Pushed, Sockets, StoreError, StoreResult, StreamConnection, StreamStore,
    StreamToken, Subscribed, TenantStore,
};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long an instance keeps its read of the live tenants for the tenants it names.
pub const LIVE_TENANTS_TTL: Duration = Duration::from_secs(5);

/// How old a read may be and still answer for a tenant it does not name: a tenant's first
/// client gets its frames within this of connecting, and an instance reads at most once
/// this often.
pub const LIVE_TENANTS_RECHECK: Duration = Duration::from_secs(1);

/// This instance's read of the live tenants.
pub(crate) struct LiveCache(converger_core::cache::TtlCache<(), Arc<LiveTenants>>);

impl Default for LiveCache {
    fn default() -> Self {
        Self(converger_core::cache::TtlCache::new(LIVE_TENANTS_TTL))
    }
}

/// A tenant's topic.
type TopicOf = (TenantId, String);
/// A frame as pushed.
type Frame = Vec<u8>;

/// How a stream client proves whose it is.
#[derive(Debug, Clone, Copy)]
pub enum StreamAuth<'a> {
    /// `Authorization: Bearer <tenant API key>` on the upgrade request.
    ApiKey(&'a str),
    /// `?token=` from `POST /api/v1/stream/tokens` (a browser cannot set headers).
    Token(&'a str),
}

pub use converger_core::stream::MAX_TENANT_CONNECTIONS;

/// Why a connection was refused.
#[derive(Debug, thiserror::Error)]
pub enum StreamRefused {
    #[error("this stack has no live stream (its `LiveStream` parameter is `disabled`)")]
    Disabled,
    #[error("invalid API key or stream token")]
    BadCredentials,
    #[error("the tenant has {0} stream connections, the most it may have; close one first")]
    TooMany(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A token given to a browser: good until `expires_at`, for its tenant's stream only.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IssuedToken {
    pub token: String,
    pub expires_at: String,
}

/// What a fan-out did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FanOut {
    /// Frames the management API took.
    pub sent: usize,
    /// Connections found gone (and forgotten).
    pub gone: usize,
    /// Pushes that failed otherwise (logged; a live stream does not retry a frame).
    pub failed: usize,
}

/// The live stream's use cases.
#[derive(Clone, Copy)]
pub struct Streams<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) tenants: &'p dyn TenantStore,
    pub(crate) streams: &'p dyn StreamStore,
    pub(crate) sockets: &'p dyn Sockets,
    /// Whether the stack has the live stream (`LIVE_STREAM`).
    pub(crate) enabled: bool,
    pub(crate) live: &'p LiveCache,
}

fn error(code: &'static str, message: impl Into<String>) -> StreamFrame {
    StreamFrame::Error {
        code,
        message: message.into(),
    }
}

impl Streams<'_> {
    /// Whether the stack has the live stream.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A new token for `tenant`'s stream, good for [`TOKEN_TTL_S`] (only its hash is kept),
    /// and only while the API key it was asked for with (`key_hash`) is the tenant's; with
    /// `topics`, a connection made with it follows those and no others.
    pub async fn issue_token(
        &self,
        tenant: &TenantId,
        key_hash: Option<&str>,
        topics: Option<&[Topic]>,
    ) -> StoreResult<IssuedToken> {
        let now = self.clock.now();
        let token = converger_core::secret::new_token();
        let expires = now.plus_ms(TOKEN_TTL_S * 1000);
        self.streams
            .put_stream_token(
                &converger_core::secret::hash_api_key(&token),
                &StreamToken {
                    tenant_id: tenant.clone(),
                    expires_at: expires.secs(),
                    key_hash: key_hash.map(str::to_owned),
                    // An empty list limits nothing (as the API never gives one).
                    topics: topics
                        .filter(|ts| !ts.is_empty())
                        .map(|ts| ts.iter().map(ToString::to_string).collect()),
                },
            )
            .await?;
        Ok(IssuedToken {
            token,
            expires_at: expires.rfc3339(),
        })
    }

    /// `$connect` of a stream client: the tenant its key or token names, kept as the
    /// connection's.
    pub async fn connect(
        &self,
        connection_id: &str,
        auth: StreamAuth<'_>,
    ) -> Result<StreamConnection, StreamRefused> {
        if !self.enabled {
            return Err(StreamRefused::Disabled);
        }
        let now = self.clock.now();
        let mut allowed_topics = None;
        let tenant = match auth {
            StreamAuth::ApiKey(key) => {
                self.tenants
                    .api_key_tenant(&converger_core::secret::hash_api_key(key))
                    .await?
            }
            StreamAuth::Token(token) => {
                match self
                    .streams
                    .stream_token(&converger_core::secret::hash_api_key(token), now)
                    .await?
                {
                    // A token asked for with a key admits while that key is the tenant's.
                    Some(t) => {
                        allowed_topics = t.topics;
                        match &t.key_hash {
                            Some(k) => self
                                .tenants
                                .api_key_tenant(k)
                                .await?
                                .filter(|id| *id == t.tenant_id),
                            None => Some(t.tenant_id),
                        }
                    }
                    None => None,
                }
            }
        };
        let Some(tenant) = tenant else {
            return Err(StreamRefused::BadCredentials);
        };
        if self.tenants.get_tenant(&tenant).await?.is_none() {
            return Err(StreamRefused::BadCredentials);
        }
        // A tenant's connections are capped: each costs its pushes, and a token shipped to
        // browsers must not let anyone open thousands.
        let open = self
            .streams
            .tenant_connections(&tenant, MAX_TENANT_CONNECTIONS)
            .await?
            .len();
        if open >= MAX_TENANT_CONNECTIONS {
            return Err(StreamRefused::TooMany(open));
        }
        let c = StreamConnection {
            connection_id: connection_id.to_owned(),
            tenant_id: tenant,
            connected_at: now,
            expires_at: now.secs() + converger_ports::CONNECTION_TTL_S,
            topics: Vec::new(),
            allowed_topics,
        };
        self.streams.put_stream_connection(&c).await?;
        Ok(c)
    }

    /// Closes every stream connection of `tenant` (its API key was rotated: a connection made
    /// with the old key, or with a token asked for with it, must not outlive it); how many.
    pub async fn close_tenant(&self, tenant: &TenantId) -> StoreResult<usize> {
        use futures::StreamExt;
        let ids = self
            .streams
            .tenant_connections(tenant, MAX_TENANT_CONNECTIONS)
            .await?;
        // Closed side by side; each one's records forgotten here too (its `$disconnect`
        // forgets them again, harmlessly, or never comes if the close failed).
        let closes: Vec<_> = ids
            .iter()
            .map(|id| {
                Box::pin(async move {
                    if let Err(e) = self.sockets.close(id).await {
                        tracing::warn!(connection_id = %id, error = %e, "stream connection not closed; forgotten");
                    }
                    self.streams.delete_stream_connection(id).await.map(|_| ())
                })
            })
            .collect();
        let done: Vec<StoreResult<()>> = futures::stream::iter(closes)
            .buffer_unordered(16)
            .collect()
            .await;
        done.into_iter().collect::<StoreResult<Vec<()>>>()?;
        Ok(ids.len())
    }

    /// `$disconnect`: the connection and its subscriptions forgotten; whether it was a stream
    /// client's.
    pub async fn disconnect(&self, connection_id: &str) -> StoreResult<bool> {
        Ok(self
            .streams
            .delete_stream_connection(connection_id)
            .await?
            .is_some())
    }

    /// A frame from a stream client, and the frame it is answered with.
    pub async fn message(&self, connection_id: &str, body: &str) -> StoreResult<StreamFrame> {
        let frame = match ClientFrame::parse(body) {
            Ok(f) => f,
            Err(e) => return Ok(error("invalid_request", e.message())),
        };
        let Some(connection) = self.streams.get_stream_connection(connection_id).await? else {
            return Ok(error(
                "not_connected",
                "this connection is not a stream client's; connect again",
            ));
        };
        let topic = match frame {
            ClientFrame::Ping => return Ok(StreamFrame::Pong),
            ClientFrame::Unsubscribe { topic } => {
                let topic = match Topic::parse(&topic) {
                    Ok(t) => t.to_string(),
                    Err(e) => return Ok(error("invalid_request", e.message())),
                };
                self.streams.unsubscribe(connection_id, &topic).await?;
                return Ok(StreamFrame::Unsubscribed { topic });
            }
            ClientFrame::Subscribe { topic } => topic,
        };
        let topic = match Topic::parse(&topic) {
            Ok(t) => t,
            Err(e) => return Ok(error("invalid_request", e.message())),
        };
        // A conversation is followed whether it has activities yet or not: the subscription
        // is the tenant's own (`sub#<tenant>#<topic>`), so another tenant's conversation of
        // the same id is never heard, and a client may subscribe before it sends.
        let name = topic.to_string();
        if let Some(allowed) = &connection.allowed_topics
            && !allowed.contains(&name)
        {
            return Ok(error(
                "topic_not_allowed",
                format!(
                    "the token this connection was made with admits only {}",
                    allowed.join(", ")
                ),
            ));
        }
        Ok(
            match self
                .streams
                .subscribe(connection_id, &name, MAX_TOPICS, self.clock.now())
                .await?
            {
                Subscribed::Yes => StreamFrame::Subscribed { topic: name },
                Subscribed::TooMany => error(
                    "too_many_topics",
                    format!("a connection follows at most {MAX_TOPICS} topics; unsubscribe first"),
                ),
                Subscribed::NoConnection => error(
                    "not_connected",
                    "this connection is not a stream client's; connect again",
                ),
            },
        )
    }

    /// Platform events (each its `detail-type` and `detail`) sent to the connections of their
    /// tenants following their topics, in order: one subscriber read per tenant and topic for
    /// the whole batch (the changes function's batch of a shard).
    pub async fn fan_out_all(&self, events: &[(&str, &Value)]) -> StoreResult<FanOut> {
        let mut out = FanOut::default();
        // Each topic's frames, in order, topics in the order they first appear.
        let mut topics: Vec<(TopicOf, Vec<Frame>)> = Vec::new();
        for (detail_type, detail) in events {
            let Some(routed) = stream::route(detail_type, detail) else {
                continue;
            };
            let Ok(tenant) = TenantId::parse(&routed.tenant_id) else {
                continue;
            };
            let data = serde_json::to_vec(&routed.frame)
                .map_err(|e| StoreError::Corrupt(format!("stream frame: {e}")))?;
            let key = (tenant, routed.topic.to_string());
            match topics.iter_mut().find(|(k, _)| *k == key) {
                Some((_, frames)) => frames.push(data),
                None => topics.push((key, vec![data])),
            }
        }
        if topics.is_empty() {
            return Ok(out);
        }
        // A tenant that has made no connection lately has no subscriber to look for.
        let live = self
            .live_tenants(topics.iter().map(|((tenant, _), _)| tenant))
            .await;
        for ((tenant, topic), frames) in topics {
            if !live.has(&tenant) {
                continue;
            }
            let connections = self.streams.subscribers(&tenant, &topic).await?;
            for data in &frames {
                let o = self.push(&tenant, &topic, &connections, data).await?;
                out.sent += o.sent;
                out.gone += o.gone;
                out.failed += o.failed;
            }
        }
        Ok(out)
    }

    /// The live tenants, as this instance last read them: within [`LIVE_TENANTS_TTL`] when the
    /// read names every one of `tenants`, within [`LIVE_TENANTS_RECHECK`] otherwise; every
    /// tenant when the read fails (a frame is not dropped for a read that did not happen).
    async fn live_tenants<'t>(
        &self,
        mut tenants: impl Iterator<Item = &'t TenantId>,
    ) -> Arc<LiveTenants> {
        if let Some(l) = self.live.0.get(&())
            && (tenants.all(|t| l.has(t))
                || self.live.0.get_within(&(), LIVE_TENANTS_RECHECK).is_some())
        {
            return l;
        }
        match self.streams.live_tenants(self.clock.now()).await {
            Ok(l) => {
                let l = Arc::new(l);
                self.live.0.insert((), l.clone());
                l
            }
            Err(e) => {
                tracing::warn!(error = %e, "live tenants not read: every tenant's subscribers looked for");
                Arc::new(LiveTenants {
                    all: true,
                    ..LiveTenants::default()
                })
            }
        }
    }

    /// One platform event (its `detail-type` and `detail`) sent to every connection of its
    /// tenant following its topic. Gone connections are forgotten; a push that fails otherwise
    /// is logged and not retried (a client that reconnects reads the state afresh).
    pub async fn fan_out(&self, detail_type: &str, detail: &Value) -> StoreResult<FanOut> {
        self.fan_out_all(&[(detail_type, detail)]).await
    }

    /// One frame to `connections` of `tenant`'s `topic`; gone ones forgotten.
    async fn push(
        &self,
        tenant: &TenantId,
        topic: &str,
        connections: &[String],
        data: &[u8],
    ) -> StoreResult<FanOut> {
        let mut out = FanOut::default();
        if connections.is_empty() {
            return Ok(out);
        }
        let pushes = connections.iter().map(|c| {
            let data = &data;
            async move { (c, self.sockets.post(c, data).await) }
        });
        for (c, r) in futures::future::join_all(pushes).await {
            match r {
                Ok(Pushed::Sent) => out.sent += 1,
                Ok(Pushed::Gone) => {
                    out.gone += 1;
                    // The connection went without a `$disconnect`: all of it goes.
                    if let Err(e) = self.streams.delete_stream_connection(c).await {
                        tracing::warn!(connection_id = %c, error = %e, "gone stream connection not removed");
                        self.streams.drop_subscription(tenant, topic, c).await?;
                    }
                }
                Ok(Pushed::TooLarge) => {
                    out.failed += 1;
                    tracing::warn!(connection_id = %c, %topic, bytes = data.len(), "stream frame larger than the WebSocket API carries");
                }
                Err(e) => {
                    out.failed += 1;
                    tracing::warn!(connection_id = %c, %topic, error = %e, "stream frame not pushed");
                }
            }
        }
        Ok(out)
    }
}
