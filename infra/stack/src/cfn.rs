//! The local stack is `infra/template.yaml` deployed: transformed by the SAM translator and
//! created as a CloudFormation stack on the emulator (`infra/local/deploy.py`). What the
//! functions use — names, URLs, policies, event source mappings, schedules, routes — is read
//! back from what CloudFormation resolved, never derived from a naming rule.

use crate::emulator;
use crate::iam::{Arns, IamGuard, Policy};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The logical ids of the functions, as the template names them.
pub mod function {
    pub const INGEST: &str = "IngestFunction";
    pub const DELIVER: &str = "DeliverFunction";
    pub const RETRY_SCHEDULER: &str = "RetrySchedulerFunction";
    pub const REPLAY: &str = "ReplayFunction";
    pub const PROBE: &str = "ProbeFunction";
    pub const HEALTH: &str = "HealthFunction";
    pub const API: &str = "ApiFunction";
    pub const ADMIN: &str = "AdminFunction";
    pub const WEBSOCKET: &str = "WebsocketFunction";
    pub const EMAIL_EVENTS: &str = "EmailEventsFunction";
    pub const STREAM: &str = "StreamFunction";
    pub const CHANGES: &str = "ChangesFunction";
}

#[derive(Debug, Clone, Deserialize)]
pub struct StackResource {
    #[serde(rename = "type")]
    pub kind: String,
    pub physical_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeployedQueue {
    pub url: String,
    pub arn: String,
    pub visibility_timeout_s: u32,
    pub redrive_policy: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedArn {
    pub name: String,
    pub arn: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RolePolicy {
    pub name: String,
    pub document: Value,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EventSourceMapping {
    /// The source's ARN: a queue's, or a table's stream's.
    pub queue_arn: String,
    /// `sqs` or `dynamodb` (a table's stream).
    #[serde(default)]
    pub source: String,
    pub batch_size: u32,
    pub maximum_concurrency: Option<u32>,
    pub report_batch_item_failures: bool,
    pub enabled: bool,
    /// A stream's: where reading starts (`TRIM_HORIZON`, `LATEST`).
    #[serde(default)]
    pub starting_position: Option<String>,
    /// A stream's: retries of a failing batch (-1: until its records expire).
    #[serde(default)]
    pub maximum_retry_attempts: Option<i64>,
    #[serde(default)]
    pub bisect_on_error: bool,
    /// A stream's: where a batch whose retries are spent is described (a queue's ARN).
    #[serde(default)]
    pub on_failure: Option<String>,
    #[serde(default)]
    pub tumbling_window_s: Option<u32>,
    /// How long a batch waits for more records before it goes (`MaximumBatchingWindowInSeconds`).
    #[serde(default)]
    pub batching_window_s: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Route {
    pub path: String,
    pub method: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeployedFunction {
    pub name: String,
    pub arn: String,
    pub timeout_s: Option<u32>,
    pub memory_mb: Option<u32>,
    pub architectures: Vec<String>,
    pub reserved_concurrency: Option<u32>,
    /// The environment as deployed (values as CloudFormation passed them).
    pub environment: BTreeMap<String, Value>,
    pub role: String,
    pub policies: Vec<RolePolicy>,
    pub managed_policies: Vec<String>,
    pub event_source_mappings: Vec<EventSourceMapping>,
    /// Schedule expressions of the rules that target the function.
    pub schedules: Vec<String>,
    pub routes: Vec<Route>,
}

impl DeployedFunction {
    /// One environment variable as a string (numbers as CloudFormation wrote them).
    pub fn env(&self, key: &str) -> Option<String> {
        match self.environment.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// The environment as strings.
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.environment
            .keys()
            .filter_map(|k| self.env(k).map(|v| (k.clone(), v)))
            .collect()
    }

    pub fn resources(&self) -> Result<converger_store::Resources, String> {
        converger_store::Resources::from_vars(|k| self.env(k))
            .map_err(|e| format!("{}: {e}", self.name))
    }

    pub fn parsed_policies(&self) -> Result<Vec<Policy>, String> {
        self.policies
            .iter()
            .map(|p| Policy::parse(&p.name, &p.document))
            .collect()
    }

    /// The period of its first schedule (`rate(N minute[s])`, `rate(N second[s])` or hours).
    pub fn schedule_period(&self) -> Option<Duration> {
        self.schedules.first().and_then(|s| rate(s))
    }
}

/// `rate(5 minutes)` -> 300 s.
pub fn rate(expr: &str) -> Option<Duration> {
    let inner = expr.strip_prefix("rate(")?.strip_suffix(')')?;
    let (n, unit) = inner.trim().split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let secs = match unit.trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86400,
        _ => return None,
    };
    n.checked_mul(secs).map(Duration::from_secs)
}

#[derive(Debug, Clone, Deserialize)]
pub struct Skipped {
    pub logical_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub standin: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Timings {
    pub transform: u64,
    pub create: u64,
    pub total: u64,
}

/// What CloudFormation created, as the emulator reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct DeployedStack {
    pub stack_name: String,
    pub region: String,
    pub account: String,
    pub outputs: BTreeMap<String, String>,
    pub resources: BTreeMap<String, StackResource>,
    pub queues: BTreeMap<String, DeployedQueue>,
    pub tables: BTreeMap<String, NamedArn>,
    pub buses: BTreeMap<String, NamedArn>,
    pub functions: BTreeMap<String, DeployedFunction>,
    pub skipped: Vec<Skipped>,
    /// Logical id -> the id standing in for a resource the emulator does not implement.
    pub standins: BTreeMap<String, String>,
    /// Logical id -> the id its service gave each skipped resource made through its API.
    #[serde(default)]
    pub made: BTreeMap<String, String>,
    pub timings_ms: Timings,
}

impl DeployedStack {
    pub fn function(&self, logical_id: &str) -> Result<&DeployedFunction, String> {
        self.functions
            .get(logical_id)
            .ok_or_else(|| format!("the template has no function {logical_id}"))
    }

    pub fn queue_by_arn(&self, arn: &str) -> Option<(&str, &DeployedQueue)> {
        self.queues
            .iter()
            .find(|(_, q)| q.arn == arn)
            .map(|(k, q)| (k.as_str(), q))
    }

    /// What request ARNs are built from.
    pub fn arns(&self) -> Arns {
        Arns {
            partition: "aws".into(),
            region: self.region.clone(),
            account: self.account.clone(),
            queues: self
                .queues
                .values()
                .map(|q| (q.url.clone(), q.arn.clone()))
                .collect(),
            tables: self
                .tables
                .values()
                .map(|t| (t.name.clone(), t.arn.clone()))
                .collect(),
            hash_keys: self.hash_keys(),
            websocket_api: self.standins.get("WebSocketApi").cloned(),
            buckets: self
                .resources
                .values()
                .filter(|r| r.kind == "AWS::S3::Bucket")
                .map(|r| r.physical_id.clone())
                .collect(),
        }
    }

    /// Table name -> its partition key's attribute (`crate::tables::hash_keys`; a
    /// `dynamodb:LeadingKeys` condition allows nothing on a table missing here).
    fn hash_keys(&self) -> std::collections::HashMap<String, String> {
        let keys = crate::tables::hash_keys();
        self.tables
            .iter()
            .filter_map(|(logical, table)| Some((table.name.clone(), keys.get(logical)?.clone())))
            .collect()
    }

    /// Physical name -> logical id, for reports in the template's terms.
    pub fn logical_names(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, t) in &self.tables {
            out.push((t.name.clone(), k.clone()));
        }
        for (k, q) in &self.queues {
            let name = q.url.rsplit('/').next().unwrap_or_default().to_owned();
            out.push((name, k.clone()));
        }
        for (k, b) in &self.buses {
            out.push((b.name.clone(), k.clone()));
        }
        for (k, r) in &self.resources {
            if r.kind == "AWS::S3::Bucket" {
                out.push((r.physical_id.clone(), k.clone()));
            }
        }
        for (k, id) in &self.standins {
            if id != k {
                out.push((id.clone(), k.clone()));
            }
        }
        out.push((format!("{}:{}:", self.region, self.account), String::new()));
        out
    }

    /// The guard that checks `function`'s requests against its deployed policies.
    pub fn guard(&self, logical_id: &str) -> Result<IamGuard, String> {
        let f = self.function(logical_id)?;
        Ok(IamGuard::new(
            logical_id,
            f.parsed_policies()?,
            self.arns(),
            self.logical_names(),
        ))
    }

    /// Every (function, action, resource) grant of the deployed policies, in the template's
    /// terms: what the test run's requests are held against.
    pub fn grants(&self) -> Result<Vec<(String, String, String)>, String> {
        let names = self.logical_names();
        let mut out = Vec::new();
        for (logical, f) in &self.functions {
            for p in f.parsed_policies()? {
                for s in p.statements.iter().filter(|s| s.allow) {
                    for a in &s.actions {
                        for r in &s.resources {
                            out.push((
                                logical.clone(),
                                a.clone(),
                                crate::iam::logicalize(&names, r),
                            ));
                        }
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// A valid stack name from a resource prefix (`t1a2b-` -> `t1a2b`).
pub fn stack_name(prefix: &str) -> String {
    let mut s: String = prefix
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_owned();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s.insert(0, 's');
    }
    s.truncate(40);
    s
}

/// Deploys the template as stack `stack_name` on the emulator at `endpoint`.
/// An exclusive lock, across processes, on deploying to the emulator at `endpoint`: its
/// CloudFormation and IAM backends are not safe under concurrent stack builds (two at once
/// were answered with 500s), while the stacks, once built, are used side by side. The lock is
/// the file's, held while the returned handle lives (and released if the process dies).
pub(crate) async fn deploy_lock(endpoint: &str) -> Result<std::fs::File, String> {
    let tag: String = endpoint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = std::env::temp_dir().join(format!("converger-deploy-{tag}.lock"));
    tokio::task::spawn_blocking(move || {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        f.lock().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(f)
    })
    .await
    .map_err(|e| format!("deploy lock: {e}"))?
}

pub async fn deploy(
    endpoint: &str,
    stack_name: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<DeployedStack, String> {
    deploy_with(endpoint, stack_name, parameters, SkippedMade::All).await
}

/// How much of what the emulator's CloudFormation skips a deployment makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkippedMade {
    /// Every skipped resource, through its own service's API (about 60 requests): the test
    /// command's reference deployment, the local runner's.
    All,
    /// The APIs and secrets only, which the stack's resources name: a test's or a
    /// benchmark's stack, which the reference deployment already checked.
    Apis,
}

/// [`deploy`], making `skipped` of what the emulator's CloudFormation skips.
pub async fn deploy_with(
    endpoint: &str,
    stack_name: &str,
    parameters: &BTreeMap<String, String>,
    skipped: SkippedMade,
) -> Result<DeployedStack, String> {
    let template = emulator::root().join("infra/template.yaml");
    deploy_template(endpoint, stack_name, &template, parameters, skipped).await
}

/// [`deploy_with`] of the template at `template` (a test's changed copy of
/// `infra/template.yaml`, say).
pub async fn deploy_template(
    endpoint: &str,
    stack_name: &str,
    template: &std::path::Path,
    parameters: &BTreeMap<String, String>,
    skipped: SkippedMade,
) -> Result<DeployedStack, String> {
    emulator::ensure_venv().await?;
    // Held until the stack is read back: one deployment at a time on an emulator.
    let _one_at_a_time = deploy_lock(endpoint).await?;
    let root = emulator::root();
    let request = serde_json::json!({
        "endpoint": endpoint,
        "region": std::env::var("AWS_REGION")
            .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|_| "us-east-1".into()),
        "stack_name": stack_name,
        "template": template,
        "parameters": parameters,
        "skipped": match skipped {
            SkippedMade::All => "all",
            SkippedMade::Apis => "apis",
        },
    });
    // The project's emulator runs the deployment in its own process; another emulator
    // (a plain moto server named by `AWS_ENDPOINT_URL`) gets it from a process of its own.
    match in_emulator(endpoint, &request).await? {
        Some(deployed) => Ok(deployed),
        None => in_own_process(&root, &request, stack_name).await,
    }
}

/// The deployment through the emulator's `POST /_converger/deploy`; `None` where the
/// emulator does not take it.
async fn in_emulator(
    endpoint: &str,
    request: &serde_json::Value,
) -> Result<Option<DeployedStack>, String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("{}/_converger/deploy", endpoint.trim_end_matches('/'));
    let resp = http
        .post(&url)
        .header("content-type", "application/json")
        .body(request.to_string())
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    // The project's emulator marks its answers; another answers an unknown path its own way.
    if !resp.headers().contains_key("x-converger-deploy") {
        return Ok(None);
    }
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("the emulator's deployment answer: {e}"));
    }
    Err(format!(
        "deploying infra/template.yaml as stack {} failed ({status}):\n{}",
        request["stack_name"].as_str().unwrap_or_default(),
        String::from_utf8_lossy(&body)
    ))
}

/// The deployment by `infra/local/deploy.py` in a Python process of its own.
async fn in_own_process(
    root: &std::path::Path,
    request: &serde_json::Value,
    stack_name: &str,
) -> Result<DeployedStack, String> {
    let mut child = tokio::process::Command::new(emulator::venv_bin("python"))
        .arg(root.join("infra/local/deploy.py"))
        .env("PYTHONWARNINGS", "ignore")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("deploy.py: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(request.to_string().as_bytes())
            .await
            .map_err(|e| format!("deploy.py: {e}"))?;
    }
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .map_err(|_| "deploying the template took more than 300 s".to_string())?
        .map_err(|e| format!("deploy.py: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "deploying infra/template.yaml as stack {stack_name} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("deploy.py's answer: {e}"))
}

/// A path matcher for API Gateway route paths (`/api/{proxy+}`, `/admin`).
pub fn route_matches(route: &str, path: &str) -> bool {
    let r: Vec<&str> = route.trim_matches('/').split('/').collect();
    let p: Vec<&str> = path.trim_matches('/').split('/').collect();
    for (i, seg) in r.iter().enumerate() {
        if seg.starts_with('{') && seg.ends_with("+}") {
            return p.len() > i && p[i..].iter().all(|s| !s.is_empty());
        }
        match p.get(i) {
            Some(s) if seg.starts_with('{') && seg.ends_with('}') => {
                if s.is_empty() {
                    return false;
                }
            }
            Some(s) if s == seg => {}
            _ => return false,
        }
    }
    r.len() == p.len()
}

/// The route API Gateway selects for `method path` among `routes`: the most specific (a
/// route without a greedy `{proxy+}` before one with, a named method before `ANY`).
pub fn route_for<'a>(routes: &'a [Route], method: &str, path: &str) -> Option<&'a Route> {
    routes
        .iter()
        .filter(|r| {
            (r.method.eq_ignore_ascii_case("ANY") || r.method.eq_ignore_ascii_case(method))
                && route_matches(&r.path, path)
        })
        .min_by_key(|r| (r.path.contains("+}"), r.method.eq_ignore_ascii_case("ANY")))
}

/// Whether one of `routes` takes `method path`.
pub fn routed(routes: &[Route], method: &str, path: &str) -> bool {
    route_for(routes, method, path).is_some()
}

/// A function as `infra/template.yaml` declares it: the parts of its configuration the
/// in-process backend plays without a deployment (its HTTP routes and its schedules).
#[derive(Debug, Clone, Default)]
pub struct DeclaredFunction {
    pub routes: Vec<Route>,
    pub schedules: Vec<String>,
    /// Its `LoggingConfig.SystemLogLevel` (Lambda's own log lines), its own or the globals'.
    pub system_log_level: Option<String>,
    /// The environment variables it is given, its own and the globals', each with the
    /// logical id of the resource it names when its value is a `!Ref`.
    pub environment: BTreeMap<String, Option<String>>,
}

impl DeclaredFunction {
    /// The period of its first `rate(...)` schedule.
    pub fn schedule_period(&self) -> Option<Duration> {
        self.schedules.first().and_then(|s| rate(s))
    }
}

/// Every `AWS::Serverless::Function` of the template, by logical id, with its `HttpApi`
/// routes and `Schedule` expressions as written.
pub fn declared_functions() -> Result<BTreeMap<String, DeclaredFunction>, String> {
    template().and_then(|doc| declared_in(&doc))
}

/// The detail types the template's `StreamRule` sends to the stream queue.
pub fn stream_rule_types() -> Result<Vec<String>, String> {
    let t = template()?;
    let types = t["Resources"]["StreamRule"]["Properties"]["EventPattern"]["detail-type"]
        .as_sequence()
        .ok_or("the template's StreamRule has no detail-type list")?;
    Ok(types
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect())
}

/// `infra/template.yaml`, as written (its `!Ref`s and `!GetAtt`s kept as YAML tags).
pub fn template() -> Result<serde_yaml::Value, String> {
    let path = emulator::root().join("infra/template.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn declared_in(doc: &serde_yaml::Value) -> Result<BTreeMap<String, DeclaredFunction>, String> {
    let resources = doc
        .get("Resources")
        .and_then(serde_yaml::Value::as_mapping)
        .ok_or("no Resources")?;
    let system_log_level = |logging: Option<&serde_yaml::Value>| {
        logging
            .and_then(|l| l.get("SystemLogLevel"))
            .and_then(serde_yaml::Value::as_str)
            .map(str::to_owned)
    };
    let global_level = system_log_level(
        doc.get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("LoggingConfig")),
    );
    let variables = |function: Option<&serde_yaml::Value>| -> Vec<(String, Option<String>)> {
        let reference = |v: &serde_yaml::Value| match v {
            serde_yaml::Value::Tagged(t) if t.tag == "Ref" => t.value.as_str().map(str::to_owned),
            _ => None,
        };
        function
            .and_then(|f| f.get("Environment"))
            .and_then(|e| e.get("Variables"))
            .and_then(serde_yaml::Value::as_mapping)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), reference(v))))
                    .collect()
            })
            .unwrap_or_default()
    };
    let global_env = variables(doc.get("Globals").and_then(|g| g.get("Function")));
    let mut out = BTreeMap::new();
    for (id, r) in resources {
        if r.get("Type").and_then(serde_yaml::Value::as_str) != Some("AWS::Serverless::Function") {
            continue;
        }
        let id = id.as_str().ok_or("a resource id is not a string")?;
        let mut f = DeclaredFunction {
            system_log_level: system_log_level(
                r.get("Properties").and_then(|p| p.get("LoggingConfig")),
            )
            .or_else(|| global_level.clone()),
            environment: global_env
                .iter()
                .cloned()
                .chain(variables(r.get("Properties")))
                .collect(),
            ..DeclaredFunction::default()
        };
        let events = r
            .get("Properties")
            .and_then(|p| p.get("Events"))
            .and_then(serde_yaml::Value::as_mapping);
        for ev in events.into_iter().flat_map(|m| m.values()) {
            let props = ev.get("Properties");
            let prop = |k: &str| {
                props
                    .and_then(|p| p.get(k))
                    .and_then(serde_yaml::Value::as_str)
                    .map(str::to_owned)
            };
            match ev.get("Type").and_then(serde_yaml::Value::as_str) {
                Some("HttpApi") => f.routes.push(Route {
                    path: prop("Path").ok_or_else(|| format!("{id}: a route has no Path"))?,
                    method: prop("Method").unwrap_or_else(|| "ANY".into()),
                }),
                Some("Schedule") => f.schedules.extend(prop("Schedule")),
                _ => {}
            }
        }
        out.insert(id.to_owned(), f);
    }
    Ok(out)
}

/// `HashMap` of queue URL by logical id (tests and tools).
pub fn queue_urls(stack: &DeployedStack) -> HashMap<String, String> {
    stack
        .queues
        .iter()
        .map(|(k, q)| (k.clone(), q.url.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every variable the template gives a function is a declared setting, every required
    /// resource name and secret is given, and `docs/configuration.md` shows the settings as
    /// declared (`UPDATE_DOCS=1` rewrites its generated table).
    #[test]
    fn the_settings_the_template_gives_are_declared_and_documented() {
        use converger_core::settings::{self, Kind};
        let declared = declared_functions().unwrap();
        let given: std::collections::BTreeSet<&String> = declared
            .values()
            .flat_map(|f| f.environment.keys())
            .collect();
        for name in &given {
            assert!(
                settings::find(name).is_some(),
                "the template sets {name}, which core::settings does not declare"
            );
        }
        for s in settings::ALL {
            let required = matches!(s.kind, Kind::Resource | Kind::Secret)
                && s.default.starts_with("none (required)")
                || s.kind == Kind::Secret;
            if required {
                assert!(
                    given.iter().any(|g| g.as_str() == s.name),
                    "the template does not set {}",
                    s.name
                );
            }
        }
        // Every function gets every required resource name.
        for (id, f) in &declared {
            for s in settings::ALL {
                if s.kind == Kind::Resource && s.default.starts_with("none (required)") {
                    assert!(f.environment.contains_key(s.name), "{id} lacks {}", s.name);
                }
            }
        }
        let path = emulator::root().join("docs/configuration.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (begin, end) = (
            "<!-- generated from core::settings: begin -->\n",
            "<!-- generated from core::settings: end -->",
        );
        let (head, rest) = page
            .split_once(begin)
            .expect("the page has the generated table");
        let (_, tail) = rest.split_once(end).expect("the generated table ends");
        let fresh = format!("{head}{begin}{}{end}{tail}", settings::markdown());
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        assert!(
            fresh == page,
            "docs/configuration.md is not what core::settings declares: run this test with UPDATE_DOCS=1"
        );
    }

    #[test]
    fn rates_parse() {
        assert_eq!(rate("rate(1 minute)"), Some(Duration::from_secs(60)));
        assert_eq!(rate("rate(5 minutes)"), Some(Duration::from_secs(300)));
        assert_eq!(rate("cron(0 * * * ? *)"), None);
    }

    #[test]
    fn routes_match_as_api_gateway_does() {
        assert!(route_matches("/api/{proxy+}", "/api/v1/activities"));
        assert!(!route_matches("/api/{proxy+}", "/api"));
        assert!(!route_matches("/api/{proxy+}", "/admin/x"));
        assert!(route_matches("/admin", "/admin"));
        assert!(!route_matches("/admin", "/admin/x"));
        let routes = vec![Route {
            path: "/portal".into(),
            method: "GET".into(),
        }];
        assert!(routed(&routes, "GET", "/portal"));
        assert!(!routed(&routes, "POST", "/portal"));
    }

    #[test]
    fn the_template_declares_routes_and_schedules() {
        let text = "Resources:\n  Api:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n        All:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n            Path: /api/{proxy+}\n            Method: ANY\n        Tick:\n          Type: Schedule\n          Properties:\n            Schedule: rate(5 minutes)\n  Q:\n    Type: AWS::SQS::Queue\n";
        let f = declared_in(&serde_yaml::from_str(text).unwrap()).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f["Api"].routes[0].path, "/api/{proxy+}");
        assert_eq!(f["Api"].schedule_period(), Some(Duration::from_secs(300)));
        let real = declared_functions().unwrap();
        assert!(
            real[function::API]
                .routes
                .iter()
                .any(|r| r.path == "/api/{proxy+}")
        );
        assert!(real[function::RETRY_SCHEDULER].schedule_period().is_some());
    }

    #[test]
    fn stack_names_are_valid() {
        assert_eq!(stack_name("t1a2b-"), "t1a2b");
        assert_eq!(stack_name("bench_12-"), "bench-12");
        assert_eq!(stack_name("9x"), "s9x");
    }
}
