//! Metrics as CloudWatch Embedded Metric Format lines on stdout: CloudWatch Logs turns them
//! into metrics without an API call. Namespace `Converger`; every metric is published by
//! channel type and by channel type and tier (no tenant or channel dimension: a fixed,
//! small number of series). The names are documented in docs/operations.md (Metrics).

use converger_core::{ChannelType, Tier};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
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
    line_of(
        metrics
            .iter()
            .map(|(name, unit, v)| (*name, *unit, json!(v))),
        kind,
        tier,
    )
}

/// An EMF line of `metrics` (name, unit, value: a number, or an array of up to
/// [`MAX_VALUES`] of them) by `kind`, and by `kind` and `tier` when given.
fn line_of<'a>(
    metrics: impl Iterator<Item = (&'a str, &'a str, Value)>,
    kind: ChannelType,
    tier: Option<Tier>,
) -> Value {
    let mut dimensions = vec![json!(["ChannelType"])];
    let mut line = json!({
        "_aws": {
            "Timestamp": chrono::Utc::now().timestamp_millis(),
            "CloudWatchMetrics": [{
                "Namespace": "Converger",
                "Dimensions": [],
                "Metrics": [],
            }],
        },
        "ChannelType": kind.as_str(),
    });
    let mut declared = Vec::new();
    for (name, unit, value) in metrics {
        declared.push(json!({"Name": name, "Unit": unit}));
        line[name] = value;
    }
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"] = Value::Array(declared);
    if let Some(t) = tier {
        dimensions.push(json!(["ChannelType", "Tier"]));
        line["Tier"] = json!(t.as_str());
    }
    line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = Value::Array(dimensions);
    line
}

/// The most values one metric of one EMF line may hold.
pub const MAX_VALUES: usize = 100;

/// A metric's unit and the values gathered for it.
type Gathered = (&'static str, Vec<f64>);

/// The metrics gathered for one channel type and tier, by name.
type Group = BTreeMap<&'static str, Gathered>;

/// The metrics of one instance's attempts, kept until [`Buffer::flush`] (the end of the
/// batch, before the instance can be frozen) and then written as one EMF line per channel
/// type and tier, each metric's values as an array: CloudWatch computes the same statistics
/// (sum, sample count, percentiles) from an array as from a line per value, and a batch of
/// ten deliveries writes one line where it wrote ten. A metric that reaches
/// [`MAX_VALUES`] has its line written at once.
#[derive(Default)]
pub struct Buffer {
    groups: Mutex<HashMap<(ChannelType, Option<Tier>), Group>>,
}

impl Buffer {
    /// Keeps the metrics of one event.
    pub fn add(&self, metrics: &[Metric<'static>], kind: ChannelType, tier: Option<Tier>) {
        let full = {
            let Ok(mut groups) = self.groups.lock() else {
                emit(line(metrics, kind, tier));
                return;
            };
            let group = groups.entry((kind, tier)).or_default();
            for (name, unit, v) in metrics {
                group
                    .entry(name)
                    .or_insert_with(|| (unit, Vec::new()))
                    .1
                    .push(*v);
            }
            if group.values().any(|(_, v)| v.len() >= MAX_VALUES) {
                groups.remove(&(kind, tier))
            } else {
                None
            }
        };
        if let Some(group) = full {
            emit(gathered_line(group, kind, tier));
        }
    }

    /// Writes what was kept, a line per channel type and tier.
    pub fn flush(&self) {
        let groups = match self.groups.lock() {
            Ok(mut g) => std::mem::take(&mut *g),
            Err(_) => return,
        };
        for ((kind, tier), group) in groups {
            emit(gathered_line(group, kind, tier));
        }
    }
}

/// The line of one channel type and tier's gathered metrics: a value alone as a number.
fn gathered_line(group: Group, kind: ChannelType, tier: Option<Tier>) -> Value {
    line_of(
        group.into_iter().map(|(name, (unit, values))| {
            let v = match values.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            (name, unit, v)
        }),
        kind,
        tier,
    )
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

    #[test]
    fn a_buffer_writes_a_line_per_channel_type_and_tier_with_each_metrics_values() {
        capture();
        let b = Buffer::default();
        for ms in [10.0, 20.0, 30.0] {
            b.add(
                &[
                    (SENT, "Count", 1.0),
                    (ATTEMPT_DURATION_MS, "Milliseconds", ms),
                ],
                ChannelType::Webhook,
                Some(Tier::High),
            );
        }
        b.add(
            &[(ATTEMPT_FAILED, "Count", 1.0)],
            ChannelType::Webhook,
            Some(Tier::High),
        );
        b.add(
            &[(SENT, "Count", 1.0)],
            ChannelType::Slack,
            Some(Tier::High),
        );
        let before = captured().len();
        b.flush();
        let lines = captured();
        let new: Vec<_> = lines[before..]
            .iter()
            .filter(|l| l["Tier"] == "high")
            .collect();
        assert_eq!(new.len(), 2, "{new:?}");
        let hook = new.iter().find(|l| l["ChannelType"] == "webhook").unwrap();
        assert_eq!(hook[SENT], json!([1.0, 1.0, 1.0]));
        assert_eq!(hook[ATTEMPT_DURATION_MS], json!([10.0, 20.0, 30.0]));
        assert_eq!(hook[ATTEMPT_FAILED], 1.0, "a value alone is a number");
        assert_eq!(
            hook["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        b.flush();
        assert_eq!(captured().len(), lines.len(), "nothing left to write");
        // A metric at its limit has its line written at once.
        for _ in 0..MAX_VALUES {
            b.add(&[(SENT, "Count", 1.0)], ChannelType::Echo, Some(Tier::Bulk));
        }
        let full = captured();
        let echo = full
            .iter()
            .rev()
            .find(|l| l["ChannelType"] == "echo" && l["Tier"] == "bulk")
            .unwrap();
        assert_eq!(echo[SENT].as_array().map(Vec::len), Some(MAX_VALUES));
    }
}
