//! Metrics as CloudWatch Embedded Metric Format lines on stdout: CloudWatch Logs turns them
//! into metrics without an API call.

use serde_json::json;

/// Writes one EMF line with a single count metric, dimensioned by channel type.
pub fn count(metric: &str, channel_type: &str, value: u64) {
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
