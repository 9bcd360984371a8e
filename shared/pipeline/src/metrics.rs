//! Metrics as CloudWatch Embedded Metric Format lines on stdout: CloudWatch Logs turns them
//! into metrics without an API call.

use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the metric lines on or off (the local runner keeps stdout for its own output).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Writes one EMF line with a single count metric, dimensioned by channel type.
pub fn count(metric: &str, channel_type: &str, value: u64) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let ts = chrono::Utc::now().timestamp_millis();
    let line = json!({
        "_aws": {
            "Timestamp": ts,
            "CloudWatchMetrics": [{
                "Namespace": "Converger",
                "Dimensions": [["ChannelType"]],
                "Metrics": [{"Name": metric, "Unit": "Count"}],
            }],
        },
        "ChannelType": channel_type,
        metric: value,
    });
    println!("{line}");
}
