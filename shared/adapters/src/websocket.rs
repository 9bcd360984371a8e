//! Websocket channels: the activity is pushed to every client connected to the channel
//! (API Gateway WebSocket API connections, pushed through its management API).
//!
//! Config: `token` (required, at least 16 characters: what a client presents to connect)
//! and `require_ack` (default false). With no connected client, or with `require_ack`, the
//! delivery is handed off: it stays `pending`, is not retried, and becomes `sent` when a
//! client acknowledges it (or asks for a replay of what is pending).

use converger_core::Invalid;

use crate::{Accepted, Adapter, Delivered, Envelope, Push, Target};
use async_trait::async_trait;
use converger_core::{ChannelType, DeliveryError, DeliveryStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Shortest connect token a channel may have.
pub const MIN_TOKEN_CHARS: usize = 16;

pub struct WebsocketAdapter;

/// A validated websocket configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketConfig {
    pub token: String,
    pub require_ack: bool,
}

pub fn socket_config(config: &Map<String, Value>) -> Result<SocketConfig, Invalid> {
    if let Some(k) = config
        .keys()
        .find(|k| !["token", "require_ack"].contains(&k.as_str()))
    {
        return Err(Invalid(format!(
            "unknown websocket config key `{k}` (allowed: token, require_ack)"
        )));
    }
    let token = config
        .get("token")
        .and_then(Value::as_str)
        .filter(|t| t.chars().count() >= MIN_TOKEN_CHARS)
        .ok_or_else(|| {
            format!("websocket config needs `token`, at least {MIN_TOKEN_CHARS} characters")
        })?;
    let require_ack = match config.get("require_ack") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Invalid::new("require_ack must be true or false")),
    };
    Ok(SocketConfig {
        token: token.to_owned(),
        require_ack,
    })
}

/// What a websocket channel's client is sent: a delivery, or the answer to a frame it sent
/// (`{"action": "ack", "delivery_id"}` or `{"action": "replay"}`), named by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SocketFrame {
    /// One delivery (`replay`: pushed again because the client asked).
    Activity {
        delivery_id: String,
        activity_id: String,
        conversation_id: String,
        seq: u64,
        payload: Value,
        require_ack: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replay: bool,
    },
    /// An acknowledgement taken: the delivery's status now.
    Ack {
        delivery_id: String,
        status: DeliveryStatus,
    },
    /// A replay done: how many deliveries were pushed again.
    Replayed {
        count: usize,
        /// More deliveries wait than this replay pushed (over `SOCKET_REPLAY_LIMIT`, or past
        /// its time budget): acknowledge these and replay again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        more: bool,
    },
    /// A frame refused: a stable code, a message, and when a throttled one may come again.
    Error {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<i64>,
    },
}

impl SocketFrame {
    /// A refusal without a wait.
    pub fn error(code: &str, message: &str) -> Self {
        Self::Error {
            code: code.to_owned(),
            message: message.to_owned(),
            retry_after_ms: None,
        }
    }
}

/// The frame a client receives for one delivery (also when it asks for a replay).
pub fn activity_frame(
    delivery_id: &str,
    activity_id: &str,
    conversation_id: &str,
    seq: u64,
    payload: &Value,
    require_ack: bool,
) -> SocketFrame {
    SocketFrame::Activity {
        delivery_id: delivery_id.to_owned(),
        activity_id: activity_id.to_owned(),
        conversation_id: conversation_id.to_owned(),
        seq,
        payload: payload.clone(),
        require_ack,
        replay: false,
    }
}

#[async_trait]
impl Adapter for WebsocketAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Websocket
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        socket_config(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let cfg = target
            .config_as(socket_config)
            .map_err(|e| DeliveryError::permanent(format!("websocket: {e}")))?;
        let connections = env.services.connections(target.channel_id).await?;
        let frame = serde_json::to_vec(&activity_frame(
            env.delivery_id,
            env.activity_id,
            env.conversation_id,
            env.seq,
            env.payload,
            cfg.require_ack,
        ))
        .map_err(|e| DeliveryError::permanent(format!("websocket: {e}")))?;
        // A frame the WebSocket API cannot carry never will be pushed: dead-lettered at once
        // with the reason, whether a client is connected or not.
        converger_core::websocket::check_message_size(frame.len())
            .map_err(|e| DeliveryError::permanent(format!("websocket: {e}")))?;
        let pushes =
            futures::future::join_all(connections.iter().map(|c| env.services.push(c, &frame)))
                .await;
        let mut pushed = 0usize;
        let mut error = None;
        for r in pushes {
            match r {
                Ok(Push::Sent) => pushed += 1,
                Ok(Push::Gone) => {}
                Err(e) => error = Some(e),
            }
        }
        if pushed == 0
            && let Some(e) = error
        {
            return Err(e);
        }
        let note = |s: String| Accepted {
            provider_message_id: None,
            status_code: None,
            response_snippet: Some(s),
        };
        Ok(if pushed == 0 {
            Delivered::HandedOff(note("no connected client".into()))
        } else if cfg.require_ack {
            Delivered::HandedOff(note(format!(
                "pushed to {pushed} connection(s); waiting for an ack"
            )))
        } else {
            Delivered::Sent(note(format!("pushed to {pushed} connection(s)")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_keep_their_wire_form() {
        let mut frame = activity_frame("dlv_1", "act_1", "c", 3, &json!({"text": "hi"}), true);
        assert_eq!(
            serde_json::to_value(&frame).unwrap(),
            json!({"type": "activity", "delivery_id": "dlv_1", "activity_id": "act_1",
                   "conversation_id": "c", "seq": 3, "payload": {"text": "hi"}, "require_ack": true})
        );
        if let SocketFrame::Activity { replay, .. } = &mut frame {
            *replay = true;
        }
        assert_eq!(serde_json::to_value(&frame).unwrap()["replay"], true);
        let ack = SocketFrame::Ack {
            delivery_id: "dlv_1".into(),
            status: DeliveryStatus::Sent,
        };
        assert_eq!(
            serde_json::to_value(&ack).unwrap(),
            json!({"type": "ack", "delivery_id": "dlv_1", "status": "sent"})
        );
        assert_eq!(
            serde_json::to_value(SocketFrame::Replayed {
                count: 2,
                more: false
            })
            .unwrap(),
            json!({"type": "replayed", "count": 2})
        );
        assert_eq!(
            serde_json::to_value(SocketFrame::Replayed {
                count: 500,
                more: true
            })
            .unwrap(),
            json!({"type": "replayed", "count": 500, "more": true})
        );
        assert_eq!(
            serde_json::to_value(SocketFrame::error("not_found", "no such delivery")).unwrap(),
            json!({"type": "error", "code": "not_found", "message": "no such delivery"})
        );
        let throttled = SocketFrame::Error {
            code: "replay_throttled".into(),
            message: "later".into(),
            retry_after_ms: Some(250),
        };
        assert_eq!(
            serde_json::to_value(&throttled).unwrap()["retry_after_ms"],
            250
        );
    }

    #[test]
    fn config() {
        let m = |v: Value| v.as_object().cloned().unwrap();
        let good = m(json!({"token": "0123456789abcdef", "require_ack": true}));
        let c = socket_config(&good).unwrap();
        assert!(c.require_ack);
        assert!(socket_config(&m(json!({"token": "short"}))).is_err());
        assert!(socket_config(&m(json!({}))).is_err());
        assert!(socket_config(&m(json!({"token": "0123456789abcdef", "x": 1}))).is_err());
        assert!(
            socket_config(&m(
                json!({"token": "0123456789abcdef", "require_ack": "yes"})
            ))
            .is_err()
        );
    }
}
