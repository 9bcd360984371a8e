//! Delivery metrics: the EMF lines the pipeline writes, with the documented names, units and
//! dimensions (channel type, and channel type and tier; never a tenant or a channel).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_pipeline::metrics;
use converger_tests::{Receiver, TestStack, is_settled};
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
        let act = t.activity(&key, &[ch.id.as_str()]).await;
        let id = act.deliveries[0].id.as_str().to_owned();
        t.wait_delivery(&key, &id, Duration::from_secs(15), is_settled)
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
    // A batch's metrics travel in one line per channel type and tier: a sent delivery's
    // count and durations together.
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
}

/// An alarm or a dashboard line on a metric the code never emits (a misspelt name, a
/// dimension it is not published by) stays quiet for ever: neither the emulator nor the linter
/// can tell. Each one of the template is held to what `converger_pipeline::metrics` emits, and
/// to the functions and queues the template has.
#[test]
fn every_alarm_and_dashboard_line_names_a_metric_the_code_emits() {
    use serde_yaml::Value;
    let t = crate::infra::template();
    let res = t["Resources"].as_mapping().unwrap();
    let of_type = |kind: &str| -> Vec<String> {
        res.iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(kind))
            .map(|(k, _)| k.as_str().unwrap().to_owned())
            .collect()
    };
    let functions = of_type("AWS::Serverless::Function");
    let queues = of_type("AWS::SQS::Queue");
    let kinds: Vec<&str> = converger_core::ChannelType::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    let tiers: Vec<&str> = converger_core::Tier::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    // One metric line: namespace, name, then dimension name and value pairs (a value as the
    // template writes it: text, or `${Logical}` / `${Logical.Attr}` naming a resource).
    let check = |what: &str, ns: &str, name: &str, dims: &[(String, String)]| {
        let names: Vec<&str> = dims.iter().map(|(n, _)| n.as_str()).collect();
        let named = |v: &str| v.trim_start_matches("${").trim_end_matches('}').to_owned();
        match ns {
            "Converger" => {
                assert!(metrics::ALL.contains(&name), "{what}: no metric {name}");
                assert!(
                    names == metrics::DIMENSIONS[..1] || names == metrics::DIMENSIONS,
                    "{what}: {name} is not emitted by {names:?}"
                );
                assert!(kinds.contains(&dims[0].1.as_str()), "{what}: {dims:?}");
                if let Some((_, tier)) = dims.get(1) {
                    assert!(tiers.contains(&tier.as_str()), "{what}: {dims:?}");
                }
            }
            "AWS/Lambda" => {
                assert!(
                    [
                        "Errors",
                        "Throttles",
                        "Duration",
                        "Invocations",
                        "IteratorAge"
                    ]
                    .contains(&name),
                    "{what}: {name}"
                );
                assert_eq!(names, ["FunctionName"], "{what}");
                assert!(functions.contains(&named(&dims[0].1)), "{what}: {dims:?}");
            }
            "AWS/SQS" => {
                assert!(
                    [
                        "ApproximateNumberOfMessagesVisible",
                        "ApproximateAgeOfOldestMessage"
                    ]
                    .contains(&name),
                    "{what}: {name}"
                );
                assert_eq!(names, ["QueueName"], "{what}");
                let q = named(&dims[0].1);
                assert!(
                    queues.contains(&q.trim_end_matches(".QueueName").to_owned()),
                    "{what}: {dims:?}"
                );
            }
            other => panic!("{what}: namespace {other}"),
        }
    };
    let mut alarms = 0;
    for (id, r) in res {
        if r["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        alarms += 1;
        let p = &r["Properties"];
        let value = |v: &Value| match v {
            Value::Tagged(t) if t.tag == "Ref" => format!("${{{}}}", t.value.as_str().unwrap()),
            Value::Tagged(t) if t.tag == "GetAtt" => format!("${{{}}}", t.value.as_str().unwrap()),
            other => other.as_str().unwrap().to_owned(),
        };
        let dims: Vec<(String, String)> = p["Dimensions"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|d| (d["Name"].as_str().unwrap().to_owned(), value(&d["Value"])))
            .collect();
        check(
            &format!("alarm {}", id.as_str().unwrap()),
            p["Namespace"].as_str().unwrap(),
            p["MetricName"].as_str().unwrap(),
            &dims,
        );
    }
    assert!(alarms >= 40, "{alarms} alarms");
    // Every function has its `Errors` and `Throttles` alarm (docs/operations.md says so).
    for (id, r) in res {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let id = id.as_str().unwrap();
        for metric in ["Errors", "Throttles"] {
            let found = res.iter().any(|(_, a)| {
                a["Type"].as_str() == Some("AWS::CloudWatch::Alarm")
                    && a["Properties"]["MetricName"].as_str() == Some(metric)
                    && matches!(&a["Properties"]["Dimensions"][0]["Value"],
                        Value::Tagged(t) if t.tag == "Ref" && t.value.as_str() == Some(id))
            });
            assert!(found, "{id} has no {metric} alarm");
        }
    }
    let body = match &res["Dashboard"]["Properties"]["DashboardBody"] {
        Value::Tagged(t) => t.value.as_str().unwrap().to_owned(),
        other => panic!("{other:?}"),
    };
    // The body with `${...}` kept as text is JSON (the template check renders it resolved).
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut lines = 0;
    for w in doc["widgets"].as_array().unwrap() {
        for m in w["properties"]["metrics"].as_array().unwrap() {
            let parts: Vec<&str> = m
                .as_array()
                .unwrap()
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect();
            if parts.is_empty() {
                continue; // an expression
            }
            lines += 1;
            let dims: Vec<(String, String)> = parts[2..]
                .chunks(2)
                .map(|c| (c[0].to_owned(), c[1].to_owned()))
                .collect();
            check(&format!("dashboard line {m}"), parts[0], parts[1], &dims);
        }
    }
    assert!(lines >= 60, "{lines} dashboard lines");
}
