//! The pipeline on the in-process backend, run the way the event source mappings run it on
//! AWS: the tier queues dispatched with each tier's concurrency (MaximumConcurrency x batch
//! size attempts at once), the probe queue, and the sweeper. For scale benchmarks, where the
//! emulator cannot measure; the latency model makes each store and queue request wait about
//! as long as it would on AWS.

use converger_adapters::Adapters;
use converger_core::Tier;
use converger_core::time;
use converger_memory::{LatencyModel, MemEvents, MemQueue, MemStore};
use converger_pipeline::{Pipeline, PipelineConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// How often the dispatcher looks for visible messages (SQS long polling answers as soon as
/// a message arrives; this is the in-process stand-in).
const POLL: Duration = Duration::from_millis(2);

/// A message whose attempt failed unexpectedly comes back after this long (the queues'
/// visibility timeout, shortened: benchmarks run for minutes, not hours).
const REDELIVERY_S: u32 = 30;

pub struct InProcess {
    pub pipeline: Arc<Pipeline>,
    pub store: Arc<MemStore>,
    pub queue: Arc<MemQueue>,
    pub events: Arc<MemEvents>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// The in-process backend's parts, for a caller to seed, drain and read.
pub struct Memory {
    pub store: Arc<MemStore>,
    pub queue: Arc<MemQueue>,
    pub events: Arc<MemEvents>,
    /// The in-process mail service (SES's identity rule; what was sent, for tests).
    pub mailer: Arc<converger_memory::MemMailer>,
    /// Tenants' AWS accounts, in process.
    pub tenant_aws: Arc<converger_memory::MemTenantAws>,
}

/// A pipeline on the in-process backend (with `latency`'s waits, if given), and its parts.
pub fn memory_pipeline(
    latency: Option<LatencyModel>,
    config: PipelineConfig,
) -> Result<(Pipeline, Memory), String> {
    memory_pipeline_with(latency, Limits::default(), config)
}

/// The stream shards the in-process table is played as having (a deliveries table taking
/// thousands of deliveries a second has tens of partitions, each its own shard).
const CHANGES_SHARDS: u32 = 8;

/// What the in-process store models beyond its latencies.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// DynamoDB's per-partition limits (`None`: unlimited).
    pub capacity: Option<converger_memory::CapacityModel>,
    /// The due index's shards (`None`: the default).
    pub due_shards: Option<u32>,
    /// How the tier queues order their messages (SQS fair queues, as deployed, by default).
    pub queue_order: converger_memory::QueueOrder,
    /// Whether the deliveries table's stream is consumed as the changes function's mapping
    /// consumes it (its counter writes charged, its grants of listing shards made).
    pub changes: bool,
}

/// [`memory_pipeline`] with `limits` modelled.
pub fn memory_pipeline_with(
    latency: Option<LatencyModel>,
    limits: Limits,
    config: PipelineConfig,
) -> Result<(Pipeline, Memory), String> {
    let Limits {
        capacity,
        due_shards,
        ..
    } = limits;
    let (store, queue) = match latency {
        Some(m) => (
            MemStore::with_latency(m),
            Arc::new(MemQueue::with_latency(m)),
        ),
        None => (MemStore::new(), Arc::new(MemQueue::new())),
    };
    let store = match capacity {
        Some(c) => store.with_capacity(c),
        None => store,
    };
    let store = Arc::new(match due_shards {
        Some(n) => store.with_due_shards(n),
        None => store,
    });
    let events = Arc::new(MemEvents::default());
    let adapters = Adapters::standard(config.allowlist.clone())
        .map_err(|e| format!("the HTTP client: {e}"))?;
    let mailer = Arc::new(converger_memory::MemMailer::new());
    let tenant_aws = Arc::new(converger_memory::MemTenantAws::new());
    let pipeline = Pipeline::new(
        store.clone(),
        queue.clone(),
        events.clone(),
        adapters,
        config,
    )
    .with_mailer(mailer.clone())
    .with_tenant_aws(tenant_aws.clone());
    Ok((
        pipeline,
        Memory {
            store,
            queue,
            events,
            mailer,
            tenant_aws,
        },
    ))
}

impl InProcess {
    /// Starts the dispatchers (and the sweeper every `sweep_period`, if given).
    pub fn start(
        latency: Option<LatencyModel>,
        config: PipelineConfig,
        sweep_period: Option<Duration>,
    ) -> Result<Self, String> {
        Self::start_with(latency, Limits::default(), config, sweep_period)
    }

    /// [`InProcess::start`] with `limits` modelled.
    pub fn start_with(
        latency: Option<LatencyModel>,
        limits: Limits,
        config: PipelineConfig,
        sweep_period: Option<Duration>,
    ) -> Result<Self, String> {
        let batch = config.batch_concurrency;
        let (
            pipeline,
            Memory {
                store,
                queue,
                events,
                ..
            },
        ) = memory_pipeline_with(latency, limits, config)?;
        let pipeline = Arc::new(pipeline);
        let (shutdown, stop) = watch::channel(false);
        let mut tasks = Vec::new();

        let permits: Vec<(Tier, Arc<Semaphore>)> = Tier::ALL
            .iter()
            .map(|t| {
                (
                    *t,
                    Arc::new(Semaphore::new(
                        pipeline.config().tier_concurrency.of(*t) * batch,
                    )),
                )
            })
            .collect();
        let in_flight: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>> =
            Arc::default();
        {
            let (p, q, mut stop) = (pipeline.clone(), queue.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(POLL) => {}
                        _ = stop.changed() => break,
                    }
                    let now = time::now_ms();
                    // Each tier's consumers take what they have room for, in the order the
                    // queue gives (fair: the tenants with the fewest messages in flight
                    // first); the rest stay queued.
                    for (tier, sem) in &permits {
                        let room = sem.available_permits();
                        if room == 0 {
                            continue;
                        }
                        let busy = in_flight.lock().map(|m| m.clone()).unwrap_or_default();
                        for msg in q.receive(now, *tier, room, limits.queue_order, &busy) {
                            let Ok(permit) = sem.clone().try_acquire_owned() else {
                                let _ = converger_ports::Queue::send(&*q, &msg, 0).await;
                                continue;
                            };
                            let group = msg.group().unwrap_or_default().to_owned();
                            if let Ok(mut m) = in_flight.lock() {
                                *m.entry(group.clone()).or_default() += 1;
                            }
                            let (p, q, in_flight) = (p.clone(), q.clone(), in_flight.clone());
                            tokio::spawn(async move {
                                let _permit = permit;
                                // The long poll's answer takes a request's time to arrive.
                                if let Some(m) = latency {
                                    tokio::time::sleep(m.sqs_receive).await;
                                }
                                if let Err(e) = p.attempts().deliver(msg.clone()).await {
                                    tracing::warn!(error = %e, "attempt failed; redelivered later");
                                    let _ =
                                        converger_ports::Queue::send(&*q, &msg, REDELIVERY_S).await;
                                }
                                if let Ok(mut m) = in_flight.lock()
                                    && let Some(n) = m.get_mut(&group)
                                {
                                    *n = n.saturating_sub(1);
                                    if *n == 0 {
                                        m.remove(&group);
                                    }
                                }
                            });
                        }
                    }
                    for job in q.take_flow_jobs(now) {
                        let (p, q) = (p.clone(), q.clone());
                        tokio::spawn(async move {
                            // As the probe queue does: a failed job comes back.
                            if let Err(e) = p.flow_jobs().flow_job(&job).await {
                                tracing::warn!(error = %e, "flow job failed; redelivered later");
                                let _ = converger_ports::Queue::send_flow(&*q, &job, REDELIVERY_S)
                                    .await;
                            }
                        });
                    }
                }
            }));
        }
        if limits.changes {
            tasks.push(crate::stack::changes::spawn_memory(
                store.clone(),
                pipeline.clone(),
                None,
                crate::stack::changes::Progress::default(),
                CHANGES_SHARDS,
                stop.clone(),
            ));
        }
        if let Some(period) = sweep_period {
            let p = pipeline.clone();
            tasks.push(crate::schedule::every(period, stop.clone(), move || {
                let p = p.clone();
                async move {
                    // As the deployed function runs: a sweep, then watching for crashed
                    // attempts for most of the period.
                    if let Err(e) = p.sweeper().sweep_and_watch(period - period / 6).await {
                        tracing::warn!(error = %e, "sweep failed");
                    }
                }
            }));
        }
        Ok(Self {
            pipeline,
            store,
            queue,
            events,
            shutdown,
            tasks,
        })
    }

    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
