//! Builds the pipeline on the AWS backend from the environment: once per process.

use crate::{Pipeline, PipelineConfig};
use converger_adapters::Adapters;
use converger_store::aws::Clients;
use converger_store::dynamo::DynamoStore;
use converger_store::events::EventBridgeEvents;
use converger_store::sqs::SqsQueue;
use converger_store::{ApiGatewaySockets, Resources};
use std::sync::Arc;

pub async fn aws_pipeline(
    clients: &Clients,
    res: &Resources,
    config: PipelineConfig,
) -> Result<Pipeline, String> {
    let store = DynamoStore::new(clients.dynamodb.clone(), res.clone())
        .with_serial_transactions(config.serial_transactions);
    let queue = SqsQueue::new(clients.sqs.clone(), res)
        .await
        .map_err(|e| e.to_string())?;
    let events = EventBridgeEvents::new(clients.eventbridge.clone(), res.bus.clone());
    let adapters = Adapters::standard(config.allowlist.clone())?;
    Ok(Pipeline::new(
        Arc::new(store),
        Arc::new(queue),
        Arc::new(events),
        adapters,
        config,
    ))
}

/// Lets the pipeline push to websocket clients through the WebSocket API's management
/// endpoint, when there is one. Only the functions that run attempts or answer sockets
/// (deliver, probe, websocket) call it, so the others do not carry its client.
pub fn with_websockets(pipeline: Pipeline, clients: &Clients) -> Pipeline {
    match &clients.websocket_management_url {
        Some(url) => pipeline.with_sockets(Arc::new(ApiGatewaySockets::new(&clients.config, url))),
        None => pipeline,
    }
}

/// The pipeline a Lambda function uses: names and settings from its environment.
pub async fn from_env() -> Result<Pipeline, String> {
    let config = PipelineConfig::from_env().map_err(|e| e.to_string())?;
    let clients = Clients::from_env().await;
    aws_pipeline(&clients, &Resources::from_env(), config).await
}

/// [`from_env`] with websocket pushes ([`with_websockets`]).
pub async fn from_env_with_websockets() -> Result<Pipeline, String> {
    let config = PipelineConfig::from_env().map_err(|e| e.to_string())?;
    let clients = Clients::from_env().await;
    let pipeline = aws_pipeline(&clients, &Resources::from_env(), config).await?;
    Ok(with_websockets(pipeline, &clients))
}

/// JSON logs for Lambda (CloudWatch), plain ones elsewhere; `RUST_LOG` filters.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .without_time()
        .try_init();
}
