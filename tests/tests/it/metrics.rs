//! Delivery metrics: the EMF lines the pipeline writes, with the documented names, units and
//! dimensions (channel type, and channel type and tier; never a tenant or a channel).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_pipeline::metrics;
use converger_tests::{Receiver, TestStack, settled};
use serde_json::{Value, json};
use std::time::Duration;

/// The captured lines that carry `metric`.
fn named<'a>(lines: &'a [Value], metric: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["Name"] == metric))
        })
        .collect()
}

/// The unit `line` declares for `metric`.
fn unit<'a>(line: &'a Value, metric: &str) -> &'a Value {
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["Name"] == metric))
        .map_or(&Value::Null, |m| &m["Unit"])
}

#[tokio::test]
async fn deliveries_write_the_documented_metric_lines() {
    let t = TestStack::start().await;
    metrics::capture();
    let ok = Receiver::always(200).await.unwrap();
    let dead = Receiver::always(500).await.unwrap();
    let (_, key) = t.tenant("high").await;
    let good = t.webhook(&key, &ok.url, json!({})).await;
    let bad = t.webhook(&key, &dead.url, json!({"max_attempts": 1})).await;
    for ch in [&good, &bad] {
        let act = t.activity(&key, &[ch["id"].as_str().unwrap()]).await;
        let id = act["deliveries"][0]["id"].as_str().unwrap().to_owned();
        t.wait_delivery(&key, &id, Duration::from_secs(15), settled)
            .await;
    }
    // What the check reads follows from the rows' changes: read to here first.
    assert!(t.stack.changes_settled().await);
    t.stack.pipeline.health().health_check().await.unwrap();
    let lines = metrics::captured();

    for (metric, unit) in [
        (metrics::SENT, "Count"),
        (metrics::ATTEMPT_FAILED, "Count"),
        (metrics::DEAD_LETTERED, "Count"),
        (metrics::ATTEMPT_DURATION_MS, "Milliseconds"),
        (metrics::INGEST_TO_SENT_MS, "Milliseconds"),
    ] {
        let found = named(&lines, metric);
        assert!(!found.is_empty(), "no {metric} line in {lines:?}");
        for l in found {
            let cw = &l["_aws"]["CloudWatchMetrics"][0];
            assert_eq!(cw["Namespace"], "Converger");
            assert_eq!(self::unit(l, metric), unit, "{l}");
            assert_eq!(
                cw["Dimensions"],
                json!([["ChannelType"], ["ChannelType", "Tier"]]),
                "{l}"
            );
            assert_eq!(
                (l["ChannelType"].as_str(), l["Tier"].as_str()),
                (Some("webhook"), Some("high"))
            );
            assert!(l[metric].as_f64().is_some(), "{l}");
            // No tenant, channel or delivery dimension: a fixed number of series.
            for k in ["TenantId", "ChannelId", "tenant_id", "channel_id"] {
                assert!(l.get(k).is_none(), "{l}");
            }
        }
    }
    assert_eq!(named(&lines, metrics::SENT).len(), 1);
    assert_eq!(named(&lines, metrics::DEAD_LETTERED).len(), 1);
    // One line per event: a sent delivery's count and durations travel together.
    let sent = named(&lines, metrics::SENT)[0];
    assert!(
        sent[metrics::ATTEMPT_DURATION_MS].as_f64().is_some(),
        "{sent}"
    );
    assert!(
        sent[metrics::INGEST_TO_SENT_MS].as_f64().is_some(),
        "{sent}"
    );
    // The health run's gauge: the stored dead letters of each checked channel type.
    let gauge = named(&lines, metrics::DEAD_LETTERS);
    let webhook: Vec<_> = gauge
        .iter()
        .filter(|l| l["ChannelType"] == "webhook")
        .collect();
    assert_eq!(webhook.len(), 1, "{gauge:?}");
    assert_eq!(webhook[0][metrics::DEAD_LETTERS], 1.0);
    assert_eq!(
        webhook[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([["ChannelType"]])
    );
    t.stop().await;
}
