//! RabbitMQ channels (`rabbitmq`): one message per delivery, published over AMQP 0-9-1 to an
//! exchange with a routing key, persistent, `mandatory` (a message no queue takes comes back
//! and fails the attempt rather than vanish), and confirmed by the broker before the attempt
//! counts as sent. Everything here is a rule without I/O: what a channel's configuration
//! holds, what goes with a message, and how the broker's refusals are classified.

use crate::Invalid;
use crate::payload::BodyShape;
use serde_json::{Map, Value};
use std::fmt;

/// The broker's port when the URL names none: AMQP's, and AMQP over TLS's.
pub const PORT: u16 = 5672;
pub const TLS_PORT: u16 = 5671;
/// AMQP's short strings (an exchange, a routing key, a virtual host, a user name) take at
/// most 255 bytes.
pub const MAX_SHORT_BYTES: usize = 255;
/// Longest password (a token of the broker's OAuth 2 plugin fits).
pub const MAX_PASSWORD_CHARS: usize = 4096;
/// Largest `ca_certificate` (a PEM bundle of a few certificates).
pub const MAX_CA_BYTES: usize = 32 * 1024;

/// Where a channel's broker is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Broker {
    /// `amqps://`: TLS, the host's certificate checked against the public roots, or against
    /// the channel's `ca_certificate`.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub vhost: String,
}

/// A `rabbitmq` channel's configuration, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct Settings {
    pub broker: Broker,
    pub username: String,
    pub password: String,
    /// `""` is the default exchange, where the routing key names the queue.
    pub exchange: String,
    pub routing_key: String,
    /// PEM certificates the broker's certificate may chain to instead of the public roots
    /// (a private CA).
    pub ca_certificate: Option<String>,
    /// Delivery mode 2 (written to disk by a durable queue); `false` for mode 1.
    pub persistent: bool,
    pub body: BodyShape,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("broker", &self.broker)
            .field("username", &self.username)
            .field("password", &"[REDACTED]")
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .field("ca_certificate", &self.ca_certificate.is_some())
            .field("persistent", &self.persistent)
            .field("body", &self.body)
            .finish()
    }
}

const KEYS: [&str; 8] = [
    "url",
    "username",
    "password",
    "exchange",
    "routing_key",
    "ca_certificate",
    "persistent",
    "body",
];

/// `config` checked: every key named in the error where it does not fit.
pub fn settings(config: &Map<String, Value>) -> Result<Settings, Invalid> {
    if let Some(k) = config.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(Invalid(format!(
            "unknown rabbitmq config key `{k}` (allowed: {})",
            KEYS.join(", ")
        )));
    }
    let text = |k: &str, required: bool| -> Result<Option<&str>, Invalid> {
        match config.get(k) {
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            None | Some(Value::Null) if required => {
                Err(Invalid(format!("rabbitmq config needs `{k}`")))
            }
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(Invalid(format!("`{k}` must be a string"))),
        }
    };
    let short = |k: &str, v: &str| -> Result<(), Invalid> {
        if v.len() > MAX_SHORT_BYTES {
            Err(Invalid(format!(
                "`{k}` takes at most {MAX_SHORT_BYTES} bytes"
            )))
        } else if v.chars().any(char::is_control) {
            Err(Invalid(format!(
                "`{k}` must not contain control characters"
            )))
        } else {
            Ok(())
        }
    };
    let broker = broker(text("url", true)?.unwrap_or_default())?;
    let username = text("username", true)?.unwrap_or_default();
    if username.is_empty() {
        return Err(Invalid::new("`username` must not be empty"));
    }
    short("username", username)?;
    let password = text("password", true)?.unwrap_or_default();
    if password.is_empty() || password.chars().count() > MAX_PASSWORD_CHARS {
        return Err(Invalid(format!(
            "`password` must be 1 to {MAX_PASSWORD_CHARS} characters"
        )));
    }
    let exchange = text("exchange", true)?.unwrap_or_default();
    short("exchange", exchange)?;
    if !exchange
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
    {
        return Err(Invalid::new(
            "`exchange` takes letters, digits, `-`, `_`, `.` and `:` (`\"\"` is the default exchange)",
        ));
    }
    if exchange.starts_with("amq.") && !DEFAULT_EXCHANGES.contains(&exchange) {
        return Err(Invalid(format!(
            "`exchange` `{exchange}`: names starting `amq.` are the broker's own"
        )));
    }
    let routing_key = text("routing_key", !exchange.is_empty())?.unwrap_or_default();
    short("routing_key", routing_key)?;
    if exchange.is_empty() && routing_key.is_empty() {
        return Err(Invalid::new(
            "the default exchange (`exchange: \"\"`) needs `routing_key`: the queue's name",
        ));
    }
    let ca_certificate = match text("ca_certificate", false)? {
        None => None,
        Some(_) if !broker.tls => {
            return Err(Invalid::new("`ca_certificate` is for `amqps://` URLs only"));
        }
        Some(pem) if pem.len() > MAX_CA_BYTES || !pem.contains("-----BEGIN CERTIFICATE-----") => {
            return Err(Invalid(format!(
                "`ca_certificate` must be PEM certificates (`-----BEGIN CERTIFICATE-----`), at most {MAX_CA_BYTES} bytes"
            )));
        }
        Some(pem) => Some(pem.to_owned()),
    };
    let persistent = match config.get("persistent") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Invalid::new("`persistent` must be true or false")),
    };
    Ok(Settings {
        broker,
        username: username.to_owned(),
        password: password.to_owned(),
        exchange: exchange.to_owned(),
        routing_key: routing_key.to_owned(),
        ca_certificate,
        persistent,
        body: BodyShape::parse(config.get("body"))?,
    })
}

/// The broker's predeclared exchanges a channel may publish to.
const DEFAULT_EXCHANGES: [&str; 4] = ["amq.direct", "amq.fanout", "amq.topic", "amq.headers"];

/// `amqp://host[:port][/vhost]` or `amqps://...`: no user (`username` and `password` are
/// separate, so that the API hides the password), no query; the virtual host is the path,
/// percent-encoded (`%2F` is `/`), `/` when there is none.
pub fn broker(url: &str) -> Result<Broker, Invalid> {
    let bad = |why: &str| Invalid(format!("`url` {why}"));
    let parsed = url::Url::parse(url.trim()).map_err(|e| {
        bad(&format!(
            "is not a URL ({e}): give amqps://host[:port][/vhost]"
        ))
    })?;
    let tls = match parsed.scheme() {
        "amqps" => true,
        "amqp" => false,
        s => return Err(bad(&format!("scheme `{s}`: use amqps:// (or amqp://)"))),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "must not carry credentials; give `username` and `password`",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("takes no query or fragment"));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("needs a host"))?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = parsed.port().unwrap_or(if tls { TLS_PORT } else { PORT });
    let path = parsed.path();
    let vhost = match path.strip_prefix('/').unwrap_or(path) {
        "" => "/".to_owned(),
        p if p.contains('/') => {
            return Err(bad(
                "path is the virtual host, one segment: write `/` in it as %2F",
            ));
        }
        p => percent_encoding::percent_decode_str(p)
            .decode_utf8()
            .map_err(|_| bad("virtual host is not UTF-8"))?
            .into_owned(),
    };
    if vhost.len() > MAX_SHORT_BYTES || vhost.chars().any(char::is_control) {
        return Err(bad(&format!(
            "virtual host takes at most {MAX_SHORT_BYTES} bytes, no control characters"
        )));
    }
    Ok(Broker {
        tls,
        host,
        port,
        vhost,
    })
}

/// One row of the reply-code table: what the broker's refusal means, whether a retry can
/// heal it, and what the tenant should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyRule {
    pub code: u16,
    pub name: &'static str,
    pub retryable: bool,
    pub advice: &'static str,
}

/// The broker's reply codes (`docs/channels/rabbitmq.md` shows them; a test keeps the two
/// equal). A code not listed retries; so does a failure with no answer (the network, a
/// timeout, a broker that is down) and a `nack`.
pub const REPLIES: &[ReplyRule] = &[
    ReplyRule {
        code: 312,
        name: "NO_ROUTE",
        // Retried: a broker that has just restarted takes connections before it has
        // recovered its queues' bindings.
        retryable: true,
        advice: "no queue is bound to the exchange for the routing key, so the message would be dropped: bind a queue, or fix `exchange` or `routing_key` (retried: a restarting broker recovers its bindings after it takes connections)",
    },
    ReplyRule {
        code: 320,
        name: "CONNECTION_FORCED",
        retryable: true,
        advice: "the broker closed the connection (a restart, an operator): retried",
    },
    ReplyRule {
        code: 403,
        name: "ACCESS_REFUSED",
        retryable: false,
        advice: "the user may not log in or may not write to the exchange: grant `write` on it to `username`, or fix `username` and `password`",
    },
    ReplyRule {
        code: 404,
        name: "NOT_FOUND",
        retryable: false,
        advice: "the exchange does not exist: declare it, or fix `exchange`",
    },
    ReplyRule {
        code: 405,
        name: "RESOURCE_LOCKED",
        retryable: true,
        advice: "an exclusive queue held by another connection: retried",
    },
    ReplyRule {
        code: 406,
        name: "PRECONDITION_FAILED",
        retryable: false,
        advice: "the broker refused the message's properties (a queue's limit with `reject-publish`, or its arguments): see the reply text",
    },
    ReplyRule {
        code: 506,
        name: "RESOURCE_ERROR",
        retryable: true,
        advice: "the broker is short of a resource (memory, disk): retried",
    },
    ReplyRule {
        code: 530,
        name: "NOT_ALLOWED",
        retryable: false,
        advice: "the virtual host does not exist or the user may not use it: fix the URL's path, or grant the user the virtual host",
    },
    ReplyRule {
        code: 541,
        name: "INTERNAL_ERROR",
        retryable: true,
        advice: "the broker failed: retried",
    },
];

/// The broker refused with `code` and `text`: the reason kept as the delivery's
/// `last_error`, and whether a retry can heal it.
pub fn refusal(code: u16, text: &str) -> (String, bool) {
    let text: String = text.chars().take(200).collect();
    match REPLIES.iter().find(|r| r.code == code) {
        Some(r) => (
            format!("rabbitmq: {code} {} ({text}): {}", r.name, r.advice),
            r.retryable,
        ),
        None => (format!("rabbitmq: {code} ({text})"), true),
    }
}

/// The broker's refusal `code` with `text`, as the attempt's error: permanent where a retry
/// cannot heal it ([`REPLIES`]).
pub fn refusal_error(code: u16, text: &str) -> crate::DeliveryError {
    let (why, retryable) = refusal(code, text);
    if retryable {
        crate::DeliveryError::transient(why)
    } else {
        crate::DeliveryError::permanent(why)
    }
}

/// A connection to `broker` that could not be opened, classified by what the client said
/// (`error`). RabbitMQ's reply texts start with the code's name (`NOT_ALLOWED - vhost x not
/// found`). A broker closes the socket of a login it refuses without saying why, as a broker
/// restarting or a proxy without a healthy target does: said as the likely refusal, but
/// retried. A certificate that does not verify will not heal by itself; the network may.
pub fn connect_failure(error: &str, broker: &Broker) -> crate::DeliveryError {
    let lower = error.to_ascii_lowercase();
    if lower.contains("reset by peer") || lower.contains("unexpected eof") {
        let (why, _) = refusal(
            403,
            &format!("the broker closed the connection at login, or went away: {error}"),
        );
        crate::DeliveryError::transient(why)
    } else if lower.contains("access_refused") {
        refusal_error(403, error)
    } else if lower.contains("not_allowed") {
        refusal_error(530, &format!("{error} (virtual host `{}`)", broker.vhost))
    } else if lower.contains("certificate") || lower.contains("invalidcert") {
        crate::DeliveryError::permanent(format!(
            "rabbitmq: the broker's TLS certificate was refused ({error}): give `ca_certificate` for a private CA"
        ))
    } else {
        crate::DeliveryError::from_transport(
            format!("connecting to {}: {error}", broker.host),
            "rabbitmq",
        )
    }
}

/// The reply-code table as `docs/channels/rabbitmq.md` shows it (a test checks the page).
pub fn replies_markdown() -> String {
    let mut out = String::from("| reply code | retried | what to do |\n|---|---|---|\n");
    for r in REPLIES {
        out.push_str(&format!(
            "| {} `{}` | {} | {} |\n",
            r.code,
            r.name,
            if r.retryable { "yes" } else { "no" },
            r.advice
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> Result<Settings, Invalid> {
        settings(v.as_object().unwrap())
    }

    fn base() -> Value {
        json!({"url": "amqps://mq.example.com", "username": "u", "password": "p",
               "exchange": "events", "routing_key": "orders.created"})
    }

    #[test]
    fn a_channel_names_its_broker_exchange_and_key() {
        let s = cfg(base()).unwrap();
        assert_eq!(
            s.broker,
            Broker {
                tls: true,
                host: "mq.example.com".into(),
                port: TLS_PORT,
                vhost: "/".into()
            }
        );
        assert!(s.persistent);
        assert_eq!(s.body, BodyShape::Envelope);
        assert!(!format!("{s:?}").contains("\"p\""));
        let b = broker("amqp://10.0.0.5:5673/tenant%2Fa").unwrap();
        assert_eq!((b.tls, b.port, b.vhost.as_str()), (false, 5673, "tenant/a"));
        assert_eq!(broker("amqp://[::1]/").unwrap().host, "::1");
        assert_eq!(broker("amqps://h/prod").unwrap().vhost, "prod");
        // The default exchange delivers to the queue the routing key names.
        let mut v = base();
        v["exchange"] = json!("");
        v["routing_key"] = json!("inbox");
        assert_eq!(cfg(v).unwrap().exchange, "");
    }

    #[test]
    fn a_bad_configuration_is_refused_with_the_field_named() {
        let cases = [
            (json!({"url": "https://h"}), "scheme `https`"),
            (
                json!({"url": "amqps://u:p@h"}),
                "must not carry credentials",
            ),
            (json!({"url": "amqps://h/a/b"}), "one segment"),
            (json!({"url": "amqps://h?heartbeat=5"}), "no query"),
            (json!({"url": "nope"}), "is not a URL"),
            (json!({"username": ""}), "`username` must not be empty"),
            (json!({"password": 5}), "`password` must be a string"),
            (json!({"exchange": "a b"}), "`exchange` takes letters"),
            (json!({"exchange": "amq.rabbitmq.trace"}), "broker's own"),
            (json!({"exchange": "x".repeat(256)}), "at most 255 bytes"),
            (json!({"routing_key": null}), "needs `routing_key`"),
            (json!({"routing_key": "a\nb"}), "control characters"),
            (json!({"ca_certificate": "nope"}), "PEM certificates"),
            (
                json!({"persistent": "yes"}),
                "`persistent` must be true or false",
            ),
            (json!({"body": "xml"}), "body must be"),
            (json!({"queue": "q"}), "unknown rabbitmq config key `queue`"),
        ];
        for (change, want) in cases {
            let mut v = base();
            for (k, x) in change.as_object().unwrap() {
                v[k] = x.clone();
            }
            let e = cfg(v).unwrap_err().to_string();
            assert!(e.contains(want), "{change}: {e}");
        }
        let mut v = base();
        v["url"] = json!("amqp://h");
        v["ca_certificate"] = json!("-----BEGIN CERTIFICATE-----\n");
        let e = cfg(v).unwrap_err().to_string();
        assert!(e.contains("`amqps://` URLs only"), "{e}");
        let mut v = base();
        v.as_object_mut().unwrap().remove("password");
        assert!(cfg(v).unwrap_err().to_string().contains("needs `password`"));
    }

    #[test]
    fn refusals_that_a_retry_cannot_heal_dead_letter() {
        let (why, retry) = refusal(404, "NOT_FOUND - no exchange 'x' in vhost '/'");
        assert!(!retry);
        assert!(
            why.contains("no exchange 'x'") && why.contains("declare it"),
            "{why}"
        );
        assert!(
            refusal(312, "NO_ROUTE").1,
            "a restarting broker's bindings come back"
        );
        assert!(!refusal(403, "ACCESS_REFUSED").1);
        assert!(refusal(320, "CONNECTION_FORCED").1);
        assert!(refusal(599, "new").1, "an unknown code retries");
    }

    /// What a failed connection says decides whether the attempt is retried: a refused
    /// virtual host or certificate is for good; a closed socket (a refused login, or a broker
    /// going away) and a refused connection are retried.
    #[test]
    fn a_failed_connection_is_classified_by_what_the_broker_did() {
        let b = broker("amqps://mq.example.com/prod").unwrap();
        let e = connect_failure("open error: '530: NOT_ALLOWED - vhost prod not found'", &b);
        assert!(
            !e.retryable && e.reason.contains("530 NOT_ALLOWED"),
            "{e:?}"
        );
        let e = connect_failure(
            "network io error: Connection reset by peer (os error 104)",
            &b,
        );
        assert!(
            e.retryable && e.reason.contains("403 ACCESS_REFUSED"),
            "{e:?}"
        );
        let e = connect_failure("invalid peer certificate: UnknownIssuer", &b);
        assert!(!e.retryable && e.reason.contains("ca_certificate"), "{e:?}");
        let e = connect_failure("network error: Connection refused (os error 111)", &b);
        assert!(
            e.retryable && e.reason.contains("connecting to mq.example.com"),
            "{e:?}"
        );
        assert!(!refusal_error(404, "NOT_FOUND").retryable);
        assert!(refusal_error(320, "CONNECTION_FORCED").retryable);
    }

    /// `docs/channels/rabbitmq.md` shows the reply codes as the code classifies them
    /// (`UPDATE_DOCS=1` rewrites it).
    #[test]
    fn the_docs_show_the_reply_codes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/channels/rabbitmq.md"
        );
        let page = std::fs::read_to_string(path).unwrap();
        let (start, end) = ("<!-- replies:start -->\n", "<!-- replies:end -->");
        let (before, rest) = page.split_once(start).unwrap();
        let (_, after) = rest.split_once(end).unwrap();
        let current = format!("{before}{start}{}{end}{after}", replies_markdown());
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &current).unwrap();
        }
        assert!(
            page == current,
            "docs/channels/rabbitmq.md's reply codes are stale: run with UPDATE_DOCS=1"
        );
    }
}
