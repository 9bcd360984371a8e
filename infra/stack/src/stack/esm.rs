//! Lambda's SQS event source mappings, played from their deployed settings: long-polling
//! pollers per mapping, at most its maximum concurrency of batches, partial batch responses.

use super::StackOptions;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use converger_pipeline::Pipeline;
use converger_store::counter::RequestCounter;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

#[derive(Clone)]
pub(crate) enum Function {
    Ingest(Arc<Pipeline>),
    Deliver(Arc<Pipeline>),
    Replay(Arc<Pipeline>),
    Probe(Arc<Pipeline>),
    Stream(Arc<Pipeline>),
}

/// One deployed event source mapping.
#[derive(Clone)]
pub(crate) struct Mapping {
    pub(crate) url: String,
    pub(crate) max_concurrency: usize,
    pub(crate) batch_size: i32,
    /// `ReportBatchItemFailures`: only the reported records return to the queue; without it,
    /// any failure returns the whole batch.
    pub(crate) partial_failures: bool,
}

/// Plays one SQS event source mapping: long-polls batches of its batch size with several
/// staggered pollers, runs at most its maximum concurrency of batches at once, deletes what
/// succeeded and leaves failures to reappear after their visibility timeout.
pub(crate) fn spawn_pollers(
    sqs: aws_sdk_sqs::Client,
    mapping: Mapping,
    opts: &StackOptions,
    stop: watch::Receiver<bool>,
    function: Function,
) -> Vec<JoinHandle<()>> {
    let permits = Arc::new(Semaphore::new(mapping.max_concurrency));
    let n = opts.pollers_per_queue.max(1);
    (0..n)
        .map(|i| {
            let offset = Duration::from_millis(1000 * i as u64 / n as u64);
            spawn_poller(
                Poller {
                    sqs: sqs.clone(),
                    mapping: mapping.clone(),
                    counter: opts.counter.clone(),
                    invocations: opts.invocations.clone(),
                },
                permits.clone(),
                offset,
                opts.poll_wait_s,
                stop.clone(),
                function.clone(),
            )
        })
        .collect()
}

/// One queue's poller: its client and, in the `requests` benchmark, the counter its receives
/// and deletes are added to.
#[derive(Clone)]
struct Poller {
    sqs: aws_sdk_sqs::Client,
    mapping: Mapping,
    counter: Option<RequestCounter>,
    /// In the `cost` benchmark: each batch's invocation and how long it ran.
    invocations: Option<super::invocations::Invocations>,
}

impl Poller {
    fn count(&self, target: &str) {
        if let Some(c) = &self.counter {
            c.record(target, None);
        }
    }
}

fn spawn_poller(
    poller: Poller,
    permits: Arc<Semaphore>,
    offset: Duration,
    wait_s: i32,
    mut stop: watch::Receiver<bool>,
    function: Function,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(offset).await;
        loop {
            if *stop.borrow() {
                break;
            }
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let recv = poller
                .sqs
                .receive_message()
                .queue_url(&poller.mapping.url)
                .max_number_of_messages(poller.mapping.batch_size)
                .wait_time_seconds(wait_s)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .customize()
                .config_override(
                    aws_sdk_sqs::config::Builder::default()
                        .timeout_config(long_poll_timeouts(&poller.sqs, wait_s)),
                )
                .send();
            let out = tokio::select! {
                r = recv => r,
                _ = stop.changed() => break,
            };
            let messages = match out {
                Ok(o) => o.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), queue = %poller.mapping.url, "receive failed");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            if messages.is_empty() {
                poller.count("esm.EmptyReceive");
                continue;
            }
            poller.count("AmazonSQS.ReceiveMessage");
            let poller = poller.clone();
            let function = function.clone();
            tokio::spawn(async move {
                let _permit = permit;
                invoke(&poller, messages, &function).await;
            });
        }
    })
}

/// A long poll's timeouts: the client's own, each made longer by the wait, since an attempt
/// takes the whole wait when the queue is empty. With the clients' 10 s attempt timeout, a
/// 10 s poll whose answer came a moment late was given up on and sent again, and a message the
/// emulator had handed to the abandoned poll stayed hidden for the queue's visibility timeout
/// (minutes): a retry that never came, in a stack with no sweeper to find it.
fn long_poll_timeouts(
    sqs: &aws_sdk_sqs::Client,
    wait_s: i32,
) -> aws_config::timeout::TimeoutConfig {
    let wait = Duration::from_secs(u64::try_from(wait_s).unwrap_or(0));
    let own = sqs
        .config()
        .timeout_config()
        .cloned()
        .unwrap_or_else(|| aws_config::timeout::TimeoutConfig::builder().build());
    let mut longer = own.to_builder();
    if let Some(t) = own.operation_attempt_timeout() {
        longer.set_operation_attempt_timeout(Some(t + wait));
    }
    if let Some(t) = own.operation_timeout() {
        longer.set_operation_timeout(Some(t + wait));
    }
    longer.build()
}

async fn invoke(poller: &Poller, messages: Vec<aws_sdk_sqs::types::Message>, function: &Function) {
    let mut handles = Vec::with_capacity(messages.len());
    let mut event = SqsEvent::default();
    for m in messages {
        let mut rec = SqsMessage::default();
        rec.message_id = m.message_id.clone();
        rec.receipt_handle = m.receipt_handle.clone();
        rec.body = m.body.clone();
        rec.md5_of_body = m.md5_of_body.clone();
        rec.attributes = m
            .attributes
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.as_str().to_owned(), v))
            .collect();
        rec.event_source = Some("aws:sqs".into());
        handles.push((
            m.message_id.unwrap_or_default(),
            m.receipt_handle.unwrap_or_default(),
        ));
        event.records.push(rec);
    }
    let started = std::time::Instant::now();
    let (resp, logical) = match function {
        Function::Ingest(p) => (
            converger_lambda::handlers::ingest_batch(p, event).await,
            crate::cfn::function::INGEST,
        ),
        Function::Deliver(p) => (
            converger_lambda::handlers::deliver_batch(p, event).await,
            crate::cfn::function::DELIVER,
        ),
        Function::Replay(p) => (
            converger_lambda::handlers::replay_batch(p, event).await,
            crate::cfn::function::REPLAY,
        ),
        Function::Probe(p) => (
            converger_lambda::handlers::flow_batch(p, event).await,
            crate::cfn::function::PROBE,
        ),
        Function::Stream(p) => (
            converger_lambda::handlers::stream_batch(p, event).await,
            crate::cfn::function::STREAM,
        ),
    };
    if let Some(i) = &poller.invocations {
        i.record(logical, started.elapsed());
    }
    let failed: std::collections::HashSet<String> = resp
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    if !failed.is_empty() && !poller.mapping.partial_failures {
        // Without partial batch responses a failure returns the whole batch.
        return;
    }
    let done: Vec<DeleteMessageBatchRequestEntry> = handles
        .into_iter()
        .enumerate()
        .filter(|(_, (id, _))| !failed.contains(id))
        .filter_map(|(i, (_, rh))| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(rh)
                .build()
                .ok()
        })
        .collect();
    if done.is_empty() {
        return;
    }
    poller.count("AmazonSQS.DeleteMessageBatch");
    if let Err(e) = poller
        .sqs
        .delete_message_batch()
        .queue_url(&poller.mapping.url)
        .set_entries(Some(done))
        .send()
        .await
    {
        tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "delete failed; messages will be redelivered");
    }
}
