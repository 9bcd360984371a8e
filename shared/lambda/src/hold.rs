//! Holding a delivery batch's messages in short slices. A tier queue's visibility timeout
//! must outlast the deliver function (six times its timeout), so a message whose instance
//! died would come back only after minutes. Instead the batch's messages are held invisible
//! for `policy::MESSAGE_HOLD_S` before the batch starts, held again every
//! `policy::MESSAGE_HOLD_RENEW_S` while their records run, and a record that failed is given
//! back to the queue's own visibility timeout (its redelivery and dead-letter pace). A first try, which has no entry in
//! the sweeper's due index, is recovered from its message this way.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsMessage};
use converger_core::Tier;
use converger_core::policy::{MESSAGE_HOLD_RENEW_S, MESSAGE_HOLD_S};
use converger_ports::Queue;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// One received message: where it came from and how to name it to SQS.
#[derive(Debug, Clone)]
struct Held {
    message_id: String,
    tier: Tier,
    receipt: String,
}

/// The messages of one batch, held while their records run.
pub struct BatchHold {
    queue: Arc<dyn Queue>,
    all: Vec<Held>,
    running: Arc<Mutex<HashSet<String>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The tier a delivery message names (a body that does not parse is not held: its record
/// fails and the queue redelivers it at its own pace).
fn tier_of(m: &SqsMessage) -> Option<Tier> {
    #[derive(serde::Deserialize)]
    struct Named {
        tier: Tier,
    }
    serde_json::from_str::<Named>(m.body.as_deref()?)
        .ok()
        .map(|n| n.tier)
}

/// Receipt handles by queue, in `Tier::ALL` order.
fn by_tier<'a>(held: impl Iterator<Item = &'a Held> + Clone) -> Vec<(Tier, Vec<String>)> {
    Tier::ALL
        .iter()
        .map(|t| {
            let receipts: Vec<String> = held
                .clone()
                .filter(|h| h.tier == *t)
                .map(|h| h.receipt.clone())
                .collect();
            (*t, receipts)
        })
        .filter(|(_, r)| !r.is_empty())
        .collect()
}

/// Holds for `seconds`, or gives back to the queue's own timeout (`None`).
async fn hold_all(queue: &dyn Queue, held: Vec<(Tier, Vec<String>)>, seconds: Option<u32>) {
    let calls = held.iter().map(|(tier, receipts)| async move {
        match seconds {
            Some(s) => queue.hold(*tier, receipts, s).await,
            None => queue.give_back(*tier, receipts).await,
        }
    });
    for r in futures::future::join_all(calls).await {
        if let Err(e) = r {
            // Not held: the message comes back at the queue's own pace, as before.
            tracing::warn!(error = %e, "delivery messages not held");
        }
    }
}

impl BatchHold {
    /// Holds `records`' messages, and again every few seconds while they run. The first hold
    /// lands before any record starts: a claim made before it would leave a row whose
    /// instance died invisible for the queue's whole timeout (minutes), where the due index
    /// no longer covers it; one SQS request per batch on the path buys recovery in seconds.
    pub async fn start(queue: Arc<dyn Queue>, records: &[SqsMessage]) -> Self {
        let all: Vec<Held> = records
            .iter()
            .filter_map(|m| {
                Some(Held {
                    message_id: m.message_id.clone()?,
                    tier: tier_of(m)?,
                    receipt: m.receipt_handle.clone().filter(|r| !r.is_empty())?,
                })
            })
            .collect();
        let running: Arc<Mutex<HashSet<String>>> = Arc::new(Mutex::new(
            all.iter().map(|h| h.message_id.clone()).collect(),
        ));
        if !all.is_empty() {
            hold_all(queue.as_ref(), by_tier(all.iter()), Some(MESSAGE_HOLD_S)).await;
        }
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let (queue, all, running) = (queue.clone(), all.clone(), running.clone());
            tokio::spawn(async move {
                if all.is_empty() {
                    return;
                }
                loop {
                    let renew = Duration::from_secs(u64::from(MESSAGE_HOLD_RENEW_S));
                    tokio::select! {
                        _ = stopped.changed() => return,
                        () = tokio::time::sleep(renew) => {}
                    }
                    let still: Vec<Held> = match running.lock() {
                        Ok(r) => all
                            .iter()
                            .filter(|h| r.contains(&h.message_id))
                            .cloned()
                            .collect(),
                        Err(_) => return,
                    };
                    if still.is_empty() {
                        return;
                    }
                    hold_all(queue.as_ref(), by_tier(still.iter()), Some(MESSAGE_HOLD_S)).await;
                }
            })
        };
        Self {
            queue,
            all,
            running,
            stop,
            task,
        }
    }

    /// A record is done: its message is no longer held again.
    pub fn done(&self, message_id: Option<&str>) {
        if let (Some(id), Ok(mut r)) = (message_id, self.running.lock()) {
            r.remove(id);
        }
    }

    /// Stops holding, and gives the records that failed back to the queue's own redelivery
    /// pace (after any hold still on its way, so that it cannot shorten theirs again).
    pub async fn finish(self, resp: &SqsBatchResponse) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "message hold task ended abnormally");
        }
        let failed: HashSet<&str> = resp
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        if failed.is_empty() {
            return;
        }
        let back = by_tier(
            self.all
                .iter()
                .filter(|h| failed.contains(h.message_id.as_str())),
        );
        hold_all(self.queue.as_ref(), back, None).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use async_trait::async_trait;
    use aws_lambda_events::event::sqs::BatchItemFailure;
    use converger_ports::{DeliveryMessage, FlowJob, QueueDepth, QueueError, ReplayMessage};

    /// One hold asked for: the queue, the receipts, the seconds (`None`: given back).
    type Asked = (Tier, Vec<String>, Option<u32>);

    /// Records every hold asked for, in order.
    #[derive(Default)]
    struct Holds(Mutex<Vec<Asked>>);

    #[async_trait]
    impl Queue for Holds {
        async fn send(&self, _: &DeliveryMessage, _: u32) -> Result<(), QueueError> {
            Ok(())
        }
        async fn send_many(&self, _: &[DeliveryMessage]) -> Result<(), QueueError> {
            Ok(())
        }
        async fn send_replay(&self, _: &ReplayMessage) -> Result<(), QueueError> {
            Ok(())
        }
        async fn send_flow(&self, _: &FlowJob, _: u32) -> Result<(), QueueError> {
            Ok(())
        }
        async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
            Ok(Vec::new())
        }
        async fn hold(&self, tier: Tier, receipts: &[String], s: u32) -> Result<(), QueueError> {
            self.0
                .lock()
                .unwrap()
                .push((tier, receipts.to_vec(), Some(s)));
            Ok(())
        }
        async fn give_back(&self, tier: Tier, receipts: &[String]) -> Result<(), QueueError> {
            self.0.lock().unwrap().push((tier, receipts.to_vec(), None));
            Ok(())
        }
    }

    fn record(id: &str, tier: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.receipt_handle = Some(format!("rh-{id}"));
        m.body = Some(format!(r#"{{"delivery_id":"d","tier":"{tier}"}}"#));
        m
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_is_held_in_slices_while_it_runs_and_failures_go_back_to_the_queues_pace() {
        let q = Arc::new(Holds::default());
        let records = vec![
            record("a", "default"),
            record("b", "high"),
            record("c", "default"),
        ];
        let hold = BatchHold::start(q.clone(), &records).await;
        // The first hold goes at once; `a` and `b` finish, `c` runs past one renewal.
        tokio::time::sleep(Duration::from_secs(1)).await;
        hold.done(Some("a"));
        hold.done(Some("b"));
        tokio::time::sleep(Duration::from_secs(u64::from(MESSAGE_HOLD_RENEW_S))).await;
        hold.done(Some("c"));
        let mut resp = SqsBatchResponse::default();
        let mut f = BatchItemFailure::default();
        f.item_identifier = "c".into();
        resp.batch_item_failures.push(f);
        hold.finish(&resp).await;
        let holds = q.0.lock().unwrap().clone();
        assert_eq!(
            holds,
            vec![
                (Tier::High, vec!["rh-b".to_owned()], Some(MESSAGE_HOLD_S)),
                (
                    Tier::Default,
                    vec!["rh-a".to_owned(), "rh-c".to_owned()],
                    Some(MESSAGE_HOLD_S)
                ),
                (Tier::Default, vec!["rh-c".to_owned()], Some(MESSAGE_HOLD_S)),
                (Tier::Default, vec!["rh-c".to_owned()], None),
            ]
        );
    }

    #[tokio::test]
    async fn a_record_without_a_receipt_or_a_readable_body_is_not_held() {
        let q = Arc::new(Holds::default());
        let mut bad = record("x", "default");
        bad.body = Some("not json".into());
        let mut local = record("y", "default");
        local.receipt_handle = None;
        let hold = BatchHold::start(q.clone(), &[bad, local]).await;
        hold.finish(&SqsBatchResponse::default()).await;
        assert!(q.0.lock().unwrap().is_empty());
    }
}
