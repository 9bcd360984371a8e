//! A loopback proxy in front of the emulator that charges every DynamoDB request its capacity
//! units by DynamoDB's rules (see the parent module), per partition key value, on the table and
//! on each of its global secondary indexes, as `DescribeTable` gives their key schemas and
//! projections (so what is measured is what the template declares).
//!
//! A write's units need the item before and after it: the proxy reads each item it touches
//! (strongly consistent `GetItem`) before forwarding the write and again after, holding a lock
//! on those keys meanwhile so that no other write through it lands in between. A read's units
//! come from the items it read: a Query or Scan that filters, projects or counts is asked again
//! without doing so (same key condition, page and limit), which gives the items DynamoDB read.
//!
//! Every other request (SQS, EventBridge, CloudFormation, ...) passes through untouched.

use super::{Charge, Item, Meter, TableSchema, read_charge, write_charges};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

const TARGET_PREFIX: &str = "DynamoDB_20120810.";

struct Inner {
    upstream: String,
    http: reqwest::Client,
    meter: Meter,
    /// Physical table name -> logical name (as the template names it).
    logical: BTreeMap<String, String>,
    schemas: Mutex<HashMap<String, Arc<TableSchema>>>,
    /// Keys a write through the proxy holds (see [`Inner::lock`]).
    held: Mutex<BTreeSet<String>>,
    released: Notify,
}

/// The running proxy; stops when dropped.
pub struct CapacityProxy {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CapacityProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CapacityProxy {
    /// Starts a proxy to `upstream`, charging `meter`. `logical` names the tables.
    pub async fn start(
        upstream: &str,
        meter: Meter,
        logical: BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        let inner = Arc::new(Inner {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http,
            meter,
            logical,
            schemas: Mutex::new(HashMap::new()),
            held: Mutex::new(BTreeSet::new()),
            released: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = Router::new().fallback(handle).with_state(inner);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url: format!("http://{addr}"),
            task,
        })
    }
}

/// An upstream answer: status, headers, body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut r = (self.status, self.body).into_response();
        for (k, v) in &self.headers {
            if k != "content-length" && k != "transfer-encoding" && k != "connection" {
                r.headers_mut().insert(k.clone(), v.clone());
            }
        }
        r
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let op = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
        .map(str::to_owned);
    // Run to the end even when the client gives up (its timeout drops this future): a
    // write's keys are held until its units are counted.
    let task = tokio::spawn(async move {
        match op {
            Some(op) => inner.dynamodb(&op, &uri, &headers, body).await,
            None => inner.forward(method, &uri, &headers, body).await,
        }
    });
    match task.await {
        Ok(Ok(a)) => a.into_response(),
        Ok(Err(e)) => (StatusCode::BAD_GATEWAY, e).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// The items of one write: the table and each item's key, and whether it is a transaction's.
struct Touched {
    table: String,
    key: Item,
    /// A `ConditionCheck`: charged, never changed.
    check: bool,
}

impl Inner {
    async fn forward(
        &self,
        method: Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, String> {
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.upstream))
            .body(body);
        for (k, v) in headers {
            if k != "host" && k != "content-length" {
                req = req.header(k, v);
            }
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        let status = r.status();
        let headers = r.headers().clone();
        let body = r.bytes().await.map_err(|e| e.to_string())?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// One DynamoDB call of the proxy's own to the emulator, signed as `like` was (the
    /// emulator reads the account from the credential and checks no signature).
    async fn call(&self, like: &HeaderMap, op: &str, body: Value) -> Result<Value, String> {
        let mut req = self
            .http
            .post(format!("{}/", self.upstream))
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("{TARGET_PREFIX}{op}"))
            .body(body.to_string());
        for h in ["authorization", "x-amz-date"] {
            if let Some(v) = like.get(h) {
                req = req.header(h, v);
            }
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        let ok = r.status().is_success();
        let bytes = r.bytes().await.map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        if ok { Ok(v) } else { Err(format!("{op}: {v}")) }
    }

    async fn schema(&self, like: &HeaderMap, table: &str) -> Result<Arc<TableSchema>, String> {
        if let Some(s) = self.schemas.lock().ok().and_then(|m| m.get(table).cloned()) {
            return Ok(s);
        }
        let d = self
            .call(like, "DescribeTable", json!({"TableName": table}))
            .await?;
        let name = self
            .logical
            .get(table)
            .cloned()
            .unwrap_or_else(|| table.to_owned());
        let s = Arc::new(TableSchema::from_description(&name, &d["Table"]));
        if let Ok(mut m) = self.schemas.lock() {
            m.insert(table.to_owned(), s.clone());
        }
        Ok(s)
    }

    async fn get(&self, like: &HeaderMap, table: &str, key: &Item) -> Result<Option<Item>, String> {
        let v = self
            .call(
                like,
                "GetItem",
                json!({"TableName": table, "Key": key, "ConsistentRead": true}),
            )
            .await?;
        Ok(v["Item"].as_object().cloned())
    }

    /// Waits until no other write holds any of `keys`, then holds them.
    async fn lock(&self, keys: &BTreeSet<String>) {
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release in between is not missed.
            notified.as_mut().enable();
            {
                let Ok(mut held) = self.held.lock() else {
                    return;
                };
                if keys.iter().all(|k| !held.contains(k)) {
                    held.extend(keys.iter().cloned());
                    return;
                }
            }
            notified.await;
        }
    }

    fn unlock(&self, keys: &BTreeSet<String>) {
        if let Ok(mut held) = self.held.lock() {
            for k in keys {
                held.remove(k);
            }
        }
        self.released.notify_waiters();
    }

    async fn dynamodb(
        &self,
        op: &str,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, String> {
        let req: Value = serde_json::from_slice(&body).unwrap_or_default();
        match op {
            "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems" => {
                self.write(op, &req, uri, headers, body).await
            }
            "GetItem" | "BatchGetItem" | "Query" | "Scan" => {
                let answer = self.forward(Method::POST, uri, headers, body).await?;
                if answer.status.is_success() {
                    let resp: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
                    // A read the proxy cannot price is left uncounted, never failed.
                    let _ = self.charge_read(op, &req, &resp, headers).await;
                }
                Ok(answer)
            }
            _ => self.forward(Method::POST, uri, headers, body).await,
        }
    }

    async fn write(
        &self,
        op: &str,
        req: &Value,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, String> {
        let mut touched = Vec::new();
        let transaction = op == "TransactWriteItems";
        match op {
            "PutItem" => {
                let table = req["TableName"].as_str().unwrap_or_default();
                let schema = self.schema(headers, table).await?;
                touched.push(Touched {
                    table: table.into(),
                    key: key_of(&schema, &req["Item"]),
                    check: false,
                });
            }
            "UpdateItem" | "DeleteItem" => touched.push(Touched {
                table: req["TableName"].as_str().unwrap_or_default().into(),
                key: req["Key"].as_object().cloned().unwrap_or_default(),
                check: false,
            }),
            "BatchWriteItem" => {
                for (table, writes) in req["RequestItems"].as_object().into_iter().flatten() {
                    let schema = self.schema(headers, table).await?;
                    for w in writes.as_array().into_iter().flatten() {
                        let key = match (w.get("PutRequest"), w.get("DeleteRequest")) {
                            (Some(p), _) => key_of(&schema, &p["Item"]),
                            (_, Some(d)) => d["Key"].as_object().cloned().unwrap_or_default(),
                            _ => continue,
                        };
                        touched.push(Touched {
                            table: table.clone(),
                            key,
                            check: false,
                        });
                    }
                }
            }
            _ => {
                for t in req["TransactItems"].as_array().into_iter().flatten() {
                    let Some((kind, w)) = t.as_object().and_then(|o| o.iter().next()) else {
                        continue;
                    };
                    let table = w["TableName"].as_str().unwrap_or_default().to_owned();
                    let key = if kind == "Put" {
                        let schema = self.schema(headers, &table).await?;
                        key_of(&schema, &w["Item"])
                    } else {
                        w["Key"].as_object().cloned().unwrap_or_default()
                    };
                    touched.push(Touched {
                        table,
                        key,
                        check: kind == "ConditionCheck",
                    });
                }
            }
        }
        let names: BTreeSet<String> = touched
            .iter()
            .map(|t| format!("{}/{}", t.table, Value::Object(t.key.clone())))
            .collect();
        self.lock(&names).await;
        let result = self
            .write_locked(uri, headers, body, &touched, transaction)
            .await;
        self.unlock(&names);
        result
    }

    async fn write_locked(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
        touched: &[Touched],
        transaction: bool,
    ) -> Result<Answer, String> {
        // Every item read at once (a transaction or a batch names up to 100).
        let before: Vec<Option<Item>> =
            futures::future::join_all(touched.iter().map(|t| self.get(headers, &t.table, &t.key)))
                .await
                .into_iter()
                .map(|r| r.ok().flatten())
                .collect();
        let answer = self.forward(Method::POST, uri, headers, body).await?;
        let resp: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        let error = resp["__type"].as_str().unwrap_or_default();
        let failed = !answer.status.is_success()
            && (error.ends_with("ConditionalCheckFailedException")
                || error.ends_with("TransactionCanceledException"));
        if !answer.status.is_success() && !failed {
            // Refused before any item was looked at (validation, throttling): no units.
            return Ok(answer);
        }
        let mut unprocessed = BTreeSet::new();
        for (table, l) in resp["UnprocessedItems"].as_object().into_iter().flatten() {
            let schema = self.schema(headers, table).await?;
            for w in l.as_array().into_iter().flatten() {
                let key = match (w.get("PutRequest"), w.get("DeleteRequest")) {
                    (Some(p), _) => key_of(&schema, &p["Item"]),
                    (_, Some(d)) => d["Key"].as_object().cloned().unwrap_or_default(),
                    _ => continue,
                };
                unprocessed.insert(format!("{table}/{}", Value::Object(key)));
            }
        }
        let after: Vec<Option<Item>> = if failed {
            vec![None; touched.len()]
        } else {
            futures::future::join_all(touched.iter().map(|t| self.get(headers, &t.table, &t.key)))
                .await
                .into_iter()
                .map(|r| r.ok().flatten())
                .collect()
        };
        let mut charges: Vec<Charge> = Vec::new();
        for ((t, old), new) in touched.iter().zip(before).zip(after) {
            let schema = self.schema(headers, &t.table).await?;
            if unprocessed.contains(&format!("{}/{}", t.table, Value::Object(t.key.clone()))) {
                // Not written: not charged.
                continue;
            }
            if failed || t.check {
                charges.extend(write_charges(
                    &schema,
                    &t.key,
                    old.as_ref(),
                    None,
                    true,
                    transaction,
                ));
                continue;
            }
            charges.extend(write_charges(
                &schema,
                &t.key,
                old.as_ref(),
                new.as_ref(),
                false,
                transaction,
            ));
        }
        self.meter.write(charges);
        Ok(answer)
    }

    async fn charge_read(
        &self,
        op: &str,
        req: &Value,
        resp: &Value,
        headers: &HeaderMap,
    ) -> Result<(), String> {
        match op {
            "GetItem" => {
                let table = req["TableName"].as_str().unwrap_or_default();
                let schema = self.schema(headers, table).await?;
                let key = req["Key"][&schema.key.hash].clone();
                let items: Vec<Item> = resp["Item"].as_object().cloned().into_iter().collect();
                self.meter.read(read_charge(
                    &schema,
                    None,
                    &text(&key),
                    &items,
                    req["ConsistentRead"].as_bool().unwrap_or(false),
                ));
            }
            "BatchGetItem" => {
                for (table, got) in resp["Responses"].as_object().into_iter().flatten() {
                    let schema = self.schema(headers, table).await?;
                    let consistent = req["RequestItems"][table]["ConsistentRead"]
                        .as_bool()
                        .unwrap_or(false);
                    for item in got.as_array().into_iter().flatten() {
                        let Some(item) = item.as_object() else {
                            continue;
                        };
                        let key = text(&item.get(&schema.key.hash).cloned().unwrap_or_default());
                        self.meter.read(read_charge(
                            &schema,
                            None,
                            &key,
                            std::slice::from_ref(item),
                            consistent,
                        ));
                    }
                }
            }
            _ => {
                let table = req["TableName"].as_str().unwrap_or_default();
                let schema = self.schema(headers, table).await?;
                let index = req["IndexName"].as_str();
                let hash = match index.and_then(|i| schema.gsis.iter().find(|g| g.name == i)) {
                    Some(g) => g.key.hash.clone(),
                    None => schema.key.hash.clone(),
                };
                let key = if op == "Scan" {
                    "*scan*".to_owned()
                } else {
                    partition_of(req, &hash).unwrap_or_default()
                };
                let reshaped = ["ProjectionExpression", "FilterExpression", "Select"]
                    .iter()
                    .any(|f| req.get(*f).is_some());
                let items: Vec<Item> = if reshaped {
                    let shadow = unshaped(req);
                    let v = self.call(headers, op, shadow).await?;
                    items_of(&v)
                } else {
                    items_of(resp)
                };
                self.meter.read(read_charge(
                    &schema,
                    index,
                    &key,
                    &items,
                    req["ConsistentRead"].as_bool().unwrap_or(false),
                ));
            }
        }
        Ok(())
    }
}

/// An item's primary key attributes.
fn key_of(schema: &TableSchema, item: &Value) -> Item {
    let mut k = Item::new();
    for a in [Some(&schema.key.hash), schema.key.range.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(v) = item.get(a) {
            k.insert(a.clone(), v.clone());
        }
    }
    k
}

fn items_of(v: &Value) -> Vec<Item> {
    v["Items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_object().cloned())
        .collect()
}

fn text(v: &Value) -> String {
    super::key_text(v).unwrap_or_default()
}

/// The partition key value a Query's key condition names (`#pk = :v` or `pk = :v`).
pub fn partition_of(req: &Value, hash: &str) -> Option<String> {
    let expr = req["KeyConditionExpression"].as_str()?;
    let names = &req["ExpressionAttributeNames"];
    for clause in expr.split(" AND ").chain(expr.split(" and ")) {
        let clause = clause.trim().trim_matches(|c| c == '(' || c == ')');
        let Some((left, right)) = clause.split_once('=') else {
            continue;
        };
        let (left, right) = (left.trim(), right.trim());
        let name = if left.starts_with('#') {
            names[left].as_str().unwrap_or_default()
        } else {
            left
        };
        if name == hash && right.starts_with(':') {
            return super::key_text(&req["ExpressionAttributeValues"][right]);
        }
    }
    None
}

/// A Query or Scan asked again without the filter, projection or count, so that its answer
/// holds every item it read; the names and values only those used are dropped.
pub fn unshaped(req: &Value) -> Value {
    let mut q = req.clone();
    let Some(o) = q.as_object_mut() else {
        return q;
    };
    o.remove("ProjectionExpression");
    o.remove("FilterExpression");
    o.remove("Select");
    o.remove("ReturnConsumedCapacity");
    let key = o
        .get("KeyConditionExpression")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    for field in ["ExpressionAttributeNames", "ExpressionAttributeValues"] {
        let keep: Option<serde_json::Map<String, Value>> =
            o.get(field).and_then(Value::as_object).map(|m| {
                m.iter()
                    .filter(|(k, _)| used_in(&key, k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            });
        match keep {
            Some(m) if !m.is_empty() => {
                o.insert(field.into(), Value::Object(m));
            }
            _ => {
                o.remove(field);
            }
        }
    }
    q
}

/// Whether placeholder `p` (`#a`, `:v`) occurs in `expr` as a whole token.
fn used_in(expr: &str, p: &str) -> bool {
    expr.match_indices(p).any(|(i, _)| {
        expr[i + p.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_query_names_its_partition_and_is_asked_again_unshaped() {
        let q = json!({
            "TableName": "t", "IndexName": "by_due",
            "KeyConditionExpression": "#s = :s AND due_at <= :to",
            "FilterExpression": "#l < :now",
            "ProjectionExpression": "id, #l",
            "Select": "SPECIFIC_ATTRIBUTES",
            "ExpressionAttributeNames": {"#s": "due_shard", "#l": "lease_until"},
            "ExpressionAttributeValues": {":s": {"S": "due#3"}, ":to": {"S": "1"},
                                          ":now": {"N": "5"}},
        });
        assert_eq!(partition_of(&q, "due_shard").as_deref(), Some("due#3"));
        assert_eq!(partition_of(&q, "other"), None);
        let u = unshaped(&q);
        assert_eq!(u.get("FilterExpression"), None);
        assert_eq!(u.get("Select"), None);
        assert_eq!(u["ExpressionAttributeNames"], json!({"#s": "due_shard"}));
        assert_eq!(
            u["ExpressionAttributeValues"],
            json!({":s": {"S": "due#3"}, ":to": {"S": "1"}})
        );
        assert!(used_in("a = :s1", ":s1"));
        assert!(!used_in("a = :s10", ":s1"));
    }
}
