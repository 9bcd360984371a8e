//! The queue-triggered entry points, shared by the Lambda functions and the local runner.

use crate::Pipeline;
use crate::batch;
use crate::ingest::{IngestError, NewActivity};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use converger_core::TenantId;
use converger_store::DeliveryMessage;
use serde::Deserialize;

/// A message on the `activities` queue: an activity submitted asynchronously by a producer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestMessage {
    pub tenant_id: TenantId,
    pub activity: NewActivity,
}

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("message body is not valid: {0}")]
    Body(String),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Attempt(#[from] crate::attempt::AttemptError),
    #[error(transparent)]
    Store(#[from] converger_store::StoreError),
    #[error(transparent)]
    Replay(#[from] crate::replay::ReplayError),
}

fn body<T: serde::de::DeserializeOwned>(m: &SqsMessage) -> Result<T, HandlerError> {
    let b = m
        .body
        .as_deref()
        .ok_or_else(|| HandlerError::Body("empty".into()))?;
    serde_json::from_str(b).map_err(|e| HandlerError::Body(e.to_string()))
}

impl Pipeline {
    /// The `deliver` function: one attempt per record.
    pub async fn deliver_batch(&self, event: SqsEvent) -> SqsBatchResponse {
        batch::process(event, self.config.batch_concurrency, |m| async move {
            let msg: DeliveryMessage = body(&m)?;
            let report = self.attempt(msg).await?;
            tracing::debug!(?report, "attempt done");
            Ok::<(), HandlerError>(())
        })
        .await
    }

    /// The `replay` function: one chunk of a replay job per record.
    pub async fn replay_batch(&self, event: SqsEvent) -> SqsBatchResponse {
        batch::process(event, 1, |m| async move {
            let msg: converger_store::ReplayMessage = body(&m)?;
            self.run_replay_job(&msg.job_id).await?;
            Ok::<(), HandlerError>(())
        })
        .await
    }

    /// The `probe` function: one flow job (probe, release) per record.
    pub async fn flow_batch(&self, event: SqsEvent) -> SqsBatchResponse {
        batch::process(event, self.config.batch_concurrency, |m| async move {
            let job: converger_store::FlowJob = body(&m)?;
            self.flow_job(&job).await?;
            Ok::<(), HandlerError>(())
        })
        .await
    }

    /// The `ingest` function: one activity per record. An activity that can never be accepted
    /// (invalid, unknown channel) is logged and dropped; storage failures are redelivered.
    pub async fn ingest_batch(&self, event: SqsEvent) -> SqsBatchResponse {
        batch::process(event, self.config.batch_concurrency, |m| {
            self.ingest_record(m)
        })
        .await
    }

    async fn ingest_record(&self, m: SqsMessage) -> Result<(), HandlerError> {
        let msg: IngestMessage = body(&m)?;
        let Some(tenant) = self.store.get_tenant(&msg.tenant_id).await? else {
            tracing::error!(tenant_id = %msg.tenant_id, "activity for an unknown tenant dropped");
            return Ok(());
        };
        match self.ingest(&tenant, msg.activity).await {
            Ok(done) => {
                tracing::info!(activity_id = %done.activity.id, deliveries = done.deliveries.len(), "activity ingested");
                Ok(())
            }
            Err(e @ (IngestError::Store(_) | IngestError::Queue(_))) => Err(e.into()),
            Err(e) => {
                tracing::error!(tenant_id = %tenant.id, error = %e, "activity refused and dropped");
                Ok(())
            }
        }
    }
}
