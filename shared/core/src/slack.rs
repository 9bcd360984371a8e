//! Slack's wire format, as pure functions: the message an activity becomes, what Slack's
//! answers say, and which of its errors a retry can heal. The adapter
//! (`converger-adapters::slack`) does the HTTP.
//!
//! Two ways in: the Web API's `chat.postMessage` (a bot token and a channel; the answer
//! carries the message's `ts`) and an incoming webhook (a URL bound to one channel; the
//! answer is the text `ok`, or an error code as plain text).

use crate::Invalid;

use serde_json::{Map, Value, json};

/// Slack truncates longer texts; `chat.postMessage` refuses them with `msg_too_long`.
pub const MAX_TEXT_CHARS: usize = 40_000;
/// Most blocks one message may carry.
pub const MAX_BLOCKS: usize = 50;

/// Error codes a retry can heal: rate limits and Slack's own failures.
pub const RETRYABLE_ERRORS: &[(&str, &str)] = &[
    ("ratelimited", "rate limited (Web API)"),
    ("rate_limited", "rate limited (incoming webhook)"),
    ("message_limit_exceeded", "too many messages to the channel"),
    ("internal_error", "Slack internal error"),
    ("fatal_error", "Slack fatal error"),
    ("service_unavailable", "Slack service unavailable"),
    ("request_timeout", "Slack timed out"),
    ("rollup_error", "incoming webhook internal error"),
    ("team_added_to_org", "workspace migrating to an org"),
];

/// Error codes a retry cannot heal: authentication, scopes, the channel, the message.
pub const PERMANENT_ERRORS: &[(&str, &str)] = &[
    ("invalid_auth", "invalid token"),
    ("not_authed", "no token"),
    ("account_inactive", "token of a deleted user or workspace"),
    ("token_revoked", "token revoked"),
    ("token_expired", "token expired"),
    ("no_permission", "no permission"),
    ("missing_scope", "token lacks chat:write"),
    ("not_allowed_token_type", "wrong token type"),
    ("ekm_access_denied", "administrators suspended posting"),
    ("access_denied", "access denied"),
    ("channel_not_found", "channel not found"),
    ("not_in_channel", "bot not in the channel"),
    ("is_archived", "channel archived"),
    ("channel_is_archived", "channel archived (incoming webhook)"),
    ("restricted_action", "workspace restricts posting"),
    ("restricted_action_read_only_channel", "read-only channel"),
    (
        "posting_to_general_channel_denied",
        "posting to #general denied",
    ),
    ("msg_too_long", "text too long"),
    ("no_text", "no text"),
    ("too_many_attachments", "too many attachments"),
    ("invalid_blocks", "invalid blocks"),
    ("invalid_blocks_format", "invalid blocks format"),
    ("invalid_arguments", "invalid arguments"),
    ("invalid_payload", "invalid payload (incoming webhook)"),
    ("user_not_found", "user not found (incoming webhook)"),
    (
        "action_prohibited",
        "administrator restriction (incoming webhook)",
    ),
    ("no_service", "incoming webhook disabled or removed"),
    ("no_service_id", "incoming webhook URL invalid"),
    ("no_team", "workspace not found (incoming webhook)"),
    ("team_disabled", "workspace disabled (incoming webhook)"),
    ("invalid_token", "incoming webhook token invalid"),
];

/// Whether a Slack error code is retryable: `Some` for the codes listed above; `None` for
/// others, which the HTTP status classifies (a 200 with `ok: false` is permanent).
pub fn error_retryable(code: &str) -> Option<bool> {
    if RETRYABLE_ERRORS.iter().any(|(c, _)| *c == code) {
        Some(true)
    } else if PERMANENT_ERRORS.iter().any(|(c, _)| *c == code) {
        Some(false)
    } else {
        None
    }
}

/// Whether an answer that is not a posted message is retryable: by Slack's error code when it
/// is one of the tables', else by the HTTP status (408, 425, 429, 5xx), an unknown code in a
/// 2xx answer being about the request (permanent).
pub fn failure_retryable(status: u16, code: Option<&str>) -> bool {
    match code.and_then(error_retryable) {
        Some(r) => r,
        None if code.is_some() && (200..300).contains(&status) => false,
        None => crate::error::is_retryable_status(status),
    }
}

/// The body of the message an activity's payload becomes: `text` (a string or `{body}`)
/// and/or `blocks` (Block Kit), `thread_ts` to answer in a thread; `channel` for the Web API
/// (the payload's `channel`, else the channel's). An `Err` is permanent.
pub fn message(payload: &Value, channel: Option<&str>) -> Result<Value, Invalid> {
    let text = match payload.get("text") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o.get("body").and_then(Value::as_str),
        _ => None,
    }
    .filter(|t| !t.trim().is_empty());
    let blocks = match payload.get("blocks") {
        None | Some(Value::Null) => None,
        Some(Value::Array(b)) if !b.is_empty() && b.len() <= MAX_BLOCKS => Some(b),
        Some(_) => {
            return Err(Invalid(format!(
                "`blocks` must be an array of 1 to {MAX_BLOCKS} blocks"
            )));
        }
    };
    if text.is_none() && blocks.is_none() {
        return Err(Invalid::new(
            "the activity has no `text` and no `blocks` to send",
        ));
    }
    if let Some(t) = text
        && t.chars().count() > MAX_TEXT_CHARS
    {
        return Err(Invalid(format!(
            "text is longer than Slack's {MAX_TEXT_CHARS} characters"
        )));
    }
    let mut body = Map::new();
    if let Some(c) = channel {
        let c = payload.get("channel").and_then(Value::as_str).unwrap_or(c);
        body.insert("channel".into(), json!(c));
    }
    if let Some(t) = text {
        body.insert("text".into(), json!(t));
    }
    if let Some(b) = blocks {
        body.insert("blocks".into(), Value::Array(b.clone()));
    }
    if let Some(ts) = payload.get("thread_ts").and_then(Value::as_str) {
        body.insert("thread_ts".into(), json!(ts));
    }
    Ok(Value::Object(body))
}

/// What a `chat.postMessage` answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Posted: the message's `ts` (its id within the channel) and the channel's id.
    Posted { ts: String, channel: Option<String> },
    /// `ok: false` with Slack's error code.
    Refused(String),
}

/// Reads a Web API answer body; `None` when it is not one.
pub fn web_api_answer(body: &[u8]) -> Option<Answer> {
    let v: Value = serde_json::from_slice(body).ok()?;
    match v.get("ok")?.as_bool()? {
        true => Some(Answer::Posted {
            ts: v.get("ts")?.as_str()?.to_owned(),
            channel: v.get("channel").and_then(Value::as_str).map(str::to_owned),
        }),
        false => Some(Answer::Refused(
            v.get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown_error")
                .to_owned(),
        )),
    }
}

/// The error code of an incoming webhook's error answer (plain text such as
/// `channel_not_found`), when it reads as one.
pub fn webhook_error(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?.trim();
    (!text.is_empty()
        && text.len() <= 64
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit()))
    .then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_text_blocks_and_thread() {
        let m = message(&json!({"text": "hi", "thread_ts": "1.2"}), Some("C1")).unwrap();
        assert_eq!(
            m,
            json!({"channel": "C1", "text": "hi", "thread_ts": "1.2"})
        );
        let m = message(
            &json!({"text": {"body": "yo"}, "channel": "C2"}),
            Some("C1"),
        )
        .unwrap();
        assert_eq!(m["channel"], "C2", "the payload's channel wins");
        let m = message(&json!({"blocks": [{"type": "divider"}]}), None).unwrap();
        assert_eq!(
            m,
            json!({"blocks": [{"type": "divider"}]}),
            "webhooks name no channel"
        );
        assert!(message(&json!({"text": " "}), Some("C1")).is_err());
        assert!(message(&json!({"blocks": []}), Some("C1")).is_err());
        assert!(message(&json!({"blocks": "x"}), Some("C1")).is_err());
        assert!(message(&json!({"text": "x".repeat(40_001)}), Some("C1")).is_err());
    }

    #[test]
    fn errors_are_classified() {
        for c in [
            "ratelimited",
            "rate_limited",
            "internal_error",
            "service_unavailable",
        ] {
            assert_eq!(error_retryable(c), Some(true), "{c}");
        }
        for c in [
            "invalid_auth",
            "channel_not_found",
            "is_archived",
            "msg_too_long",
            "not_in_channel",
            "no_service",
        ] {
            assert_eq!(error_retryable(c), Some(false), "{c}");
        }
        assert_eq!(error_retryable("something_new"), None);
        assert!(!failure_retryable(200, Some("something_new")));
        assert!(failure_retryable(200, Some("ratelimited")));
        assert!(failure_retryable(429, None));
        assert!(failure_retryable(503, Some("something_new")));
        assert!(!failure_retryable(404, Some("channel_not_found")));
    }

    #[test]
    fn answers_are_read() {
        assert_eq!(
            web_api_answer(br#"{"ok":true,"channel":"C1","ts":"1503435956.000247","message":{}}"#),
            Some(Answer::Posted {
                ts: "1503435956.000247".into(),
                channel: Some("C1".into())
            })
        );
        assert_eq!(
            web_api_answer(br#"{"ok":false,"error":"channel_not_found"}"#),
            Some(Answer::Refused("channel_not_found".into()))
        );
        assert_eq!(web_api_answer(b"ok"), None);
        assert_eq!(
            webhook_error(b"channel_is_archived\n"),
            Some("channel_is_archived".into())
        );
        assert_eq!(webhook_error(b"<html>Bad gateway</html>"), None);
    }
}
