//! Email channels' rules, as pure functions: the message an activity becomes, and what
//! Amazon SES's events (bounces, complaints, deliveries, published to EventBridge through
//! the stack's configuration set) mean for a delivery. The adapter hands the message to the
//! platform's mailer (SES v2 `SendEmail`); the `email-events` function applies the events.

use crate::Invalid;

use crate::DeliveryStatus;
use crate::providers::Receipt;
use serde_json::Value;

/// Most recipients of one message (SES: 50 per message).
pub const MAX_RECIPIENTS: usize = 50;
/// Longest subject, in characters.
pub const MAX_SUBJECT_CHARS: usize = 998;
/// The subject when neither the activity nor the channel gives one.
pub const DEFAULT_SUBJECT: &str = "New message";
/// The message tag that names the channel (SES copies tags into every event).
pub const CHANNEL_TAG: &str = "converger_channel";
/// The message tag that names the delivery.
pub const DELIVERY_TAG: &str = "converger_delivery";

/// SES `SendEmail` errors a retry can heal: throttling, quotas, a paused account.
pub const SES_RETRYABLE_ERRORS: &[&str] = &[
    "TooManyRequestsException",
    "LimitExceededException",
    "SendingPausedException",
];

/// SES `SendEmail` errors a retry cannot heal: the message, the sender or the account.
pub const SES_PERMANENT_ERRORS: &[&str] = &[
    "MessageRejected",
    "MailFromDomainNotVerifiedException",
    "AccountSuspendedException",
    "BadRequestException",
    "NotFoundException",
];

/// Whether a `SendEmail` failure is retryable: by SES's error code when it is one of the
/// tables', else by the HTTP status (408, 425, 429, 5xx); no answer at all (a timeout, the
/// network) is retryable.
pub fn ses_error_retryable(code: Option<&str>, status: Option<u16>) -> bool {
    match code {
        Some(c) if SES_RETRYABLE_ERRORS.contains(&c) => true,
        Some(c) if SES_PERMANENT_ERRORS.contains(&c) => false,
        _ => status.is_none_or(crate::error::is_retryable_status),
    }
}

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    pub from: String,
    pub to: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    pub text: Option<String>,
    pub html: Option<String>,
    /// Name and value of each message tag.
    pub tags: Vec<(String, String)>,
}

/// Whether `addr` reads as one email address (`local@domain`, at most 254 characters, no
/// spaces, angle brackets or line breaks that could add a header, exactly one `@` and no
/// quotes or backslashes: a quoted local part could hide an `@`, and the sender check and the
/// mail service must read the same domain).
pub fn is_address(addr: &str) -> bool {
    let Some((local, domain)) = addr.split_once('@') else {
        return false;
    };
    if domain.contains('@') || addr.contains(['"', '\\', '(', ')']) {
        return false;
    }
    addr.len() <= 254
        && !local.is_empty()
        && local.len() <= 64
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && addr
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '<' | '>' | ',' | ';'))
}

fn addresses(v: &Value, what: &str) -> Result<Vec<String>, Invalid> {
    let list: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().ok_or(format!("`{what}` must hold strings")))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(Invalid(format!(
                "`{what}` must be an address or a list of them"
            )));
        }
    };
    if list.is_empty() || list.len() > MAX_RECIPIENTS {
        return Err(Invalid(format!(
            "`{what}` must name 1 to {MAX_RECIPIENTS} addresses"
        )));
    }
    list.into_iter()
        .map(|a| {
            let a = a.trim();
            if is_address(a) {
                Ok(a.to_owned())
            } else {
                Err(Invalid(format!("`{what}` has an invalid address `{a}`")))
            }
        })
        .collect()
}

/// Most sender identities one tenant may hold.
pub const MAX_SENDER_IDENTITIES: usize = 20;

/// Whether `d` reads as a domain name: labels of letters, digits and hyphens (not at either
/// end), at least two of them, at most 253 characters.
fn is_domain(d: &str) -> bool {
    let labels: Vec<&str> = d.split('.').collect();
    d.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Checks the name of an SES tenant (`CreateTenant`'s rule: 1 to 64 letters, digits, `-`
/// and `_`).
pub fn ses_tenant_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim();
    if (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    {
        Ok(name.to_owned())
    } else {
        Err(Invalid(format!(
            "ses_tenant must be an SES tenant's name: 1 to 64 letters, digits, `-` and `_`, \
             not {name:?}"
        )))
    }
}

/// Checks the SES identities an operator gives a tenant (each an address, `news@acme.com`,
/// or a domain, `acme.com`), lower-cased, duplicates dropped, in the order given.
pub fn sender_identities(list: &[String]) -> Result<Vec<String>, Invalid> {
    if list.len() > MAX_SENDER_IDENTITIES {
        return Err(Invalid(format!(
            "at most {MAX_SENDER_IDENTITIES} sender identities, not {}",
            list.len()
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for raw in list {
        let id = raw.trim().to_ascii_lowercase();
        if !(is_address(&id) || is_domain(&id)) {
            return Err(Invalid(format!(
                "`{raw}` is neither an email address nor a domain name"
            )));
        }
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// Whether a tenant holding `identities` may send as `from`: the address itself is one of
/// them, or its domain is (exactly: a subdomain is an identity of its own, so a tenant given
/// `mail.acme.com` cannot send as `acme.com`, nor one given `acme.com` as `x.acme.com`).
/// Case does not matter. No identities, no sending.
pub fn sender_allowed(from: &str, identities: &[String]) -> bool {
    let from = from.trim().to_ascii_lowercase();
    let Some((_, domain)) = from.rsplit_once('@') else {
        return false;
    };
    identities
        .iter()
        .any(|i| i.eq_ignore_ascii_case(&from) || i.eq_ignore_ascii_case(domain))
}

/// Why a sender is refused, for the channel's writer and the attempt log.
pub fn sender_refused(from: &str) -> String {
    format!("`from` {from} is not one of the tenant's sender identities (an operator grants them)")
}

/// A channel's email settings: `from` (required), `to`, `reply_to` and `subject` (defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub from: String,
    pub to: Option<Vec<String>>,
    pub reply_to: Vec<String>,
    pub subject: Option<String>,
}

/// Reads and checks an `email` channel's `config`.
pub fn settings(config: &serde_json::Map<String, Value>) -> Result<Settings, Invalid> {
    const KEYS: [&str; 4] = ["from", "to", "reply_to", "subject"];
    if let Some(k) = config.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(Invalid(format!(
            "unknown email config key `{k}` (allowed: {})",
            KEYS.join(", ")
        )));
    }
    let from = match config.get("from") {
        Some(Value::String(s)) if is_address(s.trim()) => s.trim().to_owned(),
        Some(_) => {
            return Err(Invalid::new(
                "`from` must be one email address (an SES identity)",
            ));
        }
        None => {
            return Err(Invalid::new(
                "email config needs `from` (a verified SES identity)",
            ));
        }
    };
    let to = config
        .get("to")
        .filter(|v| !v.is_null())
        .map(|v| addresses(v, "to"))
        .transpose()?;
    let reply_to = config
        .get("reply_to")
        .filter(|v| !v.is_null())
        .map(|v| addresses(v, "reply_to"))
        .transpose()?
        .unwrap_or_default();
    let subject = match config.get("subject") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(subject(s)?),
        Some(_) => return Err(Invalid::new("`subject` must be a string")),
    };
    Ok(Settings {
        from,
        to,
        reply_to,
        subject,
    })
}

fn subject(s: &str) -> Result<String, Invalid> {
    let s = s.trim();
    if s.is_empty() || s.chars().count() > MAX_SUBJECT_CHARS {
        return Err(Invalid(format!(
            "the subject must be 1 to {MAX_SUBJECT_CHARS} characters"
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(Invalid::new(
            "the subject must not contain control characters",
        ));
    }
    Ok(s.to_owned())
}

/// The message an activity's payload becomes: recipients from the payload's `to` (an
/// address or a list), else the channel's; `subject` from the payload, else the channel's,
/// else [`DEFAULT_SUBJECT`]; bodies from `text` (a string or `{body}`) and `html`, at least
/// one. An `Err` is permanent.
pub fn message(payload: &Value, s: &Settings) -> Result<Email, Invalid> {
    let to = match payload.get("to").filter(|v| !v.is_null()) {
        Some(v) => addresses(v, "to")?,
        None => {
            s.to.clone()
                .ok_or("no recipient: the activity has no `to` and the channel no default `to`")?
        }
    };
    let subject = match payload.get("subject") {
        Some(Value::String(x)) => self::subject(x)?,
        Some(Value::Null) | None => s
            .subject
            .clone()
            .unwrap_or_else(|| DEFAULT_SUBJECT.to_owned()),
        Some(_) => return Err(Invalid::new("`subject` must be a string")),
    };
    let text = match payload.get("text") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Object(o)) => o.get("body").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
    .filter(|t| !t.trim().is_empty());
    let html = payload
        .get("html")
        .and_then(Value::as_str)
        .filter(|h| !h.trim().is_empty())
        .map(str::to_owned);
    if text.is_none() && html.is_none() {
        return Err(Invalid::new(
            "the activity has no `text` and no `html` to send",
        ));
    }
    Ok(Email {
        from: s.from.clone(),
        to,
        reply_to: s.reply_to.clone(),
        subject,
        text,
        html,
        tags: Vec::new(),
    })
}

/// What one SES event (the `detail` of an EventBridge event from `aws.ses`) says of one of
/// this platform's messages: the channel named by its tag, and the receipt. `None` for events
/// that change nothing (opens, clicks, delays, sends) or name no channel.
///
/// Bounces, complaints, rejects and rendering failures are `failed`; a delivery is
/// `delivered`. They apply through the receipts' forward-only rules.
pub fn ses_event(detail: &Value) -> Option<(String, Receipt)> {
    let mail = detail.get("mail")?;
    let message_id = mail.get("messageId")?.as_str()?.to_owned();
    let channel = mail
        .get("tags")?
        .get(CHANNEL_TAG)?
        .get(0)?
        .as_str()?
        .to_owned();
    let kind = detail
        .get("eventType")
        .or_else(|| detail.get("notificationType"))?
        .as_str()?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let (status, error) = match kind {
        "Delivery" => (DeliveryStatus::Delivered, None),
        "Bounce" => {
            let b = detail.get("bounce")?;
            let first = b.get("bouncedRecipients").and_then(|r| r.get(0));
            let why = text(first.and_then(|r| r.get("diagnosticCode")));
            let who = text(first.and_then(|r| r.get("emailAddress")));
            let mut e = format!(
                "email bounce: {}/{}",
                text(b.get("bounceType")),
                text(b.get("bounceSubType"))
            );
            if !who.is_empty() {
                e.push_str(&format!(": {who}"));
            }
            if !why.is_empty() {
                e.push_str(&format!(": {why}"));
            }
            (DeliveryStatus::Failed, Some(e))
        }
        "Complaint" => {
            let c = detail.get("complaint");
            let kind = text(c.and_then(|c| c.get("complaintFeedbackType")));
            let e = if kind.is_empty() {
                "email complaint".to_owned()
            } else {
                format!("email complaint: {kind}")
            };
            (DeliveryStatus::Failed, Some(e))
        }
        "Reject" => (
            DeliveryStatus::Failed,
            Some(format!(
                "email rejected: {}",
                text(detail.get("reject").and_then(|r| r.get("reason")))
            )),
        ),
        "Rendering Failure" => (
            DeliveryStatus::Failed,
            Some(format!(
                "email rendering failure: {}",
                text(detail.get("failure").and_then(|r| r.get("errorMessage")))
            )),
        ),
        _ => return None,
    };
    Some((
        channel,
        Receipt {
            provider_message_id: message_id,
            status,
            error,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ses_tenant_name_is_letters_digits_dashes_and_underscores() {
        assert_eq!(ses_tenant_name(" acme-prod_1 ").unwrap(), "acme-prod_1");
        assert!(ses_tenant_name(&"a".repeat(64)).is_ok());
        for bad in ["", "  ", "acme prod", "acme.com", "acmé", &"a".repeat(65)] {
            assert!(ses_tenant_name(bad).is_err(), "{bad:?}");
        }
    }
    use serde_json::json;

    fn settings_of(v: Value) -> Result<Settings, Invalid> {
        settings(v.as_object().unwrap())
    }

    #[test]
    fn sender_identities_are_addresses_or_domains() {
        let ids =
            |v: &[&str]| sender_identities(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            ids(&["Acme.com", " news@Other.org ", "acme.com"]).unwrap(),
            ["acme.com", "news@other.org"]
        );
        for bad in [
            "acme",
            "-acme.com",
            "acme..com",
            "a b.com",
            "@acme.com",
            "acme.com.",
        ] {
            assert!(ids(&[bad]).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_SENDER_IDENTITIES)
            .map(|i| format!("d{i}.com"))
            .collect();
        assert!(sender_identities(&many).is_err());
    }

    #[test]
    fn a_sender_is_allowed_by_its_address_or_its_exact_domain() {
        let ids = vec!["acme.com".to_string(), "news@other.org".to_string()];
        assert!(sender_allowed("alerts@acme.com", &ids));
        assert!(sender_allowed("Alerts@ACME.com", &ids));
        assert!(sender_allowed("news@other.org", &ids));
        assert!(!sender_allowed("billing@other.org", &ids));
        assert!(!sender_allowed("x@mail.acme.com", &ids));
        assert!(!sender_allowed("x@acme.com.evil.example", &ids));
        assert!(!sender_allowed("x@notacme.com", &ids));
        assert!(!sender_allowed("alerts@acme.com", &[]));
        let sub = vec!["mail.acme.com".to_string()];
        assert!(!sender_allowed("x@acme.com", &sub));
        assert!(sender_allowed("x@mail.acme.com", &sub));
    }

    #[test]
    fn settings_are_checked() {
        let s =
            settings_of(json!({"from": "alerts@example.com", "to": ["ops@example.com"]})).unwrap();
        assert_eq!(s.to, Some(vec!["ops@example.com".to_owned()]));
        assert!(settings_of(json!({})).is_err());
        assert!(settings_of(json!({"from": "not an address"})).is_err());
        assert!(settings_of(json!({"from": "a@example.com", "to": []})).is_err());
        assert!(settings_of(json!({"from": "a@example.com", "to": "x@y"})).is_err());
        assert!(settings_of(json!({"from": "a@example.com", "cc": "b@example.com"})).is_err());
        assert!(settings_of(json!({"from": "a@example.com", "subject": "a\r\nBcc: x"})).is_err());
        assert!(!is_address("a@example.com>\r\nBcc: evil@example.com"));
        assert!(!is_address("a, b@example.com"));
        // One `@`, no quoting: the sender check and SES read the same domain.
        assert!(!is_address("x@b.example@a.example"));
        assert!(!is_address("\"x@b.example\"@a.example"));
        assert!(!is_address("x\\@b.example@a.example"));
        assert!(!is_address("x(comment)@a.example"));
        assert!(is_address("first.last+tag@mail.a.example"));
    }

    #[test]
    fn messages_take_the_payload_then_the_channel() {
        let s = settings_of(
            json!({"from": "alerts@example.com", "to": "ops@example.com",
                                   "subject": "Alert"}),
        )
        .unwrap();
        let m = message(&json!({"text": "disk full"}), &s).unwrap();
        assert_eq!(m.to, ["ops@example.com"]);
        assert_eq!(m.subject, "Alert");
        assert_eq!(m.text.as_deref(), Some("disk full"));
        let m = message(
            &json!({"to": ["a@example.com", "b@example.com"], "subject": "Hi", "html": "<p>x</p>"}),
            &s,
        )
        .unwrap();
        assert_eq!(m.to.len(), 2);
        assert_eq!(m.subject, "Hi");
        assert_eq!(m.text, None);
        assert!(message(&json!({"subject": "empty"}), &s).is_err());
        assert!(message(&json!({"to": "bad", "text": "x"}), &s).is_err());
        let no_to = settings_of(json!({"from": "alerts@example.com"})).unwrap();
        let e = message(&json!({"text": "x"}), &no_to).unwrap_err();
        assert!(e.contains("no recipient"), "{e}");
        assert_eq!(
            message(&json!({"to": "a@example.com", "text": "x"}), &no_to)
                .unwrap()
                .subject,
            DEFAULT_SUBJECT
        );
    }

    fn event(kind: &str, extra: Value) -> Value {
        let mut d = json!({"eventType": kind, "mail": {"messageId": "0100-abc",
            "tags": {CHANNEL_TAG: ["ch_1"], DELIVERY_TAG: ["dlv_1"]}}});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    }

    #[test]
    fn ses_errors_are_classified_by_code_then_status() {
        assert!(ses_error_retryable(
            Some("TooManyRequestsException"),
            Some(429)
        ));
        assert!(ses_error_retryable(
            Some("SendingPausedException"),
            Some(400)
        ));
        assert!(!ses_error_retryable(Some("MessageRejected"), Some(400)));
        assert!(!ses_error_retryable(Some("NotFoundException"), Some(404)));
        assert!(ses_error_retryable(Some("InternalFailure"), Some(500)));
        assert!(!ses_error_retryable(Some("SomethingNew"), Some(400)));
        assert!(ses_error_retryable(None, None), "no answer");
    }

    #[test]
    fn ses_events_become_receipts() {
        let (ch, r) = ses_event(&event("Delivery", json!({}))).unwrap();
        assert_eq!((ch.as_str(), r.status), ("ch_1", DeliveryStatus::Delivered));
        assert_eq!(r.provider_message_id, "0100-abc");
        let (_, r) = ses_event(&event(
            "Bounce",
            json!({"bounce": {"bounceType": "Permanent", "bounceSubType": "General",
                "bouncedRecipients": [{"emailAddress": "gone@example.com", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}}),
        ))
        .unwrap();
        assert_eq!(r.status, DeliveryStatus::Failed);
        assert_eq!(
            r.error.as_deref(),
            Some("email bounce: Permanent/General: gone@example.com: smtp; 550 5.1.1 user unknown")
        );
        let (_, r) = ses_event(&event(
            "Complaint",
            json!({"complaint": {"complaintFeedbackType": "abuse"}}),
        ))
        .unwrap();
        assert_eq!(r.error.as_deref(), Some("email complaint: abuse"));
        assert!(ses_event(&event("Open", json!({}))).is_none());
        assert!(ses_event(&event("DeliveryDelay", json!({}))).is_none());
        assert!(ses_event(&json!({"eventType": "Delivery", "mail": {"messageId": "x"}})).is_none());
    }
}
