//! The `converger` command line: the tenant API from a terminal, and `listen`, which forwards
//! a websocket channel's deliveries to a local URL while a receiver is being written.
//!
//! The API URL and key come from `--api-url` / `--api-key` or `CONVERGER_API_URL` /
//! `CONVERGER_API_KEY`; `--json` prints the API's answers as they are, for scripts.

use crate::{BatchResult, Client, DeliveryQuery, Error, NewActivity};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::io::Write;
use std::time::{Duration, SystemTime};
use tokio_tungstenite::tungstenite::Message;

pub const HELP: &str = "\
converger: Converger's tenant API from a terminal

USAGE:
  converger [--api-url URL] [--api-key KEY] [--json] <command>

COMMANDS:
  listen <channel id> --forward-to URL --ws-url WS_URL --token TOKEN [--count N]
      connect to a websocket channel and POST each delivery to URL, signed as a webhook
      (webhook-id, webhook-timestamp, webhook-signature with the channel's secrets);
      a 2xx answer acknowledges it; anything else leaves it waiting (on a channel with
      require_ack), and it is asked for again every 30 s. Stops after N deliveries if given.
  send --channel ID [--channel ID...] --conversation ID [--event-type T] --payload JSON
  send --file activities.jsonl
      one activity per line, as POST /api/v1/activities takes it, sent 100 to a request;
      prints each line's activity or its refusal (exit 1 if any line was refused)
  deliveries list [--status S] [--channel ID] [--limit N]
  deliveries show <delivery id>
  deliveries retry <delivery id>
  channels list
  channels pause <channel id>
  channels resume <channel id>
  usage [--from YYYY-MM-DD] [--to YYYY-MM-DD]
      deliveries, attempts and dead letters per day (the last 30 days by default) and
      the estimate of their AWS cost

ENVIRONMENT:
  CONVERGER_API_URL, CONVERGER_API_KEY, CONVERGER_WS_URL, CONVERGER_CHANNEL_TOKEN
";

/// Why a command failed: a wrong command line (exit 2) or a failed call (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}\n\nrun `converger --help` for the commands")]
    Usage(String),
    #[error("{0}")]
    Api(#[from] Error),
    #[error("{0}")]
    Failed(String),
}

/// `send --file`: the file's activities (one JSON object a line, blank lines skipped),
/// [`MAX_BATCH`] to a request, each line's result printed; refused lines fail the command
/// once every line was sent. A line that is not an activity stops it before anything is sent.
async fn send_file(
    api: &Client,
    text: &str,
    json: bool,
    out: &mut (dyn Write + Send),
) -> Result<(), CliError> {
    let mut lines: Vec<(usize, NewActivity)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let activity = serde_json::from_str(line)
            .map_err(|e| CliError::Usage(format!("line {} is not an activity: {e}", i + 1)))?;
        lines.push((i + 1, activity));
    }
    let mut refused = 0usize;
    for chunk in lines.chunks(MAX_BATCH) {
        let batch: Vec<NewActivity> = chunk.iter().map(|(_, a)| a.clone()).collect();
        let results = api.post_activities(&batch).await?;
        for ((n, _), r) in chunk.iter().zip(&results) {
            let text = match r {
                BatchResult::Ingested { activity, .. } => format!(
                    "line {n}: activity {} ({} deliveries)",
                    activity.activity_id,
                    activity.deliveries.len()
                ),
                BatchResult::Refused { error, .. } => {
                    refused += 1;
                    format!("line {n}: refused: {}: {}", error.code, error.message)
                }
            };
            let line = if json {
                json!({"line": n, "result": r}).to_string()
            } else {
                terminal_safe(&text)
            };
            writeln!(out, "{line}").map_err(|e| CliError::Failed(e.to_string()))?;
        }
    }
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} of {} activities refused",
            lines.len()
        )));
    }
    Ok(())
}

/// `text` as a terminal shows it safely: receivers' answers and errors come from outside, so
/// every control character but a line break is written as its escape (`\u{1b}`), and no
/// escape sequence reaches the terminal. `--json` output is escaped by JSON itself.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Most activities in one batch request.
const MAX_BATCH: usize = 100;

/// The command line's arguments: positional words and `--name value` options.
struct Args {
    words: Vec<String>,
    options: Vec<(String, String)>,
    json: bool,
}

impl Args {
    fn parse(args: &[String]) -> Result<Self, CliError> {
        let mut out = Args {
            words: Vec::new(),
            options: Vec::new(),
            json: false,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--json" {
                out.json = true;
            } else if let Some(name) = a.strip_prefix("--") {
                let value = it
                    .next()
                    .ok_or_else(|| CliError::Usage(format!("--{name} needs a value")))?;
                out.options.push((name.to_owned(), value.clone()));
            } else {
                out.words.push(a.clone());
            }
        }
        Ok(out)
    }

    fn one(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.options
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn word(&self, i: usize, what: &str) -> Result<&str, CliError> {
        self.words
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| CliError::Usage(format!("missing {what}")))
    }
}

/// Runs one command line; the process's exit code (0, 1 when a call failed, 2 when the
/// command line is wrong). What it prints goes to `out`, errors to standard error.
pub async fn main(
    args: &[String],
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    out: &mut (dyn Write + Send),
) -> i32 {
    if args.is_empty() || args.iter().any(|a| a == "--help" || a == "-h") {
        let _ = out.write_all(HELP.as_bytes());
        return if args.is_empty() { 2 } else { 0 };
    }
    match run(args, env, out).await {
        Ok(()) => 0,
        Err(e @ CliError::Usage(_)) => {
            eprintln!("converger: {}", terminal_safe(&e.to_string()));
            2
        }
        Err(e) => {
            eprintln!("converger: {}", terminal_safe(&e.to_string()));
            1
        }
    }
}

fn setting(
    a: &Args,
    env: &dyn Fn(&str) -> Option<String>,
    flag: &str,
    var: &str,
) -> Result<String, CliError> {
    a.one(flag)
        .map(str::to_owned)
        .or_else(|| env(var))
        .ok_or_else(|| CliError::Usage(format!("give --{flag} or set {var}")))
}

/// Runs one command line (see [`HELP`]).
pub async fn run(
    args: &[String],
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    out: &mut (dyn Write + Send),
) -> Result<(), CliError> {
    let a = Args::parse(args)?;
    let api = Client::new(
        &setting(&a, env, "api-url", "CONVERGER_API_URL")?,
        &setting(&a, env, "api-key", "CONVERGER_API_KEY")?,
    )?;
    let print =
        |out: &mut (dyn Write + Send), json: &Value, line: String| -> Result<(), CliError> {
            let text = if a.json {
                json.to_string()
            } else {
                terminal_safe(&line)
            };
            writeln!(out, "{text}").map_err(|e| CliError::Failed(e.to_string()))
        };
    match (a.word(0, "a command")?, a.words.get(1).map(String::as_str)) {
        ("listen", _) => {
            let opts = Listen {
                channel_id: a.word(1, "the channel id")?.to_owned(),
                forward_to: a
                    .one("forward-to")
                    .ok_or_else(|| CliError::Usage("listen needs --forward-to URL".into()))?
                    .to_owned(),
                ws_url: setting(&a, env, "ws-url", "CONVERGER_WS_URL")?,
                token: setting(&a, env, "token", "CONVERGER_CHANNEL_TOKEN")?,
                count: a
                    .one("count")
                    .map(|n| n.parse::<usize>())
                    .transpose()
                    .map_err(|_| CliError::Usage("--count must be a number".into()))?,
                json: a.json,
            };
            listen(&api, &opts, out).await
        }
        ("send", _) if a.one("file").is_some() => {
            let path = a.one("file").unwrap_or_default();
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Usage(format!("cannot read {path}: {e}")))?;
            send_file(&api, &text, a.json, out).await
        }
        ("send", _) => {
            let payload: Value = serde_json::from_str(
                a.one("payload")
                    .ok_or_else(|| CliError::Usage("send needs --payload JSON".into()))?,
            )
            .map_err(|e| CliError::Usage(format!("--payload is not JSON: {e}")))?;
            let posted = api
                .post_activity(&NewActivity {
                    conversation_id: a
                        .one("conversation")
                        .ok_or_else(|| CliError::Usage("send needs --conversation ID".into()))?
                        .to_owned(),
                    channel_ids: a.all("channel"),
                    event_type: a.one("event-type").map(str::to_owned),
                    payload,
                    ..Default::default()
                })
                .await?;
            let mut line = format!("activity {}", posted.activity_id);
            for d in &posted.deliveries {
                line.push_str(&format!(
                    "\n  delivery {} to {}: {}",
                    d.id, d.channel_id, d.status
                ));
            }
            print(out, &json_of(&posted), line)
        }
        ("deliveries", Some("list")) => {
            let page = api
                .deliveries(&DeliveryQuery {
                    status: a.one("status").map(str::to_owned),
                    channel_id: a.one("channel").map(str::to_owned),
                    limit: a
                        .one("limit")
                        .map(|n| n.parse())
                        .transpose()
                        .map_err(|_| CliError::Usage("--limit must be a number".into()))?,
                    ..Default::default()
                })
                .await?;
            let lines: Vec<String> = page
                .data
                .iter()
                .map(|d| {
                    format!(
                        "{}  {:<8} attempts {}  channel {}  {}",
                        d.id,
                        d.status,
                        d.attempts,
                        d.channel_id,
                        d.last_error.as_deref().unwrap_or("")
                    )
                })
                .collect();
            print(out, &json_of(&page), lines.join("\n"))
        }
        ("deliveries", Some("show")) => {
            let d = api.delivery(a.word(2, "the delivery id")?).await?;
            let line = format!(
                "{}\n  status {} after {} attempt(s)\n  channel {}\n  activity {} (conversation {})\n  last error {}",
                d.id,
                d.status,
                d.attempts,
                d.channel_id,
                d.activity_id,
                d.conversation_id,
                d.last_error.as_deref().unwrap_or("none")
            );
            print(out, &json_of(&d), line)
        }
        ("deliveries", Some("retry")) => {
            let d = api.retry_delivery(a.word(2, "the delivery id")?).await?;
            let line = format!("{} replayed: {}", d.id, d.status);
            print(out, &json_of(&d), line)
        }
        ("usage", _) => {
            let u = api.usage(a.one("from"), a.one("to")).await?;
            let mut line = format!("usage from {} to {} (UTC)", u.from, u.to);
            let busy =
                |d: &&crate::UsageDay| d.deliveries != 0 || d.attempts != 0 || d.dead_letters != 0;
            for d in u.days.iter().filter(busy) {
                line.push_str(&format!(
                    "\n  {}  deliveries {:<6} attempts {:<6} dead letters {:<6} ${:.6}",
                    d.date.as_deref().unwrap_or(""),
                    d.deliveries,
                    d.attempts,
                    d.dead_letters,
                    d.estimated_cost_usd
                ));
            }
            let t = &u.total;
            line.push_str(&format!(
                "\n  total       deliveries {:<6} attempts {:<6} dead letters {:<6} ${:.6}\n{}",
                t.deliveries, t.attempts, t.dead_letters, t.estimated_cost_usd, u.note
            ));
            print(out, &json_of(&u), line)
        }
        ("channels", Some("list")) => {
            let page = api.channels(None).await?;
            let lines: Vec<String> = page
                .data
                .iter()
                .map(|c| {
                    format!(
                        "{}  {:<16} {}{}",
                        c.id,
                        c.kind,
                        c.name,
                        if c.active { "" } else { "  (inactive)" }
                    )
                })
                .collect();
            print(out, &json_of(&page), lines.join("\n"))
        }
        ("channels", Some(verb @ ("pause" | "resume"))) => {
            let id = a.word(2, "the channel id")?;
            let state = if verb == "pause" {
                api.pause_channel(id).await?
            } else {
                api.resume_channel(id).await?
            };
            let line = format!("{id}: {}", state.state);
            print(out, &json_of(&state), line)
        }
        (other, sub) => Err(CliError::Usage(format!(
            "unknown command `{other}{}`",
            sub.map(|s| format!(" {s}")).unwrap_or_default()
        ))),
    }
}

/// An answer as `--json` prints it.
fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// How often `listen` asks for what still waits (a delivery a failed forward left).
pub const REPLAY_EVERY: Duration = Duration::from_secs(30);

/// What `listen` does (its `Debug` leaves the connect token out).
#[derive(Clone)]
pub struct Listen {
    pub channel_id: String,
    pub forward_to: String,
    /// The WebSocket API's URL (`wss://.../prod`).
    pub ws_url: String,
    /// The channel's connect token (`config.token`).
    pub token: String,
    /// Stop after forwarding this many deliveries with a 2xx answer.
    pub count: Option<usize>,
    pub json: bool,
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen")
            .field("channel_id", &self.channel_id)
            .field("forward_to", &self.forward_to)
            .field("ws_url", &self.ws_url)
            .field("token", &"[hidden]")
            .field("count", &self.count)
            .field("json", &self.json)
            .finish()
    }
}

/// The Standard Webhooks signature header of `body` for message `id` at `ts`, one `v1,`
/// signature per secret.
pub fn signature(secrets: &[String], id: &str, ts: i64, body: &[u8]) -> Result<String, CliError> {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut out = Vec::new();
    for secret in secrets {
        let key = engine
            .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
            .map_err(|_| CliError::Failed("the channel's signing secret is not base64".into()))?;
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&key).map_err(|e| CliError::Failed(e.to_string()))?;
        mac.update(format!("{id}.{ts}.").as_bytes());
        mac.update(body);
        out.push(format!("v1,{}", engine.encode(mac.finalize().into_bytes())));
    }
    Ok(out.join(" "))
}

/// Connects to the channel's websocket, asks for what waits, and forwards each delivery to
/// `forward_to` until `count` were taken (or the connection closes).
pub async fn listen(
    api: &Client,
    o: &Listen,
    out: &mut (dyn Write + Send),
) -> Result<(), CliError> {
    // The token rides on the websocket URL and each forwarded request is signed with the
    // channel's secrets: neither goes in clear to another machine.
    crate::check_transport(&o.ws_url, "--ws-url").map_err(|e| CliError::Usage(e.to_string()))?;
    crate::check_transport(&o.forward_to, "--forward-to")
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let secrets = api.channel_secrets(&o.channel_id).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(Error::from)?;
    let mut url = reqwest::Url::parse(&o.ws_url)
        .map_err(|e| CliError::Usage(format!("--ws-url is not a URL: {e}")))?;
    url.query_pairs_mut()
        .append_pair("channel_id", &o.channel_id)
        .append_pair("token", &o.token);
    let (mut ws, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async(url.as_str()),
    )
    .await
    .map_err(|_| CliError::Failed("the websocket did not answer within 10 s".into()))?
    .map_err(|e| CliError::Failed(format!("cannot connect to the channel: {e}")))?;
    let say = |out: &mut (dyn Write + Send), v: Value, line: String| {
        let _ = writeln!(
            out,
            "{}",
            if o.json {
                v.to_string()
            } else {
                terminal_safe(&line)
            }
        );
    };
    say(
        out,
        json!({"type": "listening", "channel_id": o.channel_id, "forward_to": o.forward_to}),
        format!("listening on {} -> {}", o.channel_id, o.forward_to),
    );
    ws.send(Message::text(json!({"action": "replay"}).to_string()))
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let mut taken = 0usize;
    // What was not acknowledged is asked for again now and then.
    let mut again = tokio::time::interval(REPLAY_EVERY);
    again.tick().await;
    // A replay the channel refused for now (another client's ran within its interval) is
    // asked for again when it says.
    let mut throttled: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        let wait_throttled = async {
            match throttled.as_mut() {
                Some(s) => s.as_mut().await,
                None => std::future::pending().await,
            }
        };
        // `None`: time to ask for a replay again.
        let next = tokio::select! {
            frame = ws.next() => Some(frame),
            _ = again.tick() => None,
            () = wait_throttled => None,
        };
        let Some(frame) = next else {
            throttled = None;
            ws.send(Message::text(json!({"action": "replay"}).to_string()))
                .await
                .map_err(|e| CliError::Failed(e.to_string()))?;
            continue;
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| CliError::Failed(format!("the websocket failed: {e}")))?;
        let Message::Text(text) = frame else {
            continue;
        };
        let v: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
        if v["code"] == "replay_throttled" {
            let ms = v["retry_after_ms"]
                .as_u64()
                .unwrap_or(1_000)
                .clamp(1, 60_000);
            throttled = Some(Box::pin(tokio::time::sleep(Duration::from_millis(ms))));
            continue;
        }
        if v["type"] != "activity" {
            continue;
        }
        let id = v["delivery_id"].as_str().unwrap_or_default().to_owned();
        // The body a webhook with the default `envelope` body gets.
        let body = json!({
            "activity_id": v["activity_id"],
            "seq": v["seq"],
            "conversation_id": v["conversation_id"],
            "payload": v["payload"],
        })
        .to_string();
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let answer = http
            .post(&o.forward_to)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", ts.to_string())
            .header(
                "webhook-signature",
                signature(&secrets, &id, ts, body.as_bytes())?,
            )
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) if r.status().is_success() => {
                ws.send(Message::text(
                    json!({"action": "ack", "delivery_id": id}).to_string(),
                ))
                .await
                .map_err(|e| CliError::Failed(e.to_string()))?;
                say(
                    out,
                    json!({"type": "forwarded", "delivery_id": id, "status": r.status().as_u16(), "acknowledged": true}),
                    format!("{id} -> {} (acknowledged)", r.status().as_u16()),
                );
                taken += 1;
                if o.count.is_some_and(|n| taken >= n) {
                    break;
                }
            }
            Ok(r) => say(
                out,
                json!({"type": "forwarded", "delivery_id": id, "status": r.status().as_u16(), "acknowledged": false}),
                format!(
                    "{id} -> {} (not acknowledged: it waits for the next replay)",
                    r.status().as_u16()
                ),
            ),
            Err(e) => say(
                out,
                json!({"type": "forwarded", "delivery_id": id, "error": e.to_string(), "acknowledged": false}),
                format!("{id} -> {e} (not acknowledged: it waits for the next replay)"),
            ),
        }
    }
    let _ = ws.close(None).await;
    Ok(())
}
