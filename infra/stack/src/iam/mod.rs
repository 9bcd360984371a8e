//! IAM for the local stack: every AWS request a function makes is evaluated against that
//! function's role policy as CloudFormation deployed it, and refused (as AWS would refuse it)
//! when the policy does not allow it. The emulator enforces no IAM for DynamoDB and SQS
//! resources, so without this a missing grant would first show on AWS.
//!
//! What is evaluated: identity policies' `Allow` and `Deny` statements with `Action` /
//! `NotAction` and `Resource` / `NotResource` (strings or lists, `*` and `?` wildcards,
//! actions case-insensitive), and the conditions the template uses: `StringEquals` or
//! `StringNotEquals` on `aws:ResourceAccount` (the account in the resource's ARN), and
//! `ForAllValues:StringLike` on `dynamodb:LeadingKeys` (the partition key values of a single
//! item request or a transaction's items; unknown for any other request, which such a
//! statement then does not allow). Any other condition is refused when the policy is read; no principals or permission boundaries. What a request needs is derived as AWS authorizes it: DynamoDB index
//! queries need the index ARN (`table/T/index/I`), transactions need the per-item action on
//! each table, SQS batch calls need the single-message action, `PutEvents` needs the bus ARN,
//! a WebSocket push needs `execute-api:ManageConnections` on the connection's ARN.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// One statement of a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub allow: bool,
    pub actions: Vec<String>,
    pub not_actions: Vec<String>,
    pub resources: Vec<String>,
    pub not_resources: Vec<String>,
    /// `aws:ResourceAccount` conditions: (negated, the accounts named).
    pub account_conditions: Vec<(bool, Vec<String>)>,
    /// `ForAllValues:StringLike` on `dynamodb:LeadingKeys`: the patterns every partition key
    /// value of the request must match.
    pub leading_keys: Option<Vec<String>>,
}

/// The conditions a statement may carry here: `StringEquals` / `StringNotEquals` on
/// `aws:ResourceAccount`, `ForAllValues:StringLike` on `dynamodb:LeadingKeys`.
#[allow(clippy::type_complexity)]
fn conditions(
    name: &str,
    c: &Value,
) -> Result<(Vec<(bool, Vec<String>)>, Option<Vec<String>>), String> {
    let Some(ops) = c.as_object() else {
        return Ok((Vec::new(), None));
    };
    let (mut accounts, mut leading) = (Vec::new(), None);
    for (op, keys) in ops {
        let keys = keys
            .as_object()
            .ok_or(format!("policy {name}: {op} is not an object"))?;
        let [(key, values)] = keys.iter().collect::<Vec<_>>()[..] else {
            return Err(format!("policy {name}: {op} names more than one key"));
        };
        match op.as_str() {
            "StringEquals" | "StringNotEquals"
                if key.eq_ignore_ascii_case("aws:ResourceAccount") =>
            {
                accounts.push((op == "StringNotEquals", strings(values)?));
            }
            "ForAllValues:StringLike" if key.eq_ignore_ascii_case("dynamodb:LeadingKeys") => {
                leading = Some(strings(values)?);
            }
            other => {
                return Err(format!(
                    "policy {name}: condition {other} on {key} is not evaluated locally"
                ));
            }
        }
    }
    Ok((accounts, leading))
}

/// A named identity policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: String,
    pub statements: Vec<Statement>,
}

fn strings(v: &Value) -> Result<Vec<String>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("not a string: {x}"))
            })
            .collect(),
        other => Err(format!("expected a string or a list, found {other}")),
    }
}

impl Policy {
    /// Parses a policy document (`{"Statement": [...]}`, or a single statement object).
    pub fn parse(name: &str, doc: &Value) -> Result<Self, String> {
        let list = match &doc["Statement"] {
            Value::Array(a) => a.clone(),
            Value::Object(_) => vec![doc["Statement"].clone()],
            other => return Err(format!("policy {name}: no statements ({other})")),
        };
        let statements = list
            .iter()
            .map(|s| {
                let (account_conditions, leading_keys) = conditions(name, &s["Condition"])?;
                Ok(Statement {
                    account_conditions,
                    leading_keys,
                    allow: match s["Effect"].as_str() {
                        Some("Allow") => true,
                        Some("Deny") => false,
                        other => return Err(format!("policy {name}: effect {other:?}")),
                    },
                    actions: strings(&s["Action"])?,
                    not_actions: strings(&s["NotAction"])?,
                    resources: strings(&s["Resource"])?,
                    not_resources: strings(&s["NotResource"])?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            name: name.to_owned(),
            statements,
        })
    }
}

/// IAM's wildcard match: `*` is any run of characters, `?` any one character.
pub fn wildcard(pattern: &str, value: &str, ignore_case: bool) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = if ignore_case {
        (
            pattern.to_lowercase().chars().collect(),
            value.to_lowercase().chars().collect(),
        )
    } else {
        (pattern.chars().collect(), value.chars().collect())
    };
    // Iterative glob match with backtracking to the last star.
    let (mut pi, mut vi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == v[vi]) {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, vi));
            pi += 1;
        } else if let Some((sp, sv)) = star {
            pi = sp + 1;
            vi = sv + 1;
            star = Some((sp, sv + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The grant that allowed a request: the action and resource patterns that matched.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    pub action: String,
    pub resource: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(Grant),
    /// No statement allows it.
    ImplicitDeny,
    /// A `Deny` statement matches (of the policy named).
    ExplicitDeny(String),
}

fn matching<'a>(patterns: &'a [String], value: &str, ignore_case: bool) -> Option<&'a String> {
    patterns.iter().find(|p| wildcard(p, value, ignore_case))
}

fn statement_match(
    s: &Statement,
    action: &str,
    resource: &str,
    leading: Option<&[String]>,
) -> Option<Grant> {
    if let Some(patterns) = &s.leading_keys {
        // Unknown keys: not allowed (as AWS would not, for a request that names keys this
        // check cannot read).
        let keys = leading?;
        if !keys
            .iter()
            .all(|k| patterns.iter().any(|p| wildcard(p, k, false)))
        {
            return None;
        }
    }
    let action_pattern = if s.not_actions.is_empty() {
        matching(&s.actions, action, true)?.clone()
    } else if matching(&s.not_actions, action, true).is_none() {
        format!("NotAction {}", s.not_actions.join(","))
    } else {
        return None;
    };
    let account = resource.split(':').nth(4).unwrap_or("");
    if !s
        .account_conditions
        .iter()
        .all(|(negated, accounts)| accounts.iter().any(|a| a == account) != *negated)
    {
        return None;
    }
    let resource_pattern = if s.not_resources.is_empty() {
        matching(&s.resources, resource, false)?.clone()
    } else if matching(&s.not_resources, resource, false).is_none() {
        format!("NotResource {}", s.not_resources.join(","))
    } else {
        return None;
    };
    Some(Grant {
        action: action_pattern,
        resource: resource_pattern,
    })
}

/// IAM's evaluation of identity policies: an explicit deny wins, else any allow, else deny.
pub fn evaluate(policies: &[Policy], action: &str, resource: &str) -> Decision {
    evaluate_keys(policies, action, resource, None)
}

/// [`evaluate`] of a request whose partition key values are `leading` (when known).
pub fn evaluate_keys(
    policies: &[Policy],
    action: &str,
    resource: &str,
    leading: Option<&[String]>,
) -> Decision {
    let mut allowed = None;
    for p in policies {
        for s in &p.statements {
            if let Some(g) = statement_match(s, action, resource, leading) {
                if !s.allow {
                    return Decision::ExplicitDeny(p.name.clone());
                }
                allowed.get_or_insert(g);
            }
        }
    }
    allowed.map_or(Decision::ImplicitDeny, Decision::Allow)
}

/// One action on one resource, as IAM authorizes a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub action: String,
    pub resource: String,
    /// The partition key values it touches (`dynamodb:LeadingKeys`), where this check can
    /// read them.
    pub leading_keys: Option<Vec<String>>,
}

/// What the requests' resource ARNs are built from: the deployed stack's region, account,
/// queue ARNs and the WebSocket API's id.
#[derive(Debug, Clone, Default)]
pub struct Arns {
    pub partition: String,
    pub region: String,
    pub account: String,
    /// Queue URL -> queue ARN.
    pub queues: HashMap<String, String>,
    /// Table name -> table ARN.
    pub tables: HashMap<String, String>,
    /// Table name -> its partition key's attribute.
    pub hash_keys: HashMap<String, String>,
    /// The WebSocket API's id (its management endpoint's pushes are `execute-api` calls).
    pub websocket_api: Option<String>,
    /// The stack's S3 buckets, by name (requests name them first in the path: the
    /// emulator's endpoint takes the path style).
    pub buckets: std::collections::BTreeSet<String>,
}

impl Arns {
    fn table(&self, name: &str) -> String {
        self.tables.get(name).cloned().unwrap_or_else(|| {
            format!(
                "arn:{}:dynamodb:{}:{}:table/{name}",
                self.partition, self.region, self.account
            )
        })
    }

    fn queue(&self, url: &str) -> String {
        if let Some(arn) = self.queues.get(url) {
            return arn.clone();
        }
        let name = url.rsplit('/').next().unwrap_or(url);
        self.queue_named(name)
    }

    fn queue_named(&self, name: &str) -> String {
        format!(
            "arn:{}:sqs:{}:{}:{name}",
            self.partition, self.region, self.account
        )
    }

    fn bus(&self, name: &str) -> String {
        if name.starts_with("arn:") {
            return name.to_owned();
        }
        format!(
            "arn:{}:events:{}:{}:event-bus/{name}",
            self.partition, self.region, self.account
        )
    }

    /// An S3 request to one of the stack's buckets (`{method} /{bucket}/{key}`): the object
    /// action it needs on the object's ARN, or `s3:ListBucket` on the bucket's.
    fn s3(&self, method: &str, uri: &str) -> Option<Access> {
        let path = uri
            .split_once("://")
            .map_or(uri, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
        let path = path.split('?').next().unwrap_or(path);
        let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
        if !self.buckets.contains(bucket) {
            return None;
        }
        let arn = |r: &str| format!("arn:{}:s3:::{r}", self.partition);
        let (action, resource) = match (method, key.is_empty()) {
            ("GET" | "HEAD", true) => ("s3:ListBucket", arn(bucket)),
            ("GET" | "HEAD", false) => ("s3:GetObject", arn(path)),
            ("PUT" | "POST", false) => ("s3:PutObject", arn(path)),
            ("DELETE", false) => ("s3:DeleteObject", arn(path)),
            _ => ("unknown:s3", arn(path)),
        };
        Some(Access {
            action: action.into(),
            resource,
            leading_keys: None,
        })
    }

    /// What one request needs: from its `X-Amz-Target` (the JSON protocols of DynamoDB, SQS
    /// and EventBridge) and body, or, for the REST ones (the WebSocket management API, SES v2's
    /// `SendEmail`), its method, path and body.
    pub fn accesses(
        &self,
        target: Option<&str>,
        method: &str,
        uri: &str,
        body: &[u8],
    ) -> Vec<Access> {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let access = |action: String, resource: String| Access {
            action,
            resource,
            leading_keys: None,
        };
        // A single item's partition key value (`Key` or `Item`), as text.
        let leading = |table: &str, item: &Value| -> Option<Vec<String>> {
            let attr = self.hash_keys.get(table)?;
            let value = item["Key"].get(attr).or_else(|| item["Item"].get(attr))?;
            let text = value["S"].as_str().or_else(|| value["N"].as_str())?;
            Some(vec![text.to_owned()])
        };
        let Some(target) = target else {
            if method == "POST" && uri.contains("/v2/email/outbound-emails") {
                // SES v2 `SendEmail` (REST JSON): checked against the sending identity and
                // the configuration set, as SES authorizes it.
                let ses = |what: String| {
                    format!(
                        "arn:{}:ses:{}:{}:{what}",
                        self.partition, self.region, self.account
                    )
                };
                let mut out = vec![access(
                    "ses:SendEmail".into(),
                    ses(format!(
                        "identity/{}",
                        v["FromEmailAddress"].as_str().unwrap_or("")
                    )),
                )];
                if let Some(set) = v["ConfigurationSetName"].as_str() {
                    out.push(access(
                        "ses:SendEmail".into(),
                        ses(format!("configuration-set/{set}")),
                    ));
                }
                // Sent on behalf of an SES tenant: its ARN is `tenant/<name>/<tenant id>`,
                // the id SES's own.
                if let Some(name) = v["TenantName"].as_str() {
                    out.push(access(
                        "ses:SendEmail".into(),
                        ses(format!("tenant/{name}/id")),
                    ));
                }
                return out;
            }
            if let Some(arn) = sts_assume_role(body) {
                return vec![access("sts:AssumeRole".into(), arn)];
            }
            if let Some(a) = self.s3(method, uri) {
                return vec![a];
            }
            if !uri.contains("/@connections/") {
                // A service this check does not know: refused until it is taught.
                return vec![access(format!("unknown:{method}"), uri.to_owned())];
            }
            // The WebSocket management API: `{method} /{stage}/@connections/{id}`.
            let path = uri
                .split_once("://")
                .map_or(uri, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
            let path = path.split('?').next().unwrap_or(path);
            let api = self
                .websocket_api
                .clone()
                .unwrap_or_else(|| "unknown".into());
            return vec![access(
                "execute-api:ManageConnections".into(),
                format!(
                    "arn:{}:execute-api:{}:{}:{api}/{}",
                    self.partition,
                    self.region,
                    self.account,
                    path_with_method(path, method)
                ),
            )];
        };
        let (prefix, op) = target.split_once('.').unwrap_or(("", target));
        if prefix.starts_with("DynamoDB") {
            let table_or_index = |item: &Value| {
                let table = self.table(item["TableName"].as_str().unwrap_or(""));
                match item["IndexName"].as_str() {
                    Some(index) => format!("{table}/index/{index}"),
                    None => table,
                }
            };
            match op {
                "BatchGetItem" | "BatchWriteItem" => v["RequestItems"]
                    .as_object()
                    .map(|tables| {
                        tables
                            .keys()
                            .map(|t| access(format!("dynamodb:{op}"), self.table(t)))
                            .collect()
                    })
                    .unwrap_or_default(),
                "TransactWriteItems" | "TransactGetItems" => v["TransactItems"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|item| {
                                let (kind, inner) = item.as_object()?.iter().next()?;
                                let action = match kind.as_str() {
                                    "Put" => "PutItem",
                                    "Update" => "UpdateItem",
                                    "Delete" => "DeleteItem",
                                    "ConditionCheck" => "ConditionCheckItem",
                                    "Get" => "GetItem",
                                    _ => kind.as_str(),
                                };
                                let name = inner["TableName"].as_str().unwrap_or("");
                                Some(Access {
                                    leading_keys: leading(name, inner),
                                    ..access(format!("dynamodb:{action}"), self.table(name))
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                "GetItem" | "PutItem" | "UpdateItem" | "DeleteItem" => {
                    let name = v["TableName"].as_str().unwrap_or("");
                    vec![Access {
                        leading_keys: leading(name, &v),
                        ..access(format!("dynamodb:{op}"), table_or_index(&v))
                    }]
                }
                _ => vec![access(format!("dynamodb:{op}"), table_or_index(&v))],
            }
        } else if prefix.starts_with("AmazonSQS") {
            let action = op.strip_suffix("Batch").unwrap_or(op);
            let resource = match (v["QueueUrl"].as_str(), v["QueueName"].as_str()) {
                (Some(url), _) => self.queue(url),
                (None, Some(name)) => self.queue_named(name),
                (None, None) => "*".into(),
            };
            vec![access(format!("sqs:{action}"), resource)]
        } else if prefix.starts_with("AWSEvents") {
            let buses: BTreeSet<String> = match v["Entries"].as_array() {
                Some(entries) if op == "PutEvents" => entries
                    .iter()
                    .map(|e| self.bus(e["EventBusName"].as_str().unwrap_or("default")))
                    .collect(),
                _ => BTreeSet::from([self.bus(v["EventBusName"].as_str().unwrap_or("default"))]),
            };
            buses
                .into_iter()
                .map(|b| access(format!("events:{op}"), b))
                .collect()
        } else if prefix == "secretsmanager" {
            let id = v["SecretId"].as_str().unwrap_or("*").to_owned();
            vec![access(format!("secretsmanager:{op}"), id)]
        } else {
            vec![access(format!("{prefix}:{op}"), "*".into())]
        }
    }
}

/// The role an STS `AssumeRole` request (the query protocol's form body) names.
fn sts_assume_role(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let url = reqwest::Url::parse(&format!("http://form/?{text}")).ok()?;
    let pairs: HashMap<String, String> = url.query_pairs().into_owned().collect();
    (pairs.get("Action").map(String::as_str) == Some("AssumeRole"))
        .then(|| pairs.get("RoleArn").cloned().unwrap_or_default())
}

/// `prod/@connections/abc` with `POST` -> `prod/POST/@connections/abc`.
fn path_with_method(path: &str, method: &str) -> String {
    match path.split_once('/') {
        Some((stage, rest)) => format!("{stage}/{method}/{rest}"),
        None => format!("{path}/{method}"),
    }
}

/// A request a function's policy does not allow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Violation {
    pub function: String,
    pub action: String,
    pub resource: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is not authorized to perform {} on {}",
            self.function, self.action, self.resource
        )
    }
}

impl std::error::Error for Violation {}

/// Environment variable naming the directory where every process of a test run writes the
/// violations it saw and the grants its requests used (the test command reads them).
pub const LOG_DIR_ENV: &str = "CONVERGER_IAM_LOG";

/// Where a guard reports.
#[derive(Debug)]
enum Sink {
    /// The test run's log (files under [`LOG_DIR_ENV`], when set) and the process's log.
    Suite,
    /// Kept in the guard only: a test that provokes a denial on purpose.
    Private,
}

#[derive(Debug)]
struct GuardInner {
    function: String,
    policies: Vec<Policy>,
    arns: Arns,
    /// Physical name -> logical id, longest first: grants are reported in the template's terms.
    logical: Vec<(String, String)>,
    sink: Sink,
    violations: Mutex<Vec<Violation>>,
    used: Mutex<BTreeSet<Grant>>,
}

/// The SDK interceptor that checks each request of one function against its policies.
#[derive(Debug, Clone)]
pub struct IamGuard {
    inner: Arc<GuardInner>,
}

/// Files of this process under the log directory are opened once.
static FILES: Mutex<Option<(std::fs::File, std::fs::File)>> = Mutex::new(None);

fn append(violation: bool, line: &str) {
    let Some(dir) = std::env::var_os(LOG_DIR_ENV) else {
        return;
    };
    let Ok(mut files) = FILES.lock() else {
        return;
    };
    if files.is_none() {
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir);
        let open = |kind: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("{kind}-{}.jsonl", std::process::id())))
        };
        match (open("violations"), open("grants")) {
            (Ok(v), Ok(g)) => *files = Some((v, g)),
            (Err(e), _) | (_, Err(e)) => {
                // The run's check depends on these files: say so loudly.
                eprintln!(
                    "converger IAM check: cannot write under {}: {e}",
                    dir.display()
                );
            }
        }
    }
    if let Some((v, g)) = files.as_mut() {
        let f = if violation { v } else { g };
        let _ = writeln!(f, "{line}");
    }
}

impl IamGuard {
    /// A guard for `function` (its logical id) whose denials fail the test run.
    pub fn new(
        function: &str,
        policies: Vec<Policy>,
        arns: Arns,
        logical: Vec<(String, String)>,
    ) -> Self {
        Self::build(function, policies, arns, logical, Sink::Suite)
    }

    /// A guard that keeps its denials to itself (for a test that provokes one).
    pub fn private(function: &str, policies: Vec<Policy>, arns: Arns) -> Self {
        Self::build(function, policies, arns, Vec::new(), Sink::Private)
    }

    fn build(
        function: &str,
        policies: Vec<Policy>,
        arns: Arns,
        mut logical: Vec<(String, String)>,
        sink: Sink,
    ) -> Self {
        logical.sort_by_key(|(physical, _)| std::cmp::Reverse(physical.len()));
        Self {
            inner: Arc::new(GuardInner {
                function: function.to_owned(),
                policies,
                arns,
                logical,
                sink,
                violations: Mutex::new(Vec::new()),
                used: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// The denials this guard made.
    pub fn violations(&self) -> Vec<Violation> {
        self.inner
            .violations
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// `text` with the stack's physical names replaced by the template's logical ids.
    pub fn logicalize(&self, text: &str) -> String {
        logicalize(&self.inner.logical, text)
    }

    /// Checks one request; `Err` is the denial AWS would answer.
    pub fn check(
        &self,
        target: Option<&str>,
        method: &str,
        uri: &str,
        body: &[u8],
    ) -> Result<(), Violation> {
        let g = &self.inner;
        let mut accesses = g.arns.accesses(target, method, uri, body);
        if accesses.is_empty() {
            // A request that names no resource (an empty batch, a body that did not parse)
            // is refused rather than waved through.
            accesses.push(Access {
                action: target.unwrap_or(method).to_owned(),
                resource: "(no resource named)".into(),
                leading_keys: None,
            });
        }
        for access in accesses {
            match evaluate_keys(
                &g.policies,
                &access.action,
                &access.resource,
                access.leading_keys.as_deref(),
            ) {
                Decision::Allow(grant) => {
                    let fresh = g.used.lock().is_ok_and(|mut u| u.insert(grant.clone()));
                    if fresh && matches!(g.sink, Sink::Suite) {
                        let line = serde_json::json!({
                            "function": g.function,
                            "action": grant.action,
                            "resource": self.logicalize(&grant.resource),
                        });
                        append(false, &line.to_string());
                    }
                }
                Decision::ImplicitDeny | Decision::ExplicitDeny(_) => {
                    let v = Violation {
                        function: g.function.clone(),
                        action: access.action,
                        resource: access.resource,
                    };
                    if let Ok(mut list) = g.violations.lock() {
                        list.push(v.clone());
                    }
                    if matches!(g.sink, Sink::Suite) {
                        tracing::error!(function = %v.function, action = %v.action, resource = %v.resource, "IAM: request not allowed by the function's policy");
                        let line = serde_json::json!({
                            "function": v.function,
                            "action": v.action,
                            "resource": self.logicalize(&v.resource),
                        });
                        append(true, &line.to_string());
                    }
                    return Err(v);
                }
            }
        }
        Ok(())
    }
}

/// `text` with each physical name of `map` (longest first) replaced by its logical id.
pub fn logicalize(map: &[(String, String)], text: &str) -> String {
    let mut out = text.to_owned();
    for (physical, logical) in map {
        if !physical.is_empty() {
            out = out.replace(physical.as_str(), logical);
        }
    }
    out
}

impl Intercept for IamGuard {
    fn name(&self) -> &'static str {
        "converger-iam-guard"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let request = context.request();
        let target = request.headers().get("x-amz-target");
        self.check(
            target,
            request.method(),
            request.uri(),
            request.body().bytes().unwrap_or_default(),
        )
        .map_err(|v| Box::new(v) as Box<dyn std::error::Error + Send + Sync>)
    }
}

#[cfg(test)]
mod tests;
