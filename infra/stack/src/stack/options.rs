//! What a local stack is started with: its backend, addresses, schedules, queues and the
//! pipeline's settings, and the benchmarks' variant.

use super::*;

/// How often a scheduled function runs locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// At the rate its schedule in the template says.
    Template,
    /// At another period (tests and benchmarks that need it sooner).
    Period(Duration),
    /// Never on its own (a test calls it).
    Never,
}

/// Queue settings a deployment (the template's `MaxReceiveCount`) or a test may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Receives before a message moves to the dead-letter queue (the template parameter).
    pub max_receive_count: u32,
    /// Overrides every queue's visibility timeout after the deployment (tests of
    /// redelivery use a short one).
    pub visibility_timeout_s: Option<u32>,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            max_receive_count: 100,
            visibility_timeout_s: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct StackOptions {
    /// The stack's name, as a prefix (tests use a unique one each).
    pub prefix: String,
    pub api_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub ws_addr: SocketAddr, // the WebSocket API (and its management endpoint)
    /// The admin token; a random one when `None`.
    pub admin_token: Option<String>,
    pub config: PipelineConfig,
    /// Long-poll wait of the queue pollers, in seconds.
    pub poll_wait_s: i32,
    /// Queue settings (dead-letter threshold, visibility override).
    pub queues: QueueSettings,
    /// How often the retry scheduler (the sweeper) runs.
    pub sweep_period: Every,
    /// Whether the retry scheduler's first run is at the start rather than one period later:
    /// a restarted runner stands for a crashed worker, and on AWS the scheduler's invocation
    /// (sweeping, then watching for crashed attempts) goes on meanwhile.
    pub sweep_at_start: bool,
    /// How often the health function runs.
    pub health_period: Every,
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
    /// Counts the capacity units of every DynamoDB request the functions and APIs make, per
    /// partition key value, on each table and index (the `keys` benchmark; emulator only).
    pub capacity: Option<crate::capacity::Meter>,
    /// Counts every invocation of a function and how long it ran (the `cost` benchmark): a
    /// batch of a queue, a request of an API, a scheduled run.
    pub invocations: Option<invocations::Invocations>,
    /// The in-process backend's request latencies (`Backend::Memory` only; `None`: none).
    pub latency: Option<converger_memory::LatencyModel>,
    /// The time the in-process backend's pipelines and queues read (`Backend::Memory`
    /// only): a test's manual clock moves backoffs and cooldowns on at once.
    pub clock: Option<std::sync::Arc<dyn converger_core::time::Clock>>,
    /// Addresses allowed into the admin pages and API (`ADMIN_IP_ALLOWLIST`); `None`: any.
    pub admin_ip_allowlist: Option<converger_core::net::Allowlist>,
    /// Most rows of a CSV export from the pages (`EXPORT_LIMIT`); `None`: its default.
    pub export_limit: Option<usize>,
    /// What the functions store and send to.
    pub backend: Backend,
    /// The emulator a `Backend::Emulator` stack deploys on; `None`: the one
    /// `AWS_ENDPOINT_URL` names, or one started for the stack.
    pub endpoint: Option<String>,
    /// Template parameters beyond the defaults (`ApiThrottleRate=5`, say): deployed with the
    /// stack, and read by the local gateways (the HTTP API's route throttles) on either
    /// backend.
    pub parameters: std::collections::BTreeMap<String, String>,
    /// How much of what the emulator's CloudFormation skips the deployment makes through the
    /// services' APIs (`Backend::Emulator`): all of it by default; the APIs alone for the
    /// tests' and benchmarks' stacks (the test command's reference deployment makes all).
    pub skipped: cfn::SkippedMade,
}

/// The emulator the benchmarks' stacks deploy on, when set ([`StackOptions::bench`]): the
/// test command starts one for the benchmark smoke runs beside the other tests' emulator, so
/// that a benchmark waiting on one request after another does not queue behind every other
/// test's (see `.config/nextest.toml`).
pub const BENCH_ENDPOINT_ENV: &str = "CONVERGER_BENCH_ENDPOINT_URL";

/// The long-poll wait of a stack stopped rather than killed: each idle stack's fourteen
/// pollers ask the emulator once per 10 s, not once a second (a message comes at once).
pub const POLL_WAIT_STOPPED_S: i32 = 10;

impl Default for StackOptions {
    fn default() -> Self {
        let config = PipelineConfig {
            allowlist: converger_core::net::Allowlist::loopback(),
            // The local emulator's transactions are not serializable (see DynamoStore).
            serial_transactions: true,
            // Breaker openings counted at once (the rest of usage comes from the table's
            // stream as it goes).
            usage_flush: Duration::ZERO,
            platform_account: Some(crate::LOCAL_ACCOUNT.to_owned()),
            ..PipelineConfig::default()
        };
        Self {
            prefix: "converger-".into(),
            api_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ws_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_token: None,
            config,
            // A poller waits up to 1 s for a message. A runner that is killed (the chaos
            // suite's, a developer's Ctrl-C) leaves its long polls waiting in the emulator,
            // which hands a message that comes meanwhile to the dead poller: hidden for the
            // visibility timeout (6 minutes). Lambda's pollers do not die with a function;
            // a short wait keeps that window to a second. Stacks that are stopped, not
            // killed (the tests', the benchmarks'), wait longer: see `POLL_WAIT_STOPPED_S`.
            poll_wait_s: 1,
            pollers_per_queue: 2,
            run_functions: true,
            queues: QueueSettings::default(),
            sweep_period: Every::Template,
            sweep_at_start: false,
            health_period: Every::Template,
            counter: None,
            capacity: None,
            invocations: None,
            latency: None,
            clock: None,
            admin_ip_allowlist: None,
            export_limit: None,
            backend: Backend::Emulator,
            endpoint: None,
            parameters: std::collections::BTreeMap::new(),
            skipped: cfn::SkippedMade::All,
        }
    }
}

impl StackOptions {
    /// A benchmark's stack: its own (`tag` and the process id), no sweeper or health runs on
    /// a timer, on the emulator [`BENCH_ENDPOINT_ENV`] names if set, first tries' watch
    /// copies a second later (a case waits for them: `bench::quiet`), the live stream on as
    /// the template deploys it.
    pub fn bench(tag: &str) -> Self {
        let mut config = Self::default().config;
        config.watch_delay_s = crate::BENCH_WATCH_DELAY_S;
        config.live_stream = true;
        Self {
            config,
            prefix: format!("{tag}{}-", std::process::id()),
            sweep_period: Every::Never,
            health_period: Every::Never,
            poll_wait_s: POLL_WAIT_STOPPED_S,
            skipped: cfn::SkippedMade::Apis,
            endpoint: std::env::var(BENCH_ENDPOINT_ENV)
                .ok()
                .filter(|e| !e.is_empty()),
            ..Self::default()
        }
    }
}

/// What the functions store and send to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The template deployed on the emulator, every request IAM-checked (the runner's
    /// default; the tests of AWS code paths).
    #[default]
    Emulator,
    /// The in-process backend: nothing deployed, the template's routes and schedules played
    /// over memory queues and tables (the use-case tests).
    Memory,
}
