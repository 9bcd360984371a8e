//! A live stream client for tests: connects to the stack's WebSocket API as a tenant (its API
//! key in `Authorization`, or a stream token), subscribes, and reads typed frames.

use crate::TestStack;
use crate::client::Tenant;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One frame the stream sent (`core::stream::StreamFrame` as JSON), with what tests read of it.
#[derive(Debug, Clone, Deserialize)]
pub struct Frame {
    #[serde(rename = "type")]
    pub kind: String,
    pub topic: Option<String>,
    pub code: Option<String>,
    pub delivery_id: Option<String>,
    pub activity_id: Option<String>,
    pub channel_id: Option<String>,
    pub conversation_id: Option<String>,
    pub status: Option<String>,
    pub attempts: Option<u32>,
    pub error: Option<String>,
    pub next_attempt_at: Option<String>,
    pub awaiting_ack: Option<bool>,
    pub state: Option<String>,
    pub reason: Option<String>,
    pub at: Option<String>,
}

/// A connected stream client.
pub struct StreamClient {
    ws: Socket,
}

/// Why a connection was refused: the handshake's HTTP status.
pub fn refused_status(e: &tokio_tungstenite::tungstenite::Error) -> Option<u16> {
    match e {
        tokio_tungstenite::tungstenite::Error::Http(r) => Some(r.status().as_u16()),
        _ => None,
    }
}

impl TestStack {
    /// Connects to the live stream with `Authorization: Bearer <key>`.
    pub async fn stream_with_key(
        &self,
        key: &str,
    ) -> Result<StreamClient, tokio_tungstenite::tungstenite::Error> {
        let (ws, _) = tokio_tungstenite::connect_async(self.keyed_request(key)?).await?;
        Ok(StreamClient { ws })
    }

    /// The stream's handshake request with `Authorization: Bearer <key>`.
    fn keyed_request(
        &self,
        key: &str,
    ) -> Result<
        tokio_tungstenite::tungstenite::handshake::client::Request,
        tokio_tungstenite::tungstenite::Error,
    > {
        let mut req = self.stack.ws_url.as_str().into_client_request()?;
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {key}")
                .parse()
                .map_err(|_| tokio_tungstenite::tungstenite::Error::Utf8(String::new()))?,
        );
        Ok(req)
    }

    /// [`Self::stream_with_key`] from the local address `source` (a loopback address other
    /// than 127.0.0.1: another client, as API Gateway's source IP tells them apart).
    pub async fn stream_with_key_from(
        &self,
        source: &str,
        key: &str,
    ) -> Result<StreamClient, tokio_tungstenite::tungstenite::Error> {
        use tokio_tungstenite::tungstenite::Error;
        let req = self.keyed_request(key)?;
        let host = req.uri().host().unwrap_or("127.0.0.1").to_owned();
        let port = req.uri().port_u16().unwrap_or(80);
        let local: std::net::IpAddr = source.parse().map_err(|_| Error::Utf8(source.into()))?;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind((local, 0).into())?;
        let to: std::net::IpAddr = host.parse().map_err(|_| Error::Utf8(host.clone()))?;
        let tcp = socket.connect((to, port).into()).await?;
        let (ws, _) =
            tokio_tungstenite::client_async(req, tokio_tungstenite::MaybeTlsStream::Plain(tcp))
                .await?;
        Ok(StreamClient { ws })
    }

    /// Connects to the live stream with `?token=`.
    pub async fn stream_with_token(
        &self,
        token: &str,
    ) -> Result<StreamClient, tokio_tungstenite::tungstenite::Error> {
        let (ws, _) =
            tokio_tungstenite::connect_async(format!("{}?token={token}", self.stack.ws_url))
                .await?;
        Ok(StreamClient { ws })
    }
}

impl Tenant<'_> {
    /// This tenant's stream client (its API key).
    pub async fn stream(&self) -> StreamClient {
        self.stack()
            .stream_with_key(&self.key)
            .await
            .expect("the stream accepts the tenant's key")
    }
}

impl StreamClient {
    pub async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("the stream is open");
    }

    /// Subscribes to `topic`; the answer.
    pub async fn subscribe(&mut self, topic: &str) -> Frame {
        self.send(json!({"action": "subscribe", "topic": topic}))
            .await;
        self.next().await
    }

    /// The next frame, within 30 s.
    pub async fn next(&mut self) -> Frame {
        self.next_within(Duration::from_secs(30))
            .await
            .expect("a frame in time")
    }

    /// The next frame, if one comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        let v = self.next_json_within(wait).await?;
        Some(
            serde_json::from_value(v.clone())
                .unwrap_or_else(|e| panic!("a frame that is not one ({e}): {v}")),
        )
    }

    /// The next text frame as JSON, whatever it is (a gateway's own answer has no `type`),
    /// if one comes within `wait`.
    pub async fn next_json_within(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .ok()?
                .expect("the stream is open")
                .expect("a frame");
            if let Message::Text(t) = msg {
                return Some(
                    serde_json::from_str(&t)
                        .unwrap_or_else(|e| panic!("a frame that is not JSON ({e}): {t}")),
                );
            }
        }
    }

    /// Whether the server closes the connection within `wait` (frames before it are read
    /// and dropped).
    pub async fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// Frames until `done` holds of the ones read (30 s at most); all of them.
    pub async fn until(&mut self, done: impl Fn(&[Frame]) -> bool) -> Vec<Frame> {
        let mut seen = Vec::new();
        while !done(&seen) {
            seen.push(self.next().await);
        }
        seen
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
