//! A chaos scenario's moving parts: the local runner as a child process on fixed ports, the
//! tenant and its channels, and the producer.

use super::{SETTLE, tap};
use crate::bus_tap::BusTap;
use crate::emulator::{Emulator, root};
use crate::receiver::{Receiver, Reply};
use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The local runner in a child process, on a fixed set of ports, so that a restarted one
/// answers where the killed one did.
pub(super) struct Runner {
    pub(super) child: Child,
    pub(super) api_url: String,
    pub(super) admin_url: String,
    pub(super) admin_token: String,
}

pub(super) struct RunnerEnv {
    pub(super) endpoint: String,
    pub(super) stack: String,
    pub(super) admin_token: String,
    pub(super) ports: [u16; 3],
    pub(super) log: std::path::PathBuf,
}

impl RunnerEnv {
    pub(super) fn new(endpoint: &str, scenario: &str) -> Result<Self, String> {
        // The runner is killed and started again on the same ports: ports below the
        // ephemeral range, which no outgoing connection takes meanwhile.
        let free = crate::emulator::free_port_to_keep;
        let dir = root().join(".local/chaos");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let stack = format!("chaos-{scenario}-{}", std::process::id());
        Ok(Self {
            endpoint: endpoint.to_owned(),
            log: dir.join(format!("{stack}.log")),
            stack,
            admin_token: format!("chaos-{}", hex::encode(rand::random::<[u8; 16]>())),
            ports: [free()?, free()?, free()?],
        })
    }

    /// Starts the runner (this very program, without arguments) and waits for its READY line.
    pub(super) async fn start(&self) -> Result<Runner, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let [api, admin, ws] = self.ports;
        let mut child = Command::new(exe)
            .current_dir(root())
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("CONVERGER_STACK", &self.stack)
            .env("CONVERGER_API_ADDR", format!("127.0.0.1:{api}"))
            .env("CONVERGER_ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("CONVERGER_WS_ADDR", format!("127.0.0.1:{ws}"))
            .env("ADMIN_TOKEN", &self.admin_token)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("runner: {e}"))?;
        let stdout = child.stdout.take().ok_or("runner: no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(300), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(json) = line.strip_prefix("READY ") {
                    return serde_json::from_str::<Value>(json).map_err(|e| e.to_string());
                }
            }
            Err(format!(
                "the runner exited before it was ready (see {})",
                self.log.display()
            ))
        })
        .await
        .map_err(|_| "the runner was not ready within 300 s".to_owned())??;
        // Whatever else it prints is read and dropped.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Runner {
            child,
            api_url: ready["api_url"].as_str().unwrap_or_default().to_owned(),
            admin_url: ready["admin_url"].as_str().unwrap_or_default().to_owned(),
            admin_token: self.admin_token.clone(),
        })
    }
}

impl Runner {
    /// SIGKILL: no shutdown, no flush, leases and in-flight messages left as they were.
    pub(super) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

pub(super) fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())
}

/// A tenant and one webhook channel to `rx`; returns (API key, channel id).
pub(super) async fn tenant_and_channel(
    http: &reqwest::Client,
    r: &Runner,
    rx: &Receiver,
) -> Result<(String, String), String> {
    let tenant = post_json(
        http,
        format!("{}/admin/api/tenants", r.admin_url),
        &r.admin_token,
        json!({"name": "chaos", "tier": "default"}),
    )
    .await?;
    let key = tenant["api_key"].as_str().unwrap_or_default().to_owned();
    let ch = channel_to(http, r, &key, rx, json!({})).await?;
    Ok((key, ch))
}

/// A webhook channel of the tenant of `key` to `rx`, with `settings` beside the scenario's
/// retry policy; its id.
pub(super) async fn channel_to(
    http: &reqwest::Client,
    r: &Runner,
    key: &str,
    rx: &Receiver,
    settings: Value,
) -> Result<String, String> {
    let mut body = json!({"type": "webhook", "name": "chaos", "config": {"url": rx.url},
                          "retry_policy": {"backoff": "fixed", "base_ms": 1000}});
    if let (Some(b), Some(extra)) = (body.as_object_mut(), settings.as_object()) {
        b.extend(extra.clone());
    }
    let url = format!("{}/api/v1/channels", r.api_url);
    let v = post_json(http, url.clone(), key, body).await?;
    v["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{url}: {v}"))
}

/// POSTs `body` to `url` as `token`; the answer's JSON, or what went wrong.
async fn post_json(
    http: &reqwest::Client,
    url: String,
    token: &str,
    body: Value,
) -> Result<Value, String> {
    let resp = http
        .post(&url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}: {text}"))?;
    if status.is_success() {
        Ok(v)
    } else {
        Err(format!("{url}: {status} {v}"))
    }
}

/// The producer: activities `0..n` at `rate` per second, each posted until it is accepted
/// (a retry carries the same id, so it is idempotent). Counts the posts that failed.
pub(super) fn producer(
    api_url: String,
    key: String,
    channels: Vec<String>,
    n: usize,
    rate: u32,
    sent: Arc<AtomicUsize>,
    failed_posts: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::spawn(async move {
        let http = client()?;
        let gap = Duration::from_secs(1) / rate.max(1);
        let started = Instant::now();
        for i in 0..n {
            let due = started + gap * u32::try_from(i).unwrap_or(u32::MAX);
            tokio::time::sleep_until(due.into()).await;
            let body = json!({"id": format!("act_chaos-{i}"), "conversation_id": "chaos",
                              "channel_ids": channels, "payload": {"n": i}});
            loop {
                let ok = http
                    .post(format!("{api_url}/api/v1/activities"))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ok {
                    break;
                }
                failed_posts.fetch_add(1, Ordering::Relaxed);
                if started.elapsed() > SETTLE {
                    return Err(format!("activity {i} could not be posted"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    })
}

/// A scenario's moving parts: its emulator, a receiver that takes 500 ms, the runner, one
/// tenant with one webhook channel, and the producer sending `n` activities at `rate`/s.
pub(super) struct Flow {
    pub(super) em: Emulator,
    pub(super) rx: Receiver,
    pub(super) env: RunnerEnv,
    pub(super) runner: Runner,
    pub(super) key: String,
    pub(super) sent: Arc<AtomicUsize>,
    pub(super) failed_posts: Arc<AtomicUsize>,
    pub(super) started: Instant,
    pub(super) producing: tokio::task::JoinHandle<Result<(), String>>,
    /// What the stack's bus carries.
    pub(super) tap: BusTap,
    /// A second channel of every activity, whose receiver answers 400 (each delivery a dead
    /// letter at its first attempt), and its id; `None` unless the scenario asks.
    pub(super) dead: Option<(Receiver, String)>,
}

impl Flow {
    pub(super) async fn start(
        scenario: &str,
        n: usize,
        rate: u32,
        dead_letters: bool,
    ) -> Result<Self, String> {
        let em = Emulator::start().await?;
        let rx =
            Receiver::start(vec![], Reply::status(200).delay(Duration::from_millis(500))).await?;
        let env = RunnerEnv::new(&em.endpoint, scenario)?;
        let runner = env.start().await?;
        let tap = tap::start(&em.endpoint, &env.stack).await?;
        let http = client()?;
        let (key, channel) = tenant_and_channel(&http, &runner, &rx).await?;
        let mut channels = vec![channel];
        let dead = if dead_letters {
            let refusing =
                Receiver::start(vec![], Reply::status(400).delay(Duration::from_millis(200)))
                    .await?;
            // Never disabled by its failures while the scenario runs.
            let id = channel_to(
                &http,
                &runner,
                &key,
                &refusing,
                json!({"auto_disable": {"failed_attempts": 0}}),
            )
            .await?;
            channels.push(id.clone());
            Some((refusing, id))
        } else {
            None
        };
        let (sent, failed_posts) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let producing = producer(
            runner.api_url.clone(),
            key.clone(),
            channels,
            n,
            rate,
            sent.clone(),
            failed_posts.clone(),
        );
        Ok(Self {
            em,
            rx,
            env,
            runner,
            key,
            sent,
            failed_posts,
            started: Instant::now(),
            producing,
            tap,
            dead,
        })
    }
}
