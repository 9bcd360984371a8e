//! Slack channels (`slack`): the Web API's `chat.postMessage`, or an incoming webhook. The
//! message shape and the error classification are rules of `converger_core::slack`; this
//! module does the HTTP.
//!
//! `config`: either `token` (a bot token with `chat:write`) and `channel` (the channel's id),
//! with `base_url` (default [`SLACK_BASE_URL`]); or `webhook_url` (an incoming webhook).

use converger_core::Invalid;

use crate::config::{base_url, join, keys_allowed, string, timeout};
use crate::http::{Guarded, Response};
use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::slack::{self, Answer};
use converger_core::{ChannelType, DeliveryError, RateLimit};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::SystemTime;

pub const SLACK_BASE_URL: &str = "https://slack.com";
/// Slack's guidance for posting to one channel: about one message a second.
pub const SLACK_DEFAULT_RATE: RateLimit = RateLimit {
    count: 1,
    per_ms: 1000,
};

const SLACK: &str = "slack";

enum Mode {
    WebApi {
        url: reqwest::Url,
        token: String,
        channel: String,
    },
    Webhook {
        url: reqwest::Url,
    },
}

fn mode(config: &Map<String, Value>) -> Result<Mode, Invalid> {
    keys_allowed(
        config,
        &["token", "channel", "base_url", "webhook_url"],
        SLACK,
    )?;
    match (string(config, "token")?, string(config, "webhook_url")?) {
        (Some(token), None) => {
            if !token.starts_with("xox") {
                return Err(Invalid::new("`token` must be a Slack token (`xoxb-...`)"));
            }
            let channel = string(config, "channel")?
                .ok_or("slack config with a `token` needs `channel` (the channel's id)")?;
            let base = base_url(string(config, "base_url")?.unwrap_or(SLACK_BASE_URL))?;
            Ok(Mode::WebApi {
                url: join(&base, &["api", "chat.postMessage"])?,
                token: token.to_owned(),
                channel: channel.to_owned(),
            })
        }
        (None, Some(hook)) => {
            if config.contains_key("channel") || config.contains_key("base_url") {
                return Err(
                    "an incoming webhook posts to its own channel: no `channel` or `base_url`"
                        .into(),
                );
            }
            let url = base_url(hook).map_err(|e| e.replace("base_url", "webhook_url"))?;
            Ok(Mode::Webhook { url })
        }
        _ => Err(Invalid::new(
            "slack config needs either `token` and `channel`, or `webhook_url`",
        )),
    }
}

/// An answer that is not a posted message, classified by `core::slack::failure_retryable`
/// (with its `Retry-After`).
pub fn slack_failure(resp: &Response, code: Option<&str>) -> DeliveryError {
    let mut err = DeliveryError::from_http(
        resp.status,
        resp.retry_after.as_deref(),
        &resp.body,
        SLACK,
        SystemTime::now(),
    );
    if let Some(code) = code {
        err.reason = format!("{SLACK}: HTTP {}: {code}", resp.status);
    }
    err.retryable = slack::failure_retryable(resp.status, code);
    err
}

/// Slack.
pub struct SlackAdapter {
    http: Arc<Guarded>,
}

impl SlackAdapter {
    pub fn new(http: Arc<Guarded>) -> Self {
        Self { http }
    }
}

#[async_trait]
impl Adapter for SlackAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Slack
    }

    fn default_rate_limit(
        &self,
        _config: &Map<String, Value>,
        _parsed: &converger_core::cache::Parsed,
    ) -> Option<RateLimit> {
        Some(SLACK_DEFAULT_RATE)
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        mode(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let permanent = |e: Invalid| DeliveryError::permanent(format!("{SLACK}: {e}"));
        let mode = target.config_as(mode).map_err(permanent)?;
        let (url, token, channel) = match &*mode {
            Mode::WebApi {
                url,
                token,
                channel,
            } => (url.clone(), Some(token.as_str()), Some(channel.as_str())),
            Mode::Webhook { url } => (url.clone(), None, None),
        };
        let body = slack::message(env.payload, channel).map_err(permanent)?;
        self.http.check_literal(&url, SLACK)?;
        // An incoming webhook's path is its secret: kept out of transport errors.
        let secret_path = token.is_none().then(|| url.path().to_owned());
        let mut req = self
            .http
            .request(reqwest::Method::POST, url)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string());
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = match self.http.send(req, timeout(&target), SLACK).await {
            Ok(r) => r,
            Err(mut e) => {
                if let Some(p) = secret_path.filter(|p| p.len() > 1) {
                    e.reason = e.reason.replace(&p, "/[REDACTED]");
                }
                return Err(e);
            }
        };
        let snippet = Some(converger_core::error::snippet(&resp.body)).filter(|s| !s.is_empty());
        if token.is_none() {
            // An incoming webhook answers `ok`, or an error code as plain text.
            if resp.is_success() {
                return Ok(Delivered::Sent(Accepted {
                    provider_message_id: None,
                    status_code: Some(resp.status),
                    response_snippet: snippet,
                }));
            }
            return Err(slack_failure(
                &resp,
                slack::webhook_error(&resp.body).as_deref(),
            ));
        }
        match slack::web_api_answer(&resp.body) {
            Some(Answer::Posted { ts, .. }) if resp.is_success() => Ok(Delivered::Sent(Accepted {
                provider_message_id: Some(ts),
                status_code: Some(resp.status),
                response_snippet: snippet,
            })),
            Some(Answer::Refused(code)) => Err(slack_failure(&resp, Some(&code))),
            _ if resp.is_success() => {
                // A 200 that is not Slack's answer (a proxy's page): whether it posted is
                // unknown, so it is tried again.
                let mut e = slack_failure(&resp, None);
                e.reason = format!("{SLACK}: HTTP {}: not a Web API answer", resp.status);
                e.retryable = true;
                Err(e)
            }
            _ => Err(slack_failure(&resp, None)),
        }
    }
}
