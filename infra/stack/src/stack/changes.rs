//! The deliveries table's stream and its event source mapping, played as Lambda plays them:
//! one batch of one shard at a time, in order, in the tumbling window's event shape (which
//! names the shard), the batch's failures handed out again from the first failed record (up
//! to the mapping's retries; then a description of the batch goes to its on-failure queue and
//! the shard goes on past it). On the emulator it reads the stream through DynamoDB Streams'
//! API (`DescribeStream`, `GetShardIterator`, `GetRecords`); in process, the memory store's
//! feed of its row changes.

use aws_lambda_events::event::dynamodb::{EventRecord, TimeWindowEvent};
use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};
use converger_pipeline::Pipeline;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often an idle shard is read (Lambda reads a stream's shard four times a second; every
/// test's stack reads its own on the one emulator, so once a second here).
const POLL: Duration = Duration::from_secs(1);
/// The in-process feed is read more often (a read costs nothing there).
const MEMORY_POLL: Duration = Duration::from_millis(10);
/// How long the in-process mapping holds a shard's records for a fuller batch (the
/// template's `MaximumBatchingWindowInSeconds`): a batch goes when one shard has a whole
/// batch, or when its first record has waited this long.
const MEMORY_BATCHING_WINDOW: Duration = Duration::from_secs(1);

/// How far the mapping has read: when its latest read that found nothing new started (ms).
/// Every row written before then has been handed to the function.
#[derive(Clone, Default)]
pub struct Progress(Arc<std::sync::atomic::AtomicI64>);

impl Progress {
    fn caught_up(&self, read_started_ms: i64) {
        self.0
            .fetch_max(read_started_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits until everything written before `ms` has been handed to the function, or
    /// `within` passes; whether it was.
    pub async fn wait_past(&self, ms: i64, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while self.0.load(std::sync::atomic::Ordering::SeqCst) < ms {
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

/// A deployed stream mapping's settings.
#[derive(Debug, Clone)]
pub(crate) struct StreamMapping {
    pub(crate) stream_arn: String,
    pub(crate) batch_size: i32,
    /// How long a batch waits for more records before it goes.
    pub(crate) batching_window: Duration,
    pub(crate) trim_horizon: bool,
    /// -1: until the records expire.
    pub(crate) max_retries: i64,
    /// The on-failure queue's URL.
    pub(crate) dlq_url: Option<String>,
}

impl StreamMapping {
    pub(crate) fn of(m: &crate::cfn::EventSourceMapping, dlq_url: Option<String>) -> Self {
        Self {
            stream_arn: m.queue_arn.clone(),
            batch_size: i32::try_from(m.batch_size.clamp(1, 1000)).unwrap_or(100),
            batching_window: Duration::from_secs(u64::from(m.batching_window_s.unwrap_or(0))),
            trim_horizon: m.starting_position.as_deref() != Some("LATEST"),
            max_retries: m.maximum_retry_attempts.unwrap_or(-1),
            dlq_url,
        }
    }
}

/// A stream attribute as DynamoDB's JSON (what Lambda's event carries).
fn attribute_json(v: &AttributeValue) -> Value {
    use base64::Engine;
    let b64 = |b: &aws_sdk_dynamodbstreams::primitives::Blob| {
        base64::engine::general_purpose::STANDARD.encode(b.as_ref())
    };
    match v {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::B(b) => json!({ "B": b64(b) }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::Bs(v) => json!({ "BS": v.iter().map(b64).collect::<Vec<_>>() }),
        AttributeValue::L(v) => json!({ "L": v.iter().map(attribute_json).collect::<Vec<_>>() }),
        AttributeValue::M(m) => json!({
            "M": m.iter().map(|(k, v)| (k.clone(), attribute_json(v))).collect::<serde_json::Map<_, _>>()
        }),
        _ => json!({ "NULL": true }),
    }
}

fn image(
    item: Option<&std::collections::HashMap<String, AttributeValue>>,
) -> Result<serde_dynamo::Item, String> {
    let Some(item) = item else {
        return Ok(serde_dynamo::Item::default());
    };
    let v: serde_json::Map<String, Value> = item
        .iter()
        .map(|(k, v)| (k.clone(), attribute_json(v)))
        .collect();
    serde_json::from_value(Value::Object(v)).map_err(|e| format!("stream image: {e}"))
}

/// A record read from the emulator's stream, as Lambda's event carries it.
fn event_record(
    r: &aws_sdk_dynamodbstreams::types::Record,
    arn: &str,
) -> Result<EventRecord, String> {
    let d = r
        .dynamodb
        .as_ref()
        .ok_or("a stream record without its change")?;
    let mut e = EventRecord::default();
    e.event_id = r.event_id.clone().unwrap_or_default();
    e.event_name = r
        .event_name
        .as_ref()
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    e.event_source = Some("aws:dynamodb".into());
    e.event_source_arn = Some(arn.to_owned());
    e.aws_region = "us-east-1".into();
    e.change.sequence_number = d.sequence_number.clone();
    e.change.keys = image(d.keys.as_ref())?;
    e.change.new_image = image(d.new_image.as_ref())?;
    e.change.old_image = image(d.old_image.as_ref())?;
    Ok(e)
}

/// A batch of `shard` as the tumbling window's event; the answer's first failed record.
async fn invoke(
    p: &Pipeline,
    shard: &str,
    records: Vec<EventRecord>,
    invocations: Option<&super::invocations::Invocations>,
) -> Option<String> {
    let mut event = TimeWindowEvent::default();
    event.time_window_properties.shard_id = Some(shard.to_owned());
    event.dynamo_db_event.records = records;
    let started = std::time::Instant::now();
    let resp = converger_lambda::handlers::changes_batch(p, event).await;
    if let Some(i) = invocations {
        i.record(crate::cfn::function::CHANGES, started.elapsed());
    }
    resp.batch_item_failures
        .into_iter()
        .find_map(|f| f.item_identifier)
}

/// Plays the mapping on the emulator's stream until `stop`.
pub(crate) fn spawn_aws(
    streams: aws_sdk_dynamodbstreams::Client,
    sqs: aws_sdk_sqs::Client,
    m: StreamMapping,
    p: Arc<Pipeline>,
    invocations: Option<super::invocations::Invocations>,
    progress: Progress,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut reader = Reader {
            streams,
            sqs,
            m,
            p,
            invocations,
            progress,
            shard: None,
            iterator: None,
            retries: 0,
        };
        loop {
            let wait = match reader.step().await {
                Ok(true) => Duration::ZERO,
                Ok(false) => POLL,
                Err(e) => {
                    tracing::warn!(error = %e, "deliveries stream not read");
                    reader.iterator = None;
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
        }
    })
}

struct Reader {
    streams: aws_sdk_dynamodbstreams::Client,
    sqs: aws_sdk_sqs::Client,
    m: StreamMapping,
    p: Arc<Pipeline>,
    /// In the `cost` benchmark: each batch's invocation and how long it ran.
    invocations: Option<super::invocations::Invocations>,
    progress: Progress,
    shard: Option<String>,
    iterator: Option<String>,
    /// Tries of the batch at the iterator.
    retries: i64,
}

/// A DynamoDB Streams request's error as text.
fn err<E: std::error::Error + 'static, R: std::fmt::Debug>(
    e: aws_sdk_dynamodbstreams::error::SdkError<E, R>,
) -> String {
    aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e).to_string()
}

impl Reader {
    /// An iterator of `shard` of the kind `kind` (at or after `seq` for those kinds).
    async fn iterator(
        &self,
        shard: &str,
        kind: ShardIteratorType,
        seq: Option<String>,
    ) -> Result<Option<String>, String> {
        Ok(self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.m.stream_arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(seq)
            .send()
            .await
            .map_err(err)?
            .shard_iterator)
    }

    /// Up to `limit` records at `it`, and the iterator after them.
    async fn read(
        &self,
        it: &str,
        limit: i32,
    ) -> Result<(Vec<aws_sdk_dynamodbstreams::types::Record>, Option<String>), String> {
        let out = self
            .streams
            .get_records()
            .shard_iterator(it)
            .limit(limit)
            .send()
            .await
            .map_err(err)?;
        Ok((out.records.unwrap_or_default(), out.next_shard_iterator))
    }

    /// Reads one batch and runs it; whether it had records.
    async fn step(&mut self) -> Result<bool, String> {
        if self.shard.is_none() {
            let d = self
                .streams
                .describe_stream()
                .stream_arn(&self.m.stream_arn)
                .send()
                .await
                .map_err(err)?;
            // The emulator's stream has one shard, open for good.
            self.shard = d
                .stream_description
                .and_then(|s| s.shards)
                .and_then(|s| s.into_iter().next())
                .and_then(|s| s.shard_id);
        }
        let Some(shard) = self.shard.clone() else {
            return Ok(false);
        };
        if self.iterator.is_none() {
            let kind = if self.m.trim_horizon {
                ShardIteratorType::TrimHorizon
            } else {
                ShardIteratorType::Latest
            };
            self.iterator = self.iterator(&shard, kind, None).await?;
        }
        let Some(it) = self.iterator.clone() else {
            return Ok(false);
        };
        let read_started = converger_core::time::now_ms();
        let (mut records, mut next) = self.read(&it, self.m.batch_size).await?;
        if records.is_empty() {
            self.iterator = next;
            self.progress.caught_up(read_started);
            return Ok(false);
        }
        // The batching window: a batch short of its size waits for more records, up to the
        // window after its first (as the mapping's `MaximumBatchingWindowInSeconds`).
        let first_seen = std::time::Instant::now();
        while records.len() < self.m.batch_size as usize
            && first_seen.elapsed() < self.m.batching_window
            && let Some(it) = next.clone()
        {
            tokio::time::sleep(POLL).await;
            let (more, after) = self
                .read(&it, self.m.batch_size - records.len() as i32)
                .await?;
            records.extend(more);
            next = after;
        }
        let batch = records
            .iter()
            .map(|r| event_record(r, &self.m.stream_arn))
            .collect::<Result<Vec<_>, _>>()?;
        let seqs: Vec<String> = batch
            .iter()
            .map(|r| r.change.sequence_number.clone().unwrap_or_default())
            .collect();
        match invoke(&self.p, &shard, batch, self.invocations.as_ref()).await {
            None => {
                self.retries = 0;
                self.iterator = next;
            }
            Some(failed) => {
                self.retries += 1;
                let spent = self.m.max_retries >= 0 && self.retries > self.m.max_retries;
                let from = if spent {
                    // The batch from its failed record on is described to the on-failure
                    // queue, and the shard goes on after it.
                    self.give_up(&shard, &failed, seqs.last().map_or("", String::as_str))
                        .await;
                    self.retries = 0;
                    (ShardIteratorType::AfterSequenceNumber, seqs.last().cloned())
                } else {
                    (ShardIteratorType::AtSequenceNumber, Some(failed))
                };
                self.iterator = self.iterator(&shard, from.0, from.1).await?;
                if !spent {
                    // Lambda's backoff between a batch's tries.
                    let ms = 100u64.saturating_mul(1 << self.retries.clamp(0, 4));
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
            }
        }
        Ok(true)
    }

    /// What Lambda sends an on-failure destination for a stream batch: its place, not its
    /// records.
    async fn give_up(&self, shard: &str, first: &str, last: &str) {
        tracing::error!(shard, first, last, "stream batch failed past its retries");
        let Some(url) = &self.m.dlq_url else {
            return;
        };
        let body = json!({
            "requestContext": {
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self.retries,
            },
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": first,
                "endSequenceNumber": last,
                "streamArn": self.m.stream_arn,
            },
        });
        if let Err(e) = self
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(body.to_string())
            .send()
            .await
        {
            tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "on-failure destination not sent");
        }
    }
}

/// The in-process feed, played as the mapping plays a table of `shards` partitions: each
/// row's changes on the shard its id hashes to (in order, as a stream keeps one item's
/// changes), held for the batching window unless a shard has a whole batch, each shard's
/// batches of up to 100 run beside the others', a failed batch read again from its failed
/// record (ten times, then past it, logged). One shard is the stack's; the benchmarks play
/// more, at rates one shard's consumer could not follow.
pub(crate) fn spawn_memory(
    store: Arc<converger_memory::MemStore>,
    p: Arc<Pipeline>,
    invocations: Option<super::invocations::Invocations>,
    progress: Progress,
    shards: u32,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    const BATCH: usize = 100;
    const RETRIES: u32 = 10;
    let shards = shards.max(1);
    let name = move |k: u32| {
        if shards == 1 {
            converger_memory::CHANGES_SHARD.to_owned()
        } else {
            format!("shardId-memory-{k}")
        }
    };
    tokio::spawn(async move {
        let mut after = 0u64;
        let mut retries = 0u32;
        // When the first record not yet handed out was seen.
        let mut pending_since: Option<std::time::Instant> = None;
        loop {
            let read_started = converger_core::time::now_ms();
            let changes = store
                .row_changes(after, BATCH * shards as usize)
                .unwrap_or_default();
            let shard_of = |c: &converger_ports::RowChange| {
                let id = c.new.as_ref().or(c.old.as_ref()).map(|d| d.id.as_str());
                id.map_or(0, converger_core::ids::stable_hash) % shards
            };
            let mut counts = vec![0usize; shards as usize];
            for c in &changes {
                counts[shard_of(c) as usize] += 1;
            }
            let held = !changes.is_empty()
                && counts.iter().all(|n| *n < BATCH)
                && pending_since
                    .get_or_insert_with(std::time::Instant::now)
                    .elapsed()
                    < MEMORY_BATCHING_WINDOW;
            let wait = if changes.is_empty() {
                progress.caught_up(read_started);
                MEMORY_POLL
            } else if held {
                MEMORY_POLL
            } else {
                pending_since = None;
                let last = seq_number(changes.last().map_or("0", |c| c.seq.as_str()));
                let mut by_shard: Vec<Vec<EventRecord>> = vec![Vec::new(); shards as usize];
                for c in &changes {
                    by_shard[shard_of(c) as usize].push(memory_record(c));
                }
                let runs: Vec<_> = by_shard
                    .into_iter()
                    .zip(0u32..)
                    .filter(|(records, _)| !records.is_empty())
                    .map(|(records, k)| {
                        let (p, invocations, shard) = (&p, invocations.as_ref(), name(k));
                        async move {
                            for batch in records.chunks(BATCH) {
                                let failed = invoke(p, &shard, batch.to_vec(), invocations).await;
                                if failed.is_some() {
                                    return failed;
                                }
                            }
                            None
                        }
                    })
                    .collect();
                let failed = futures::future::join_all(runs)
                    .await
                    .into_iter()
                    .flatten()
                    .map(|f| seq_number(&f))
                    .min();
                match failed {
                    None => {
                        retries = 0;
                        after = last;
                        Duration::ZERO
                    }
                    Some(from) if retries >= RETRIES => {
                        tracing::error!(from, "in-process stream batch failed past its retries");
                        retries = 0;
                        after = last;
                        Duration::ZERO
                    }
                    Some(from) => {
                        retries += 1;
                        after = from.saturating_sub(1);
                        Duration::from_millis(20 * u64::from(retries))
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
        }
    })
}

fn seq_number(seq: &str) -> u64 {
    seq.trim_start_matches('0').parse().unwrap_or(0)
}

/// A row change of the in-process feed as the stream's record (the rows' images as their
/// DynamoDB items would read, as far as the consumer reads them).
fn memory_record(c: &converger_ports::RowChange) -> EventRecord {
    let item = |d: &Option<converger_ports::Delivery>| -> serde_dynamo::Item {
        d.as_ref()
            .and_then(|d| serde_dynamo::to_item(d).ok())
            .unwrap_or_default()
    };
    let mut e = EventRecord::default();
    e.event_id = c.event_id.clone();
    e.event_name = match (&c.old, &c.new) {
        (None, _) => "INSERT",
        (_, None) => "REMOVE",
        _ => "MODIFY",
    }
    .into();
    e.event_source = Some("aws:dynamodb".into());
    e.change.sequence_number = Some(seq_number(&c.seq).to_string());
    e.change.old_image = item(&c.old);
    e.change.new_image = item(&c.new);
    e
}
