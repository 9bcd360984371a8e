//! WhatsApp channels: Meta's Cloud API (`whatsapp_meta`) and Infobip (`whatsapp_infobip`).
//! The message shape, the error classification and the receipts are rules of
//! `converger_core::providers`; this module does the HTTP.
//!
//! `whatsapp_meta` config: `phone_number_id` and `access_token` (required), `api_version`
//! (default [`META_API_VERSION`]), `base_url` (default [`META_BASE_URL`]),
//! `default_recipient`, and for receipts `app_secret` and `verify_token`.
//!
//! `whatsapp_infobip` config: `base_url`, `api_key` and `sender` (required),
//! `default_recipient`, `notify_url` (where Infobip posts delivery reports), and for receipts
//! `receipt_token`.

use converger_core::Invalid;

use crate::config::{base_url, callback_token, join, keys_allowed, required, string, timeout};
use crate::http::{Guarded, Response};
use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::providers::{
    self, infobip_error, infobip_request, meta_code_retryable, meta_error, meta_request,
    whatsapp_message,
};
use converger_core::{ChannelType, DeliveryError, RateLimit};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::SystemTime;

pub const META_BASE_URL: &str = "https://graph.facebook.com";
pub const META_API_VERSION: &str = "v21.0";
/// The Cloud API's default throughput per business phone number.
pub const META_DEFAULT_RATE: RateLimit = RateLimit {
    count: 80,
    per_ms: 1000,
};

fn default_recipient(config: &Map<String, Value>) -> Result<Option<&str>, Invalid> {
    let r = string(config, "default_recipient")?;
    if let Some(r) = r
        && providers::normalize_phone(r).is_none()
    {
        return Err(Invalid::new(
            "default_recipient must be a phone number with 6 to 15 digits",
        ));
    }
    Ok(r)
}

struct MetaConfig {
    url: reqwest::Url,
    access_token: String,
    default_recipient: Option<String>,
}

fn meta_config(config: &Map<String, Value>) -> Result<MetaConfig, Invalid> {
    const KIND: &str = "whatsapp_meta";
    keys_allowed(
        config,
        &[
            "phone_number_id",
            "access_token",
            "api_version",
            "base_url",
            "default_recipient",
            "app_secret",
            "verify_token",
        ],
        KIND,
    )?;
    let phone = required(config, "phone_number_id", KIND)?;
    if !phone.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Invalid::new(
            "phone_number_id must be the number's id (digits)",
        ));
    }
    let access_token = required(config, "access_token", KIND)?;
    let version = string(config, "api_version")?.unwrap_or(META_API_VERSION);
    let valid_version = version.strip_prefix('v').is_some_and(|v| {
        !v.is_empty()
            && v.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    });
    if !valid_version {
        return Err(Invalid(format!(
            "api_version `{version}` must look like `{META_API_VERSION}`"
        )));
    }
    string(config, "app_secret")?;
    callback_token(config, "verify_token")?;
    let base = base_url(string(config, "base_url")?.unwrap_or(META_BASE_URL))?;
    Ok(MetaConfig {
        url: join(&base, &[version, phone, "messages"])?,
        access_token: access_token.to_owned(),
        default_recipient: default_recipient(config)?.map(str::to_owned),
    })
}

/// The WhatsApp Cloud API.
pub struct MetaAdapter {
    http: Arc<Guarded>,
}

impl MetaAdapter {
    pub fn new(http: Arc<Guarded>) -> Self {
        Self { http }
    }
}

const META: &str = "whatsapp_meta";

/// Classifies a Cloud API error answer: by its error code when the code is one we map, by
/// the HTTP status otherwise.
pub fn meta_failure(resp: &Response) -> DeliveryError {
    let mut err = DeliveryError::from_http(
        resp.status,
        resp.retry_after.as_deref(),
        &resp.body,
        META,
        SystemTime::now(),
    );
    if let Some(e) = meta_error(&resp.body) {
        err.reason = format!("{META}: HTTP {}: ({}) {}", resp.status, e.code, e.message);
        if let Some(retryable) = meta_code_retryable(e.code) {
            err.retryable = retryable;
        }
    }
    err
}

#[async_trait]
impl Adapter for MetaAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::WhatsappMeta
    }

    fn default_rate_limit(
        &self,
        _config: &Map<String, Value>,
        _parsed: &converger_core::cache::Parsed,
    ) -> Option<RateLimit> {
        Some(META_DEFAULT_RATE)
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        meta_config(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let permanent = |e: Invalid| DeliveryError::permanent(format!("{META}: {e}"));
        let cfg = target.config_as(meta_config).map_err(permanent)?;
        let message =
            whatsapp_message(env.payload, cfg.default_recipient.as_deref()).map_err(permanent)?;
        self.http.check_literal(&cfg.url, META)?;
        let req = self
            .http
            .request(reqwest::Method::POST, cfg.url.clone())
            .bearer_auth(&cfg.access_token)
            .header("content-type", "application/json")
            .body(meta_request(&message).to_string());
        let resp = self.http.send(req, timeout(&target), META).await?;
        if !resp.is_success() {
            return Err(meta_failure(&resp));
        }
        let id = serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .and_then(|v| v.pointer("/messages/0/id")?.as_str().map(str::to_owned));
        Ok(Delivered::Sent(Accepted {
            provider_message_id: id,
            status_code: Some(resp.status),
            response_snippet: Some(converger_core::error::snippet(&resp.body))
                .filter(|s| !s.is_empty()),
        }))
    }
}

struct InfobipConfig {
    url: reqwest::Url,
    api_key: String,
    sender: String,
    notify_url: Option<String>,
    default_recipient: Option<String>,
}

fn infobip_config(config: &Map<String, Value>) -> Result<InfobipConfig, Invalid> {
    const KIND: &str = "whatsapp_infobip";
    keys_allowed(
        config,
        &[
            "base_url",
            "api_key",
            "sender",
            "default_recipient",
            "notify_url",
            "receipt_token",
        ],
        KIND,
    )?;
    let base = base_url(required(config, "base_url", KIND)?)?;
    let sender = required(config, "sender", KIND)?;
    if providers::normalize_phone(sender).is_none() {
        return Err(Invalid::new(
            "sender must be the WhatsApp sender's phone number",
        ));
    }
    let notify_url = string(config, "notify_url")?;
    if let Some(u) = notify_url {
        base_url(u).map_err(|e| e.replace("base_url", "notify_url"))?;
    }
    callback_token(config, "receipt_token")?;
    Ok(InfobipConfig {
        url: join(&base, &["whatsapp", "1", "message", "text"])?,
        api_key: required(config, "api_key", KIND)?.to_owned(),
        sender: sender.to_owned(),
        notify_url: notify_url.map(str::to_owned),
        default_recipient: default_recipient(config)?.map(str::to_owned),
    })
}

/// Infobip's WhatsApp API.
pub struct InfobipAdapter {
    http: Arc<Guarded>,
}

impl InfobipAdapter {
    pub fn new(http: Arc<Guarded>) -> Self {
        Self { http }
    }
}

const INFOBIP: &str = "whatsapp_infobip";

/// Classifies an Infobip error answer by its HTTP status, with Infobip's error id and text
/// as the reason.
pub fn infobip_failure(resp: &Response) -> DeliveryError {
    let mut err = DeliveryError::from_http(
        resp.status,
        resp.retry_after.as_deref(),
        &resp.body,
        INFOBIP,
        SystemTime::now(),
    );
    if let Some((id, text)) = infobip_error(&resp.body) {
        err.reason = format!("{INFOBIP}: HTTP {}: {id}: {text}", resp.status);
        if id == "TOO_MANY_REQUESTS" {
            err.retryable = true;
        }
    }
    err
}

#[async_trait]
impl Adapter for InfobipAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::WhatsappInfobip
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        infobip_config(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let permanent = |e: Invalid| DeliveryError::permanent(format!("{INFOBIP}: {e}"));
        let cfg = target.config_as(infobip_config).map_err(permanent)?;
        let message =
            whatsapp_message(env.payload, cfg.default_recipient.as_deref()).map_err(permanent)?;
        let body = infobip_request(
            &message,
            &cfg.sender,
            env.delivery_id,
            cfg.notify_url.as_deref(),
        )
        .map_err(permanent)?;
        self.http.check_literal(&cfg.url, INFOBIP)?;
        let req = self
            .http
            .request(reqwest::Method::POST, cfg.url.clone())
            .header("authorization", format!("App {}", cfg.api_key))
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(body.to_string());
        let resp = self.http.send(req, timeout(&target), INFOBIP).await?;
        if !resp.is_success() {
            return Err(infobip_failure(&resp));
        }
        let v: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        let snippet = Some(converger_core::error::snippet(&resp.body)).filter(|s| !s.is_empty());
        // Infobip answers 200 with a status; a REJECTED group is a refusal.
        let group = v.pointer("/status/groupName").and_then(Value::as_str);
        if group == Some("REJECTED") {
            let why = v
                .pointer("/status/description")
                .and_then(Value::as_str)
                .unwrap_or("rejected");
            let mut e = DeliveryError::permanent(format!("{INFOBIP}: REJECTED: {why}"));
            e.status = Some(resp.status);
            e.response_snippet = snippet;
            return Err(e);
        }
        let id = v
            .get("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| Some(env.delivery_id.to_owned()));
        Ok(Delivered::Sent(Accepted {
            provider_message_id: id,
            status_code: Some(resp.status),
            response_snippet: snippet,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn callback_tokens_are_at_least_sixteen_characters() {
        let meta = |t: &str| {
            let c = json!({"phone_number_id": "123", "access_token": "x", "verify_token": t});
            meta_config(c.as_object().unwrap_or(&Map::new())).map(|_| ())
        };
        assert!(meta("0123456789abcdef").is_ok());
        assert_eq!(
            meta("x"),
            Err(Invalid::new(
                "`verify_token` must be at least 16 characters"
            ))
        );
        let infobip = |t: &str| {
            let c = json!({"base_url": "https://api.infobip.com", "api_key": "k",
                           "sender": "+15551234567", "receipt_token": t});
            infobip_config(c.as_object().unwrap_or(&Map::new())).map(|_| ())
        };
        assert!(infobip("0123456789abcdef").is_ok());
        assert_eq!(
            infobip("short"),
            Err(Invalid::new(
                "`receipt_token` must be at least 16 characters"
            ))
        );
    }

    fn cfg(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn meta_config_is_validated() {
        let good = cfg(json!({"phone_number_id": "1234", "access_token": "t"}));
        let ok = meta_config(&good).ok().unwrap();
        assert_eq!(
            ok.url.as_str(),
            "https://graph.facebook.com/v21.0/1234/messages"
        );
        let local = cfg(
            json!({"phone_number_id": "1", "access_token": "t", "base_url": "http://127.0.0.1:9/graph/", "api_version": "v19.0"}),
        );
        let local = meta_config(&local).ok().unwrap();
        assert_eq!(
            local.url.as_str(),
            "http://127.0.0.1:9/graph/v19.0/1/messages"
        );
        for bad in [
            json!({"access_token": "t"}),
            json!({"phone_number_id": "1"}),
            json!({"phone_number_id": "abc", "access_token": "t"}),
            json!({"phone_number_id": "1", "access_token": "t", "api_version": "21"}),
            json!({"phone_number_id": "1", "access_token": "t", "base_url": "ftp://x"}),
            json!({"phone_number_id": "1", "access_token": "t", "colour": "red"}),
            json!({"phone_number_id": "1", "access_token": "t", "default_recipient": "x"}),
        ] {
            assert!(meta_config(&cfg(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn infobip_config_is_validated() {
        let good = cfg(
            json!({"base_url": "https://abc.api.infobip.com", "api_key": "k", "sender": "441134960000"}),
        );
        let ok = infobip_config(&good).ok().unwrap();
        assert_eq!(
            ok.url.as_str(),
            "https://abc.api.infobip.com/whatsapp/1/message/text"
        );
        for bad in [
            json!({"api_key": "k", "sender": "441134960000"}),
            json!({"base_url": "https://x", "sender": "441134960000"}),
            json!({"base_url": "https://x", "api_key": "k", "sender": "me"}),
            json!({"base_url": "https://x", "api_key": "k", "sender": "441134960000", "notify_url": "nope"}),
        ] {
            assert!(infobip_config(&cfg(bad.clone())).is_err(), "{bad}");
        }
    }

    fn resp(status: u16, body: &str) -> Response {
        Response {
            status,
            retry_after: None,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn meta_errors_are_classified_by_code_then_status() {
        let throttled = meta_failure(&resp(
            400,
            r#"{"error":{"code":130429,"message":"Rate limit hit"}}"#,
        ));
        assert!(
            throttled.retryable,
            "130429 comes with a 400 but is retryable"
        );
        let invalid = meta_failure(&resp(
            400,
            r#"{"error":{"code":131026,"message":"Undeliverable"}}"#,
        ));
        assert!(!invalid.retryable);
        assert!(invalid.reason.contains("131026"), "{}", invalid.reason);
        let auth = meta_failure(&resp(
            500,
            r#"{"error":{"code":190,"message":"token expired"}}"#,
        ));
        assert!(!auth.retryable);
        assert!(meta_failure(&resp(503, "oops")).retryable);
        assert!(!meta_failure(&resp(404, r#"{"error":{"code":777777}}"#)).retryable);
    }

    #[test]
    fn infobip_errors_are_classified() {
        let e = infobip_failure(&resp(
            401,
            r#"{"requestError":{"serviceException":{"messageId":"UNAUTHORIZED","text":"Invalid login details"}}}"#,
        ));
        assert!(!e.retryable);
        assert!(e.reason.contains("UNAUTHORIZED"));
        assert!(infobip_failure(&resp(429, r#"{"requestError":{"serviceException":{"messageId":"TOO_MANY_REQUESTS","text":"slow down"}}}"#)).retryable);
        assert!(infobip_failure(&resp(500, "")).retryable);
        assert!(!infobip_failure(&resp(400, r#"{"requestError":{"serviceException":{"messageId":"BAD_REQUEST","text":"Bad request"}}}"#)).retryable);
    }
}
