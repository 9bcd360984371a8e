//! Email channels (`email`): the message built by `converger_core::email` from the activity,
//! handed to the platform's mail service (Amazon SES v2). `config`: `from` (a verified SES
//! identity the tenant holds), and the defaults `to`, `reply_to` and `subject`.

use converger_core::Invalid;

use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use async_trait::async_trait;
use converger_core::email::{self, CHANNEL_TAG, DELIVERY_TAG};
use converger_core::{ChannelType, DeliveryError};
use serde_json::{Map, Value};

pub struct EmailAdapter;

#[async_trait]
impl Adapter for EmailAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Email
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        email::settings(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let permanent = |e: Invalid| DeliveryError::permanent(format!("email: {e}"));
        let settings = target.config_as(email::settings).map_err(permanent)?;
        let mut message = email::message(env.payload, &settings).map_err(permanent)?;
        // SES copies the tags into every event of the message: its bounce finds the channel.
        message.tags = vec![
            (CHANNEL_TAG.to_owned(), target.channel_id.to_owned()),
            (DELIVERY_TAG.to_owned(), env.delivery_id.to_owned()),
        ];
        let id = tokio::time::timeout(
            target.timeout,
            env.services.send_email(env.tenant_id, &message),
        )
        .await
        .map_err(|_| DeliveryError::timeout(target.timeout.as_millis(), "email"))??;
        Ok(Delivered::Sent(Accepted {
            provider_message_id: Some(id),
            status_code: None,
            response_snippet: None,
        }))
    }
}
