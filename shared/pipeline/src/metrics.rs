//! Metrics as CloudWatch Embedded Metric Format lines on stdout: CloudWatch Logs turns them
//! into metrics without an API call. Namespace `Converger`; every metric is published by
//! channel type and by channel type and tier (no tenant or channel dimension: a fixed,
//! small number of series). The names are documented in docs/operations.md (Metrics).

use converger_core::{ChannelType, Tier};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);
/// Where lines go instead of stdout while a test captures them.
static CAPTURED: Mutex<Option<Vec<Value>>> = Mutex::new(None);
/// Whether lines are counted rather than printed (a benchmark pricing their log bytes), and
/// the lines and bytes counted so far.
static COUNTING: AtomicBool = AtomicBool::new(false);
static COUNTED_LINES: AtomicU64 = AtomicU64::new(0);
static COUNTED_BYTES: AtomicU64 = AtomicU64::new(0);

/// A delivery was sent (`Count`).
pub const SENT: &str = "sent";
/// An attempt failed, retried or not (`Count`).
pub const ATTEMPT_FAILED: &str = "attempt_failed";
/// A delivery was dead-lettered (`Count`).
pub const DEAD_LETTERED: &str = "dead_lettered";
/// A delivery was handed to a websocket client that has not acknowledged it (`Count`).
pub const HANDED_OFF: &str = "handed_off";
/// From the ingest to the sent record (`Milliseconds`).
pub const INGEST_TO_SENT_MS: &str = "ingest_to_sent_ms";
/// One attempt's call (`Milliseconds`).
pub const ATTEMPT_DURATION_MS: &str = "attempt_duration_ms";
/// Dead letters still stored of a channel type's checked channels (those created within the
/// retention period), as the health run summed their day counters (`Count`, a gauge: one
/// value per run).
pub const DEAD_LETTERS: &str = "dead_letters";
/// A breaker opened / closed; the health run disabled a channel (`Count`).
pub const CIRCUIT_OPENED: &str = "circuit_opened";
pub const CIRCUIT_CLOSED: &str = "circuit_closed";
pub const CHANNEL_DISABLED: &str = "channel_disabled";

/// Every metric the code emits, in namespace [`NAMESPACE`], by `ChannelType` and by
/// `ChannelType` and `Tier`: what an alarm or a dashboard line of the template may name.
pub const ALL: [&str; 10] = [
    SENT,
    ATTEMPT_FAILED,
    DEAD_LETTERED,
    HANDED_OFF,
    INGEST_TO_SENT_MS,
    ATTEMPT_DURATION_MS,
    DEAD_LETTERS,
    CIRCUIT_OPENED,
    CIRCUIT_CLOSED,
    CHANNEL_DISABLED,
];
/// The metrics' namespace.
pub const NAMESPACE: &str = "Converger";
/// The dimensions a metric is emitted with (two sets: the first, and both).
pub const DIMENSIONS: [&str; 2] = ["ChannelType", "Tier"];

/// Turns the metric lines on or off (the local runner keeps stdout for its own output).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
    // Printing, capturing or off: no longer counting (see [`count_only`]).
    COUNTING.store(false, Ordering::Relaxed);
}

/// Keeps every line from now on for [`captured`] instead of printing it (tests).
pub fn capture() {
    if let Ok(mut c) = CAPTURED.lock() {
        *c = Some(Vec::new());
    }
    set_enabled(true);
}

/// Counts every line from now on (with its newline, as CloudWatch Logs ingests it) instead
/// of printing it: [`take_counted`] reads the count.
pub fn count_only() {
    set_enabled(true);
    COUNTING.store(true, Ordering::Relaxed);
}

/// The lines and bytes counted since the last call, and a fresh start.
pub fn take_counted() -> (u64, u64) {
    (
        COUNTED_LINES.swap(0, Ordering::Relaxed),
        COUNTED_BYTES.swap(0, Ordering::Relaxed),
    )
}

/// The lines kept since [`capture`].
pub fn captured() -> Vec<Value> {
    CAPTURED
        .lock()
        .ok()
        .and_then(|c| c.clone())
        .unwrap_or_default()
}

/// One value of one metric: its name, unit (`Count`, `Milliseconds`) and value.
pub type Metric<'a> = (&'a str, &'a str, f64);

/// The EMF line of the metrics of one event: one line however many metrics (CloudWatch Logs
/// bills the bytes).
pub fn line(metrics: &[Metric<'_>], kind: ChannelType, tier: Option<Tier>) -> Value {
    let mut dimensions = vec![json!(["ChannelType"])];
    let mut line = json!({
        "_aws": {
            "Timestamp": chrono::Utc::now().timestamp_millis(),
            "CloudWatchMetrics": [{
                "Namespace": "Converger",
                "Dimensions": [],
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
                    .collect::<Vec<_>>(),
            }],
        },
        "ChannelType": kind.as_str(),
    });
    for (name, _, value) in metrics {
        line[*name] = json!(value);
    }
    if let Some(t) = tier {
        dimensions.push(json!(["ChannelType", "Tier"]));
        line["Tier"] = json!(t.as_str());
    }
    line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = Value::Array(dimensions);
    line
}

fn emit(line: Value) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    if COUNTING.load(Ordering::Relaxed) {
        COUNTED_LINES.fetch_add(1, Ordering::Relaxed);
        COUNTED_BYTES.fetch_add(line.to_string().len() as u64 + 1, Ordering::Relaxed);
        return;
    }
    if let Ok(mut c) = CAPTURED.lock()
        && let Some(lines) = c.as_mut()
    {
        lines.push(line);
        return;
    }
    println!("{line}");
}

/// The metrics of one event, in one line.
pub fn record(metrics: &[Metric<'_>], kind: ChannelType, tier: Option<Tier>) {
    emit(line(metrics, kind, tier));
}

/// A count of `value` events.
pub fn count(metric: &str, kind: ChannelType, tier: Option<Tier>, value: u64) {
    record(&[(metric, "Count", value as f64)], kind, tier);
}

/// A duration in milliseconds, as a metric of a [`record`].
pub fn ms(metric: &str, ms: u64) -> Metric<'_> {
    (metric, "Milliseconds", ms as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_its_metric_unit_and_both_dimension_sets() {
        let l = line(
            &[(SENT, "Count", 1.0), ms(ATTEMPT_DURATION_MS, 12)],
            ChannelType::Webhook,
            Some(Tier::High),
        );
        let cw = &l["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], "Converger");
        assert_eq!(
            cw["Metrics"],
            json!([{"Name": "sent", "Unit": "Count"},
                   {"Name": "attempt_duration_ms", "Unit": "Milliseconds"}])
        );
        assert_eq!(l["attempt_duration_ms"], 12.0);
        assert_eq!(
            cw["Dimensions"],
            json!([["ChannelType"], ["ChannelType", "Tier"]])
        );
        assert_eq!(
            (l["ChannelType"].as_str(), l["Tier"].as_str()),
            (Some("webhook"), Some("high"))
        );
        assert_eq!(l["sent"], 1.0);
        let g = line(&[(DEAD_LETTERS, "Count", 3.0)], ChannelType::Echo, None);
        assert_eq!(
            g["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["ChannelType"]])
        );
        assert!(g.get("Tier").is_none());
    }
}
