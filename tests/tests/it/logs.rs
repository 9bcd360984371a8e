//! What the functions log, in their deployed format (`bootstrap::json_logs`): every line of
//! an attempt carries the SQS record it came in (`message_id`, `receive_count`) and the
//! attempt's span (delivery, tenant, activity, channel, attempt number), so a line need not
//! name them and one delivery can be followed through its lines; at debug level the stage
//! (claim, prepare, call, settle) is a span of its own. In process: the stack's
//! queue consumers run the deployed handlers on this test's thread.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_tests::{Receiver, TestStack, is_settled};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

/// The lines written, kept.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
    type Writer = Lines;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Lines {
    fn parsed(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

#[tokio::test]
async fn an_attempt_logs_under_its_sqs_record_and_its_delivery() {
    let lines = Lines::default();
    let subscriber = tracing_subscriber::registry()
        .with(converger_lambda::bootstrap::json_logs_to(lines.clone()))
        .with(
            tracing_subscriber::filter::Targets::new()
                .with_target("converger_pipeline", tracing::Level::INFO)
                // The attempt's stages are spans at debug level.
                .with_target("converger_pipeline::attempt", tracing::Level::DEBUG)
                .with_target("converger_lambda", tracing::Level::INFO),
        );
    let _guard = tracing::subscriber::set_default(subscriber);
    let t = TestStack::start().await;
    let rx = Receiver::always(200).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t.webhook(&key, &rx.url, serde_json::json!({})).await;
    let ch_id = ch.id.as_str();
    let act = t.activity(&key, &[ch_id]).await;
    let id = act.deliveries[0].id.as_str().to_owned();
    let d = t
        .wait_delivery(&key, &id, Duration::from_secs(15), is_settled)
        .await;
    assert_eq!(d.status, "sent", "{d:?}");

    let all = lines.parsed();
    let sent = all
        .iter()
        .find(|l| l["fields"]["message"] == "delivery sent")
        .unwrap_or_else(|| panic!("no `delivery sent` line in {all:?}"));
    let spans = sent["spans"].as_array().unwrap();
    let record = spans.iter().find(|s| s["name"] == "sqs_record");
    let record = record.unwrap_or_else(|| panic!("no record span: {sent}"));
    assert!(record["message_id"].is_string(), "{sent}");
    assert_eq!(record["receive_count"], "1", "{sent}");
    let attempt = spans.iter().find(|s| s["name"] == "attempt");
    let attempt = attempt.unwrap_or_else(|| panic!("no attempt span: {sent}"));
    assert_eq!(attempt["delivery_id"], id.as_str(), "{sent}");
    assert_eq!(attempt["tenant_id"], tenant.as_str(), "{sent}");
    assert_eq!(attempt["channel_id"], ch_id, "{sent}");
    assert_eq!(attempt["activity_id"], d.activity_id, "{sent}");
    assert_eq!(attempt["attempt"], 1, "{sent}");
    assert_eq!(attempt["chained"], false, "{sent}");
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["sqs_record", "attempt", "settle"], "{sent}");
    // The ids are the spans', not repeated on the line.
    assert!(sent["fields"]["delivery_id"].is_null(), "{sent}");
    // Every line has its level and an RFC 3339 timestamp: Lambda's log-level filter classes
    // a JSON line without a valid timestamp as INFO, whatever its level, so a WARN setting
    // would drop the errors.
    for l in &all {
        let at = l["timestamp"].as_str().unwrap_or_default();
        assert!(
            chrono::DateTime::parse_from_rfc3339(at).is_ok(),
            "no RFC 3339 timestamp: {l}"
        );
        assert!(l["level"].is_string(), "{l}");
    }
}
