//! The echo channel: accepts every delivery in-process (no network), for trying the pipeline
//! and for tests.

use crate::{Accepted, Adapter, Envelope, Target};
use async_trait::async_trait;
use converger_core::{ChannelType, DeliveryError};
use serde_json::{Map, Value};

pub struct EchoAdapter;

#[async_trait]
impl Adapter for EchoAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Echo
    }

    fn validate_config(&self, _config: &Map<String, Value>) -> Result<(), String> {
        Ok(())
    }

    async fn deliver(&self, env: Envelope<'_>, _t: Target<'_>) -> Result<Accepted, DeliveryError> {
        Ok(Accepted {
            provider_message_id: Some(format!("echo:{}", env.delivery_id)),
            status_code: None,
            response_snippet: None,
        })
    }
}
