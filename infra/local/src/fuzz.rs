//! The API fuzzing of the test command: schemathesis (pinned in
//! `infra/local/requirements-fuzz.txt`) generates requests from `docs/openapi.json` against
//! a local stack on the emulator and checks that nothing answers with a server error, that
//! every status is one the document allows, and that every answer matches its schema. The
//! path ids of the operations are a seeded tenant's real channels, deliveries, activities,
//! replay jobs and tenant, so the fuzzing reaches past 404.

use crate::emulator::{root, venv_bin};
use crate::stack::{Stack, StackOptions};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::process::Command;

pub const USAGE: &str =
    "converger-local fuzz [--max-examples N]: schemathesis against a local stack";

/// The checks every answer is held to.
const CHECKS: &str = "not_a_server_error,status_code_conformance,response_schema_conformance,\
                      content_type_conformance";

pub async fn run(args: &[String]) -> Result<(), String> {
    let mut max_examples = "25".to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--max-examples" => {
                max_examples = it.next().cloned().ok_or("--max-examples needs a number")?;
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    crate::emulator::ensure_fuzz_tools().await?;
    let token = converger_core::secret::new_token();
    let stack = Stack::start(StackOptions {
        prefix: format!("fuzz{}-", std::process::id()),
        admin_token: Some(token.clone()),
        ..StackOptions::default()
    })
    .await?;
    let result = fuzz(&stack, &token, &max_examples).await;
    stack.stop().await;
    result
}

async fn fuzz(stack: &Stack, token: &str, max_examples: &str) -> Result<(), String> {
    let rx = crate::receiver::Receiver::always(200).await?;
    let seed = Seed::new(stack, token).await;
    let seeded = seed.data(&rx.url).await?;
    let dir = root().join(".local/fuzz");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = dir.join("schemathesis.toml");
    std::fs::write(&config, seeded.config()).map_err(|e| e.to_string())?;
    let mut failed = Vec::new();
    for (name, url, regex, credential) in [
        (
            "tenant API and receipts",
            &stack.api_url,
            "^/api/",
            &seeded.api_key,
        ),
        ("admin API", &stack.admin_url, "^/admin/", &token.to_owned()),
    ] {
        eprintln!("converger fuzz: {name} at {url}");
        let status = Command::new(venv_bin("schemathesis"))
            .arg("--config-file")
            .arg(&config)
            .arg("run")
            .arg(root().join("docs/openapi.json"))
            .args(["--url", url])
            .args(["--include-path-regex", regex])
            .args(["--header", &format!("Authorization: Bearer {credential}")])
            .args(["--checks", CHECKS])
            .args(["--phases", "examples,coverage,fuzzing"])
            .args(["--max-examples", max_examples])
            // One worker: schemathesis's workers are threads, and two of them describing
            // strategies at once (each parses Python source) trip the interpreter's AST
            // recursion counter, which Python 3.11 shares between threads ("SystemError: AST
            // constructor recursion depth mismatch"), failing the run with no API fault.
            .args(["--workers", "1", "--request-timeout", "30", "--no-color"])
            .args(["--seed", "20261201"])
            .current_dir(&dir)
            .env("NO_COLOR", "1")
            .status()
            .await
            .map_err(|e| format!("schemathesis: {e}"))?;
        if !status.success() {
            failed.push(name);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("the API fuzzing failed for: {}", failed.join(", ")))
    }
}

/// A tenant with something of each kind, for the operations' path ids.
struct Seed<'a> {
    stack: &'a Stack,
    token: &'a str,
    http: reqwest::Client,
}

struct Seeded {
    api_key: String,
    tenant: String,
    channel: String,
    doomed: String,
    delivery: String,
    activity: String,
    replay: String,
}

impl<'a> Seed<'a> {
    async fn new(stack: &'a Stack, token: &'a str) -> Seed<'a> {
        Seed {
            stack,
            token,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap_or_default(),
        }
    }

    async fn post(&self, url: String, key: &str, body: Value) -> Result<Value, String> {
        let r = self
            .http
            .post(&url)
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = r.status();
        let text = r.text().await.map_err(|e| format!("{url}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}: {text}"))?;
        if !status.is_success() {
            return Err(format!("{url}: {status} {v}"));
        }
        Ok(v)
    }

    async fn data(&self, receiver: &str) -> Result<Seeded, String> {
        let (api, admin) = (&self.stack.api_url, &self.stack.admin_url);
        let t = self
            .post(
                format!("{admin}/admin/api/tenants"),
                self.token,
                json!({"name": "fuzz"}),
            )
            .await?;
        let key = str_of(&t["api_key"])?;
        let hook = |name: &str| {
            json!({"type": "webhook", "name": name, "event_types": ["*"],
                   "config": {"url": receiver}})
        };
        let channel = self
            .post(format!("{api}/api/v1/channels"), &key, hook("fuzz"))
            .await?;
        let doomed = self
            .post(
                format!("{api}/api/v1/channels"),
                &key,
                hook("deleted by the fuzzing"),
            )
            .await?;
        let channel_id = str_of(&channel["id"])?;
        let act = self
            .post(
                format!("{api}/api/v1/activities"),
                &key,
                json!({"conversation_id": "fuzz", "channel_ids": [channel_id], "payload": {"n": 1}}),
            )
            .await?;
        let replay = self
            .post(
                format!("{api}/api/v1/channels/{channel_id}/deliveries/replays"),
                &key,
                json!({}),
            )
            .await?;
        Ok(Seeded {
            api_key: key,
            tenant: str_of(&t["id"])?,
            channel: channel_id,
            doomed: str_of(&doomed["id"])?,
            delivery: str_of(&act["deliveries"][0]["id"])?,
            activity: str_of(&act["activity_id"])?,
            replay: str_of(&replay["id"])?,
        })
    }
}

fn str_of(v: &Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("expected a string, got {v}"))
}

impl Seeded {
    /// schemathesis's settings: each operation's `id` is a seeded one (the deleted channel's
    /// for the DELETE, so the other operations keep theirs).
    fn config(&self) -> String {
        let op = |method: &str, regex: &str, id: &str| {
            format!(
                "[[operations]]\ninclude-method = \"{method}\"\ninclude-path-regex = \"{regex}\"\n\
                 parameters = {{ \"path.id\" = \"{id}\" }}\n\n"
            )
        };
        let mut s = String::from("# Written by `converger-local fuzz` for one run.\n\n");
        for m in ["GET", "PATCH", "POST"] {
            s.push_str(&op(m, "^/api/v1/channels/\\\\{id\\\\}", &self.channel));
            s.push_str(&op(m, "^/api/v1/deliveries/\\\\{id\\\\}", &self.delivery));
        }
        s.push_str(&op(
            "DELETE",
            "^/api/v1/channels/\\\\{id\\\\}$",
            &self.doomed,
        ));
        s.push_str(&op(
            "GET",
            "^/api/v1/activities/\\\\{id\\\\}$",
            &self.activity,
        ));
        s.push_str(&op("GET", "^/api/v1/replays/\\\\{id\\\\}$", &self.replay));
        for m in ["GET", "PATCH"] {
            s.push_str(&op(m, "^/admin/api/tenants/\\\\{id\\\\}$", &self.tenant));
        }
        s
    }
}
