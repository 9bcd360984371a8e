//! The echo bot: answers every activity in the same conversation with an activity authored
//! by the bot, and the delivery is `sent` with the reply's id. No network.
//!
//! Config: `reply_to`: `"activity_channels"` (default: the reply goes to the channels the
//! activity targeted, except echo channels, so a bot never answers a bot) or `"none"` (the
//! reply is only stored in the conversation).

use converger_core::Invalid;

use crate::{Accepted, Adapter, Delivered, Envelope, Reply, Target};
use async_trait::async_trait;
use converger_core::{ChannelType, DeliveryError};
use serde_json::{Map, Value, json};

pub struct EchoAdapter;

fn reply_everywhere(config: &Map<String, Value>) -> Result<bool, Invalid> {
    if let Some(k) = config.keys().find(|k| k.as_str() != "reply_to") {
        return Err(Invalid(format!(
            "unknown echo config key `{k}` (allowed: reply_to)"
        )));
    }
    match config.get("reply_to") {
        None | Some(Value::Null) => Ok(true),
        Some(Value::String(s)) if s == "activity_channels" => Ok(true),
        Some(Value::String(s)) if s == "none" => Ok(false),
        Some(_) => Err(Invalid::new(
            "reply_to must be \"activity_channels\" or \"none\"",
        )),
    }
}

/// The bot's answer to `payload`: its text back, or the whole payload when it has none.
pub fn reply_payload(payload: &Value, activity_id: &str, channel_id: &str) -> Value {
    let text = match payload.get("text") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o.get("body").and_then(Value::as_str),
        _ => None,
    };
    let mut reply = json!({
        "type": "message",
        "author": {"type": "bot", "id": format!("echo:{channel_id}")},
        "in_reply_to": activity_id,
    });
    if let Some(o) = reply.as_object_mut() {
        match text {
            Some(t) => o.insert("text".into(), json!(t)),
            None => o.insert("echo".into(), payload.clone()),
        };
        // A WhatsApp recipient carries over, so the reply can reach the same person.
        for k in ["recipient", "to"] {
            if let Some(v) = payload.get(k) {
                o.insert(k.into(), v.clone());
            }
        }
    }
    reply
}

#[async_trait]
impl Adapter for EchoAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Echo
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        reply_everywhere(config).map(drop)
    }

    async fn deliver(&self, env: Envelope<'_>, t: Target<'_>) -> Result<Delivered, DeliveryError> {
        let everywhere = *t
            .config_as(reply_everywhere)
            .map_err(|e| DeliveryError::permanent(format!("echo: {e}")))?;
        let id = env
            .services
            .post_reply(Reply {
                tenant_id: env.tenant_id,
                conversation_id: env.conversation_id,
                delivery_id: env.delivery_id,
                channel_ids: if everywhere { env.channel_ids } else { &[] },
                payload: reply_payload(env.payload, env.activity_id, t.channel_id),
            })
            .await?;
        Ok(Delivered::Sent(Accepted {
            provider_message_id: Some(id),
            status_code: None,
            response_snippet: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_echoes_the_text_and_names_the_bot() {
        let r = reply_payload(&json!({"text": "hello", "to": "1555"}), "act_1", "ch_1");
        assert_eq!(r["text"], "hello");
        assert_eq!(r["author"]["type"], "bot");
        assert_eq!(r["in_reply_to"], "act_1");
        assert_eq!(r["to"], "1555");
        let r = reply_payload(&json!({"n": 1}), "act_1", "ch_1");
        assert_eq!(r["echo"]["n"], 1);
    }

    #[test]
    fn config() {
        let m = |v: Value| v.as_object().cloned().unwrap();
        assert!(reply_everywhere(&m(json!({}))).unwrap());
        assert!(!reply_everywhere(&m(json!({"reply_to": "none"}))).unwrap());
        assert!(reply_everywhere(&m(json!({"reply_to": 1}))).is_err());
        assert!(reply_everywhere(&m(json!({"x": 1}))).is_err());
    }
}
