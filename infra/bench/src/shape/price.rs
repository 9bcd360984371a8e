//! Every line of a shape's run priced per million deliveries, and what the template deploys
//! that the prices depend on.

use super::{Counted, round};
use crate::cost;
use converger_memory::CapacityTally;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// List prices, US East (N. Virginia), dollars.
const PRICE_WRITE_UNIT_HOUR: f64 = 0.000_65;
const PRICE_READ_UNIT_HOUR: f64 = 0.000_13;
/// Provisioned capacity is bought for the peak: this share of it is used.
const PROVISIONED_UTILISATION: f64 = 0.7;
const PRICE_GB_SECOND_ARM: f64 = 0.000_013_333_4;
const PRICE_XRAY_TRACE: f64 = 5.0 / 1e6;
const PRICE_DATA_OUT_GB: f64 = 0.09;
const PRICE_STORAGE_GB_MONTH: f64 = 0.25;
const PRICE_PITR_GB_MONTH: f64 = 0.20;
/// An HTTP API access log line in the template's format, filled in (an estimate: API
/// Gateway writes it, not the functions).
const ACCESS_LOG_BYTES: u64 = 330;
/// The share of requests X-Ray records when turned on (its default rule: the first each
/// second, then 5%).
const XRAY_SAMPLED: f64 = 0.05;

/// What the template deploys that prices depend on.
pub(super) struct Template {
    pub(super) memory_mb: BTreeMap<String, u32>,
    pub(super) architecture: String,
    pub(super) stage_rate: Option<f64>,
    pitr: bool,
    xray: bool,
}

impl Template {
    pub(super) fn read() -> Result<Self, String> {
        let t = converger_stack::cfn::template()?;
        let global = t["Globals"]["Function"]["MemorySize"]
            .as_u64()
            .unwrap_or(128) as u32;
        let mut memory_mb = BTreeMap::new();
        if let Some(resources) = t["Resources"].as_mapping() {
            for (k, r) in resources {
                if r["Type"].as_str() == Some("AWS::Serverless::Function")
                    && let Some(k) = k.as_str()
                {
                    let mb = r["Properties"]["MemorySize"]
                        .as_u64()
                        .map_or(global, |m| m as u32);
                    memory_mb.insert(k.to_owned(), mb);
                }
            }
        }
        let param = |name: &str| t["Parameters"][name]["Default"].clone();
        let text = serde_yaml::to_string(&t["Resources"]).unwrap_or_default();
        Ok(Self {
            memory_mb,
            architecture: param("Architecture")
                .as_str()
                .unwrap_or("x86_64")
                .to_owned(),
            stage_rate: param("ApiThrottleRate").as_f64().or_else(|| {
                param("ApiThrottleRate")
                    .as_str()
                    .and_then(|s| s.parse().ok())
            }),
            pitr: text.contains("PointInTimeRecoveryEnabled: true"),
            xray: param("XRayTracing").as_str() == Some("enabled"),
        })
    }

    fn gb_second(&self) -> f64 {
        if self.architecture == "arm64" {
            PRICE_GB_SECOND_ARM
        } else {
            cost::PRICE_LAMBDA_GB_SECOND
        }
    }
}

pub(super) fn throttles(t: &CapacityTally) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (p, c) in &t.throttled {
        *out.entry(format!(
            "{} {}: {}",
            p.table,
            p.index.unwrap_or("(table)"),
            p.family
        ))
        .or_default() += c;
    }
    out
}

/// One run priced per million deliveries: (on demand, provisioned, every line).
pub(super) fn priced(c: &Counted, t: &Template) -> (f64, f64, Value) {
    use crate::requests::{
        PRICE_DYNAMODB_READ_UNIT, PRICE_DYNAMODB_WRITE_UNIT, PRICE_EVENTBRIDGE_EVENT,
        PRICE_SQS_REQUEST,
    };
    let n = c.delivered.max(1) as f64;
    let per = |x: f64| x / n;
    // Units by table (its indexes included).
    let mut writes_by: BTreeMap<String, f64> = BTreeMap::new();
    let mut reads_by: BTreeMap<String, f64> = BTreeMap::new();
    for (p, u) in &c.units.writes {
        *writes_by.entry(p.table.to_string()).or_default() += u;
    }
    for (p, u) in &c.units.reads {
        *reads_by.entry(p.table.to_string()).or_default() += u;
    }
    let wcu = per(writes_by.values().sum());
    let rcu = per(reads_by.values().sum());
    let mut lambda = Map::new();
    let (mut requests, mut gb_s) = (0.0, 0.0);
    for (f, tally) in &c.calls {
        let mb = f64::from(t.memory_mb.get(*f).copied().unwrap_or(256));
        let calls = per(tally.invocations as f64);
        let gbs = per(tally.billed_ms as f64) / 1000.0 * mb / 1024.0;
        requests += calls;
        gb_s += gbs;
        lambda.insert(
            (*f).to_owned(),
            json!({
                "invocations_per_delivery": round(calls, 4),
                "ms_per_invocation": round(tally.billed_ms as f64 / tally.invocations.max(1) as f64, 1),
                "gb_seconds_per_delivery": round(gbs, 6),
                "instances": c.instances.get(*f),
            }),
        );
    }
    let api = per(c.api_requests as f64);
    let log_bytes = per(
        (c.logs.0 + c.metric_lines.1 + c.api_requests * ACCESS_LOG_BYTES) as f64
            + (c.logs.1 + c.metric_lines.0 + c.api_requests) as f64 * 26.0,
    );
    // Each invocation (an API request's included) starts a trace.
    let xray_when_on = requests * XRAY_SAMPLED * PRICE_XRAY_TRACE * 1e6;
    let m = 1e6;
    let mut usd = BTreeMap::from([
        ("dynamodb_writes", wcu * PRICE_DYNAMODB_WRITE_UNIT),
        ("dynamodb_reads", rcu * PRICE_DYNAMODB_READ_UNIT),
        ("sqs", per(c.sqs.total() as f64) * PRICE_SQS_REQUEST),
        (
            "eventbridge",
            per(c.events as f64) * PRICE_EVENTBRIDGE_EVENT,
        ),
        ("api_gateway", api * cost::PRICE_API_REQUEST),
        ("lambda_requests", requests * cost::PRICE_LAMBDA_REQUEST),
        ("lambda_duration", gb_s * t.gb_second() * m),
        ("logs", log_bytes / 1e9 * cost::PRICE_LOGS_GB * m),
        ("xray", if t.xray { xray_when_on } else { 0.0 }),
        (
            "data_out",
            per(c.bytes_out as f64) / 1e9 * PRICE_DATA_OUT_GB * m,
        ),
    ]);
    let on_demand: f64 = usd.values().sum();
    let hour = 3600.0 * PROVISIONED_UTILISATION;
    let provisioned_writes = wcu * PRICE_WRITE_UNIT_HOUR / hour * m;
    let provisioned_reads = rcu * PRICE_READ_UNIT_HOUR / hour * m;
    let provisioned = on_demand - usd["dynamodb_writes"] - usd["dynamodb_reads"]
        + provisioned_writes
        + provisioned_reads;
    let mut largest: Vec<(&str, f64)> = usd.iter().map(|(k, v)| (*k, *v)).collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let stored_gb = c.stored_bytes * m / 1e9;
    let storage =
        stored_gb * (PRICE_STORAGE_GB_MONTH + if t.pitr { PRICE_PITR_GB_MONTH } else { 0.0 });
    usd.insert("dynamodb_writes_provisioned", provisioned_writes);
    usd.insert("dynamodb_reads_provisioned", provisioned_reads);
    let usd: Map<String, Value> = usd
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(round(v, 3))))
        .collect();
    let lines = json!({
        "offered": c.offered,
        "accepted": c.accepted,
        "delivered": c.delivered,
        "api_requests": c.api_requests,
        "refused_requests": c.refused_requests,
        "seconds": round(c.seconds, 1),
        "ingest_to_receiver": c.latency,
        "per_delivery": {
            "dynamodb_write_units": round(wcu, 3),
            "dynamodb_write_units_by_table": writes_by.iter().map(|(k, v)| (k.clone(), json!(round(per(*v), 3)))).collect::<Map<_, _>>(),
            "dynamodb_read_units": round(rcu, 3),
            "dynamodb_read_units_by_table": reads_by.iter().map(|(k, v)| (k.clone(), json!(round(per(*v), 3)))).collect::<Map<_, _>>(),
            "sqs_requests": {"sends": round(per(c.sqs.sends as f64), 3), "receives": round(per(c.sqs.receives as f64), 3), "deletes": round(per(c.sqs.deletes as f64), 3)},
            "eventbridge_events": round(per(c.events as f64), 3),
            "api_requests": round(api, 3),
            "lambda_requests": round(requests, 4),
            "lambda_gb_seconds": round(gb_s, 6),
            "log_bytes": round(log_bytes, 0),
            "metric_lines": round(per(c.metric_lines.0 as f64), 3),
            "bytes_out": round(per(c.bytes_out as f64), 0),
            "throttled_requests": c.units.throttled.values().sum::<u64>(),
        },
        "lambda": lambda,
        "capacity": crate::hot_tenant::report(&c.units, c.delivered, c.seconds, &c.model),
        "usd_per_million": usd,
        "usd_per_million_on_demand": round(on_demand, 2),
        "usd_per_million_provisioned": round(provisioned, 2),
        // A deployment whose bus has no consumer of status changes (`BusStatusEvents`
        // disabled): the stream, the pages and the dead-letter events are unchanged.
        "usd_per_million_without_bus_status_events": {
            "on_demand": round(on_demand - per(c.status_events as f64) * PRICE_EVENTBRIDGE_EVENT, 2),
            "provisioned": round(provisioned - per(c.status_events as f64) * PRICE_EVENTBRIDGE_EVENT, 2),
        },
        "largest_lines": largest.iter().take(4).map(|(k, v)| json!({k.to_string(): round(*v, 2)})).collect::<Vec<_>>(),
        "xray_usd_per_million_when_on": round(xray_when_on, 3),
        "storage": {
            "bytes_per_delivery": round(c.stored_bytes, 0),
            "usd_per_million_per_month_kept": round(storage, 3),
            "point_in_time_recovery": t.pitr,
        },
    });
    (on_demand, provisioned, lines)
}
