//! Webhook channels: an HTTP request per delivery, signed with Standard Webhooks.
//!
//! Configuration: `url` (http or https, required), `method` (POST, PUT or PATCH; default
//! POST), `headers` (extra string headers), `receive_timeout` (ms; overrides the policy's
//! `timeout_ms`). Every request has a timeout, follows no redirect, reads at most
//! [`MAX_RESPONSE_BYTES`] of the answer, and reaches only addresses the SSRF guard allows:
//! the host is resolved, special-purpose addresses are dropped unless allowlisted, and the
//! connection uses the vetted addresses only.

use crate::{Accepted, Adapter, Envelope, Target};
use async_trait::async_trait;
use converger_core::net::{Allowlist, check_destination};
use converger_core::signing::Signer;
use converger_core::{ChannelType, DeliveryError};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Most of a response body that is read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Upper bound on any webhook request, whatever the channel asks.
pub const MAX_TIMEOUT_MS: u64 = 30_000;
/// The webhook adapter's policy layer.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

const LABEL: &str = "webhook";

/// Headers a channel may not set: the signature headers and what HTTP itself controls.
const RESERVED: [&str; 7] = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
];

#[derive(Debug, thiserror::Error)]
#[error("destination {host} is not allowed ({reason} address)")]
struct Blocked {
    host: String,
    reason: &'static str,
}

#[derive(Debug, thiserror::Error)]
#[error("{host} did not resolve to any address")]
struct NoAddress {
    host: String,
}

/// DNS resolution that only hands out allowed addresses, so the vetted address is the one
/// connected to (no rebinding between check and connect).
struct GuardedResolver {
    allow: Arc<Allowlist>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let allow = self.allow.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(Box::new(NoAddress { host }) as _);
            }
            let mut reason = "";
            let ok: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| match check_destination(a.ip(), &allow) {
                    Ok(()) => true,
                    Err(r) => {
                        reason = r;
                        false
                    }
                })
                .collect();
            if ok.is_empty() {
                return Err(Box::new(Blocked { host, reason }) as _);
            }
            Ok(Box::new(ok.into_iter()) as Addrs)
        })
    }
}

pub struct WebhookAdapter {
    client: reqwest::Client,
    allow: Arc<Allowlist>,
}

/// A validated webhook configuration.
#[derive(Debug)]
struct Config {
    url: reqwest::Url,
    method: reqwest::Method,
    headers: HeaderMap,
    receive_timeout: Option<u64>,
    /// Send the activity's payload alone as the body (`"body": "payload"`), instead of the
    /// envelope with the activity id, seq and conversation.
    payload_only: bool,
}

fn parse_config(config: &Map<String, Value>) -> Result<Config, String> {
    for k in config.keys() {
        if !["url", "method", "headers", "receive_timeout", "body"].contains(&k.as_str()) {
            return Err(format!(
                "unknown webhook config key `{k}` (allowed: url, method, headers, receive_timeout, body)"
            ));
        }
    }
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .ok_or("webhook config needs `url`")?;
    let url = reqwest::Url::parse(url).map_err(|e| format!("invalid webhook url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("webhook url must be http(s) with a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("webhook url must not carry credentials; use headers".into());
    }
    let method = match config.get("method") {
        None => reqwest::Method::POST,
        Some(Value::String(m)) => match m.to_ascii_uppercase().as_str() {
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            _ => return Err(format!("invalid webhook method `{m}` (POST, PUT or PATCH)")),
        },
        Some(_) => return Err("webhook method must be a string".into()),
    };
    let mut headers = HeaderMap::new();
    match config.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| format!("invalid header name `{k}`"))?;
                if RESERVED.contains(&name.as_str()) {
                    return Err(format!("header `{k}` is set by Converger"));
                }
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("header `{k}` must be a string"))?;
                let value = HeaderValue::from_str(v)
                    .map_err(|_| format!("invalid value for header `{k}`"))?;
                headers.insert(name, value);
            }
        }
        Some(_) => return Err("webhook headers must be an object of strings".into()),
    }
    let receive_timeout = match config.get("receive_timeout") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n > 0)
                .ok_or("receive_timeout must be a positive integer (ms)")?,
        ),
    };
    let payload_only = match config.get("body") {
        None | Some(Value::Null) => false,
        Some(Value::String(b)) if b == "envelope" => false,
        Some(Value::String(b)) if b == "payload" => true,
        Some(_) => return Err("webhook body must be \"envelope\" or \"payload\"".into()),
    };
    Ok(Config {
        url,
        method,
        headers,
        receive_timeout,
        payload_only,
    })
}

impl WebhookAdapter {
    pub fn new(allow: Allowlist) -> Result<Self, String> {
        let allow = Arc::new(allow);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_millis(MAX_TIMEOUT_MS))
            .pool_idle_timeout(Duration::from_secs(50))
            .user_agent(concat!("Converger/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(GuardedResolver {
                allow: allow.clone(),
            })
            .build()
            .map_err(|e| format!("webhook client: {e}"))?;
        Ok(Self { client, allow })
    }

    fn classify_transport(&self, e: &reqwest::Error, timeout: Duration) -> DeliveryError {
        let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(s) = src {
            if let Some(b) = s.downcast_ref::<Blocked>() {
                return DeliveryError::permanent(format!("{LABEL}: {b}"));
            }
            if let Some(n) = s.downcast_ref::<NoAddress>() {
                return DeliveryError::from_transport(n, LABEL);
            }
            src = s.source();
        }
        if e.is_timeout() {
            return DeliveryError::from_transport(
                format!("timed out after {} ms", timeout.as_millis()),
                LABEL,
            );
        }
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        DeliveryError::from_transport(msg, LABEL)
    }
}

#[async_trait]
impl Adapter for WebhookAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Webhook
    }

    fn default_policy(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("timeout_ms".into(), Value::from(DEFAULT_TIMEOUT_MS));
        m
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), String> {
        parse_config(config).map(|_| ())
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Accepted, DeliveryError> {
        let cfg = parse_config(target.config)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        if let Some(Ok(ip)) = cfg
            .url
            .host_str()
            .map(|h| h.trim_matches(['[', ']']).parse::<IpAddr>())
            && let Err(reason) = check_destination(ip, &self.allow)
        {
            return Err(DeliveryError::permanent(format!(
                "{LABEL}: destination {ip} is not allowed ({reason} address)"
            )));
        }
        let timeout_ms = cfg
            .receive_timeout
            .unwrap_or(u64::try_from(target.timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS))
            .min(MAX_TIMEOUT_MS);
        let timeout = Duration::from_millis(timeout_ms);
        let body = if cfg.payload_only {
            serde_json::to_vec(env.payload)
        } else {
            serde_json::to_vec(&json!({
                "activity_id": env.activity_id,
                "seq": env.seq,
                "conversation_id": env.conversation_id,
                "payload": env.payload,
            }))
        }
        .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let signer = Signer::new(target.signing_secret)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let signature = signer.sign(env.delivery_id, ts, &body);

        let resp = self
            .client
            .request(cfg.method, cfg.url)
            .headers(cfg.headers)
            .header("content-type", "application/json")
            .header("webhook-id", env.delivery_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .timeout(timeout)
            .body(body)
            .send()
            .await;
        let mut resp = match resp {
            Ok(r) => r,
            Err(e) => return Err(self.classify_transport(&e, timeout)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut buf: Vec<u8> = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let room = MAX_RESPONSE_BYTES.saturating_sub(buf.len());
                    buf.extend_from_slice(&c[..c.len().min(room)]);
                    if buf.len() >= MAX_RESPONSE_BYTES {
                        break;
                    }
                }
                Ok(None) => break,
                // A 2xx whose body breaks off was still accepted; the error is for the log.
                Err(e) if (200..300).contains(&status) => {
                    tracing::debug!(error = %e, "response body cut short");
                    break;
                }
                Err(e) => return Err(self.classify_transport(&e, timeout)),
            }
        }
        if (200..300).contains(&status) {
            let snippet = converger_core::error::snippet(&buf);
            Ok(Accepted {
                provider_message_id: None,
                status_code: Some(status),
                response_snippet: (!snippet.is_empty()).then_some(snippet),
            })
        } else {
            Err(DeliveryError::from_http(
                status,
                retry_after.as_deref(),
                &buf,
                LABEL,
                SystemTime::now(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn config_validation() {
        assert!(parse_config(&cfg(json!({"url": "https://example.com/hook"}))).is_ok());
        assert!(parse_config(&cfg(json!({"url": "https://example.com", "method": "put", "headers": {"x-a": "1"}, "receive_timeout": 2000}))).is_ok());
        for bad in [
            json!({}),
            json!({"url": "ftp://example.com"}),
            json!({"url": "not a url"}),
            json!({"url": "https://u:p@example.com"}),
            json!({"url": "https://example.com", "method": "GET"}),
            json!({"url": "https://example.com", "headers": {"webhook-id": "x"}}),
            json!({"url": "https://example.com", "headers": {"x": 1}}),
            json!({"url": "https://example.com", "receive_timeout": 0}),
            json!({"url": "https://example.com", "colour": "red"}),
        ] {
            assert!(parse_config(&cfg(bad.clone())).is_err(), "{bad}");
        }
    }
}
