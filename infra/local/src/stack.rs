//! The whole system on one machine: the emulator (started unless `AWS_ENDPOINT_URL` names
//! one), every resource of `infra/template.yaml`, the queue-triggered functions driven the way
//! Lambda's event source mappings drive them, and the two HTTP APIs.

use crate::emulator::Emulator;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use converger_core::Tier;
use converger_http::AppState;
use converger_pipeline::{Pipeline, PipelineConfig, bootstrap};
use converger_store::aws::Clients;
use converger_store::counter::RequestCounter;
use converger_store::resources::{
    ACTIVITIES_QUEUE, PROBE_QUEUE, QueueDef, REPLAY_QUEUE, tier_queue,
};
use converger_store::{Resources, provision, sqs::queue_url};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Prefix of every resource name (tests use a unique one each).
    pub prefix: String,
    pub api_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// The WebSocket API (and its management endpoint).
    pub ws_addr: SocketAddr,
    /// The admin token; a random one when `None`.
    pub admin_token: Option<String>,
    pub config: PipelineConfig,
    /// Long-poll wait of the queue pollers, in seconds.
    pub poll_wait_s: i32,
    /// Queue settings (dead-letter threshold, visibility override).
    pub queues: provision::QueueSettings,
    /// How often the retry scheduler (the sweeper) runs; `None`: never on its own.
    pub sweep_period: Option<Duration>,
    /// How often the health function runs (`None`: never; tests call it directly).
    pub health_period: Option<Duration>,
    /// Whether the queue-triggered functions run (benchmarks that only seed and sweep turn
    /// them off).
    pub run_functions: bool,
    /// Long-pollers per queue, started `1000 / n` ms apart (Lambda's event source mapping
    /// polls with several at once).
    pub pollers_per_queue: usize,
    /// Counts every AWS request the functions and APIs make (the `requests` benchmark). The
    /// pollers' own receives and deletes are counted too when they carry messages; empty
    /// long polls are counted apart, as `esm/EmptyReceive`.
    pub counter: Option<RequestCounter>,
    /// Addresses allowed into the admin pages and API (`ADMIN_IP_ALLOWLIST`); `None`: any.
    pub admin_ip_allowlist: Option<converger_core::net::Allowlist>,
}

impl Default for StackOptions {
    fn default() -> Self {
        let config = PipelineConfig {
            allowlist: converger_core::net::Allowlist::loopback(),
            // The local emulator's transactions are not serializable (see DynamoStore).
            serial_transactions: true,
            ..PipelineConfig::default()
        };
        Self {
            prefix: "converger-".into(),
            api_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ws_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_token: None,
            config,
            poll_wait_s: 1,
            pollers_per_queue: 2,
            run_functions: true,
            queues: provision::QueueSettings::default(),
            sweep_period: Some(Duration::from_secs(60)),
            health_period: Some(Duration::from_secs(300)),
            counter: None,
            admin_ip_allowlist: None,
        }
    }
}

impl StackOptions {
    /// A benchmark's stack: its own resource names (`tag` and the process id), no sweeper and
    /// no health runs on a timer (a scenario measures what it runs itself).
    pub fn bench(tag: &str) -> Self {
        Self {
            prefix: format!("{tag}{}-", std::process::id()),
            sweep_period: None,
            health_period: None,
            ..Self::default()
        }
    }
}

pub struct Stack {
    pub api_url: String,
    pub admin_url: String,
    /// Where websocket clients connect (`ws://.../prod`; add `?channel_id=...&token=...`).
    pub ws_url: String,
    /// The first admin user of the web pages (`super_admin`), created at start.
    pub admin_email: String,
    pub admin_password: String,
    pub aws_endpoint_url: Option<String>,
    pub admin_token: String,
    pub pipeline: Arc<Pipeline>,
    pub clients: Clients,
    pub resources: Resources,
    emulator: Option<Emulator>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

impl Stack {
    pub async fn start(opts: StackOptions) -> Result<Self, String> {
        let (emulator, endpoint) = match std::env::var("AWS_ENDPOINT_URL") {
            Ok(ep) if !ep.is_empty() => (None, Some(ep)),
            _ => {
                let em = Emulator::start().await?;
                let ep = em.endpoint.clone();
                (Some(em), Some(ep))
            }
        };
        let sdk = converger_store::aws::load_config_for(endpoint.as_deref()).await;
        let clients = Clients::new(&sdk);
        let resources = Resources::with_prefix(&opts.prefix);
        provision::provision(
            &clients.dynamodb,
            &clients.sqs,
            &clients.eventbridge,
            &resources,
            opts.queues,
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut function_clients = match &opts.counter {
            Some(c) => Clients::counted(&sdk, c),
            None => clients.clone(),
        };
        // The WebSocket API: bound first, so the functions know its management endpoint.
        let ws_listener = tokio::net::TcpListener::bind(opts.ws_addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", opts.ws_addr))?;
        let ws_local = ws_listener.local_addr().map_err(|e| e.to_string())?;
        function_clients.websocket_management_url =
            Some(format!("http://{ws_local}/{}", crate::gateway::STAGE));
        let pipeline = Arc::new(bootstrap::with_websockets(
            bootstrap::aws_pipeline(&function_clients, &resources, opts.config.clone()).await?,
            &function_clients,
        ));

        let (shutdown, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let admin_token = opts.admin_token.clone().unwrap_or_else(random_token);

        // The functions, as their event source mappings would run them.
        if opts.run_functions {
            let ingest_url = queue_url(&clients.sqs, &resources, &ACTIVITIES_QUEUE)
                .await
                .map_err(|e| e.to_string())?;
            tasks.extend(spawn_pollers(
                clients.sqs.clone(),
                ingest_url,
                5,
                &opts,
                rx.clone(),
                Function::Ingest(pipeline.clone()),
            ));
            let replay_url = queue_url(&clients.sqs, &resources, &REPLAY_QUEUE)
                .await
                .map_err(|e| e.to_string())?;
            tasks.extend(spawn_pollers(
                clients.sqs.clone(),
                replay_url,
                2,
                &opts,
                rx.clone(),
                Function::Replay(pipeline.clone()),
            ));
            let probe_url = queue_url(&clients.sqs, &resources, &PROBE_QUEUE)
                .await
                .map_err(|e| e.to_string())?;
            tasks.extend(spawn_pollers(
                clients.sqs.clone(),
                probe_url,
                2,
                &opts,
                rx.clone(),
                Function::Probe(pipeline.clone()),
            ));
            for tier in Tier::ALL {
                let def: QueueDef = tier_queue(tier);
                let url = queue_url(&clients.sqs, &resources, &def)
                    .await
                    .map_err(|e| e.to_string())?;
                tasks.extend(spawn_pollers(
                    clients.sqs.clone(),
                    url,
                    tier.max_concurrency(),
                    &opts,
                    rx.clone(),
                    Function::Deliver(pipeline.clone()),
                ));
            }
        }

        // The scheduled functions, as their schedules would fire them.
        if let Some(period) = opts.sweep_period {
            let p = pipeline.clone();
            tasks.push(every(period, rx.clone(), move || {
                let p = p.clone();
                async move {
                    if let Err(e) = p.sweep().await {
                        tracing::warn!(error = %e, "sweep failed");
                    }
                }
            }));
        }
        if let Some(period) = opts.health_period {
            let p = pipeline.clone();
            tasks.push(every(period, rx.clone(), move || {
                let p = p.clone();
                async move {
                    if let Err(e) = p.health_check().await {
                        tracing::warn!(error = %e, "health checks failed");
                    }
                }
            }));
        }

        // The APIs and the web pages.
        let state = AppState::new(pipeline.clone(), Some(admin_token.clone())).with_web(
            converger_http::web::WebConfig {
                admin_allow: opts.admin_ip_allowlist.clone(),
                ..converger_http::web::WebConfig::local()
            },
        );
        let admin_password = random_token();
        let admin_email = "admin@localhost".to_owned();
        match converger_http::web::create_user(
            &state,
            converger_core::web::Realm::Admin,
            &admin_email,
            &admin_password,
            converger_core::web::Role::SuperAdmin,
            None,
        )
        .await
        {
            Ok(_) => {}
            // A stack restarted on the same tables: its first admin gets the new password,
            // so that the one printed works.
            Err(converger_http::web::NewUserError::Exists) => {
                let hash = converger_http::web::hash_password(&admin_password)?;
                state
                    .pipeline
                    .store
                    .set_password(converger_core::web::Realm::Admin, &admin_email, &hash)
                    .await
                    .map_err(|e| format!("first admin user: {e}"))?;
            }
            Err(e) => return Err(format!("first admin user: {e}")),
        }
        let (api_url, t) = serve(
            opts.api_addr,
            converger_http::api::router(state.clone()),
            rx.clone(),
        )
        .await?;
        tasks.push(t);
        let (admin_url, t) = serve(
            opts.admin_addr,
            converger_http::admin::router(state.clone())
                .merge(converger_http::web::router(state))
                .layer(axum::middleware::from_fn(source_ip)),
            rx.clone(),
        )
        .await?;
        tasks.push(t);
        tasks.push(serve_listener(
            ws_listener,
            crate::gateway::router(pipeline.clone()),
            rx.clone(),
        ));

        Ok(Self {
            api_url,
            admin_url,
            ws_url: format!("ws://{ws_local}/{}", crate::gateway::STAGE),
            admin_email,
            admin_password,
            aws_endpoint_url: endpoint,
            admin_token,
            pipeline,
            clients,
            resources,
            emulator,
            shutdown,
            tasks,
        })
    }

    /// Stops the pollers, the servers and the emulator this stack started.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        if let Some(em) = self.emulator {
            em.stop().await;
        }
    }

    /// The emulator's process id, when this stack started it.
    pub fn emulator_pid(&self) -> Option<u32> {
        self.emulator.as_ref().and_then(Emulator::pid)
    }

    /// The tier queue's URL.
    pub async fn queue_url(&self, tier: Tier) -> Result<String, String> {
        queue_url(&self.clients.sqs, &self.resources, &tier_queue(tier))
            .await
            .map_err(|e| e.to_string())
    }
}

/// Runs `f` every `period` (the first time one period after the start) until `stop`.
pub(crate) fn every<F, Fut>(
    period: Duration,
    mut stop: watch::Receiver<bool>,
    f: F,
) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => f().await,
                _ = stop.changed() => break,
            }
        }
    })
}

async fn serve(
    addr: SocketAddr,
    router: axum::Router,
    stop: watch::Receiver<bool>,
) -> Result<(String, JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    Ok((
        format!("http://{local}"),
        serve_listener(listener, router, stop),
    ))
}

fn serve_listener(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await
        {
            tracing::error!(error = %e, "server stopped");
        }
    })
}

#[derive(Clone)]
enum Function {
    Ingest(Arc<Pipeline>),
    Deliver(Arc<Pipeline>),
    Replay(Arc<Pipeline>),
    Probe(Arc<Pipeline>),
}

/// Plays one SQS event source mapping: long-polls batches of up to 10 with several staggered
/// pollers, runs at most `max_concurrency` batches at once, deletes what succeeded and leaves
/// reported failures to reappear after their visibility timeout.
fn spawn_pollers(
    sqs: aws_sdk_sqs::Client,
    url: String,
    max_concurrency: usize,
    opts: &StackOptions,
    stop: watch::Receiver<bool>,
    function: Function,
) -> Vec<JoinHandle<()>> {
    let permits = Arc::new(Semaphore::new(max_concurrency));
    let n = opts.pollers_per_queue.max(1);
    (0..n)
        .map(|i| {
            let offset = Duration::from_millis(1000 * i as u64 / n as u64);
            spawn_poller(
                Poller {
                    sqs: sqs.clone(),
                    url: url.clone(),
                    counter: opts.counter.clone(),
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
    url: String,
    counter: Option<RequestCounter>,
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
                .queue_url(&poller.url)
                .max_number_of_messages(10)
                .wait_time_seconds(wait_s)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send();
            let out = tokio::select! {
                r = recv => r,
                _ = stop.changed() => break,
            };
            let messages = match out {
                Ok(o) => o.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), queue = %poller.url, "receive failed");
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
    let resp = match function {
        Function::Ingest(p) => p.ingest_batch(event).await,
        Function::Deliver(p) => p.deliver_batch(event).await,
        Function::Replay(p) => p.replay_batch(event).await,
        Function::Probe(p) => p.flow_batch(event).await,
    };
    let failed: std::collections::HashSet<String> = resp
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
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
        .queue_url(&poller.url)
        .set_entries(Some(done))
        .send()
        .await
    {
        tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "delete failed; messages will be redelivered");
    }
}

/// The client's address, where the admin IP allowlist reads it (on Lambda, API Gateway's
/// source IP).
async fn source_ip(
    axum::extract::ConnectInfo(addr): axum::extract::ConnectInfo<SocketAddr>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    req.extensions_mut()
        .insert(converger_http::web::SourceIp(addr.ip()));
    next.run(req).await
}
