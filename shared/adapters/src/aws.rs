//! AWS channels (`aws_sqs`, `aws_eventbridge`, `aws_kinesis`, `aws_sns`): one message into the
//! tenant's own queue, bus, stream or topic, sent as the role the channel names (see
//! `converger_core::aws`). The body is a webhook's (`config.body`), signed the same way; the
//! platform's services assume the role and send.

use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::aws::{self, AwsMessage, Service};
use converger_core::signing::signature_header;
use converger_core::{ChannelType, DeliveryError, Invalid, RateLimit};
use serde_json::{Map, Value};
use std::time::SystemTime;

/// The adapter of one AWS channel type.
pub struct AwsAdapter(pub Service);

#[async_trait]
impl Adapter for AwsAdapter {
    fn kind(&self) -> ChannelType {
        self.0.channel_type()
    }

    fn default_rate_limit(
        &self,
        config: &Map<String, Value>,
        parsed: &converger_core::cache::Parsed,
    ) -> Option<RateLimit> {
        parsed
            .get_or_make(|| aws::channel_config(self.0, config))
            .ok()
            .and_then(|c| aws::default_rate_limit(&c.destination))
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        aws::channel_config(self.0, config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let service = self.0;
        let label = service.channel_type().as_str();
        let cfg = target
            .config_as(|c| aws::channel_config(service, c))
            .map_err(|e| DeliveryError::permanent(format!("{label}: {e}")))?;
        let body = cfg.body.value(crate::body_parts(&env));
        let body_text = serde_json::to_string(&body)
            .map_err(|e| DeliveryError::permanent(format!("{label}: {e}")))?;
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let signature = signature_header(
            target.signing_secrets,
            env.delivery_id,
            ts,
            body_text.as_bytes(),
        )
        .map_err(|e| DeliveryError::permanent(format!("{label}: {e}")))?;
        let out = aws::outgoing(
            service,
            body_text,
            &aws::Signed {
                delivery_id: env.delivery_id,
                timestamp: ts,
                signature: &signature,
                event_type: env.event_type,
                conversation_id: env.conversation_id,
                traceparent: env.traceparent,
                tracestate: env.tracestate,
            },
        );
        aws::check_size(service, out.size)
            .map_err(|e| DeliveryError::permanent(format!("{label}: {e}")))?;
        let dedup = aws::deduplication_id(env.delivery_id, env.replays);
        let message = AwsMessage {
            destination: &cfg.destination,
            body: &out.text,
            attributes: &out.attributes,
            detail_type: &out.detail_type,
            group_id: &out.group_id,
            deduplication_id: &dedup,
            trace_header: out.trace_header.as_deref(),
        };
        let receipt = tokio::time::timeout(
            target.timeout,
            env.services.send_to_aws(env.tenant_id, &cfg.role, &message),
        )
        .await
        .map_err(|_| DeliveryError::timeout(target.timeout.as_millis(), label))??;
        // The attempt log keeps the service's answer. The id is not the delivery's
        // `provider_message_id`: no receipt comes back to look it up by, and setting it would
        // write the receipts index once per delivery.
        let snippet = match (&receipt.message_id, &receipt.sequence_number) {
            (Some(id), Some(seq)) => Some(format!("message id {id}, sequence number {seq}")),
            (Some(id), None) => Some(format!("message id {id}")),
            (None, Some(seq)) => Some(format!("sequence number {seq}")),
            (None, None) => None,
        };
        Ok(Delivered::Sent(Accepted {
            provider_message_id: None,
            status_code: None,
            response_snippet: snippet,
        }))
    }
}
