//! Channel adapters: one trait, one module per channel type. An adapter turns one delivery into
//! one request to the outside world and classifies what came back.

use converger_core::Invalid;

pub mod aws;
mod config;
pub mod echo;
pub mod email;
pub mod http;
pub mod oauth2;
pub mod rabbitmq;
pub mod slack;
pub mod webhook;
pub mod websocket;
pub mod whatsapp;

use async_trait::async_trait;
use converger_core::{ChannelId, ChannelType, DeliveryError};
/// Why the adapters' HTTP client could not be built (its TLS backend did not start).
pub use reqwest::Error as HttpClientError;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What an adapter needs to know about the message, and the platform services it may use.
#[derive(Clone, Copy)]
pub struct Envelope<'a> {
    pub delivery_id: &'a str,
    pub tenant_id: &'a str,
    pub activity_id: &'a str,
    pub conversation_id: &'a str,
    pub seq: u64,
    /// The activity's event type, if it was sent by one.
    pub event_type: Option<&'a str>,
    /// When the activity was ingested (RFC 3339).
    pub created_at: &'a str,
    pub payload: &'a Value,
    /// The channels the activity targets.
    pub channel_ids: &'a [ChannelId],
    /// 1-based number of this attempt.
    pub attempt: u32,
    /// How many times the delivery was replayed (0 before its first replay).
    pub replays: u32,
    /// This attempt's W3C `traceparent` (a new span of the activity's trace) and the
    /// producer's `tracestate`, if the activity has a trace.
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
    pub services: &'a dyn Services,
}

/// The parts of the activity a message's body is made of.
pub(crate) fn body_parts<'a>(env: &Envelope<'a>) -> converger_core::payload::BodyParts<'a> {
    converger_core::payload::BodyParts {
        activity_id: env.activity_id,
        seq: env.seq,
        conversation_id: env.conversation_id,
        event_type: env.event_type,
        created_at: env.created_at,
        payload: env.payload,
    }
}

/// A bot's reply to post into a conversation.
#[derive(Debug, Clone)]
pub struct Reply<'a> {
    pub tenant_id: &'a str,
    pub conversation_id: &'a str,
    /// The delivery that answers: the reply's id is derived from it, so a retried attempt
    /// posts the same reply once.
    pub delivery_id: &'a str,
    /// Where the reply goes (the pipeline drops echo channels from it: no loops).
    pub channel_ids: &'a [ChannelId],
    pub payload: Value,
}

/// The outcome of pushing one frame to one websocket connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    Sent,
    /// The connection is gone (and forgotten).
    Gone,
}

/// What the platform offers adapters beyond the network: posting into a conversation and
/// the websocket connections of a channel. The pipeline implements it.
#[async_trait]
pub trait Services: Send + Sync {
    /// Posts a reply activity; returns its id.
    async fn post_reply(&self, reply: Reply<'_>) -> Result<String, DeliveryError>;
    /// The open connections of a websocket channel.
    async fn connections(&self, channel_id: &str) -> Result<Vec<String>, DeliveryError>;
    /// Pushes one frame to one connection.
    async fn push(&self, connection_id: &str, frame: &[u8]) -> Result<Push, DeliveryError>;
    /// Hands one message of a tenant to the mail service; its message id. Refused for good
    /// unless the sender is one of the tenant's identities.
    async fn send_email(
        &self,
        tenant_id: &str,
        email: &converger_core::email::Email,
    ) -> Result<String, DeliveryError>;
    /// Sends one message into a tenant's own AWS account as the channel's role, with the
    /// tenant's external id; what the service answered.
    async fn send_to_aws(
        &self,
        tenant_id: &str,
        role: &converger_core::aws::Role,
        message: &converger_core::aws::AwsMessage<'_>,
    ) -> Result<converger_core::aws::AwsReceipt, DeliveryError>;
}

/// What an attempt achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The provider accepted the message.
    Sent(Accepted),
    /// Handed off to a client that has not confirmed it (websocket with no client, or with
    /// `require_ack`): the delivery stays pending, not retried, until acknowledged.
    HandedOff(Accepted),
}

/// What an adapter needs to know about the channel.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub channel_id: &'a str,
    pub config: &'a Map<String, Value>,
    /// What the adapter parsed of `config` (the channel's `parsed_config`).
    pub parsed: &'a converger_core::cache::Parsed,
    /// The secrets that sign the request: the current one, then those a rotation is
    /// retiring (each gives one signature of the `webhook-signature` header).
    pub signing_secrets: &'a [&'a str],
    /// The effective policy's `timeout_ms`.
    pub timeout: Duration,
}

impl Target<'_> {
    /// The channel's `config` as `parse` reads it: parsed by the channel's first delivery on
    /// this copy of the channel, kept for the others.
    pub(crate) fn config_as<T: Send + Sync + 'static>(
        &self,
        parse: impl FnOnce(&Map<String, Value>) -> Result<T, Invalid>,
    ) -> Result<Arc<T>, Invalid> {
        self.parsed.get_or_make(|| parse(self.config))
    }
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
    fn default_policy(&self) -> converger_core::PolicyLayer {
        converger_core::PolicyLayer::default()
    }

    /// The channel's outbound rate limit when it sets none (WhatsApp's Cloud API: 80/s; a
    /// FIFO queue: 300/s), given its `config` (and what its deliveries parsed of it).
    fn default_rate_limit(
        &self,
        _config: &Map<String, Value>,
        _parsed: &converger_core::cache::Parsed,
    ) -> Option<converger_core::RateLimit> {
        None
    }

    /// Checks a channel's configuration when it is written.
    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid>;

    /// The configuration as it is stored, once checked: secrets the platform keeps sealed
    /// (a client certificate's private key) are sealed here.
    fn seal_config(&self, config: Map<String, Value>) -> Result<Map<String, Value>, Invalid> {
        Ok(config)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError>;
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

    /// The standard set: webhook, the WhatsApp providers and Slack (sharing one HTTP client
    /// with the given destination allowlist), echo, websocket, email and the four AWS types.
    /// Every adapter, over one HTTP client guarded by `allow`; fails only when the TLS
    /// backend cannot start.
    pub fn standard(allow: converger_core::net::Allowlist) -> Result<Self, HttpClientError> {
        Self::standard_keyed(allow, None)
    }

    /// [`Self::standard`] with the deployment's channel key, which seals and opens webhook
    /// channels' client certificates (without it they are refused).
    pub fn standard_keyed(
        allow: converger_core::net::Allowlist,
        key: Option<converger_core::mtls::ChannelKey>,
    ) -> Result<Self, HttpClientError> {
        let rabbitmq = rabbitmq::RabbitMqAdapter::new(Arc::new(allow.clone()));
        let http = Arc::new(http::Guarded::new(allow)?);
        Ok(Self::new(vec![
            Arc::new(webhook::WebhookAdapter::new(http.clone(), key)),
            Arc::new(whatsapp::MetaAdapter::new(http.clone())),
            Arc::new(whatsapp::InfobipAdapter::new(http.clone())),
            Arc::new(slack::SlackAdapter::new(http)),
            Arc::new(echo::EchoAdapter),
            Arc::new(websocket::WebsocketAdapter),
            Arc::new(email::EmailAdapter),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::Sqs)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::EventBridge)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::Kinesis)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::Sns)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::Firehose)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::StepFunctions)),
            Arc::new(aws::AwsAdapter(converger_core::aws::Service::S3)),
            Arc::new(rabbitmq),
        ]))
    }

    pub fn get(&self, kind: ChannelType) -> Option<&Arc<dyn Adapter>> {
        self.all.iter().find(|a| a.kind() == kind)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use converger_core::{PolicyLayer, RateLimit, RetryPolicy};

    fn standard() -> Adapters {
        Adapters::standard(converger_core::net::Allowlist::default()).unwrap()
    }

    /// The reference's per-type defaults: a webhook waits 10 s for its answer (a channel's
    /// `timeout_ms` overrides it), WhatsApp through Meta's Cloud API sends at most 80/s.
    #[test]
    fn each_channel_type_brings_its_defaults() {
        let a = standard();
        let none = PolicyLayer::default();
        let webhook = a.get(ChannelType::Webhook).unwrap().default_policy();
        assert_eq!(
            RetryPolicy::effective(&none, &webhook, &none).timeout_ms,
            10_000
        );
        let own = PolicyLayer {
            timeout_ms: Some(2_500),
            ..PolicyLayer::default()
        };
        assert_eq!(
            RetryPolicy::effective(&none, &webhook, &own).timeout_ms,
            2_500
        );
        // Without an adapter layer, the policy's own default.
        let meta = a.get(ChannelType::WhatsappMeta).unwrap();
        assert_eq!(
            RetryPolicy::effective(&none, &meta.default_policy(), &none).timeout_ms,
            RetryPolicy::default().timeout_ms
        );
        assert_eq!(
            meta.default_rate_limit(&Map::new(), &Default::default()),
            Some("80/s".parse::<RateLimit>().unwrap())
        );
        for kind in [
            ChannelType::Webhook,
            ChannelType::WhatsappInfobip,
            ChannelType::Echo,
        ] {
            assert_eq!(
                a.get(kind)
                    .unwrap()
                    .default_rate_limit(&Map::new(), &Default::default()),
                None,
                "{kind}"
            );
        }
    }
}
