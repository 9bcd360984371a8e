//! `converger-local`: runs the whole system on this machine, or (`test`) every test.
//!
//!   cargo run -p converger-local [-- --demo]
//!   cargo run -p converger-local -- test [--no-lint] [-- <test runner args>]
//!   cargo run --release -p converger-local -- bench <scenario> [options]
//!   cargo run -p converger-local -- chaos <scenario> [options]

use converger_local::emulator::on_path;
use converger_local::{Every, Stack, StackOptions, emulator};
use converger_pipeline::PipelineConfig;
use std::net::SocketAddr;
use std::process::ExitCode;
use tokio::process::Command;

fn addr(var: &str, default: &str) -> Result<SocketAddr, String> {
    let v = std::env::var(var).unwrap_or_else(|_| default.into());
    v.parse()
        .map_err(|_| format!("{var}: `{v}` is not host:port"))
}

async fn run(demo: bool) -> Result<(), String> {
    let mut config = PipelineConfig::from_env().map_err(|e| e.to_string())?;
    if std::env::var("WEBHOOK_ALLOW_CIDRS").is_err() {
        config.allowlist = converger_core::net::Allowlist::loopback();
    }
    if std::env::var("DYNAMODB_SERIAL_TRANSACTIONS").is_err() {
        config.serial_transactions = true;
    }
    // The local stack has the live stream unless `LIVE_STREAM=false` says otherwise.
    if std::env::var("LIVE_STREAM").is_err() {
        config.live_stream = true;
    }
    // Usage is logged and folded once a minute, as the template deploys it, unless
    // `USAGE_FOLD=false` says otherwise (the pages then count at once).
    if std::env::var("USAGE_FOLD").is_err() {
        config.usage_fold = true;
    }
    if std::env::var("PLATFORM_ACCOUNT_ID").is_err() {
        config.platform_account = Some(converger_local::LOCAL_ACCOUNT.to_owned());
    }
    converger_pipeline::metrics::set_enabled(std::env::var("CONVERGER_METRICS").is_ok());
    // The schedules run at the template's rates unless these say otherwise.
    let period = |var: &str| -> Result<Every, String> {
        match std::env::var(var) {
            Ok(v) => Ok(Every::Period(std::time::Duration::from_millis(
                v.parse()
                    .map_err(|_| format!("{var}: `{v}` is not a number"))?,
            ))),
            Err(_) => Ok(Every::Template),
        }
    };
    let sweep_period = period("SWEEP_PERIOD_MS")?;
    let health_period = period("HEALTH_PERIOD_MS")?;
    let opts = StackOptions {
        sweep_period,
        sweep_at_start: true,
        health_period,
        prefix: std::env::var("CONVERGER_STACK").unwrap_or_else(|_| "converger".into()),
        api_addr: addr("CONVERGER_API_ADDR", "127.0.0.1:3000")?,
        admin_addr: addr("CONVERGER_ADMIN_ADDR", "127.0.0.1:3001")?,
        ws_addr: addr("CONVERGER_WS_ADDR", "127.0.0.1:3002")?,
        admin_token: converger_core::secret::admin_token(std::env::var("ADMIN_TOKEN").ok())
            .map_err(|e| e.to_string())?,
        admin_ip_allowlist: match std::env::var("ADMIN_IP_ALLOWLIST") {
            Ok(v) if !v.trim().is_empty() => Some(
                converger_core::net::Allowlist::parse(&v)
                    .map_err(|e| format!("ADMIN_IP_ALLOWLIST: {e}"))?,
            ),
            _ => None,
        },
        config,
        ..StackOptions::default()
    };
    let stack = Stack::start(opts).await?;
    eprintln!(
        "converger: infra/template.yaml deployed as stack `{}` in {} ms; ready in {} ms",
        stack.name(),
        stack.aws()?.deploy_time.as_millis(),
        stack.start_time.as_millis()
    );
    let env_dir = write_function_envs(&stack)?;
    eprintln!(
        "converger: each function's deployed environment is in {} (for cargo lambda watch --env-file)",
        env_dir.display()
    );
    let ready = serde_json::json!({
        "api_url": stack.api_url,
        "admin_url": stack.admin_url,
        "websocket_url": stack.ws_url,
        "aws_endpoint_url": stack.aws_endpoint_url,
        "admin_token": stack.admin_token,
        "admin_email": stack.admin_email,
        "admin_password": stack.admin_password,
    });
    println!("READY {ready}");
    if demo && let Err(e) = converger_local::demo::run(&stack).await {
        eprintln!("demo failed: {e}");
    }
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("converger: stopping");
    stack.stop().await;
    Ok(())
}

/// Writes each function's environment as deployed, pointed at this runner's emulator and
/// WebSocket gateway, to `.local/stack/<function>.env`: what `cargo lambda watch --env-file`
/// needs to run one function against the local stack.
fn write_function_envs(stack: &Stack) -> Result<std::path::PathBuf, String> {
    let dir = emulator::root().join(".local/stack");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let management = stack.ws_url.replacen("ws://", "http://", 1);
    for f in stack.aws()?.deployed.functions.values() {
        let binary = f
            .name
            .strip_prefix(&format!("{}-", stack.name()))
            .unwrap_or(&f.name);
        let mut lines: Vec<String> = f
            .env_pairs()
            .into_iter()
            .map(|(k, v)| match k.as_str() {
                "WEBSOCKET_MANAGEMENT_URL" => format!("{k}={management}"),
                _ => format!("{k}={v}"),
            })
            .collect();
        if let Some(ep) = &stack.aws_endpoint_url {
            lines.push(format!("AWS_ENDPOINT_URL={ep}"));
        }
        let path = dir.join(format!("{binary}.env"));
        std::fs::write(&path, lines.join("\n") + "\n")
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(dir)
}

async fn status(cmd: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("converger test: {what}");
    let st = cmd.status().await.map_err(|e| format!("{what}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({st})"))
    }
}

/// The browser tests drive a headless Chromium through chromedriver: Debian's packages,
/// installed here when missing (`CHROMEDRIVER` and `CHROME_BIN` name other ones).
async fn ensure_browser() -> Result<(), String> {
    let driver = std::env::var_os("CHROMEDRIVER").is_some() || on_path("chromedriver");
    let browser = std::env::var_os("CHROME_BIN").is_some()
        || ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .any(|n| on_path(n));
    if driver && browser {
        return Ok(());
    }
    emulator::apt_install(
        &["chromium", "chromium-driver"],
        "the browser tests (or set CHROME_BIN and CHROMEDRIVER)",
    )
    .await
}

async fn test(args: &[String]) -> Result<(), String> {
    let root = emulator::root();
    let lint = !args.iter().any(|a| a == "--no-lint");
    let passthrough: Vec<String> = args
        .iter()
        .skip_while(|a| *a != "--")
        .skip(1)
        .cloned()
        .collect();
    let mut times = Times::start();
    // Two lanes side by side: the Python tools (the virtualenv, the template's lint, the
    // fuzzing's tools) and the browser, which wait on downloads and installs, beside the
    // compiler's checks and build, which keep the cores busy. On a fresh machine each lane
    // takes a minute or more; one after the other, they were most of the run's set-up.
    let tools = async {
        emulator::ensure_venv().await?;
        status(
            Command::new(emulator::venv_bin("cfn-lint"))
                .arg(root.join("infra/template.yaml"))
                .current_dir(&root),
            "cfn-lint infra/template.yaml",
        )
        .await?;
        status(
            Command::new(emulator::venv_bin("sam"))
                .args(["validate", "--lint", "-t", "infra/template.yaml"])
                .env("SAM_CLI_TELEMETRY", "0")
                .env("AWS_DEFAULT_REGION", "us-east-1")
                .current_dir(&root),
            "sam validate --lint",
        )
        .await?;
        // What no emulator and no linter looks at: the dashboard's body, the names at the
        // longest stack name, the environments and inline policies at the largest
        // parameters (each check also run with its bug put back).
        status(
            Command::new(emulator::venv_bin("python"))
                .arg(root.join("infra/local/template_checks.py"))
                .env("PYTHONWARNINGS", "ignore")
                .current_dir(&root),
            "template checks (infra/local/template_checks.py)",
        )
        .await?;
        // The fuzzing's tools go into the same virtualenv: here, not while an emulator
        // starts from it.
        emulator::ensure_fuzz_tools().await?;
        // The clients' tests run them against a stack: their packages, here too.
        converger_local::clients::ensure_python_tools().await?;
        converger_local::clients::ensure_node_tools().await?;
        // The RabbitMQ channel's tests start private brokers of the machine's server.
        converger_local::rabbitmq::ensure_server().await?;
        ensure_browser().await
    };
    let rust = async {
        if lint {
            status(
                Command::new("cargo")
                    .args(["fmt", "--all", "--check"])
                    .current_dir(&root),
                "cargo fmt --check",
            )
            .await?;
            status(
                Command::new("cargo")
                    .args([
                        "clippy",
                        "--workspace",
                        "--all-targets",
                        "--",
                        "-D",
                        "warnings",
                    ])
                    .current_dir(&root),
                "cargo clippy",
            )
            .await?;
        }
        // The `binaries` smoke test starts a function's debug build as Lambda would: built
        // here, before the tests run in parallel, so that no test waits behind a compiler.
        // Beside this runner, so that its dependencies have the runner's features (which
        // are the tests', see infra/local/Cargo.toml) and are not built again with the
        // function's own.
        status(
            Command::new("cargo")
                .args([
                    "build",
                    "-p",
                    "converger-local",
                    "-p",
                    "converger-fn-health",
                ])
                .current_dir(&root),
            "cargo build -p converger-local -p converger-fn-health",
        )
        .await?;
        // The test binaries too: built while the other lane waits on its downloads, not
        // while the chaos smoke and the fuzzing start beside the tests.
        status(
            Command::new("cargo")
                .args(["test", "--workspace", "--no-run"])
                .current_dir(&root),
            "cargo test --workspace --no-run",
        )
        .await
    };
    let ((tools, tools_took), (rust, rust_took)) = tokio::join!(timed(tools), timed(rust));
    tools?;
    rust?;
    times.mark("set-up and checks");
    times.note("template lint, tools and browser alone", tools_took);
    times.note(
        if lint {
            "fmt, clippy and build alone"
        } else {
            "build alone"
        },
        rust_took,
    );
    // Two emulators: the tests' own, and one for the benchmark smoke runs on the emulator.
    // Those runs wait on one request after another (a delivery at a time, each case's
    // trailing events) and count them: on the one emulator every other test shares, each of
    // their requests queued behind the others' and three of them took 90-100 s each instead
    // of 35-48 s alone, holding three of the emulator group's four places meanwhile. An
    // emulator is one Python process, so the second also lets the two cores serve both.
    let (em, bench_em) =
        tokio::try_join!(emulator::Emulator::start(), emulator::Emulator::start())?;
    eprintln!(
        "converger test: emulators at {} (the tests') and {} (the benchmarks')",
        em.endpoint, bench_em.endpoint
    );
    // Every process of the run reports the requests its functions' policies refused, and the
    // grants its requests used, under one directory.
    let iam_dir = emulator::target_dir().join("iam");
    let _ = std::fs::remove_dir_all(&iam_dir);
    std::fs::create_dir_all(&iam_dir).map_err(|e| format!("{}: {e}", iam_dir.display()))?;
    // Absolute: the test processes run in their crates' directories.
    let iam_dir = iam_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", iam_dir.display()))?;
    // One deployment up front: the template must deploy, and its grants are what the run's
    // requests are held against.
    let started = std::time::Instant::now();
    let reference = converger_local::cfn::deploy(
        &em.endpoint,
        "iam-reference",
        &std::collections::BTreeMap::new(),
    )
    .await?;
    eprintln!(
        "converger test: template deployed as a stack in {} ms ({} resources, {} skipped by the emulator)",
        started.elapsed().as_millis(),
        reference.resources.len(),
        reference.skipped.len()
    );
    let nextest = Command::new("cargo")
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    // The benchmarks' smoke runs time and count what they measure against a clock: beside
    // the chaos smoke and the fuzzing on a two-core machine, a case could spill into the next
    // or run out of its time (four did on a slow machine). They run after everything else,
    // on their own; the rest runs beside the chaos smoke.
    const BENCH: &str = "binary(it) & test(/^bench::/)";
    let pass = |filter: Option<String>| {
        let mut cmd = Command::new("cargo");
        if nextest {
            cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
            if let Some(f) = filter {
                // A filter given after `--` may leave one pass with nothing to run.
                cmd.args(["--no-tests=pass", "-E", &f]);
            }
        } else {
            cmd.args(["test", "--workspace", "--no-fail-fast"]);
        }
        cmd.args(&passthrough)
            .current_dir(&root)
            .env("AWS_ENDPOINT_URL", &em.endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env(
                converger_local::stack::BENCH_ENDPOINT_ENV,
                &bench_em.endpoint,
            )
            .env(converger_local::iam::LOG_DIR_ENV, &iam_dir);
        cmd
    };
    // A filter of the caller's (`-- -E '...'`) runs once, as given: nextest joins filter
    // expressions with `or`, so beside the two passes' own it would select everything.
    let filtered = passthrough
        .iter()
        .any(|a| a.starts_with("-E") || a.starts_with("--filter-expr"));
    let (mut first, mut benches) = if nextest && !filtered {
        (
            pass(Some(format!("not ({BENCH})"))),
            Some(pass(Some(BENCH.to_owned()))),
        )
    } else {
        (pass(None), None)
    };
    times.mark("emulator and reference stack");
    // Beside the tests: the chaos suite, small (the runner SIGKILLed mid-run and the emulator
    // frozen; anything lost fails the run, and the figures are printed, never asserted: see
    // docs/benchmarks/chaos.md), with its own emulator and stack. Most of the tests' time, and
    // most of the chaos smoke's, is spent waiting (timers, backoffs, a frozen emulator), so the
    // two side by side take little longer than the tests alone.
    eprintln!(
        "converger test: the tests, beside the chaos smoke (crash, storage stall, hostile \
         receivers)"
    );
    let smoke = ["smoke".to_owned()];
    let ((result, tests_took), (chaos, chaos_took)) = tokio::join!(
        timed(status(&mut first, "tests")),
        timed(converger_local::chaos::run(&smoke)),
    );
    times.mark("tests beside the chaos smoke");
    times.note("tests alone", tests_took);
    times.note("chaos smoke alone", chaos_took);
    // Then the API fuzzing (schemathesis from docs/openapi.json against a local stack of its
    // own; a server error, a status the document does not allow or an answer off its schema
    // fails the run). It is busy, not waiting: beside the tests on two cores it starved
    // their emulator until waits ran out (three minutes more here, and no such failures).
    eprintln!("converger test: the API fuzzing (schemathesis, docs/openapi.json)");
    let fuzz = converger_local::fuzz::run(&[]).await;
    times.mark("API fuzzing");
    // The build a deployment ships: `sam build` of one function with the template's
    // `Architecture`, its bootstrap read for the machine it is for (the template checks hold
    // every function to that parameter; a release build of all twelve is `release-check`
    // alone). Beside the benchmarks' smoke runs, which wait on one request after another and
    // leave the cores mostly idle; the release build's link uses one.
    let one = ["--function".to_owned(), "HealthFunction".to_owned()];
    let release = converger_local::release::run(&one);
    let (result, release) = match benches.as_mut() {
        Some(cmd) => {
            eprintln!(
                "converger test: the benchmarks' smoke runs, beside a release build (sam build)"
            );
            let ((r, bench_took), (release, release_took)) = tokio::join!(
                timed(status(cmd, "the benchmarks' smoke runs")),
                timed(release)
            );
            times.mark("benchmarks' smoke runs beside the release build");
            times.note("benchmarks' smoke runs alone", bench_took);
            times.note("release build alone", release_took);
            (result.and(r), release)
        }
        None => {
            let r = release.await;
            times.mark("release build");
            (result, r)
        }
    };
    let cpu = |e: &emulator::Emulator| {
        e.pid()
            .and_then(|p| converger_bench::cpu_seconds(&p.to_string()))
    };
    let emulator_cpu = (cpu(&em), cpu(&bench_em));
    em.stop().await;
    bench_em.stop().await;
    let iam = iam_report(&iam_dir, &reference);
    times.report();
    // Where the machine's time went: this command and every process it waited for (the
    // compiler, the test processes, the other emulators), and the tests' emulator alone.
    if let Some(all) = converger_bench::cpu_seconds_with_children("self") {
        eprintln!(
            "converger test: CPU {all:.0} s in all, the tests' emulator {:.0} s, the benchmarks' {:.0} s",
            emulator_cpu.0.unwrap_or_default(),
            emulator_cpu.1.unwrap_or_default()
        );
    }
    result.and(iam).and(chaos).and(fuzz).and(release)
}

/// What `f` gives, and how long it took.
async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, std::time::Duration) {
    let started = std::time::Instant::now();
    let r = f.await;
    (r, started.elapsed())
}

/// How long each phase of the test command took, reported at its end.
struct Times {
    started: std::time::Instant,
    last: std::time::Instant,
    phases: Vec<(&'static str, std::time::Duration)>,
    /// Parts of a phase, each timed on its own (run side by side within it).
    notes: Vec<(&'static str, std::time::Duration)>,
}

impl Times {
    fn start() -> Self {
        let now = std::time::Instant::now();
        Self {
            started: now,
            last: now,
            phases: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The phase named `what` ended now.
    fn mark(&mut self, what: &'static str) {
        let now = std::time::Instant::now();
        self.phases.push((what, now - self.last));
        self.last = now;
    }

    /// `what`, part of a phase run side by side with others, took `d`.
    fn note(&mut self, what: &'static str, d: std::time::Duration) {
        self.notes.push((what, d));
    }

    fn report(&self) {
        let parts: Vec<String> = self
            .phases
            .iter()
            .chain(&self.notes)
            .map(|(what, d)| format!("{what} {:.0} s", d.as_secs_f64()))
            .collect();
        eprintln!(
            "converger test: took {:.0} s ({})",
            self.started.elapsed().as_secs_f64(),
            parts.join(", ")
        );
    }
}

/// Reads what the run's processes reported: any request a policy refused fails the run; the
/// grants no request used are listed (in `unexercised.txt` beside the reports).
fn iam_report(
    dir: &std::path::Path,
    reference: &converger_local::cfn::DeployedStack,
) -> Result<(), String> {
    use std::collections::BTreeSet;
    let mut violations = BTreeSet::new();
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let key = (
                v["function"].as_str().unwrap_or_default().to_owned(),
                v["action"].as_str().unwrap_or_default().to_owned(),
                v["resource"].as_str().unwrap_or_default().to_owned(),
            );
            if name.starts_with("violations-") {
                violations.insert(key);
            } else if name.starts_with("grants-") {
                used.insert(key);
            }
        }
    }
    let all = reference.grants()?;
    let unused: Vec<String> = all
        .iter()
        .filter(|g| !used.contains(*g))
        .map(|(f, a, r)| format!("{f}\t{a}\t{r}"))
        .collect();
    let _ = std::fs::write(dir.join("unexercised.txt"), unused.join("\n") + "\n");
    eprintln!(
        "converger test: IAM: {} grants in the template, {} used by the tests, {} not exercised \
         (listed in {})",
        all.len(),
        all.len() - unused.len(),
        unused.len(),
        dir.join("unexercised.txt").display()
    );
    if violations.is_empty() {
        return Ok(());
    }
    for (f, a, r) in &violations {
        eprintln!("converger test: IAM: {f} is not authorized to perform {a} on {r}");
    }
    Err(format!(
        "{} requests were refused by their function's IAM policy (listed above)",
        violations.len()
    ))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The benchmarks print their figures on stdout and keep stderr for warnings.
    let default_filter = if args.first().is_some_and(|a| a == "bench") {
        "warn"
    } else {
        "info,aws_config=warn,aws_smithy_runtime=warn"
    };
    {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        // The benchmarks that price logs (`cost`, and `smoke` which runs it) also count what
        // the functions would write at their deployed level.
        let count_logs = args.first().is_some_and(|a| a == "bench")
            && args.get(1).is_some_and(|s| s == "cost" || s == "smoke");
        let _ = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                    .with_filter(
                        tracing_subscriber::EnvFilter::try_from_default_env()
                            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
                    ),
            )
            .with(count_logs.then(converger_bench::cost::log_layer))
            .try_init();
    }
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]).await,
        Some("bench") => converger_bench::run(&args[1..]).await,
        Some("chaos") => converger_local::chaos::run(&args[1..]).await,
        Some("fuzz") => converger_local::fuzz::run(&args[1..]).await,
        Some("clients") => converger_local::clients::run_command(&args[1..]).await,
        Some("release-check") => converger_local::release::run(&args[1..]).await,
        Some("backfill-handoffs") => backfill_handoffs(&args[1..]).await,
        Some("--demo") => run(true).await,
        None => run(false).await,
        Some("--help" | "-h") => {
            println!(
                "usage: converger-local [--demo] | converger-local test [--no-lint] [-- <runner args>]"
            );
            println!("{}", converger_bench::USAGE);
            println!("{}", converger_local::chaos::USAGE);
            println!("{}", converger_local::fuzz::USAGE);
            println!("{}", converger_local::clients::USAGE);
            println!("{}", converger_local::release::USAGE);
            println!("{BACKFILL_USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown argument `{other}` (try --help)")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("converger: {e}");
            ExitCode::FAILURE
        }
    }
}

const BACKFILL_USAGE: &str = "converger-local backfill-handoffs <deliveries table>   after an upgrade: hand-offs waiting for an ack into their channel's index (once; AWS credentials and region from the environment)";

/// Puts the deliveries an earlier version handed off, and still waiting for their acks, into
/// their channel's index (`DynamoStore::backfill_handoff_index`) on the table named: on AWS
/// with the environment's credentials, or the emulator `AWS_ENDPOINT_URL` names.
async fn backfill_handoffs(args: &[String]) -> Result<(), String> {
    let [table] = args else {
        return Err(format!("usage: {BACKFILL_USAGE}"));
    };
    let sdk = converger_store::aws::load_config().await;
    let res = converger_store::Resources::from_vars(|k| {
        Some(match k {
            "DELIVERIES_TABLE" => table.clone(),
            "DUE_SHARDS" => "1".to_owned(),
            // Not read by the backfill.
            other => format!("unused-{other}"),
        })
    })
    .map_err(|e| e.to_string())?;
    let store = converger_store::dynamo::DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), res);
    let moved = store
        .backfill_handoff_index()
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", serde_json::json!({"table": table, "moved": moved}));
    Ok(())
}
