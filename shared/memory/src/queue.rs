//! The queues in memory: delivery messages with their visibility, replay messages and flow
//! jobs, received in fair or FIFO order.

use super::*;

/// The order a receive returns a queue's visible messages in (see [`MemQueue::receive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// SQS fair queues: the groups with the fewest messages in flight first.
    #[default]
    Fair,
    /// Oldest first, as a queue whose messages carry no group.
    Fifo,
}

/// The queues, in memory: messages are kept with the time they become visible.
#[derive(Default)]
pub struct MemQueue {
    deliveries: Mutex<Vec<(i64, DeliveryMessage)>>,
    replays: Mutex<Vec<ReplayMessage>>,
    flow_jobs: Mutex<Vec<(i64, FlowJob)>>,
    latency: Option<LatencyModel>,
    /// Where a message's delay is counted from (the system's time unless set).
    clock: Option<Arc<dyn converger_core::time::Clock>>,
    /// The SQS requests the same work would bill.
    requests: Requests,
}

/// The SQS requests the queues' work would bill, as the SQS backend and Lambda's event
/// source mappings make them: a send or a batch send of up to ten (each message here is far
/// under 64 KiB, one request's chunk), and per ten messages received one receive and one
/// batch delete. Empty long polls are not counted (they cost the same whatever the traffic).
#[derive(Debug, Default)]
struct Requests {
    sends: std::sync::atomic::AtomicU64,
    receives: std::sync::atomic::AtomicU64,
    deletes: std::sync::atomic::AtomicU64,
}

/// [`MemQueue::take_requests`]'s counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueRequests {
    pub sends: u64,
    pub receives: u64,
    pub deletes: u64,
}

impl QueueRequests {
    pub fn total(&self) -> u64 {
        self.sends + self.receives + self.deletes
    }
}

impl MemQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue that waits `model`'s send latency per request (a batch of ten is one).
    pub fn with_latency(model: LatencyModel) -> Self {
        Self {
            latency: Some(model),
            ..Self::default()
        }
    }

    /// This queue with its delays run on `clock` (a test's manual clock, shared with its
    /// pipeline).
    pub fn clocked(mut self, clock: Arc<dyn converger_core::time::Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The SQS requests counted since the last call, and a fresh start.
    pub fn take_requests(&self) -> QueueRequests {
        use std::sync::atomic::Ordering::Relaxed;
        QueueRequests {
            sends: self.requests.sends.swap(0, Relaxed),
            receives: self.requests.receives.swap(0, Relaxed),
            deletes: self.requests.deletes.swap(0, Relaxed),
        }
    }

    fn count_sends(&self, n: usize) {
        self.requests
            .sends
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// A receive of `n` messages: a receive and a batch delete per ten.
    fn count_received(&self, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let batches = n.div_ceil(10) as u64;
        self.requests.receives.fetch_add(batches, Relaxed);
        self.requests.deletes.fetch_add(batches, Relaxed);
    }

    /// The time its delays run on (its clock's, or the system's).
    pub fn now_ms(&self) -> i64 {
        self.clock
            .as_ref()
            .map_or_else(converger_core::time::now_ms, |c| c.now_ms())
    }

    /// Removes and returns the delivery messages visible at `now_ms`.
    pub fn take_due(&self, now_ms: i64) -> Vec<DeliveryMessage> {
        let Ok(mut q) = self.deliveries.lock() else {
            return Vec::new();
        };
        let (due, wait): (Vec<_>, Vec<_>) = q.drain(..).partition(|(at, _)| *at <= now_ms);
        *q = wait;
        self.count_received(due.len());
        due.into_iter().map(|(_, m)| m).collect()
    }

    /// Removes and returns up to `max` messages of `tier` visible at `now_ms`, in the order a
    /// receive from the tier's queue returns them. `Fair` models SQS fair queues (every
    /// message carries its tenant as `MessageGroupId`): the message groups with the fewest
    /// messages in flight (`in_flight`, plus those taken by this receive) come first, each
    /// group's oldest first, so a tenant's backlog cannot hold up a quiet tenant's messages.
    /// `Fifo`: oldest first, whatever their group.
    pub fn receive(
        &self,
        now_ms: i64,
        tier: converger_core::Tier,
        max: usize,
        order: QueueOrder,
        in_flight: &HashMap<String, usize>,
    ) -> Vec<DeliveryMessage> {
        let Ok(mut q) = self.deliveries.lock() else {
            return Vec::new();
        };
        let visible: Vec<usize> = q
            .iter()
            .enumerate()
            .filter(|(_, (at, m))| *at <= now_ms && m.tier == tier)
            .map(|(i, _)| i)
            .collect();
        let picked: Vec<usize> = match order {
            QueueOrder::Fifo => visible.into_iter().take(max).collect(),
            QueueOrder::Fair => {
                let group = |i: usize| q[i].1.group().unwrap_or_default().to_owned();
                let mut by_group: BTreeMap<String, std::collections::VecDeque<usize>> =
                    BTreeMap::new();
                for i in visible {
                    by_group.entry(group(i)).or_default().push_back(i);
                }
                let mut taken: HashMap<String, usize> = HashMap::new();
                let mut out = Vec::new();
                while out.len() < max {
                    let Some(g) = by_group
                        .iter()
                        .filter(|(_, v)| !v.is_empty())
                        .min_by_key(|(g, v)| {
                            let busy = in_flight.get(*g).copied().unwrap_or(0)
                                + taken.get(*g).copied().unwrap_or(0);
                            (busy, v.front().copied())
                        })
                        .map(|(g, _)| g.clone())
                    else {
                        break;
                    };
                    if let Some(i) = by_group.get_mut(&g).and_then(|v| v.pop_front()) {
                        out.push(i);
                        *taken.entry(g).or_default() += 1;
                    }
                }
                out
            }
        };
        if picked.is_empty() {
            return Vec::new();
        }
        let chosen: std::collections::HashSet<usize> = picked.iter().copied().collect();
        let mut taken: HashMap<usize, DeliveryMessage> = HashMap::with_capacity(picked.len());
        let mut keep = Vec::with_capacity(q.len() - picked.len());
        for (i, item) in q.drain(..).enumerate() {
            if chosen.contains(&i) {
                taken.insert(i, item.1);
            } else {
                keep.push(item);
            }
        }
        *q = keep;
        self.count_received(picked.len());
        picked
            .into_iter()
            .filter_map(|i| taken.remove(&i))
            .collect()
    }

    /// The delivery messages waiting (visible or delayed), left in place.
    pub fn peek(&self) -> Vec<DeliveryMessage> {
        self.deliveries
            .lock()
            .map(|q| q.iter().map(|(_, m)| m.clone()).collect())
            .unwrap_or_default()
    }

    /// Messages waiting (visible or delayed).
    pub fn depth(&self) -> usize {
        self.deliveries.lock().map(|q| q.len()).unwrap_or(0)
    }

    /// Removes and returns the flow jobs visible at `now_ms`.
    pub fn take_flow_jobs(&self, now_ms: i64) -> Vec<FlowJob> {
        let Ok(mut q) = self.flow_jobs.lock() else {
            return Vec::new();
        };
        let (due, wait): (Vec<_>, Vec<_>) = q.drain(..).partition(|(at, _)| *at <= now_ms);
        *q = wait;
        self.count_received(due.len());
        due.into_iter().map(|(_, m)| m).collect()
    }

    pub fn take_replays(&self) -> Vec<ReplayMessage> {
        self.replays
            .lock()
            .map(|mut q| q.drain(..).collect())
            .unwrap_or_default()
    }
}

#[async_trait]
impl Queue for MemQueue {
    async fn send(&self, msg: &DeliveryMessage, delay_s: u32) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        self.count_sends(1);
        let at = self.now_ms() + i64::from(delay_s.min(converger_ports::MAX_DELAY_S)) * 1000;
        self.deliveries
            .lock()
            .map_err(|_| QueueError::new("poisoned"))?
            .push((at, msg.clone()));
        Ok(())
    }

    async fn send_many(&self, msgs: &[DeliveryMessage]) -> Result<(), QueueError> {
        self.count_sends(msgs.len().div_ceil(10));
        // Batches of ten, eight in flight, as the SQS backend sends them.
        if let Some(m) = &self.latency {
            let batches = msgs.len().div_ceil(10) as u32;
            tokio::time::sleep(m.sqs_send * batches.div_ceil(8)).await;
        }
        let now = self.now_ms();
        self.deliveries
            .lock()
            .map_err(|_| QueueError::new("poisoned"))?
            .extend(
                msgs.iter()
                    .map(|m| (now + i64::from(m.send_delay_s) * 1000, m.clone())),
            );
        Ok(())
    }

    async fn send_flow(&self, msg: &FlowJob, delay_s: u32) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        self.count_sends(1);
        let at = self.now_ms() + i64::from(delay_s.min(converger_ports::MAX_DELAY_S)) * 1000;
        self.flow_jobs
            .lock()
            .map_err(|_| QueueError::new("poisoned"))?
            .push((at, msg.clone()));
        Ok(())
    }

    async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
        let now = self.now_ms();
        let q = self
            .deliveries
            .lock()
            .map_err(|_| QueueError::new("poisoned"))?;
        let mut out = Vec::new();
        for tier in converger_core::Tier::ALL {
            let of_tier = || q.iter().filter(|(_, m)| m.tier == tier);
            let name = tier.queue_name();
            // Taken messages leave the queue at once (nothing is in flight), and nothing is
            // ever dead-lettered in process.
            out.push(QueueDepth {
                queue: name.to_owned(),
                visible: of_tier().filter(|(at, _)| *at <= now).count() as u64,
                delayed: of_tier().filter(|(at, _)| *at > now).count() as u64,
                in_flight: 0,
            });
            out.push(QueueDepth {
                queue: format!("{name}-dlq"),
                visible: 0,
                delayed: 0,
                in_flight: 0,
            });
        }
        Ok(out)
    }

    async fn send_replay(&self, msg: &ReplayMessage) -> Result<(), QueueError> {
        wait(&self.latency, |m| m.sqs_send).await;
        self.count_sends(1);
        self.replays
            .lock()
            .map_err(|_| QueueError::new("poisoned"))?
            .push(msg.clone());
        Ok(())
    }
}
