//! Channel adapters: one trait, one module per channel type. An adapter turns one delivery into
//! one request to the outside world and classifies what came back.

pub mod echo;
pub mod webhook;

use async_trait::async_trait;
use converger_core::{ChannelType, DeliveryError};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What an adapter needs to know about the message.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    pub delivery_id: &'a str,
    pub activity_id: &'a str,
    pub conversation_id: &'a str,
    pub seq: u64,
    pub payload: &'a Value,
    /// 1-based number of this attempt.
    pub attempt: u32,
}

/// What an adapter needs to know about the channel.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub channel_id: &'a str,
    pub config: &'a Map<String, Value>,
    pub signing_secret: &'a str,
    /// The effective policy's `timeout_ms`.
    pub timeout: Duration,
}

/// A request the provider accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    pub provider_message_id: Option<String>,
    pub status_code: Option<u16>,
    pub response_snippet: Option<String>,
}

#[async_trait]
pub trait Adapter: Send + Sync {
    fn kind(&self) -> ChannelType;

    /// The adapter's layer of the retry policy (see `RetryPolicy::effective`).
    fn default_policy(&self) -> Map<String, Value> {
        Map::new()
    }

    /// The channel's outbound rate limit when it sets none (WhatsApp's Cloud API: 80/s).
    fn default_rate_limit(&self) -> Option<converger_core::RateLimit> {
        None
    }

    /// Checks a channel's configuration when it is written.
    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), String>;

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Accepted, DeliveryError>;
}

/// The adapters this build supports, by channel type.
#[derive(Clone)]
pub struct Adapters {
    all: Vec<Arc<dyn Adapter>>,
}

impl Adapters {
    pub fn new(all: Vec<Arc<dyn Adapter>>) -> Self {
        Self { all }
    }

    /// The standard set: webhook (with the given destination allowlist) and echo.
    pub fn standard(allow: converger_core::net::Allowlist) -> Result<Self, String> {
        Ok(Self::new(vec![
            Arc::new(webhook::WebhookAdapter::new(allow)?),
            Arc::new(echo::EchoAdapter),
        ]))
    }

    pub fn get(&self, kind: ChannelType) -> Option<&Arc<dyn Adapter>> {
        self.all.iter().find(|a| a.kind() == kind)
    }
}
