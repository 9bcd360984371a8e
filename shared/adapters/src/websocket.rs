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
use converger_core::{ChannelType, DeliveryError};
use serde_json::{Map, Value, json};

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

/// The frame a client receives for one delivery (also when it asks for a replay).
pub fn activity_frame(
    delivery_id: &str,
    activity_id: &str,
    conversation_id: &str,
    seq: u64,
    payload: &Value,
    require_ack: bool,
) -> Value {
    json!({
        "type": "activity",
        "delivery_id": delivery_id,
        "activity_id": activity_id,
        "conversation_id": conversation_id,
        "seq": seq,
        "payload": payload,
        "require_ack": require_ack,
    })
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
