//! The SQS backend of [`Queue`]: one queue per tier, each with its dead-letter queue.

use crate::resources::{QueueDef, Resources, tier_queue};
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use converger_core::Tier;
use converger_ports::{DeliveryMessage, FlowJob, ReplayMessage};
use converger_ports::{Queue, QueueDepth, QueueError};

pub use converger_ports::MAX_DELAY_S;

#[derive(Clone, Debug)]
pub struct SqsQueue {
    client: Client,
    high: String,
    default: String,
    bulk: String,
    replay: String,
    probe: String,
    /// The tier queues' dead-letter queues (high, default, bulk), where the environment
    /// names them: only the function that reports queue depths is given them.
    dlqs: [Option<String>; 3],
}

impl SqsQueue {
    /// The queues named by `res` (the function's environment as the template sets it).
    pub fn new(client: Client, res: &Resources) -> Result<Self, QueueError> {
        let url = |def: QueueDef| {
            res.queue_url(&def)
                .map(str::to_owned)
                .map_err(|e| QueueError::new(e.to_string()))
        };
        let dlq = |tier: Tier| res.dlq_urls.get(tier_queue(tier).name).cloned();
        Ok(Self {
            high: url(tier_queue(Tier::High))?,
            default: url(tier_queue(Tier::Default))?,
            bulk: url(tier_queue(Tier::Bulk))?,
            replay: url(crate::resources::REPLAY_QUEUE)?,
            probe: url(crate::resources::PROBE_QUEUE)?,
            dlqs: [dlq(Tier::High), dlq(Tier::Default), dlq(Tier::Bulk)],
            client,
        })
    }

    pub fn url(&self, tier: Tier) -> &str {
        match tier {
            Tier::High => &self.high,
            Tier::Default => &self.default,
            Tier::Bulk => &self.bulk,
        }
    }
}

fn body<T: converger_ports::message::QueueMessage>(msg: &T) -> Result<String, QueueError> {
    converger_ports::message::encode(msg).map_err(|e| QueueError::new(e.to_string()))
}

impl SqsQueue {
    async fn depth(&self, name: String, url: &str) -> Result<QueueDepth, QueueError> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(queue_err)?;
        let attrs = out.attributes.unwrap_or_default();
        let n = |a: A| {
            attrs
                .get(&a)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(QueueDepth {
            queue: name,
            visible: n(A::ApproximateNumberOfMessages),
            delayed: n(A::ApproximateNumberOfMessagesDelayed),
            in_flight: n(A::ApproximateNumberOfMessagesNotVisible),
        })
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
        // Each tier queue and its dead-letter queue, as the template named them; all six are
        // asked at once.
        let mut queues: Vec<(String, String)> = Vec::with_capacity(6);
        for (i, tier) in Tier::ALL.iter().enumerate() {
            let name = tier.queue_name();
            let dlq_env = tier_queue(*tier)
                .dlq_env
                .unwrap_or("a dead-letter queue URL");
            let dlq = self.dlqs.get(i).cloned().flatten().ok_or_else(|| {
                QueueError::new(format!(
                    "{dlq_env} is not set: queue depths need the dead-letter queues' URLs"
                ))
            })?;
            queues.push((name.to_owned(), self.url(*tier).to_owned()));
            queues.push((format!("{name}-dlq"), dlq));
        }
        futures::future::try_join_all(
            queues
                .into_iter()
                .map(|(name, url)| async move { self.depth(name, &url).await }),
        )
        .await
    }

    async fn send(&self, msg: &DeliveryMessage, delay_s: u32) -> Result<(), QueueError> {
        let delay = i32::try_from(delay_s.min(MAX_DELAY_S)).unwrap_or(0);
        // The tenant is the message's group: the tier queues are fair queues.
        self.client
            .send_message()
            .queue_url(self.url(msg.tier))
            .message_body(body(msg)?)
            .set_message_group_id(msg.group().map(str::to_owned))
            .delay_seconds(delay)
            .send()
            .await
            .map_err(queue_err)?;
        Ok(())
    }

    async fn send_replay(&self, msg: &ReplayMessage) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(&self.replay)
            .message_body(body(msg)?)
            .send()
            .await
            .map_err(queue_err)?;
        Ok(())
    }

    async fn send_flow(&self, msg: &FlowJob, delay_s: u32) -> Result<(), QueueError> {
        let delay = i32::try_from(delay_s.min(MAX_DELAY_S)).unwrap_or(0);
        self.client
            .send_message()
            .queue_url(&self.probe)
            .message_body(body(msg)?)
            .delay_seconds(delay)
            .send()
            .await
            .map_err(queue_err)?;
        Ok(())
    }

    async fn send_many(&self, msgs: &[DeliveryMessage]) -> Result<(), QueueError> {
        use futures::StreamExt;
        if let [one] = msgs {
            return self.send(one, one.send_delay_s).await;
        }
        // Each body serialized once; batches of ten per tier, several in flight at once (a
        // bulk replay of 10,000 deliveries is 1,000 batches). A watch copy goes in the same
        // batch as its message, with its own delay.
        let mut batches: Vec<(Tier, Vec<Entry>)> = Vec::new();
        for tier in Tier::ALL {
            let bodies = msgs
                .iter()
                .filter(|m| m.tier == tier)
                .map(|m| {
                    Ok(Entry {
                        body: body(m)?,
                        group: m.group().map(str::to_owned),
                        delay_s: m.send_delay_s,
                    })
                })
                .collect::<Result<Vec<_>, QueueError>>()?;
            batches.extend(bodies.chunks(10).map(|c| (tier, c.to_vec())));
        }
        let sends = batches
            .into_iter()
            .map(|(tier, bodies)| self.send_batch(tier, bodies));
        let results: Vec<Result<(), QueueError>> = futures::stream::iter(sends)
            .buffer_unordered(SEND_CONCURRENCY)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// One message of a `SendMessageBatch`.
#[derive(Clone)]
struct Entry {
    body: String,
    group: Option<String>,
    delay_s: u32,
}

/// Batches sent at once by `send_many`.
const SEND_CONCURRENCY: usize = 8;

impl SqsQueue {
    /// One SendMessageBatch of at most ten messages; entries it refuses are sent one by one
    /// and a second refusal is an error.
    async fn send_batch(&self, tier: Tier, bodies: Vec<Entry>) -> Result<(), QueueError> {
        let mut entries = Vec::with_capacity(bodies.len());
        for (i, e) in bodies.iter().enumerate() {
            entries.push(
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(e.body.as_str())
                    .set_message_group_id(e.group.clone())
                    .set_delay_seconds(
                        (e.delay_s > 0)
                            .then(|| i32::try_from(e.delay_s.min(MAX_DELAY_S)).unwrap_or(0)),
                    )
                    .build()
                    .map_err(|e| QueueError::new(e.to_string()))?,
            );
        }
        let out = self
            .client
            .send_message_batch()
            .queue_url(self.url(tier))
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(queue_err)?;
        for failed in out.failed {
            let idx: usize = failed.id.parse().unwrap_or(usize::MAX);
            let Some(e) = bodies.get(idx) else {
                return Err(QueueError::new(format!("batch entry {} failed", failed.id)));
            };
            self.client
                .send_message()
                .queue_url(self.url(tier))
                .message_body(e.body.as_str())
                .set_message_group_id(e.group.clone())
                .delay_seconds(i32::try_from(e.delay_s.min(MAX_DELAY_S)).unwrap_or(0))
                .send()
                .await
                .map_err(queue_err)?;
        }
        Ok(())
    }
}

/// A failed SQS request as a [`QueueError`] that keeps the SDK's error as its source.
fn queue_err<E, R>(e: aws_sdk_sqs::error::SdkError<E, R>) -> QueueError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let message = aws_sdk_sqs::error::DisplayErrorContext(&e).to_string();
    QueueError::service(message, Box::new(e))
}
