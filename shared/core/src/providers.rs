//! The WhatsApp providers' wire formats, as pure functions: the message an activity becomes,
//! how each provider's errors are classified, and how their delivery receipts read.
//! The adapters (`converger-adapters`) do the HTTP; the receipt endpoint applies what
//! [`meta_receipts`] and [`infobip_receipts`] return.

use crate::Invalid;

use crate::DeliveryStatus;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// A WhatsApp message built from an activity's payload.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatsappMessage {
    /// The recipient's phone number, digits only (E.164 without `+`), or a WhatsApp id.
    pub to: String,
    pub content: Content,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// A pre-approved template: name, language code and the Cloud API's `components`.
    Template {
        name: String,
        language: String,
        components: Vec<Value>,
    },
}

/// Longest text body WhatsApp accepts.
pub const MAX_TEXT_CHARS: usize = 4096;

/// Reads the recipient and the content of a WhatsApp message from an activity's payload.
///
/// Recipient: `recipient` (a string, or an object with `phone` or `wa_id`), else `to`, else the
/// channel's `default_recipient`. Content: `template` (`{name, language, components}`) when the
/// activity asks for one, else `text` (a string or `{body}`). An `Err` is permanent: retrying
/// the same activity cannot heal it.
pub fn whatsapp_message(
    payload: &Value,
    default_recipient: Option<&str>,
) -> Result<WhatsappMessage, Invalid> {
    let raw = match payload.get("recipient") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o
            .get("phone")
            .or_else(|| o.get("wa_id"))
            .and_then(Value::as_str),
        _ => None,
    }
    .or_else(|| payload.get("to").and_then(Value::as_str))
    .or(default_recipient)
    .ok_or("no recipient: the activity has no `recipient` (or `to`) and the channel no `default_recipient`")?;
    let to = normalize_phone(raw).ok_or_else(|| {
        format!("invalid recipient `{raw}`: expected a phone number with 6 to 15 digits")
    })?;

    if let Some(t) = payload.get("template") {
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or("`template.name` is missing")?;
        let language = match t.get("language") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(o)) => o
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => String::new(),
        };
        if language.is_empty() {
            return Err(Invalid::new("`template.language` is missing"));
        }
        let components = match t.get("components") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(Invalid::new("`template.components` must be an array")),
        };
        return Ok(WhatsappMessage {
            to,
            content: Content::Template {
                name: name.to_owned(),
                language,
                components,
            },
        });
    }
    let text = match payload.get("text") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o.get("body").and_then(Value::as_str),
        _ => None,
    }
    .filter(|t| !t.trim().is_empty())
    .ok_or("the activity has no `text` and no `template` to send")?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(Invalid(format!(
            "text is longer than WhatsApp's {MAX_TEXT_CHARS} characters"
        )));
    }
    Ok(WhatsappMessage {
        to,
        content: Content::Text(text.to_owned()),
    })
}

/// `+44 20-7946 0958` -> `442079460958`; `None` unless 6 to 15 digits remain.
pub fn normalize_phone(raw: &str) -> Option<String> {
    let trimmed = raw.trim();
    let rest = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if !rest
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')' | '.'))
    {
        return None;
    }
    let digits: String = rest.chars().filter(char::is_ascii_digit).collect();
    (6..=15).contains(&digits.len()).then_some(digits)
}

/// The Cloud API request body (`POST /{version}/{phone_number_id}/messages`).
pub fn meta_request(m: &WhatsappMessage) -> Value {
    match &m.content {
        Content::Text(body) => json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": m.to,
            "type": "text",
            "text": {"preview_url": false, "body": body},
        }),
        Content::Template {
            name,
            language,
            components,
        } => {
            let mut template = Map::new();
            template.insert("name".into(), json!(name));
            template.insert("language".into(), json!({"code": language}));
            if !components.is_empty() {
                template.insert("components".into(), Value::Array(components.clone()));
            }
            json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": m.to,
                "type": "template",
                "template": template,
            })
        }
    }
}

/// Cloud API error codes that retrying can heal: throttling and the platform's own
/// temporary failures.
pub const META_RETRYABLE_CODES: &[(i64, &str)] = &[
    (1, "API unknown error"),
    (2, "API service temporarily unavailable"),
    (4, "API too many calls"),
    (17, "API user too many calls"),
    (341, "application limit reached"),
    (80007, "rate limit issues"),
    (130429, "Cloud API throughput reached"),
    (131000, "something went wrong"),
    (131016, "service unavailable"),
    (131048, "spam rate limit hit"),
    (131056, "pair rate limit hit"),
    (131057, "account in maintenance mode"),
    (133004, "server temporarily unavailable"),
];

/// Cloud API error codes that retrying cannot heal: authentication and permissions, invalid
/// parameters or recipients, templates, policy blocks.
pub const META_PERMANENT_CODES: &[(i64, &str)] = &[
    (0, "authentication exception"),
    (3, "API method not permitted"),
    (10, "permission denied"),
    (100, "invalid parameter"),
    (190, "access token expired or invalid"),
    (368, "temporarily blocked for policy violations"),
    (130472, "recipient in an experiment group"),
    (131005, "access denied"),
    (131008, "required parameter missing"),
    (131009, "parameter value not valid"),
    (131021, "recipient cannot be the sender"),
    (131026, "message undeliverable (recipient not on WhatsApp)"),
    (131030, "recipient not in the allowed list"),
    (131031, "business account locked"),
    (
        131047,
        "re-engagement message needed (over 24 hours since the last reply)",
    ),
    (131051, "unsupported message type"),
    (131052, "media download error"),
    (131053, "media upload error"),
    (132000, "template parameter count mismatch"),
    (132001, "template does not exist"),
    (132005, "template text too long"),
    (132007, "template format policy violated"),
    (132012, "template parameter format mismatch"),
    (132015, "template paused"),
    (132016, "template disabled"),
    (133010, "phone number not registered"),
];

/// Whether a Cloud API error code is retryable: `Some` for the codes listed above; `None`
/// for others, which are classified by their HTTP status. Permission codes 200-299 are
/// permanent.
pub fn meta_code_retryable(code: i64) -> Option<bool> {
    if META_RETRYABLE_CODES.iter().any(|(c, _)| *c == code) {
        Some(true)
    } else if META_PERMANENT_CODES.iter().any(|(c, _)| *c == code) || (200..=299).contains(&code) {
        Some(false)
    } else {
        None
    }
}

/// A Cloud API error body (`{"error": {"code", "message", "error_subcode", ...}}`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetaError {
    pub code: i64,
    pub subcode: Option<i64>,
    pub message: String,
}

pub fn meta_error(body: &[u8]) -> Option<MetaError> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?;
    let code = e.get("code")?.as_i64()?;
    let message = e
        .get("error_data")
        .and_then(|d| d.get("details"))
        .and_then(Value::as_str)
        .or_else(|| e.get("message").and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    Some(MetaError {
        code,
        subcode: e.get("error_subcode").and_then(Value::as_i64),
        message,
    })
}

/// Infobip's error body (`{"requestError": {"serviceException": {"messageId", "text"}}}`):
/// the error's id and text.
pub fn infobip_error(body: &[u8]) -> Option<(String, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("requestError")?;
    let e = e
        .get("serviceException")
        .or_else(|| e.get("policyException"))?;
    Some((
        e.get("messageId")?.as_str()?.to_owned(),
        e.get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    ))
}

/// Infobip status groups that end a message: it will not be delivered.
pub const INFOBIP_FAILED_GROUPS: &[&str] = &["UNDELIVERABLE", "EXPIRED", "REJECTED"];

/// The Infobip text message request (`POST /whatsapp/1/message/text`).
pub fn infobip_request(
    m: &WhatsappMessage,
    from: &str,
    message_id: &str,
    notify_url: Option<&str>,
) -> Result<Value, Invalid> {
    let Content::Text(text) = &m.content else {
        return Err(
            "whatsapp_infobip channels send text messages; the activity asks for a template".into(),
        );
    };
    let mut body = json!({
        "from": from,
        "to": m.to,
        "messageId": message_id,
        "content": {"text": text},
        "callbackData": message_id,
    });
    if let (Some(url), Some(o)) = (notify_url, body.as_object_mut()) {
        o.insert("notifyUrl".into(), json!(url));
    }
    Ok(body)
}

/// One provider receipt: what the provider says happened to one of its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    pub provider_message_id: String,
    /// `sent`, `delivered`, `read` or `failed`.
    pub status: DeliveryStatus,
    /// The provider's reason, for `failed`.
    pub error: Option<String>,
}

/// Verifies Meta's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>` with the
/// app secret, in constant time.
pub fn verify_meta_signature(app_secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// The header value Meta would send for `body` (for fakes and tests).
pub fn meta_signature(app_secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Reads the `statuses` of a Cloud API webhook notification (`entry[].changes[].value
/// .statuses[]`). Statuses other than sent/delivered/read/failed (`deleted`, `warning`) and
/// everything else the notification carries (inbound messages) are skipped. `Err` when the
/// body is not a WhatsApp notification at all.
pub fn meta_receipts(body: &Value) -> Result<Vec<Receipt>, Invalid> {
    let entries = body
        .get("entry")
        .and_then(Value::as_array)
        .ok_or("not a WhatsApp webhook notification: no `entry` array")?;
    let mut out = Vec::new();
    for change in entries
        .iter()
        .filter_map(|e| e.get("changes").and_then(Value::as_array))
        .flatten()
    {
        let Some(statuses) = change
            .get("value")
            .and_then(|v| v.get("statuses"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for s in statuses {
            let (Some(id), Some(st)) = (
                s.get("id").and_then(Value::as_str),
                s.get("status").and_then(Value::as_str),
            ) else {
                continue;
            };
            let status = match st {
                "sent" => DeliveryStatus::Sent,
                "delivered" => DeliveryStatus::Delivered,
                "read" => DeliveryStatus::Read,
                "failed" => DeliveryStatus::Failed,
                _ => continue,
            };
            let error = (status == DeliveryStatus::Failed).then(|| {
                let e = s.get("errors").and_then(|e| e.get(0));
                let code = e.and_then(|e| e.get("code")).and_then(Value::as_i64);
                let title = e
                    .and_then(|e| {
                        e.get("error_data")
                            .and_then(|d| d.get("details"))
                            .or_else(|| e.get("title"))
                            .or_else(|| e.get("message"))
                    })
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                match code {
                    Some(c) => format!("whatsapp_meta receipt: {c} {title}"),
                    None => format!("whatsapp_meta receipt: {title}"),
                }
            });
            out.push(Receipt {
                provider_message_id: id.to_owned(),
                status,
                error,
            });
        }
    }
    Ok(out)
}

/// Reads Infobip's delivery reports (`results[]` with `status.groupName`) and seen reports
/// (`results[]` with `seenAt`). PENDING is `sent`; DELIVERED `delivered`; UNDELIVERABLE,
/// EXPIRED and REJECTED `failed`; a seen report `read`.
pub fn infobip_receipts(body: &Value) -> Result<Vec<Receipt>, Invalid> {
    let results = body
        .get("results")
        .and_then(Value::as_array)
        .ok_or("not an Infobip report: no `results` array")?;
    let mut out = Vec::new();
    for r in results {
        let Some(id) = r.get("messageId").and_then(Value::as_str) else {
            continue;
        };
        let group = r
            .get("status")
            .and_then(|s| s.get("groupName"))
            .and_then(Value::as_str);
        let (status, error) = match group {
            Some("PENDING") => (DeliveryStatus::Sent, None),
            Some("DELIVERED") => (DeliveryStatus::Delivered, None),
            Some(g) if INFOBIP_FAILED_GROUPS.contains(&g) => {
                let why = r
                    .get("error")
                    .and_then(|e| e.get("description").or_else(|| e.get("name")))
                    .or_else(|| r.get("status").and_then(|s| s.get("description")))
                    .and_then(Value::as_str)
                    .unwrap_or(g);
                (
                    DeliveryStatus::Failed,
                    Some(format!("whatsapp_infobip receipt: {g}: {why}")),
                )
            }
            Some(_) => continue,
            None if r.get("seenAt").is_some() => (DeliveryStatus::Read, None),
            None => continue,
        };
        out.push(Receipt {
            provider_message_id: id.to_owned(),
            status,
            error,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipient_and_text_come_from_the_payload() {
        let m =
            whatsapp_message(&json!({"recipient": "+44 7700-900123", "text": "hi"}), None).unwrap();
        assert_eq!(m.to, "447700900123");
        assert_eq!(m.content, Content::Text("hi".into()));
        let m = whatsapp_message(
            &json!({"recipient": {"wa_id": "15551234567"}, "text": {"body": "yo"}}),
            None,
        )
        .unwrap();
        assert_eq!(m.to, "15551234567");
        let m = whatsapp_message(&json!({"text": "hi"}), Some("15550001111")).unwrap();
        assert_eq!(m.to, "15550001111");
    }

    #[test]
    fn a_missing_or_invalid_recipient_is_an_error() {
        let e = whatsapp_message(&json!({"text": "hi"}), None).unwrap_err();
        assert!(e.contains("no recipient"), "{e}");
        assert!(whatsapp_message(&json!({"to": "12ab", "text": "hi"}), None).is_err());
        assert!(whatsapp_message(&json!({"to": "123", "text": "hi"}), None).is_err());
        assert!(whatsapp_message(&json!({"to": "15551234567"}), None).is_err());
        assert!(
            whatsapp_message(
                &json!({"to": "15551234567", "text": "x".repeat(4097)}),
                None
            )
            .is_err()
        );
    }

    #[test]
    fn templates_build_the_cloud_api_shape() {
        let m = whatsapp_message(
            &json!({"to": "15551234567", "text": "ignored",
                    "template": {"name": "order_update", "language": "en_US",
                                 "components": [{"type": "body", "parameters": [{"type": "text", "text": "42"}]}]}}),
            None,
        )
        .unwrap();
        let body = meta_request(&m);
        assert_eq!(body["type"], "template");
        assert_eq!(body["template"]["name"], "order_update");
        assert_eq!(body["template"]["language"]["code"], "en_US");
        assert_eq!(
            body["template"]["components"][0]["parameters"][0]["text"],
            "42"
        );
        assert!(
            whatsapp_message(
                &json!({"to": "15551234567", "template": {"name": "x"}}),
                None
            )
            .is_err()
        );
        let text = meta_request(
            &whatsapp_message(&json!({"to": "15551234567", "text": "hi"}), None).unwrap(),
        );
        assert_eq!(text["text"]["body"], "hi");
        assert_eq!(text["messaging_product"], "whatsapp");
    }

    #[test]
    fn meta_codes_are_classified() {
        for code in [4, 80007, 130429, 131000, 131016, 131048, 131056, 133004] {
            assert_eq!(meta_code_retryable(code), Some(true), "{code}");
        }
        for code in [0, 10, 100, 190, 250, 131008, 131026, 131047, 132001, 133010] {
            assert_eq!(meta_code_retryable(code), Some(false), "{code}");
        }
        assert_eq!(meta_code_retryable(999_999), None);
        let e = meta_error(br#"{"error":{"message":"(#131026) Message Undeliverable","type":"OAuthException","code":131026,"error_data":{"messaging_product":"whatsapp","details":"Receiver is incapable"},"fbtrace_id":"x"}}"#).unwrap();
        assert_eq!(e.code, 131026);
        assert_eq!(e.message, "Receiver is incapable");
        assert!(meta_error(b"not json").is_none());
    }

    #[test]
    fn meta_signatures_verify() {
        let body = br#"{"entry":[]}"#;
        let sig = meta_signature("app-secret", body);
        assert!(verify_meta_signature("app-secret", body, &sig));
        assert!(!verify_meta_signature("other", body, &sig));
        assert!(!verify_meta_signature("app-secret", b"{}", &sig));
        assert!(!verify_meta_signature("app-secret", body, "sha1=abc"));
        assert!(!verify_meta_signature("app-secret", body, "sha256=zz"));
    }

    #[test]
    fn meta_statuses_are_read() {
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "statuses": [
                {"id": "wamid.A", "status": "delivered", "timestamp": "1", "recipient_id": "1555"},
                {"id": "wamid.B", "status": "failed", "errors": [{"code": 131026, "title": "Message undeliverable"}]},
                {"id": "wamid.C", "status": "deleted"}
            ],
            "messages": [{"id": "wamid.in", "text": {"body": "inbound"}}]
        }}]}]});
        let r = meta_receipts(&body).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].status, DeliveryStatus::Delivered);
        assert_eq!(r[1].status, DeliveryStatus::Failed);
        assert!(r[1].error.as_deref().unwrap().contains("131026"));
        assert!(meta_receipts(&json!({"results": []})).is_err());
    }

    #[test]
    fn infobip_reports_are_read() {
        let body = json!({"results": [
            {"messageId": "m1", "status": {"groupName": "DELIVERED", "name": "DELIVERED_TO_HANDSET"}},
            {"messageId": "m2", "status": {"groupName": "UNDELIVERABLE", "description": "Not on WhatsApp"}, "error": {"name": "EC_ABSENT", "description": "Absent subscriber"}},
            {"messageId": "m3", "seenAt": "2026-11-30T10:00:00.000+0000"},
            {"messageId": "m4", "status": {"groupName": "PENDING"}}
        ]});
        let r = infobip_receipts(&body).unwrap();
        let st: Vec<_> = r.iter().map(|r| r.status).collect();
        assert_eq!(
            st,
            [
                DeliveryStatus::Delivered,
                DeliveryStatus::Failed,
                DeliveryStatus::Read,
                DeliveryStatus::Sent
            ]
        );
        assert!(r[1].error.as_deref().unwrap().contains("Absent subscriber"));
        assert_eq!(
            infobip_error(br#"{"requestError":{"serviceException":{"messageId":"UNAUTHORIZED","text":"Invalid login details"}}}"#),
            Some(("UNAUTHORIZED".into(), "Invalid login details".into()))
        );
    }

    #[test]
    fn infobip_sends_text_only() {
        let m = whatsapp_message(&json!({"to": "15551234567", "text": "hi"}), None).unwrap();
        let b = infobip_request(&m, "441134960000", "dlv_1", Some("https://x/status")).unwrap();
        assert_eq!(b["content"]["text"], "hi");
        assert_eq!(b["messageId"], "dlv_1");
        assert_eq!(b["notifyUrl"], "https://x/status");
        let t = whatsapp_message(
            &json!({"to": "15551234567", "template": {"name": "a", "language": "en"}}),
            None,
        )
        .unwrap();
        assert!(infobip_request(&t, "1", "2", None).is_err());
    }
}
