//! Webhook channels: an HTTP request per delivery, signed with Standard Webhooks.
//!
//! Configuration: `url` (http or https, required), `method` (POST, PUT or PATCH; default
//! POST), `headers` (extra string headers), `receive_timeout` (ms; overrides the policy's
//! `timeout_ms`). Every request has a timeout, follows no redirect, reads at most
//! [`crate::http::MAX_RESPONSE_BYTES`] of the answer, and reaches only addresses the SSRF guard allows:
//! the host is resolved, special-purpose addresses are dropped unless allowlisted, and the
//! connection uses the vetted addresses only.

use converger_core::Invalid;

use crate::http::{Guarded, MAX_TIMEOUT_MS, Response};
use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::payload::BodyShape;
use converger_core::signing::signature_header;
use converger_core::{ChannelType, DeliveryError};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The webhook adapter's policy layer.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

const LABEL: &str = "webhook";

/// Headers a channel may not set: the signature headers and what HTTP itself controls.
const RESERVED: [&str; 9] = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "traceparent",
    "tracestate",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
];

pub struct WebhookAdapter {
    http: Arc<Guarded>,
}

/// A validated webhook configuration.
#[derive(Debug)]
struct Config {
    url: reqwest::Url,
    method: reqwest::Method,
    headers: HeaderMap,
    receive_timeout: Option<u64>,
    body: BodyShape,
}

fn parse_config(config: &Map<String, Value>) -> Result<Config, Invalid> {
    for k in config.keys() {
        if !["url", "method", "headers", "receive_timeout", "body"].contains(&k.as_str()) {
            return Err(Invalid(format!(
                "unknown webhook config key `{k}` (allowed: url, method, headers, receive_timeout, body)"
            )));
        }
    }
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .ok_or("webhook config needs `url`")?;
    let url = reqwest::Url::parse(url).map_err(|e| Invalid(format!("invalid webhook url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Invalid::new("webhook url must be http(s) with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::new(
            "webhook url must not carry credentials; use headers",
        ));
    }
    let method = match config.get("method") {
        None => reqwest::Method::POST,
        Some(Value::String(m)) => match m.to_ascii_uppercase().as_str() {
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            _ => {
                return Err(Invalid(format!(
                    "invalid webhook method `{m}` (POST, PUT or PATCH)"
                )));
            }
        },
        Some(_) => return Err(Invalid::new("webhook method must be a string")),
    };
    let mut headers = HeaderMap::new();
    match config.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| Invalid(format!("invalid header name `{k}`")))?;
                if RESERVED.contains(&name.as_str()) {
                    return Err(Invalid(format!("header `{k}` is set by Converger")));
                }
                let v = v
                    .as_str()
                    .ok_or_else(|| Invalid(format!("header `{k}` must be a string")))?;
                let value = HeaderValue::from_str(v)
                    .map_err(|_| Invalid(format!("invalid value for header `{k}`")))?;
                headers.insert(name, value);
            }
        }
        Some(_) => return Err(Invalid::new("webhook headers must be an object of strings")),
    }
    let receive_timeout = match config.get("receive_timeout") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n > 0)
                .ok_or("receive_timeout must be a positive integer (ms)")?,
        ),
    };
    let body =
        BodyShape::parse(config.get("body")).map_err(|e| Invalid(format!("webhook {}", e.0)))?;
    Ok(Config {
        url,
        method,
        headers,
        receive_timeout,
        body,
    })
}

impl WebhookAdapter {
    pub fn new(http: Arc<Guarded>) -> Self {
        Self { http }
    }
}

#[async_trait]
impl Adapter for WebhookAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Webhook
    }

    fn default_policy(&self) -> converger_core::PolicyLayer {
        converger_core::PolicyLayer {
            timeout_ms: Some(DEFAULT_TIMEOUT_MS),
            ..Default::default()
        }
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        parse_config(config).map(|_| ())
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let cfg = target
            .config_as(parse_config)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        self.http.check_literal(&cfg.url, LABEL)?;
        let timeout_ms = cfg
            .receive_timeout
            .unwrap_or(u64::try_from(target.timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS))
            .min(MAX_TIMEOUT_MS);
        let timeout = Duration::from_millis(timeout_ms);
        let body = serde_json::to_vec(&cfg.body.value(crate::body_parts(&env)))
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let signature = signature_header(target.signing_secrets, env.delivery_id, ts, &body)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;

        let mut req = self
            .http
            .request(cfg.method.clone(), cfg.url.clone())
            .headers(cfg.headers.clone())
            .header("content-type", "application/json")
            .header("webhook-id", env.delivery_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature);
        // The attempt is a span of the producer's trace.
        for (name, value) in [
            ("traceparent", env.traceparent),
            ("tracestate", env.tracestate),
        ] {
            if let Some(v) = value {
                req = req.header(name, v);
            }
        }
        let req = req.body(body);
        let Response {
            status,
            retry_after,
            body: buf,
        } = self.http.send(req, timeout, LABEL).await?;
        if (200..300).contains(&status) {
            let snippet = converger_core::error::snippet(&buf);
            Ok(Delivered::Sent(Accepted {
                provider_message_id: None,
                status_code: Some(status),
                response_snippet: (!snippet.is_empty()).then_some(snippet),
            }))
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
    use serde_json::json;

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
