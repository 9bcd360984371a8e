//! The live stream's rules: the topics a client subscribes to, the frames it sends and is
//! sent, and which platform event becomes which frame on which topic. A stream client is a
//! tenant's (its API key, or a short-lived token the tenant API gives a browser); it only ever
//! hears of its own tenant's deliveries and channels.

use crate::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most topics one connection follows at once.
pub const MAX_TOPICS: usize = 20;

/// Most live stream connections one tenant has open at once (each costs its pushes, and a
/// token shipped to browsers must not let anyone open thousands). Counted at `$connect`, so
/// connections made at the same instant may pass it by a few.
pub const MAX_TENANT_CONNECTIONS: usize = 500;
/// How long a stream token is good for (seconds): long enough for a page to connect and
/// reconnect, short enough that one left in a browser's history is worthless.
pub const TOKEN_TTL_S: i64 = 300;

/// The day (since the epoch, UTC) a connection made at `at_s` marks its tenant live in.
pub fn live_day(at_s: i64) -> i64 {
    at_s.div_euclid(86_400)
}

/// The days whose marks a reader at `now_s` reads: today's and yesterday's (a connection
/// lasts at most two hours, so one made before midnight is in yesterday's).
pub fn live_days(now_s: i64) -> [i64; 2] {
    let today = live_day(now_s);
    [today - 1, today]
}

/// Whether a mark whose connection expires at `until_s` counts at `now_s`.
pub fn live_mark_counts(until_s: i64, now_s: i64) -> bool {
    until_s > now_s
}

/// When a day's marks may be dropped (seconds): a day after the last reader asks for them.
pub fn live_day_expiry(day: i64) -> i64 {
    (day + 3) * 86_400
}
/// Longest conversation id (as ingest accepts it).
pub const MAX_CONVERSATION_ID: usize = 256;

/// What a client follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topic {
    /// Every status change of every delivery of one of the tenant's conversations.
    Conversation(String),
    /// Health and breaker changes of the tenant's channels.
    ChannelHealth,
}

impl Topic {
    /// `conversation:<id>` or `channel_health`.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if s == "channel_health" {
            return Ok(Self::ChannelHealth);
        }
        match s.strip_prefix("conversation:") {
            Some(id) if !id.trim().is_empty() && id.len() <= MAX_CONVERSATION_ID => {
                Ok(Self::Conversation(id.to_owned()))
            }
            Some(_) => Err(Invalid::new(format!(
                "a conversation id is 1 to {MAX_CONVERSATION_ID} characters"
            ))),
            None => Err(Invalid::new(
                "topic must be `conversation:<conversation id>` or `channel_health`",
            )),
        }
    }

    /// The topics a token is limited to: 1 to [`MAX_TOPICS`] of them, each as
    /// [`Topic::parse`] takes it, repeats dropped, in order.
    pub fn parse_limit(topics: &[String]) -> Result<Vec<Self>, Invalid> {
        if topics.is_empty() || topics.len() > MAX_TOPICS {
            return Err(Invalid::new(format!(
                "`topics` names 1 to {MAX_TOPICS} topics (leave it out for every topic)"
            )));
        }
        let mut out: Vec<Self> = Vec::with_capacity(topics.len());
        for t in topics {
            let t =
                Self::parse(t).map_err(|e| Invalid::new(format!("`topics`: {}", e.message())))?;
            if !out.contains(&t) {
                out.push(t);
            }
        }
        Ok(out)
    }
}

impl std::fmt::Display for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Conversation(id) => write!(f, "conversation:{id}"),
            Self::ChannelHealth => f.write_str("channel_health"),
        }
    }
}

/// A frame a stream client sends.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ClientFrame {
    Subscribe { topic: String },
    Unsubscribe { topic: String },
    Ping,
}

impl ClientFrame {
    /// Whether a frame with this `action` is a stream frame (`subscribe`, `unsubscribe`,
    /// `ping`); a websocket channel's client sends others (`ack`, `replay`).
    pub fn is_stream_action(body: &str) -> bool {
        #[derive(Deserialize)]
        struct Action<'a> {
            #[serde(borrow)]
            action: Option<std::borrow::Cow<'a, str>>,
        }
        serde_json::from_str::<Action>(body).is_ok_and(|a| {
            a.action
                .is_some_and(|a| matches!(&*a, "subscribe" | "unsubscribe" | "ping"))
        })
    }

    pub fn parse(body: &str) -> Result<Self, Invalid> {
        serde_json::from_str(body).map_err(|e| {
            Invalid::new(format!(
                "expected {{\"action\": \"subscribe\" | \"unsubscribe\", \"topic\": ...}} or {{\"action\": \"ping\"}}: {e}"
            ))
        })
    }
}

/// A frame the stream sends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamFrame {
    Subscribed {
        topic: String,
    },
    Unsubscribed {
        topic: String,
    },
    Pong,
    Error {
        code: &'static str,
        message: String,
    },
    /// A delivery of the conversation changed (`topic` `conversation:<id>`).
    DeliveryStatus {
        delivery_id: String,
        activity_id: String,
        channel_id: String,
        conversation_id: String,
        status: String,
        attempts: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        awaiting_ack: bool,
        /// When a failed attempt's retry is due (a pending delivery with attempts behind it).
        #[serde(skip_serializing_if = "Option::is_none")]
        next_attempt_at: Option<String>,
        at: String,
    },
    /// A channel's health status changed (`topic` `channel_health`).
    HealthChanged {
        channel_id: String,
        previous_status: String,
        status: String,
        at: String,
    },
    /// A channel's breaker opened or closed (`topic` `channel_health`).
    CircuitChanged {
        channel_id: String,
        state: &'static str,
        reason: String,
        at: String,
    },
}

/// Where a platform event goes: its tenant, its topic and the frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    pub tenant_id: String,
    pub topic: Topic,
    pub frame: StreamFrame,
}

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k)?.as_str().map(str::to_owned)
}

/// The frame a platform event (its `detail-type` and `detail`) becomes, if any:
/// `delivery.status_changed` on its conversation's topic; `channel.health_changed`,
/// `channel.circuit_opened`, `channel.circuit_closed`, `channel.paused` and
/// `channel.resumed` on `channel_health`. Other events
/// (dead letters, retries, disables) are announced by the status change they come with.
pub fn route(detail_type: &str, detail: &Value) -> Option<Routed> {
    let tenant_id = text(detail, "tenant_id")?;
    let (topic, frame) = match detail_type {
        "delivery.status_changed" => {
            let conversation_id = text(detail, "conversation_id")?;
            (
                Topic::Conversation(conversation_id.clone()),
                StreamFrame::DeliveryStatus {
                    delivery_id: text(detail, "delivery_id")?,
                    activity_id: text(detail, "activity_id")?,
                    channel_id: text(detail, "channel_id")?,
                    conversation_id,
                    status: text(detail, "status")?,
                    attempts: detail.get("attempts").and_then(Value::as_u64).unwrap_or(0),
                    error: text(detail, "error"),
                    awaiting_ack: detail
                        .get("awaiting_ack")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    next_attempt_at: text(detail, "next_attempt_at"),
                    at: text(detail, "at")?,
                },
            )
        }
        "channel.health_changed" => (
            Topic::ChannelHealth,
            StreamFrame::HealthChanged {
                channel_id: text(detail, "channel_id")?,
                previous_status: text(detail, "previous_status").unwrap_or_default(),
                status: text(detail, "new_status")?,
                at: text(detail, "checked_at")?,
            },
        ),
        "channel.circuit_opened"
        | "channel.circuit_half_open"
        | "channel.circuit_closed"
        | "channel.paused"
        | "channel.resumed" => (
            Topic::ChannelHealth,
            StreamFrame::CircuitChanged {
                channel_id: text(detail, "channel_id")?,
                // Every transition, the manual ones included: a pause is its own state, a
                // resume closes the breaker.
                state: match detail_type {
                    "channel.circuit_opened" => "open",
                    "channel.circuit_half_open" => "half_open",
                    "channel.paused" => "paused",
                    _ => "closed",
                },
                reason: text(detail, "reason").unwrap_or_default(),
                at: text(detail, "changed_at")?,
            },
        ),
        _ => return None,
    };
    Some(Routed {
        tenant_id,
        topic,
        frame,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_connection_before_midnight_is_read_the_next_day_until_it_expires() {
        let midnight = 20_000 * 86_400;
        let late = midnight - 60;
        assert_eq!(live_day(late), 19_999);
        assert!(live_days(midnight + 600).contains(&live_day(late)));
        assert!(!live_days(midnight + 2 * 86_400).contains(&live_day(late)));
        assert!(live_mark_counts(late + 7_200, midnight + 600));
        assert!(!live_mark_counts(late + 7_200, late + 7_200));
        assert!(live_day_expiry(19_999) > (midnight + 86_400));
    }

    #[test]
    fn a_tokens_topics_are_one_to_twenty_valid_topics() {
        let ok = Topic::parse_limit(&[
            "conversation:c1".into(),
            "channel_health".into(),
            "conversation:c1".into(),
        ])
        .unwrap();
        assert_eq!(ok, [Topic::Conversation("c1".into()), Topic::ChannelHealth]);
        assert!(Topic::parse_limit(&[]).is_err());
        assert!(Topic::parse_limit(&["nope".into()]).is_err());
        let many: Vec<String> = (0..=MAX_TOPICS)
            .map(|i| format!("conversation:{i}"))
            .collect();
        assert!(Topic::parse_limit(&many).is_err());
    }
    use serde_json::json;

    #[test]
    fn topics_parse_and_print_back() {
        for s in ["conversation:c-1", "conversation:a:b", "channel_health"] {
            assert_eq!(Topic::parse(s).unwrap().to_string(), s);
        }
        assert!(Topic::parse("conversation:").is_err());
        assert!(Topic::parse("conversation: ").is_err());
        assert!(Topic::parse(&format!("conversation:{}", "x".repeat(257))).is_err());
        assert!(Topic::parse(&format!("conversation:{}", "x".repeat(256))).is_ok());
        assert!(Topic::parse("deliveries").is_err());
        assert!(Topic::parse("").is_err());
    }

    #[test]
    fn client_frames_parse_and_stream_actions_are_told_from_a_channels() {
        assert_eq!(
            ClientFrame::parse(r#"{"action":"subscribe","topic":"channel_health"}"#).unwrap(),
            ClientFrame::Subscribe {
                topic: "channel_health".into()
            }
        );
        assert_eq!(
            ClientFrame::parse(r#"{"action":"ping"}"#).unwrap(),
            ClientFrame::Ping
        );
        assert!(ClientFrame::parse(r#"{"action":"subscribe"}"#).is_err());
        assert!(ClientFrame::parse("not json").is_err());
        assert!(ClientFrame::is_stream_action(
            r#"{"action":"unsubscribe","topic":"x"}"#
        ));
        assert!(!ClientFrame::is_stream_action(
            r#"{"action":"ack","delivery_id":"d"}"#
        ));
        assert!(!ClientFrame::is_stream_action("[1]"));
    }

    #[test]
    fn a_status_change_goes_to_its_conversation_with_the_documented_fields() {
        let detail = json!({
            "delivery_id": "dlv_1", "activity_id": "act_1", "channel_id": "ch_1",
            "tenant_id": "ten_1", "conversation_id": "conv-9", "status": "sent",
            "attempts": 2, "error": null, "awaiting_ack": false, "at": "2026-12-04T10:00:00Z",
        });
        let r = route("delivery.status_changed", &detail).unwrap();
        assert_eq!(r.tenant_id, "ten_1");
        assert_eq!(r.topic, Topic::Conversation("conv-9".into()));
        assert_eq!(
            serde_json::to_value(&r.frame).unwrap(),
            json!({
                "type": "delivery_status", "delivery_id": "dlv_1", "activity_id": "act_1",
                "channel_id": "ch_1", "conversation_id": "conv-9", "status": "sent",
                "attempts": 2, "awaiting_ack": false, "at": "2026-12-04T10:00:00Z",
            })
        );
    }

    #[test]
    fn health_and_breaker_changes_go_to_channel_health() {
        let health = json!({
            "event": "channel.health_changed", "channel_id": "ch_1", "tenant_id": "ten_1",
            "previous_status": "healthy", "new_status": "degraded",
            "checked_at": "2026-12-04T10:00:00Z",
        });
        let r = route("channel.health_changed", &health).unwrap();
        assert_eq!(r.topic, Topic::ChannelHealth);
        assert_eq!(
            serde_json::to_value(&r.frame).unwrap(),
            json!({"type": "health_changed", "channel_id": "ch_1",
                   "previous_status": "healthy", "status": "degraded",
                   "at": "2026-12-04T10:00:00Z"})
        );
        let opened = json!({"channel_id": "ch_1", "tenant_id": "ten_1",
                            "reason": "probe_failed", "changed_at": "2026-12-04T10:00:01Z"});
        let r = route("channel.circuit_opened", &opened).unwrap();
        assert_eq!(
            serde_json::to_value(&r.frame).unwrap()["state"],
            json!("open")
        );
        let r = route("channel.circuit_closed", &opened).unwrap();
        assert_eq!(
            serde_json::to_value(&r.frame).unwrap()["state"],
            json!("closed")
        );
    }

    #[test]
    fn other_events_and_events_without_a_tenant_go_nowhere() {
        let detail = json!({"tenant_id": "ten_1", "delivery_id": "d"});
        assert!(route("delivery.dead_lettered", &detail).is_none());
        assert!(route("channel.disabled", &detail).is_none());
        let no_tenant = json!({"conversation_id": "c", "delivery_id": "d",
                               "activity_id": "a", "channel_id": "ch", "status": "sent",
                               "at": "2026-12-04T10:00:00Z"});
        assert!(route("delivery.status_changed", &no_tenant).is_none());
    }
}
