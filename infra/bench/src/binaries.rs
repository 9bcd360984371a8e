//! `bench binaries`: each function's `bootstrap` as `cargo lambda build --release` makes it
//! (its size), and its init time: the binary is started the way Lambda starts it, against a
//! local stand-in of the Lambda Runtime API, with its sample event from `events/`; init is the
//! time from the process start to its first `next` request, and `first_event_ms` the time to
//! its answer for that event (the store it talks to is the emulator, provisioned first).
//! `--dev` measures the debug build of `cargo build` instead (a quick check of the harness).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{get, post};
use converger_stack::emulator;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone)]
pub struct Options {
    /// One function only (its directory name under `functions/`).
    pub function: Option<String>,
    /// `cargo lambda build --release`; else the debug `cargo build`.
    pub release: bool,
}

pub const FUNCTIONS: [&str; 9] = [
    "ingest",
    "deliver",
    "retry-scheduler",
    "replay",
    "probe",
    "health",
    "api",
    "admin",
    "websocket",
];

pub async fn run(o: Options) -> Result<Value, String> {
    let functions: Vec<&str> = match &o.function {
        Some(f) => {
            let f = FUNCTIONS
                .iter()
                .find(|n| **n == f.as_str())
                .ok_or_else(|| format!("no function `{f}` (one of {FUNCTIONS:?})"))?;
            vec![*f]
        }
        None => FUNCTIONS.to_vec(),
    };
    let root = emulator::root();
    let (em, endpoint) = emulator::named_or_started(None).await?;
    let result = async {
        // The template, deployed: the functions get its environment, and the build targets
        // the architecture it declares.
        let stack = converger_stack::cfn::deploy(
            &endpoint,
            &format!("bin{}", std::process::id()),
            &std::collections::BTreeMap::new(),
        )
        .await?;
        let arch = architecture(&stack)?;
        let build_started = Instant::now();
        build(&root, &functions, o.release, &arch).await?;
        let build_s = build_started.elapsed().as_secs_f64();
        let figures = measure_all(&root, &functions, o.release, &endpoint, &stack).await?;
        Ok::<_, String>((arch, build_s, figures))
    }
    .await;
    if let Some(em) = em {
        em.stop().await;
    }
    let (arch, build_s, figures) = result?;
    Ok(super::emit(json!({
        "scenario": "binaries",
        "architecture": arch,
        "build": if o.release { format!("cargo lambda build --release --{}", lambda_arch_flag(&arch)) } else { "cargo build (debug)".into() },
        "build_s": (build_s * 10.0).round() / 10.0,
        "functions": figures,
        "targets": {"size_mib": 8, "init_ms": 20},
    })))
}

/// The one architecture every function of the deployed template declares.
fn architecture(stack: &converger_stack::cfn::DeployedStack) -> Result<String, String> {
    let archs: std::collections::BTreeSet<&str> = stack
        .functions
        .values()
        .flat_map(|f| f.architectures.iter().map(String::as_str))
        .collect();
    match archs.into_iter().collect::<Vec<_>>().as_slice() {
        [one] => Ok((*one).to_owned()),
        other => Err(format!(
            "the functions declare architectures {other:?}, not one"
        )),
    }
}

/// cargo-lambda's flag for an architecture (`--x86-64`, `--arm64`).
fn lambda_arch_flag(arch: &str) -> &'static str {
    if arch == "arm64" { "arm64" } else { "x86-64" }
}

async fn build(
    root: &std::path::Path,
    functions: &[&str],
    release: bool,
    arch: &str,
) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new("cargo");
    if release {
        // cargo-lambda lives in the project's virtualenv (with the zig it links with).
        emulator::ensure_lambda_tools().await?;
        let path = format!(
            "{}:{}",
            emulator::venv_dir().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path).args([
            "lambda",
            "build",
            "--release",
            &format!("--{}", lambda_arch_flag(arch)),
        ]);
    } else {
        // With the local runner, as the test command's set-up builds them: its dependencies
        // then have the features they were built with there, and nothing is compiled again
        // (a function alone resolves its dependencies' features differently, and on a fresh
        // machine rebuilt a dozen crates while the tests ran).
        cmd.args(["build", "-p", "converger-local"]);
    }
    for f in functions {
        cmd.args(["-p", &format!("converger-fn-{f}")]);
    }
    let st = cmd
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("build: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("building the functions failed ({st})"))
    }
}

fn binary(function: &str, release: bool) -> std::path::PathBuf {
    let target = emulator::target_dir();
    if release {
        target.join("lambda").join(function).join("bootstrap")
    } else {
        target.join("debug").join(function)
    }
}

async fn measure_all(
    root: &std::path::Path,
    functions: &[&str],
    release: bool,
    endpoint: &str,
    stack: &converger_stack::cfn::DeployedStack,
) -> Result<Value, String> {
    let mut out = Map::new();
    for f in functions {
        let path = binary(f, release);
        let size = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        let event = std::fs::read_to_string(root.join("events").join(format!("{f}.json")))
            .map_err(|e| format!("events/{f}.json: {e}"))?;
        // The function's environment as CloudFormation deployed it, pointed at the emulator.
        let deployed = stack
            .functions
            .values()
            .find(|d| d.name.ends_with(&format!("-{f}")))
            .ok_or_else(|| format!("the stack has no function {f}"))?;
        let mut env = deployed.env_pairs();
        env.extend(
            [
                ("AWS_ENDPOINT_URL", endpoint),
                ("AWS_REGION", "us-east-1"),
                ("AWS_ACCESS_KEY_ID", "test"),
                ("AWS_SECRET_ACCESS_KEY", "test"),
                ("RUST_LOG", "warn"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let (init, first) = init_time(&path, f, &env, event).await?;
        out.insert(
            (*f).into(),
            json!({
                "size_mib": (size as f64 / 1_048_576.0 * 100.0).round() / 100.0,
                "init_ms": (init * 10.0).round() / 10.0,
                "first_event_ms": (first * 10.0).round() / 10.0,
            }),
        );
    }
    Ok(Value::Object(out))
}

/// What the stand-in Runtime API saw.
#[derive(Default)]
struct Seen {
    first_next: Option<Instant>,
    answered: Option<(Instant, String)>,
}

#[derive(Clone)]
struct RuntimeApi {
    event: Arc<String>,
    seen: Arc<Mutex<Seen>>,
    notify: Arc<Notify>,
}

async fn next(State(api): State<RuntimeApi>) -> (StatusCode, HeaderMap, String) {
    let first = {
        let Ok(mut seen) = api.seen.lock() else {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                HeaderMap::new(),
                String::new(),
            );
        };
        let first = seen.first_next.is_none();
        if first {
            seen.first_next = Some(Instant::now());
        }
        first
    };
    if !first {
        // One event per run: the second `next` waits until the process is stopped.
        std::future::pending::<()>().await;
    }
    let mut h = HeaderMap::new();
    let deadline = (converger_core::time::now_ms() + 60_000).to_string();
    for (k, v) in [
        ("lambda-runtime-aws-request-id", "bench-request-1"),
        ("lambda-runtime-deadline-ms", deadline.as_str()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:000000000000:function:bench",
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-00000000-000000000000000000000000",
        ),
    ] {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    }
    (StatusCode::OK, h, (*api.event).clone())
}

fn answer(api: &RuntimeApi, outcome: String) -> StatusCode {
    if let Ok(mut seen) = api.seen.lock()
        && seen.answered.is_none()
    {
        seen.answered = Some((Instant::now(), outcome));
    }
    api.notify.notify_waiters();
    StatusCode::ACCEPTED
}

async fn response(State(api): State<RuntimeApi>, Path(_id): Path<String>) -> StatusCode {
    answer(&api, "response".into())
}

async fn error(State(api): State<RuntimeApi>, body: String) -> StatusCode {
    answer(&api, format!("error: {body}"))
}

/// Starts `path` as Lambda would and times its init and its first event.
async fn init_time(
    path: &std::path::Path,
    function: &str,
    env: &[(String, String)],
    event: String,
) -> Result<(f64, f64), String> {
    let api = RuntimeApi {
        event: Arc::new(event),
        seen: Arc::default(),
        notify: Arc::default(),
    };
    let router = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(error))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let started = Instant::now();
    let mut child = tokio::process::Command::new(path)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env(
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{function}"),
        )
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let deadline = started + Duration::from_secs(30);
    let outcome = loop {
        let notified = api.notify.notified();
        let done = api.seen.lock().ok().and_then(|s| {
            s.answered
                .as_ref()
                .map(|(at, o)| (s.first_next, *at, o.clone()))
        });
        if let Some(d) = done {
            break Some(d);
        }
        if Instant::now() >= deadline {
            break None;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
    };
    let _ = child.kill().await;
    server.abort();
    let Some((first_next, answered, how)) = outcome else {
        return Err(format!(
            "{function}: no answer to its first event within 30 s"
        ));
    };
    if how != "response" {
        return Err(format!("{function}: {how}"));
    }
    let ms = |i: Instant| i.saturating_duration_since(started).as_secs_f64() * 1000.0;
    Ok((first_next.map(ms).unwrap_or(0.0), ms(answered)))
}
