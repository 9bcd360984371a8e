//! The whole system on one machine: the emulator (started unless `AWS_ENDPOINT_URL` names
//! one), `infra/template.yaml` deployed on it as a CloudFormation stack, each function run as
//! its deployed configuration says (its environment, its event source mappings, its schedule,
//! its HTTP routes) with every AWS request checked against its deployed IAM policy.

use crate::cfn::{self, DeployedStack, function as fun};
use crate::emulator::Emulator;
use crate::iam::{IamGuard, Violation};
use converger_core::Tier;
use converger_http::AppState;
use converger_lambda::bootstrap;
use converger_pipeline::{Pipeline, PipelineConfig};
use converger_store::Resources;
use converger_store::aws::{Clients, SharedInterceptor};
use converger_store::counter::RequestCounter;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use std::{net::SocketAddr, sync::Arc};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod aws;
pub(crate) mod changes;
mod esm;
pub mod invocations;
mod memory;
mod options;
use crate::inprocess::Memory;
use crate::schedule::{every, every_after};
pub use aws::AwsStack;
use aws::build_aws;
use esm::{Function, Mapping, spawn_pollers};
pub use options::{
    BENCH_ENDPOINT_ENV, Backend, Every, POLL_WAIT_STOPPED_S, QueueSettings, StackOptions,
};

/// Each function's own pipeline, built from its deployed environment with clients whose
/// every request its deployed IAM policy must allow (as one Lambda instance of each).
#[derive(Clone)]
pub struct Functions {
    pub ingest: Arc<Pipeline>,
    pub deliver: Arc<Pipeline>,
    pub retry_scheduler: Arc<Pipeline>,
    pub replay: Arc<Pipeline>,
    pub probe: Arc<Pipeline>,
    pub health: Arc<Pipeline>,
    pub api: Arc<Pipeline>,
    pub admin: Arc<Pipeline>,
    pub websocket: Arc<Pipeline>,
    /// The live stream's fan-out (the bus's channel events, through the stream queue).
    pub stream: Arc<Pipeline>,
    /// What follows from each change of a delivery row (the deliveries table's stream).
    pub changes: Arc<Pipeline>,
    /// SES's events (nothing emits them locally: tests hand the function what SES would).
    pub email_events: Arc<Pipeline>,
}

enum Backing {
    Aws(Box<AwsStack>),
    Memory(Memory),
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
    /// The operator's (and the tests') own view: the admin function's names with unchecked
    /// clients, for seeding and inspecting. What the functions do goes through [`Functions`].
    pub pipeline: Arc<Pipeline>,
    /// The same view's store and queues, for seeding and inspecting what no use case shows.
    pub store: Arc<dyn converger_ports::Store>,
    pub queue: Arc<dyn converger_ports::Queue>,
    pub functions: Functions,
    /// How long the whole start took.
    pub start_time: Duration,
    name: String,
    backing: Backing,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// How far the deliveries table's stream has been read.
    changes: changes::Progress,
}

fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// The functions that push to websocket clients or close them (admin: a rotated key's stream
/// connections) through the management endpoint their template environment names.
fn pushes(logical_id: &str) -> bool {
    matches!(
        logical_id,
        fun::DELIVER | fun::PROBE | fun::WEBSOCKET | fun::STREAM | fun::CHANGES | fun::ADMIN
    )
}

/// What either backend hands the common part of the start: the functions, the admin
/// function's secrets, and what the template says of routes and schedules.
struct Built {
    name: String,
    functions: Functions,
    pipeline: Arc<Pipeline>,
    store: Arc<dyn converger_ports::Store>,
    queue: Arc<dyn converger_ports::Queue>,
    admin_token: String,
    session_secret: String,
    api_routes: Vec<cfn::Route>,
    admin_routes: Vec<cfn::Route>,
    sweep_schedule: Option<Duration>,
    health_schedule: Option<Duration>,
    backing: Backing,
}

/// The in-process backend: one set of memory tables and queues shared by every function (each
/// with its own pipeline and caches, as its own Lambda instance), the template's routes and
/// schedules, and the memory queues dispatched to the functions' batch handlers.
async fn build_memory(
    opts: &StackOptions,
    management_url: &str,
    stop: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
    progress: &changes::Progress,
) -> Result<Built, String> {
    let declared = cfn::declared_functions()?;
    let declared = |id: &str| {
        declared
            .get(id)
            .cloned()
            .ok_or_else(|| format!("the template has no function {id}"))
    };
    let limits = crate::inprocess::Limits {
        clock: opts.clock.clone(),
        ..Default::default()
    };
    let (pipeline, memory) =
        crate::inprocess::memory_pipeline_with(opts.latency, limits, opts.config.clone())?;
    // Websocket pushes go to the local gateway through the management API's client (no
    // emulator: the gateway is the only endpoint it calls).
    let sdk = converger_store::aws::load_config_for(Some(management_url)).await;
    let sockets: Arc<dyn converger_ports::Sockets> = Arc::new(
        converger_store::ApiGatewaySockets::new(&sdk, management_url, &[]),
    );
    let build = |id: &str| -> Result<Arc<Pipeline>, String> {
        let adapters = memory.adapters(&opts.config)?;
        let p = Pipeline::new(
            memory.store.clone(),
            memory.queue.clone(),
            memory.events.clone(),
            adapters,
            opts.config.clone(),
        )
        .with_payloads(memory.payloads.clone());
        let p = memory.clocked(p);
        let p = if pushes(id) {
            p.with_sockets(sockets.clone())
                .with_mailer(memory.mailer.clone())
                .with_tenant_aws(memory.tenant_aws.clone())
        } else {
            p
        };
        // Attempts' spans.
        Ok(Arc::new(aws::with_parameter_spans(
            p,
            id,
            &opts.parameters,
        )?))
    };
    let functions = Functions {
        ingest: build(fun::INGEST)?,
        deliver: build(fun::DELIVER)?,
        retry_scheduler: build(fun::RETRY_SCHEDULER)?,
        replay: build(fun::REPLAY)?,
        probe: build(fun::PROBE)?,
        email_events: build(fun::EMAIL_EVENTS)?,
        health: build(fun::HEALTH)?,
        api: build(fun::API)?,
        admin: build(fun::ADMIN)?,
        websocket: build(fun::WEBSOCKET)?,
        stream: build(fun::STREAM)?,
        changes: build(fun::CHANGES)?,
    };
    if opts.run_functions {
        tasks.push(memory::spawn_dispatcher(
            memory.queue.clone(),
            memory::Triggered {
                deliver: functions.deliver.clone(),
                probe: functions.probe.clone(),
                replay: functions.replay.clone(),
            },
            opts.queues.visibility_timeout_s.unwrap_or(30),
            opts.invocations.clone(),
            stop.clone(),
        ));
        // The deliveries table's stream (one shard) and its mapping.
        tasks.push(changes::spawn_memory(
            memory.store.clone(),
            functions.changes.clone(),
            opts.invocations.clone(),
            progress.clone(),
            1,
            stop.clone(),
        ));
        // The bus's rule to the stream queue exists where the stack has the live stream.
        if opts.config.live_stream {
            tasks.push(memory::spawn_stream(
                &memory.events,
                cfn::stream_rule_types()?,
                functions.stream.clone(),
                stop.clone(),
            ));
        }
    }
    Ok(Built {
        name: cfn::stack_name(&opts.prefix),
        functions,
        pipeline: Arc::new(pipeline),
        store: memory.store.clone(),
        queue: memory.queue.clone(),
        admin_token: opts.admin_token.clone().unwrap_or_else(random_token),
        session_secret: random_token(),
        api_routes: declared(fun::API)?.routes,
        admin_routes: declared(fun::ADMIN)?.routes,
        sweep_schedule: declared(fun::RETRY_SCHEDULER)?.schedule_period(),
        health_schedule: declared(fun::HEALTH)?.schedule_period(),
        backing: Backing::Memory(memory),
    })
}

impl Stack {
    pub async fn start(opts: StackOptions) -> Result<Self, String> {
        let started = Instant::now();
        if opts.clock.is_some() && opts.backend != Backend::Memory {
            return Err("a stack's own clock runs the in-process backend only".into());
        }
        // The WebSocket API: bound first, so the functions know its management endpoint.
        let ws_listener = tokio::net::TcpListener::bind(opts.ws_addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", opts.ws_addr))?;
        let ws_local = ws_listener.local_addr().map_err(|e| e.to_string())?;
        let management_url = format!("http://{ws_local}/{}", crate::gateway::STAGE);

        let (shutdown, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let changes = changes::Progress::default();
        let built = match opts.backend {
            Backend::Emulator => build_aws(&opts, &management_url, &rx, &mut tasks, &changes).await,
            Backend::Memory => {
                build_memory(&opts, &management_url, &rx, &mut tasks, &changes).await
            }
        };
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                let _ = shutdown.send(true);
                return Err(e);
            }
        };
        let Built {
            name,
            functions,
            pipeline,
            store,
            queue,
            admin_token,
            session_secret,
            api_routes,
            admin_routes,
            sweep_schedule,
            health_schedule,
            backing,
        } = built;

        // The scheduled functions, as their schedules would fire them.
        let period = |every: Every, template: Option<Duration>, logical: &str| match every {
            Every::Never => Ok(None),
            Every::Template | Every::Period(_) if template.is_none() => Err(format!(
                "the template schedules no {logical} (expected a `rate(...)` schedule)"
            )),
            Every::Template => Ok(template),
            Every::Period(d) => Ok(Some(d)),
        };
        if let Some(period) = period(opts.sweep_period, sweep_schedule, fun::RETRY_SCHEDULER)? {
            let p = functions.retry_scheduler.clone();
            let first = if opts.sweep_at_start {
                Duration::ZERO
            } else {
                period
            };
            tasks.push(every_after(first, period, rx.clone(), move || {
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
        if let Some(period) = period(opts.health_period, health_schedule, fun::HEALTH)? {
            let p = functions.health.clone();
            tasks.push(every(period, rx.clone(), move || {
                let p = p.clone();
                async move {
                    if let Err(e) = p.health().health_check().await {
                        tracing::warn!(error = %e, "health checks failed");
                    }
                }
            }));
        }

        // The APIs and the web pages, each on the routes the template gives its function.
        let api_state = AppState::new(functions.api.clone(), None);
        let admin_state = AppState::new(functions.admin.clone(), Some(admin_token.clone()))
            .with_web({
                let local = converger_http::web::WebConfig::local();
                converger_http::web::WebConfig {
                    admin_allow: opts.admin_ip_allowlist.clone(),
                    session_secret: session_secret.into_bytes(),
                    export_limit: opts.export_limit.unwrap_or(local.export_limit),
                    stream_url: converger_http::web::stream_url_of(&management_url),
                    ..local
                }
            });
        let admin_password = random_token();
        let admin_email = "admin@localhost".to_owned();
        match converger_http::web::create_user(
            &admin_state,
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
                let hash = converger_http::web::hash_password(&admin_password)
                    .map_err(|e| e.to_string())?;
                admin_state
                    .accounts
                    .set_password(converger_core::web::Realm::Admin, &admin_email, &hash)
                    .await
                    .map_err(|e| format!("first admin user: {e}"))?;
            }
            Err(e) => return Err(format!("first admin user: {e}")),
        }
        let api_routes = Arc::new(api_routes);
        let api_throttles = Arc::new(crate::throttle::RouteThrottles::of_http_api(
            &opts.parameters,
        )?);
        let api_throttles_admin = api_throttles.clone();
        let (api_url, t) = serve(
            opts.api_addr,
            converger_http::app::tenant_api(api_state)
                .layer(axum::middleware::from_fn_with_state(
                    (opts.invocations.clone(), fun::API),
                    timed,
                ))
                .layer(axum::middleware::from_fn(source_ip))
                .layer(axum::middleware::from_fn(
                    move |req: axum::extract::Request, next: axum::middleware::Next| {
                        let routes = api_routes.clone();
                        let throttles = api_throttles.clone();
                        async move { gateway_route(&routes, Some(&throttles), req, next).await }
                    },
                )),
            rx.clone(),
        )
        .await?;
        tasks.push(t);
        let admin_routes = Arc::new(admin_routes);
        let (admin_url, t) = serve(
            opts.admin_addr,
            converger_http::admin::router(admin_state.clone())
                .merge(converger_http::web::router(admin_state))
                .layer(axum::middleware::from_fn_with_state(
                    (opts.invocations.clone(), fun::ADMIN),
                    timed,
                ))
                .layer(axum::middleware::from_fn(source_ip))
                .layer(axum::middleware::from_fn(
                    move |req: axum::extract::Request, next: axum::middleware::Next| {
                        let routes = admin_routes.clone();
                        let throttles = api_throttles_admin.clone();
                        async move { gateway_route(&routes, Some(&throttles), req, next).await }
                    },
                )),
            rx.clone(),
        )
        .await?;
        tasks.push(t);
        tasks.push(serve_listener(
            ws_listener,
            crate::gateway::router(
                functions.websocket.clone(),
                Some(Arc::new(
                    crate::throttle::RouteThrottles::of_websocket_stage(&opts.parameters)?,
                )),
            ),
            rx.clone(),
        ));

        Ok(Self {
            api_url,
            admin_url,
            ws_url: format!("ws://{ws_local}/{}", crate::gateway::STAGE),
            admin_email,
            admin_password,
            aws_endpoint_url: match &backing {
                Backing::Aws(a) => Some(a.endpoint.clone()),
                Backing::Memory(_) => None,
            },
            admin_token,
            pipeline,
            store,
            queue,
            functions,
            start_time: started.elapsed(),
            name,
            backing,
            shutdown,
            tasks,
            changes,
        })
    }

    /// Waits until every row written before now has been handed to the changes function
    /// (its events, frames and counts follow from it), for at most a minute; whether it was.
    pub async fn changes_settled(&self) -> bool {
        self.changes
            .wait_past(converger_core::time::now_ms(), Duration::from_secs(60))
            .await
    }

    /// The stack's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The emulator side, when the stack runs on it.
    pub fn aws(&self) -> Result<&AwsStack, String> {
        match &self.backing {
            Backing::Aws(a) => Ok(a),
            Backing::Memory(_) => Err(format!(
                "stack {} runs on the in-process backend; this needs the emulator",
                self.name
            )),
        }
    }

    /// The memory tables and queues, when the stack runs on the in-process backend.
    pub fn memory(&self) -> Option<&Memory> {
        match &self.backing {
            Backing::Memory(m) => Some(m),
            Backing::Aws(_) => None,
        }
    }

    /// Every request a function made that its deployed policy does not allow (none on the
    /// in-process backend, which has no policies).
    pub fn iam_violations(&self) -> Vec<Violation> {
        match &self.backing {
            Backing::Aws(a) => a.guards.values().flat_map(IamGuard::violations).collect(),
            Backing::Memory(_) => Vec::new(),
        }
    }

    /// Writes activities and deliveries straight into the tables (no queue message), the way
    /// `converger_local::seed` leaves them.
    pub async fn seed_rows(
        &self,
        activities: &[converger_ports::Activity],
        rows: &[converger_ports::Delivery],
    ) -> Result<(), String> {
        match &self.backing {
            Backing::Aws(a) => {
                let dynamo = converger_store::dynamo::DynamoStore::new(
                    a.clients.dynamodb.clone(),
                    a.resources.clone(),
                );
                dynamo
                    .seed_activities(activities)
                    .await
                    .map_err(|e| e.to_string())?;
                dynamo
                    .seed_deliveries(rows)
                    .await
                    .map_err(|e| e.to_string())
            }
            Backing::Memory(m) => {
                m.store
                    .seed_activities(activities)
                    .map_err(|e| e.to_string())?;
                m.store.seed_deliveries(rows).map_err(|e| e.to_string())
            }
        }
    }

    /// Stops the pollers, the servers and the emulator this stack started.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        for t in std::mem::take(&mut self.tasks) {
            t.abort();
            let _ = t.await;
        }
        if let Backing::Aws(a) = &mut self.backing
            && let Some(em) = a.emulator.take()
        {
            em.stop().await;
        }
    }

    /// The emulator's process id, when this stack started it.
    pub fn emulator_pid(&self) -> Option<u32> {
        match &self.backing {
            Backing::Aws(a) => a.emulator.as_ref().and_then(Emulator::pid),
            Backing::Memory(_) => None,
        }
    }
}

/// A stack that goes out of scope without [`Stack::stop`] (a test that panicked, say) stops
/// its servers, pollers and schedules at once rather than when its runtime ends; an emulator it
/// started is killed with its process handle.
impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Records each request that reaches a function (API Gateway's own refusals, unrouted
/// paths, never do) as one invocation of it.
async fn timed(
    axum::extract::State((invocations, function)): axum::extract::State<(
        Option<invocations::Invocations>,
        &'static str,
    )>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = Instant::now();
    let resp = next.run(req).await;
    if let Some(i) = &invocations {
        i.record(function, started.elapsed());
    }
    resp
}

/// API Gateway's routing: a request no route of the function takes never reaches it, and one
/// past its route's throttle is answered 429 by the gateway (no `Retry-After`, as API Gateway).
async fn gateway_route(
    routes: &[cfn::Route],
    throttles: Option<&crate::throttle::RouteThrottles>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(route) = cfn::route_for(routes, req.method().as_str(), req.uri().path()) {
        if throttles.is_some_and(|t| !t.admit(route)) {
            return (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                axum::Json(serde_json::json!({"message": "Too Many Requests"})),
            )
                .into_response();
        }
        next.run(req).await
    } else {
        (
            axum::http::StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"message": "Not Found"})),
        )
            .into_response()
    }
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

/// The client's address, where the admin IP allowlist, the sign-in counts and the refused-
/// request throttle read it (on Lambda, API Gateway's source IP).
async fn source_ip(
    axum::extract::ConnectInfo(addr): axum::extract::ConnectInfo<SocketAddr>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    req.extensions_mut()
        .insert(converger_http::web::SourceIp(addr.ip()));
    next.run(req).await
}
