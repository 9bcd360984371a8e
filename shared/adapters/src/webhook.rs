//! Webhook channels: an HTTP request per delivery, signed with Standard Webhooks.
//!
//! Configuration: `url` (http or https, required), `method` (POST, PUT or PATCH; default
//! POST), `headers` (extra string headers), `receive_timeout` (ms; overrides the policy's
//! `timeout_ms`), `auth` (OAuth 2.0 client credentials: `core::oauth2`; each request then
//! carries a bearer token, fetched again once when the receiver answers 401; or a client
//! certificate: `core::mtls`, its private key sealed when the channel is written). Every request has a timeout, follows no redirect, reads at most
//! [`crate::http::MAX_RESPONSE_BYTES`] of the answer, and reaches only addresses the SSRF guard allows:
//! the host is resolved, special-purpose addresses are dropped unless allowlisted, and the
//! connection uses the vetted addresses only.

use converger_core::Invalid;

use crate::http::{Guarded, MAX_TIMEOUT_MS, Response};
use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::mtls::{ChannelKey, ClientCert};
use converger_core::oauth2::ClientCredentials;
use converger_core::payload::BodyShape;
use converger_core::signing::signature_header;
use converger_core::{ChannelType, DeliveryError};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};
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
    tokens: crate::oauth2::Tokens,
    /// The deployment's key that seals and opens client certificates' private keys.
    key: Option<ChannelKey>,
    /// The clients of channels with a client certificate: each its own TLS configuration,
    /// kept (at most [`MAX_CERT_CLIENTS`], the oldest dropped first) by channel and
    /// certificate, so that a changed certificate gets a new one.
    cert_clients: Mutex<Vec<CertClient>>,
}

/// A client kept for a channel (by its id) and the certificate it presents.
type CertClient = ((String, ClientCert), Arc<Guarded>);

/// Most clients with a client certificate one process keeps.
pub const MAX_CERT_CLIENTS: usize = 64;

/// A validated webhook configuration.
#[derive(Debug)]
struct Config {
    url: reqwest::Url,
    method: reqwest::Method,
    headers: HeaderMap,
    receive_timeout: Option<u64>,
    body: BodyShape,
    auth: Option<ClientCredentials>,
    mtls: Option<ClientCert>,
}

fn parse_config(config: &Map<String, Value>) -> Result<Config, Invalid> {
    for k in config.keys() {
        if ![
            "url",
            "method",
            "headers",
            "receive_timeout",
            "body",
            "auth",
        ]
        .contains(&k.as_str())
        {
            return Err(Invalid(format!(
                "unknown webhook config key `{k}` (allowed: url, method, headers, receive_timeout, body, auth)"
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
    let (auth, mtls) = match config.get("auth") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(a)) if a.get("type").and_then(Value::as_str) == Some("mtls") => {
            (None, Some(ClientCert::parse(a)?))
        }
        Some(Value::Object(a)) => (Some(ClientCredentials::parse(a)?), None),
        Some(_) => return Err(Invalid::new("webhook `auth` must be an object")),
    };
    if mtls.is_some() && url.scheme() != "https" {
        return Err(Invalid::new(
            "a client certificate (`auth.type` mtls) needs an https url",
        ));
    }
    if auth.is_some() && headers.contains_key(reqwest::header::AUTHORIZATION) {
        return Err(Invalid::new(
            "header `Authorization` is set by `auth`; give one or the other",
        ));
    }
    Ok(Config {
        url,
        method,
        headers,
        receive_timeout,
        body,
        auth,
        mtls,
    })
}

impl WebhookAdapter {
    pub fn new(http: Arc<Guarded>, key: Option<ChannelKey>) -> Self {
        Self {
            http,
            tokens: Default::default(),
            key,
            cert_clients: Mutex::new(Vec::new()),
        }
    }

    /// The client that presents `cert`: built with the private key opened, or kept.
    fn cert_client(&self, channel_id: &str, cert: &ClientCert) -> Result<Arc<Guarded>, Invalid> {
        if let Some(c) = self.cert_clients.lock().ok().and_then(|l| {
            l.iter()
                .find(|((c, kept), _)| c == channel_id && kept == cert)
                .map(|(_, client)| client.clone())
        }) {
            return Ok(c);
        }
        let key = cert.key_pem(self.key.as_ref())?;
        let identity = format!("{}\n{key}", cert.certificate);
        let client = self
            .http
            .with_client_cert(&identity, cert.ca_certificate.as_deref())
            .map(Arc::new)
            .map_err(|e| {
                Invalid(format!(
                    "`auth`: the certificate, its private key or the CA could not be used ({e}); give the certificate chain and its own key, in PEM"
                ))
            })?;
        if let Ok(mut l) = self.cert_clients.lock() {
            l.retain(|((c, _), _)| c != channel_id);
            if l.len() >= MAX_CERT_CLIENTS {
                l.remove(0);
            }
            l.push(((channel_id.to_owned(), cert.clone()), client.clone()));
        }
        Ok(client)
    }

    /// The bearer token of a channel that authenticates with `auth`: the one kept, or a new
    /// one from its token endpoint.
    async fn token(
        &self,
        key: &str,
        auth: &ClientCredentials,
        timeout: Duration,
    ) -> Result<String, DeliveryError> {
        let (token, fetched) = self
            .tokens
            .get(key, converger_core::time::now_ms, || async {
                let opened = auth
                    .opened(self.key.as_ref())
                    .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
                crate::oauth2::fetch(&self.http, &opened, timeout).await
            })
            .await?;
        if fetched {
            tracing::info!("oauth2 token fetched");
        }
        Ok(token)
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
        let cfg = parse_config(config)?;
        if let Some(a) = &cfg.auth {
            // A sealed secret (kept from the stored config) opens under this key.
            a.opened(self.key.as_ref())?;
        }
        if let Some(cert) = &cfg.mtls {
            // The PEM's contents: a client is built of them (and kept for no one).
            let key = cert.key_pem(self.key.as_ref())?;
            self.http
                .with_client_cert(
                    &format!("{}\n{key}", cert.certificate),
                    cert.ca_certificate.as_deref(),
                )
                .map_err(|e| {
                    Invalid(format!(
                        "`auth`: the certificate, its private key or the CA could not be used ({e}); give the certificate chain and its own key, in PEM"
                    ))
                })?;
            if self.key.is_none() {
                return Err(converger_core::mtls::no_key());
            }
        }
        Ok(())
    }

    fn seal_config(&self, mut config: Map<String, Value>) -> Result<Map<String, Value>, Invalid> {
        if let Some(Value::Object(auth)) = config.get_mut("auth") {
            if auth.get("type").and_then(Value::as_str) == Some("mtls") {
                converger_core::mtls::seal_auth(auth, self.key.as_ref())?;
            } else {
                converger_core::mtls::seal_field(auth, "client_secret", self.key.as_ref(), false)?;
            }
        }
        Ok(config)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let cfg = target
            .config_as(parse_config)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let http = match &cfg.mtls {
            Some(cert) => self
                .cert_client(target.channel_id, cert)
                .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?,
            None => self.http.clone(),
        };
        http.check_literal(&cfg.url, LABEL)?;
        let timeout_ms = cfg
            .receive_timeout
            .unwrap_or(u64::try_from(target.timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS))
            .min(MAX_TIMEOUT_MS);
        let timeout = Duration::from_millis(timeout_ms);
        let body = bytes::Bytes::from(
            serde_json::to_vec(&cfg.body.value(crate::body_parts(&env)))
                .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?,
        );
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let signature = signature_header(target.signing_secrets, env.delivery_id, ts, &body)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;

        let request = |bearer: Option<&str>| {
            let mut req = http
                .request(cfg.method.clone(), cfg.url.clone())
                .headers(cfg.headers.clone())
                .header("content-type", "application/json")
                .header("webhook-id", env.delivery_id)
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", signature.as_str());
            // The attempt is a span of the producer's trace.
            for (name, value) in [
                ("traceparent", env.traceparent),
                ("tracestate", env.tracestate),
            ] {
                if let Some(v) = value {
                    req = req.header(name, v);
                }
            }
            if let Some(t) = bearer {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            // A second send (a refused token) shares the bytes: no copy of the body.
            req.body(body.clone())
        };
        let auth = cfg
            .auth
            .as_ref()
            .map(|a| (a, a.cache_key(target.channel_id)));
        let bearer = match &auth {
            Some((a, key)) => Some(self.token(key, a, timeout).await?),
            None => None,
        };
        let mut resp = http
            .send(request(bearer.as_deref()), timeout, LABEL)
            .await?;
        // A token the receiver refuses (expired early, revoked) is fetched again, once.
        if resp.status == 401
            && let (Some((a, key)), Some(old)) = (&auth, &bearer)
        {
            self.tokens.refused(key, old).await;
            let fresh = self.token(key, a, timeout).await?;
            resp = http.send(request(Some(&fresh)), timeout, LABEL).await?;
        }
        let Response {
            status,
            retry_after,
            body: buf,
        } = resp;
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
        let with_auth = parse_config(&cfg(json!({"url": "https://example.com",
            "auth": {"type": "oauth2_client_credentials", "token_url": "https://idp.example/t",
                     "client_id": "a", "client_secret": "b", "scope": "hooks"}})))
        .unwrap();
        assert_eq!(with_auth.auth.unwrap().scope.as_deref(), Some("hooks"));
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
            json!({"url": "https://example.com", "auth": "token"}),
            json!({"url": "https://example.com", "auth": {"type": "oauth2_client_credentials"}}),
            json!({"url": "http://example.com", "auth": {"type": "mtls",
                   "certificate": "-----BEGIN CERTIFICATE-----\n", "private_key": "-----BEGIN PRIVATE KEY-----\n"}}),
            json!({"url": "https://example.com", "auth": {"type": "mtls"}}),
            json!({"url": "https://example.com", "headers": {"Authorization": "Bearer x"},
                   "auth": {"type": "oauth2_client_credentials", "token_url": "https://idp.example/t",
                            "client_id": "a", "client_secret": "b"}}),
        ] {
            assert!(parse_config(&cfg(bad.clone())).is_err(), "{bad}");
        }
    }
}
