//! The in-process backend's stand-in for Lambda's event source mappings: the memory queues
//! dispatched to the same batch handlers the deployed functions run, in batches of ten with
//! each tier's maximum concurrency; a failed record comes back after the visibility timeout.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use converger_core::{Tier, time};
use converger_memory::MemQueue;
use converger_pipeline::Pipeline;
use converger_ports::Queue;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// How often the dispatcher looks for visible messages (SQS long polling answers as soon as
/// a message arrives; this is the in-process stand-in).
const POLL: Duration = Duration::from_millis(5);

/// Records per batch, as the template's delivery mappings take them.
const BATCH: usize = 10;

/// The functions the memory queues trigger.
pub(crate) struct Triggered {
    pub(crate) deliver: Arc<Pipeline>,
    pub(crate) probe: Arc<Pipeline>,
    pub(crate) replay: Arc<Pipeline>,
}

/// Dispatches the memory queues until `stop`; records whose handler reports them failed are
/// sent again, visible after `redelivery_s`.
pub(crate) fn spawn_dispatcher(
    queue: Arc<MemQueue>,
    functions: Triggered,
    redelivery_s: u32,
    invocations: Option<super::invocations::Invocations>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let permits: Vec<(Tier, Arc<Semaphore>)> = Tier::ALL
        .iter()
        .map(|t| {
            (
                *t,
                Arc::new(Semaphore::new(
                    functions.deliver.config().tier_concurrency.of(*t),
                )),
            )
        })
        .collect();
    let functions = Arc::new(functions);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.changed() => break,
            }
            let now = queue.now_ms();
            let due = queue.take_due(now);
            for (tier, sem) in &permits {
                let of_tier: Vec<_> = due.iter().filter(|m| m.tier == *tier).cloned().collect();
                for chunk in of_tier.chunks(BATCH) {
                    let (q, f, msgs) = (queue.clone(), functions.clone(), chunk.to_vec());
                    let sem = sem.clone();
                    let invocations = invocations.clone();
                    // Each tier waits for its own concurrency only (its own queue and mapping).
                    tokio::spawn(async move {
                        let Ok(_permit) = sem.acquire_owned().await else {
                            return;
                        };
                        let started = std::time::Instant::now();
                        let resp =
                            converger_lambda::handlers::deliver_batch(&f.deliver, event(&msgs))
                                .await;
                        if let Some(i) = &invocations {
                            i.record(crate::cfn::function::DELIVER, started.elapsed());
                        }
                        for i in failed(&resp) {
                            if let Some(m) = msgs.get(i) {
                                let _ = q.send(m, redelivery_s).await;
                            }
                        }
                    });
                }
            }
            let jobs = queue.take_flow_jobs(now);
            for chunk in jobs.chunks(BATCH) {
                let (q, f, jobs) = (queue.clone(), functions.clone(), chunk.to_vec());
                tokio::spawn(async move {
                    let resp = converger_lambda::handlers::flow_batch(&f.probe, event(&jobs)).await;
                    for i in failed(&resp) {
                        if let Some(j) = jobs.get(i) {
                            let _ = q.send_flow(j, redelivery_s).await;
                        }
                    }
                });
            }
            for msg in queue.take_replays() {
                let (q, f) = (queue.clone(), functions.clone());
                tokio::spawn(async move {
                    let resp = converger_lambda::handlers::replay_batch(
                        &f.replay,
                        event(std::slice::from_ref(&msg)),
                    )
                    .await;
                    if !failed(&resp).is_empty() {
                        tokio::time::sleep(Duration::from_secs(u64::from(redelivery_s))).await;
                        let _ = q.send_replay(&msg).await;
                    }
                });
            }
        }
    })
}

/// The bus's rule to the stream queue and its mapping, in process: every event of the rule's
/// detail types (`rule`, as the template's `StreamRule` lists them) is handed to the stream
/// function in the EventBridge envelope the queue would carry, up to ten
/// a batch.
pub(crate) fn spawn_stream(
    events: &converger_memory::MemEvents,
    rule: Vec<String>,
    stream: Arc<Pipeline>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let mut rx = events.tap();
    tokio::spawn(async move {
        loop {
            let first = tokio::select! {
                e = rx.recv() => e,
                _ = stop.changed() => None,
            };
            let Some(first) = first else { break };
            // The rule's pattern: the channels' events (a delivery's frames come from the
            // deliveries table's stream).
            let routed = |e: &converger_ports::PlatformEvent| {
                rule.iter().any(|t| t == e.detail_type.as_str())
            };
            let mut batch: Vec<_> = std::iter::once(first).filter(routed).collect();
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(e) if routed(&e) => batch.push(e),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                continue;
            }
            let bodies: Vec<serde_json::Value> = batch
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "version": "0",
                        "source": converger_store::resources::EVENT_SOURCE,
                        "detail-type": e.detail_type.as_str(),
                        "time": time::now_rfc3339(),
                        "detail": e.detail,
                    })
                })
                .collect();
            // A live stream does not retry a frame: failures are the handler's to log.
            let _ = converger_lambda::handlers::stream_batch(&stream, event(&bodies)).await;
        }
    })
}

/// An SQS event of `bodies`, the record ids their positions.
fn event<T: Serialize>(bodies: &[T]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (i, b) in bodies.iter().enumerate() {
        let mut rec = SqsMessage::default();
        rec.message_id = Some(i.to_string());
        rec.body = serde_json::to_string(b).ok();
        rec.event_source = Some("aws:sqs".into());
        event.records.push(rec);
    }
    event
}

/// The positions of the records a batch response reports failed.
fn failed(resp: &SqsBatchResponse) -> Vec<usize> {
    resp.batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.parse().ok())
        .collect()
}
