//! Counts the AWS requests a process makes, by service and operation, client-side: an SDK
//! interceptor that sees every attempt the SDK puts on the wire (a retried call counts once per
//! try, as AWS bills it). The `awsJson` services' operation is read from the request's
//! `X-Amz-Target` header (`DynamoDB_20120810.UpdateItem`, `AmazonSQS.SendMessage`,
//! `AWSEvents.PutEvents`); a query-protocol request's (STS, SNS) from its form body's
//! `Action`, its service from its signature's credential scope. Requests sent as a tenant's
//! role are counted apart (`tenant:` before the service): the tenant's account pays them.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Per `(service, operation)`: requests, and the capacity units (DynamoDB) or billed
/// requests (SQS, EventBridge) they imply.
pub type Counts = BTreeMap<(String, String), Tally>;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    pub requests: u64,
    /// DynamoDB: read or write request units, assuming items under 1 KB (writes) and 4 KB
    /// (reads): a write is 1 unit per item (2 in a transaction), a strongly consistent read 1
    /// per item, an eventually consistent one 0.5. SQS: 1 per request. EventBridge: the events
    /// billed (each entry of a `PutEvents`, one per 64 KB of it).
    pub units: f64,
}

#[derive(Clone, Debug, Default)]
pub struct RequestCounter {
    counts: Arc<Mutex<Counts>>,
    /// Put before the service of every request this handle counts (`tenant:`).
    prefix: Option<&'static str>,
}

/// The service and operation of a request without `X-Amz-Target`: the query protocol's
/// `Action=` and the credential scope's service (`Credential=AKID/date/region/sts/...`).
fn query_request(authorization: Option<&str>, body: &[u8]) -> Option<(String, String)> {
    let body = std::str::from_utf8(body).ok()?;
    let action = body.split('&').find_map(|kv| kv.strip_prefix("Action="))?;
    let scope = authorization?.split("Credential=").nth(1)?;
    let service = scope.split('/').nth(3)?;
    Some((service.to_owned(), action.to_owned()))
}

/// The service and operation of a REST request (S3's): the credential scope's service, and the
/// operation its method implies on an object (`PUT` is `PutObject`).
fn rest_request(authorization: Option<&str>, method: &str) -> Option<(String, String)> {
    let scope = authorization?.split("Credential=").nth(1)?;
    let service = scope.split('/').nth(3)?;
    let op = match (service, method) {
        ("s3", "PUT") => "PutObject",
        ("s3", "GET") => "GetObject",
        (_, m) => m,
    };
    Some((service.to_owned(), op.to_owned()))
}

/// The units one DynamoDB request implies, from its JSON body (see [`Tally::units`]).
pub fn dynamodb_units(operation: &str, body: &[u8]) -> f64 {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let read = |consistent: bool| if consistent { 1.0 } else { 0.5 };
    let consistent = v["ConsistentRead"].as_bool().unwrap_or(false);
    let per_table = |field: &str| -> f64 {
        v["RequestItems"]
            .as_object()
            .map(|tables| {
                tables
                    .values()
                    .map(|t| match field {
                        "Keys" => {
                            t["Keys"].as_array().map_or(0, Vec::len) as f64
                                * read(t["ConsistentRead"].as_bool().unwrap_or(false))
                        }
                        _ => t.as_array().map_or(0, Vec::len) as f64,
                    })
                    .sum()
            })
            .unwrap_or(0.0)
    };
    let items = |field: &str| v[field].as_array().map_or(0, Vec::len) as f64;
    match operation {
        "GetItem" | "Query" | "Scan" => read(consistent),
        "BatchGetItem" => per_table("Keys"),
        "BatchWriteItem" => per_table("Writes"),
        "TransactWriteItems" | "TransactGetItems" => 2.0 * items("TransactItems"),
        "PutItem" | "UpdateItem" | "DeleteItem" => 1.0,
        _ => 0.0,
    }
}

/// The events one EventBridge request is billed for, from its JSON body: each entry of a
/// `PutEvents` is one event per 64 KB (or part) of it.
pub fn eventbridge_events(operation: &str, body: &[u8]) -> f64 {
    if operation != "PutEvents" {
        return 0.0;
    }
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    v["Entries"].as_array().map_or(0.0, |entries| {
        entries
            .iter()
            .map(|e| (e.to_string().len().max(1)).div_ceil(64 * 1024) as f64)
            .sum()
    })
}

/// The pseudo-service under which [`RequestCounter`] counts EventBridge events by their
/// detail type (`("event-types", "delivery.status_changed")`); never priced on its own, as the
/// same events are counted under `events`.
pub const EVENT_TYPES: &str = "event-types";

/// The events of a `PutEvents` body per detail type, billed as [`eventbridge_events`] bills
/// them.
pub fn eventbridge_detail_types(operation: &str, body: &[u8]) -> BTreeMap<String, f64> {
    let mut by_type = BTreeMap::new();
    if operation != "PutEvents" {
        return by_type;
    }
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    for e in v["Entries"].as_array().into_iter().flatten() {
        let kind = e["DetailType"].as_str().unwrap_or("unknown").to_owned();
        *by_type.entry(kind).or_default() +=
            (e.to_string().len().max(1)).div_ceil(64 * 1024) as f64;
    }
    by_type
}

/// The service and operation of an `X-Amz-Target` value.
pub fn classify(target: &str) -> (String, String) {
    let (prefix, op) = target.split_once('.').unwrap_or(("unknown", target));
    let service = if prefix.starts_with("DynamoDB") {
        "dynamodb"
    } else if prefix.starts_with("AmazonSQS") {
        "sqs"
    } else if prefix.starts_with("AWSEvents") {
        "events"
    } else if prefix.starts_with("Kinesis_") {
        "kinesis"
    } else if prefix.starts_with("Firehose_") {
        "firehose"
    } else if prefix.starts_with("AWSStepFunctions") {
        "states"
    } else {
        prefix
    };
    (service.to_string(), op.to_string())
}

impl RequestCounter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle on the same counts whose requests are counted as `tenant:<service>`, with no
    /// units of the platform's (for the clients that send as a tenant's role).
    pub fn for_tenant_sends(&self) -> Self {
        Self {
            counts: self.counts.clone(),
            prefix: Some("tenant:"),
        }
    }

    /// Counts one request (and its units: see [`Tally::units`]).
    pub fn record(&self, target: &str, body: Option<&[u8]>) {
        self.record_key(classify(target), body);
    }

    /// A handle on the same counts whose requests are counted as `<prefix><service>`, units
    /// and events included (a function whose requests a benchmark shows apart: the changes
    /// function's, amortised over its batches).
    pub fn for_function(&self, prefix: &'static str) -> Self {
        Self {
            counts: self.counts.clone(),
            prefix: Some(prefix),
        }
    }

    fn record_key(&self, key: (String, String), body: Option<&[u8]>) {
        if let Some(prefix @ "tenant:") = self.prefix {
            if let Ok(mut c) = self.counts.lock() {
                c.entry((format!("{prefix}{}", key.0), key.1))
                    .or_default()
                    .requests += 1;
            }
            return;
        }
        let units = match key.0.as_str() {
            "dynamodb" => dynamodb_units(&key.1, body.unwrap_or_default()),
            "events" => eventbridge_events(&key.1, body.unwrap_or_default()),
            "sqs" => 1.0,
            _ => 0.0,
        };
        let by_type = if key.0 == "events" {
            eventbridge_detail_types(&key.1, body.unwrap_or_default())
        } else {
            BTreeMap::new()
        };
        let key = match self.prefix {
            Some(p) => (format!("{p}{}", key.0), key.1),
            None => key,
        };
        if let Ok(mut c) = self.counts.lock() {
            let t = c.entry(key).or_default();
            t.requests += 1;
            t.units += units;
            for (kind, events) in by_type {
                c.entry((EVENT_TYPES.to_owned(), kind)).or_default().units += events;
            }
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Counts {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The counts so far, and zero again.
    pub fn take(&self) -> Counts {
        self.counts
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "converger-request-counter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let request = context.request();
        let body = request.body().bytes();
        let key = match request.headers().get("x-amz-target") {
            Some(target) => classify(target),
            None => query_request(
                request.headers().get("authorization"),
                body.unwrap_or_default(),
            )
            .or_else(|| rest_request(request.headers().get("authorization"), request.method()))
            .unwrap_or_else(|| classify("unknown.unknown")),
        };
        self.record_key(key, body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_protocol_requests_are_named_by_their_scope_and_action() {
        let auth = "AWS4-HMAC-SHA256 Credential=AKID/20261204/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=x";
        assert_eq!(
            query_request(Some(auth), b"Action=AssumeRole&Version=2011-06-15"),
            Some(("sts".into(), "AssumeRole".into()))
        );
        assert_eq!(query_request(Some(auth), b"{}"), None);
        let c = RequestCounter::new();
        c.for_tenant_sends().record("AmazonSQS.SendMessage", None);
        c.record("AmazonSQS.SendMessage", None);
        let counts = c.take();
        let tenant = counts[&("tenant:sqs".to_owned(), "SendMessage".to_owned())];
        assert_eq!((tenant.requests, tenant.units), (1, 0.0));
        assert_eq!(
            counts[&("sqs".to_owned(), "SendMessage".to_owned())].units,
            1.0
        );
    }

    #[test]
    fn put_events_is_billed_per_entry_and_64_kb() {
        let small = serde_json::json!({"Entries": [{"Detail": "{}"}, {"Detail": "{}"}]});
        assert_eq!(
            eventbridge_events("PutEvents", small.to_string().as_bytes()),
            2.0
        );
        let big = serde_json::json!({"Entries": [{"Detail": "x".repeat(70 * 1024)}]});
        assert_eq!(
            eventbridge_events("PutEvents", big.to_string().as_bytes()),
            2.0
        );
        assert_eq!(eventbridge_events("ListRules", b"{}"), 0.0);
        let mixed = serde_json::json!({"Entries": [
            {"DetailType": "delivery.status_changed", "Detail": "{}"},
            {"DetailType": "channel.health_changed", "Detail": "{}"},
            {"DetailType": "delivery.status_changed", "Detail": "{}"},
        ]});
        let c = RequestCounter::new();
        c.record("AWSEvents.PutEvents", Some(mixed.to_string().as_bytes()));
        let counts = c.take();
        assert_eq!(counts[&("events".into(), "PutEvents".into())].units, 3.0);
        let of = |t: &str| counts[&(EVENT_TYPES.into(), t.into())].units;
        assert_eq!(of("delivery.status_changed"), 2.0);
        assert_eq!(of("channel.health_changed"), 1.0);
    }

    #[test]
    fn targets_name_service_and_operation() {
        assert_eq!(
            classify("DynamoDB_20120810.TransactWriteItems"),
            ("dynamodb".into(), "TransactWriteItems".into())
        );
        assert_eq!(
            classify("AmazonSQS.ReceiveMessage"),
            ("sqs".into(), "ReceiveMessage".into())
        );
        assert_eq!(
            classify("AWSEvents.PutEvents"),
            ("events".into(), "PutEvents".into())
        );
        let c = RequestCounter::new();
        c.record("AmazonSQS.SendMessage", None);
        c.record("AmazonSQS.SendMessage", None);
        let sent = c.take()[&("sqs".into(), "SendMessage".into())];
        assert_eq!((sent.requests, sent.units), (2, 2.0));
        assert!(c.snapshot().is_empty());
    }

    #[test]
    fn dynamodb_units_follow_the_pricing_rules() {
        let body = |v: serde_json::Value| v.to_string().into_bytes();
        let tx =
            body(serde_json::json!({"TransactItems": [{"Put": {}}, {"Put": {}}, {"Update": {}}]}));
        assert_eq!(dynamodb_units("TransactWriteItems", &tx), 6.0);
        let get = body(serde_json::json!({"ConsistentRead": true}));
        assert_eq!(dynamodb_units("GetItem", &get), 1.0);
        assert_eq!(dynamodb_units("GetItem", b"{}"), 0.5);
        let batch = body(serde_json::json!({"RequestItems": {
            "a": {"Keys": [{}, {}], "ConsistentRead": true},
            "b": {"Keys": [{}]}
        }}));
        assert_eq!(dynamodb_units("BatchGetItem", &batch), 2.5);
        let writes = body(serde_json::json!({"RequestItems": {"a": [{}, {}, {}]}}));
        assert_eq!(dynamodb_units("BatchWriteItem", &writes), 3.0);
        assert_eq!(dynamodb_units("UpdateItem", b"{}"), 1.0);
    }
}
