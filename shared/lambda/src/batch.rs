//! One partial-batch helper for every SQS-triggered function: records run concurrently, and
//! only the records whose processing failed unexpectedly are reported back, so SQS redelivers
//! those and nothing else.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use std::future::Future;
use tracing::Instrument;

/// Runs `handle` on every record, at most `concurrency` at once.
pub async fn process<F, Fut, E>(event: SqsEvent, concurrency: usize, handle: F) -> SqsBatchResponse
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let failures: Vec<String> = futures::stream::iter(event.records)
        .map(|record| {
            let id = record.message_id.clone().unwrap_or_default();
            // Every line of the record's work names it, and how often SQS has handed it out.
            let span = tracing::info_span!(
                "sqs_record",
                message_id = %id,
                receive_count = record
                    .attributes
                    .get("ApproximateReceiveCount")
                    .map(String::as_str)
                    .unwrap_or("1"),
            );
            let fut = handle(record);
            async move {
                match fut.await {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::error!(error = %e, "record failed; SQS will redeliver it");
                        Some(id)
                    }
                }
            }
            .instrument(span)
        })
        .buffer_unordered(concurrency.max(1))
        .filter_map(|x| async move { x })
        .collect()
        .await;
    let mut resp = SqsBatchResponse::default();
    resp.set_failures(failures);
    resp
}
