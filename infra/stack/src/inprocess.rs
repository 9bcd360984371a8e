//! The pipeline on the in-process backend, run the way the event source mappings run it on
//! AWS: the tier queues dispatched with each tier's concurrency (MaximumConcurrency x batch
//! size attempts at once), the probe queue, and the sweeper. For scale benchmarks, where the
//! emulator cannot measure; the latency model makes each store and queue request wait about
//! as long as it would on AWS.

use converger_adapters::Adapters;
use converger_core::Tier;
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
    /// The deliver function's instances.
    pub deliver: Arc<Pool<Pipeline>>,
    /// Starts another instance of a function over the same store, queues and bus.
    pub instances: Arc<Instances>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// What a new instance of a function is made of: the in-process backend's parts and the
/// configuration; each instance has its own caches, HTTP client and counters.
pub struct Instances {
    parts: Memory,
    config: PipelineConfig,
}

impl Instances {
    /// A new instance's pipeline.
    pub fn start(&self) -> Result<Pipeline, String> {
        self.parts.pipeline(&self.config)
    }
}

/// The in-process backend's parts, for a caller to seed, drain and read.
#[derive(Clone)]
pub struct Memory {
    pub store: Arc<MemStore>,
    pub queue: Arc<MemQueue>,
    pub events: Arc<MemEvents>,
    /// The in-process mail service (SES's identity rule; what was sent, for tests).
    pub mailer: Arc<converger_memory::MemMailer>,
    /// Tenants' AWS accounts, in process.
    pub tenant_aws: Arc<converger_memory::MemTenantAws>,
    /// The payload bucket, in process (its upload URLs are only for `MemPayloads::upload`).
    pub payloads: Arc<converger_memory::MemPayloads>,
    /// The channel key every pipeline of these parts shares (a random one: what the
    /// deployment keeps in Secrets Manager).
    pub channel_key: converger_core::mtls::ChannelKey,
    /// The time its pipelines read ([`Limits::clock`]).
    pub clock: Option<Arc<dyn converger_core::time::Clock>>,
}

impl Memory {
    /// Every adapter, over an HTTP client of their own, with the parts' channel key.
    pub fn adapters(&self, config: &PipelineConfig) -> Result<Adapters, String> {
        Adapters::standard_keyed(config.allowlist.clone(), Some(self.channel_key.clone()))
            .map_err(|e| format!("the HTTP client: {e}"))
    }

    /// A pipeline over these parts, with caches, an HTTP client and counters of its own.
    pub fn pipeline(&self, config: &PipelineConfig) -> Result<Pipeline, String> {
        let adapters = self.adapters(config)?;
        Ok(Pipeline::new(
            self.store.clone(),
            self.queue.clone(),
            self.events.clone(),
            adapters,
            config.clone(),
        )
        .with_mailer(self.mailer.clone())
        .with_tenant_aws(self.tenant_aws.clone())
        .with_payloads(self.payloads.clone()))
        .map(|p| self.clocked(p))
    }

    /// `p` on these parts' clock, if they have one.
    pub fn clocked(&self, p: Pipeline) -> Pipeline {
        match &self.clock {
            Some(c) => p.with_clock(c.clone()),
            None => p,
        }
    }
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
#[derive(Debug, Clone, Default)]
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
    /// Whether each invocation of the deliver function runs on an instance of its own, as
    /// Lambda runs them: an idle one (the most recently used), else a new one with empty
    /// caches and its own counters' flushes (`false`: every invocation on the one pipeline).
    pub instances: bool,
    /// Counts the invocations (a received batch of the deliver function, a stream batch of
    /// the changes function, a flow job of the probe function) and their durations.
    pub invocations: Option<crate::stack::invocations::Invocations>,
    /// The time the pipelines' rules and the queues' delays read (a test's manual clock, so
    /// that a backoff or a cooldown passes when the test moves it); the system's when `None`.
    pub clock: Option<Arc<dyn converger_core::time::Clock>>,
}

/// Lambda's instances of one function: an invocation takes an idle instance (the most
/// recently used, as Lambda reuses warm ones) or starts a new one, and gives it back when
/// it ends.
pub struct Pool<T> {
    idle: std::sync::Mutex<Vec<Arc<T>>>,
    started: std::sync::atomic::AtomicUsize,
    /// Starts an instance; `None`: the pool is one instance shared by every invocation.
    make: Option<Box<dyn Fn() -> Result<T, String> + Send + Sync>>,
}

impl<T> Pool<T> {
    pub fn new(make: impl Fn() -> Result<T, String> + Send + Sync + 'static) -> Self {
        Self {
            idle: std::sync::Mutex::default(),
            started: std::sync::atomic::AtomicUsize::new(0),
            make: Some(Box::new(make)),
        }
    }

    /// One instance, shared by every invocation at once.
    pub fn shared(one: Arc<T>) -> Self {
        Self {
            idle: std::sync::Mutex::new(vec![one]),
            started: std::sync::atomic::AtomicUsize::new(1),
            make: None,
        }
    }

    /// An instance for one invocation.
    pub fn take(&self) -> Result<Arc<T>, String> {
        let Some(make) = &self.make else {
            return self
                .idle
                .lock()
                .ok()
                .and_then(|v| v.first().cloned())
                .ok_or_else(|| "the pool has no instance".to_owned());
        };
        if let Some(i) = self.idle.lock().ok().and_then(|mut v| v.pop()) {
            return Ok(i);
        }
        let i = Arc::new(make()?);
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(i)
    }

    /// Gives an instance back when its invocation ends.
    pub fn give(&self, i: Arc<T>) {
        if self.make.is_some()
            && let Ok(mut v) = self.idle.lock()
        {
            v.push(i);
        }
    }

    /// How many instances were started.
    pub fn started(&self) -> usize {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
    }
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
        clock,
        ..
    } = limits;
    let (store, queue) = match latency {
        Some(m) => (MemStore::with_latency(m), MemQueue::with_latency(m)),
        None => (MemStore::new(), MemQueue::new()),
    };
    let queue = Arc::new(match &clock {
        Some(c) => queue.clocked(c.clone()),
        None => queue,
    });
    let store = match capacity {
        Some(c) => store.with_capacity(c),
        None => store,
    };
    let store = Arc::new(match due_shards {
        Some(n) => store.with_due_shards(n),
        None => store,
    });
    let memory = Memory {
        store,
        queue,
        events: Arc::new(MemEvents::default()),
        mailer: Arc::new(converger_memory::MemMailer::new()),
        tenant_aws: Arc::new(converger_memory::MemTenantAws::new()),
        payloads: Arc::new(converger_memory::MemPayloads::new()),
        channel_key: converger_core::mtls::ChannelKey::derive(&converger_core::secret::new_token())
            .map_err(|e| e.to_string())?,
        clock,
    };
    Ok((memory.pipeline(&config)?, memory))
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
        let instance_config = config.clone();
        let (pipeline, memory) = memory_pipeline_with(latency, limits.clone(), config)?;
        let (store, queue, events) = (
            memory.store.clone(),
            memory.queue.clone(),
            memory.events.clone(),
        );
        let instances = Arc::new(Instances {
            parts: memory,
            config: instance_config,
        });
        let pipeline = Arc::new(pipeline);
        let deliver = Arc::new(if limits.instances {
            let made = instances.clone();
            Pool::new(move || made.start())
        } else {
            Pool::shared(pipeline.clone())
        });
        let invocations = limits.invocations.clone();
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
            let (deliver, invocations, limits) =
                (deliver.clone(), invocations.clone(), limits.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(POLL) => {}
                        _ = stop.changed() => break,
                    }
                    let now = q.now_ms();
                    // Each tier's consumers take what they have room for, in the order the
                    // queue gives (fair: the tenants with the fewest messages in flight
                    // first); the rest stay queued.
                    for (tier, sem) in &permits {
                        let room = sem.available_permits();
                        if room == 0 {
                            continue;
                        }
                        let busy = in_flight.lock().map(|m| m.clone()).unwrap_or_default();
                        let mut taken = Vec::new();
                        for msg in q.receive(now, *tier, room, limits.queue_order, &busy) {
                            let Ok(permit) = sem.clone().try_acquire_owned() else {
                                let _ = converger_ports::Queue::send(&*q, &msg, 0).await;
                                continue;
                            };
                            let group = msg.group().unwrap_or_default().to_owned();
                            if let Ok(mut m) = in_flight.lock() {
                                *m.entry(group.clone()).or_default() += 1;
                            }
                            taken.push((msg, group, permit));
                        }
                        // A receive hands the mapping up to ten messages: one invocation.
                        while !taken.is_empty() {
                            let batch: Vec<_> = taken.drain(..taken.len().min(10)).collect();
                            let (q, in_flight) = (q.clone(), in_flight.clone());
                            let (deliver, invocations) = (deliver.clone(), invocations.clone());
                            tokio::spawn(async move {
                                // The long poll's answer takes a request's time to arrive.
                                if let Some(m) = latency {
                                    tokio::time::sleep(m.sqs_receive).await;
                                }
                                let started = std::time::Instant::now();
                                let instance = deliver.take();
                                let runs = batch.into_iter().map(|(msg, group, permit)| {
                                    let (q, in_flight, instance) =
                                        (q.clone(), in_flight.clone(), instance.clone());
                                    async move {
                                        let _permit = permit;
                                        let done = match &instance {
                                            Ok(p) => p.attempts().deliver(msg.clone()).await.map_err(|e| e.to_string()),
                                            Err(e) => Err(e.clone()),
                                        };
                                        if let Err(e) = done {
                                            tracing::warn!(error = %e, "attempt failed; redelivered later");
                                            let _ = converger_ports::Queue::send(
                                                &*q,
                                                &msg,
                                                REDELIVERY_S,
                                            )
                                            .await;
                                        }
                                        if let Ok(mut m) = in_flight.lock()
                                            && let Some(n) = m.get_mut(&group)
                                        {
                                            *n = n.saturating_sub(1);
                                            if *n == 0 {
                                                m.remove(&group);
                                            }
                                        }
                                    }
                                });
                                futures::future::join_all(runs).await;
                                if let Ok(i) = instance {
                                    // As the deliver function's handler: the batch's
                                    // metrics and spans before the instance is idle.
                                    i.flush_telemetry().await;
                                    deliver.give(i);
                                }
                                if let Some(inv) = &invocations {
                                    inv.record(crate::cfn::function::DELIVER, started.elapsed());
                                }
                            });
                        }
                    }
                    for job in q.take_flow_jobs(now) {
                        let (p, q, invocations) = (p.clone(), q.clone(), invocations.clone());
                        tokio::spawn(async move {
                            let started = std::time::Instant::now();
                            let done = p.flow_jobs().flow_job(&job).await;
                            p.flush_telemetry().await;
                            if let Some(inv) = &invocations {
                                inv.record(crate::cfn::function::PROBE, started.elapsed());
                            }
                            // As the probe queue does: a failed job comes back.
                            if let Err(e) = done {
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
                invocations.clone(),
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
            deliver,
            instances,
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
