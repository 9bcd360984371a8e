//! The SAM template and the local stack agree on every resource, and every sample event in
//! `events/` parses into its function's event type.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_lambda_events::event::apigw::ApiGatewayV2httpRequest;
use aws_lambda_events::event::sqs::SqsEvent;
use converger_pipeline::handlers::IngestMessage;
use converger_store::DeliveryMessage;
use converger_store::resources::{DELIVER_TIMEOUT_S, MAX_RECEIVE_COUNT, QUEUES, TABLES};
use serde_yaml::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn template() -> Value {
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// Follows CloudFormation's short-form tags (`!GetAtt X.Arn`) to their value.
fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => &t.value,
        other => other,
    }
}

fn keys(schema: &Value) -> Vec<(String, String)> {
    schema
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["AttributeName"].as_str().unwrap().to_owned(),
                k["KeyType"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn tables_agree_with_the_template() {
    let t = template();
    let res = &t["Resources"];
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    for def in TABLES {
        let table = &res[def.logical_id];
        assert_eq!(
            table["Type"].as_str(),
            Some("AWS::DynamoDB::Table"),
            "{}",
            def.logical_id
        );
        let p = &table["Properties"];
        let mut want = vec![(def.hash_key.to_owned(), "HASH".to_owned())];
        if let Some(r) = def.range_key {
            want.push((r.to_owned(), "RANGE".to_owned()));
        }
        assert_eq!(keys(&p["KeySchema"]), want, "{}", def.logical_id);
        assert_eq!(
            p["TimeToLiveSpecification"]["AttributeName"].as_str(),
            def.ttl_attribute,
            "{} TTL",
            def.logical_id
        );
        let gsis = p["GlobalSecondaryIndexes"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        assert_eq!(gsis.len(), def.gsis.len(), "{}", def.logical_id);
        for g in def.gsis {
            let found = gsis
                .iter()
                .find(|x| x["IndexName"].as_str() == Some(g.name))
                .unwrap_or_else(|| panic!("index {} missing", g.name));
            assert_eq!(
                keys(&found["KeySchema"]),
                vec![
                    (g.hash_key.to_owned(), "HASH".to_owned()),
                    (g.range_key.to_owned(), "RANGE".to_owned())
                ]
            );
            let projection = &found["Projection"];
            if g.include.is_empty() {
                assert_eq!(
                    projection["ProjectionType"].as_str(),
                    Some("ALL"),
                    "{}",
                    g.name
                );
            } else {
                assert_eq!(
                    projection["ProjectionType"].as_str(),
                    Some("INCLUDE"),
                    "{}",
                    g.name
                );
                let attrs: Vec<&str> = projection["NonKeyAttributes"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                assert_eq!(attrs, g.include, "{}", g.name);
            }
        }
        assert_eq!(
            untag(&env[def.env]).as_str(),
            Some(def.logical_id),
            "{} is passed to the functions",
            def.env
        );
    }
}

#[test]
fn queues_agree_with_the_template() {
    let t = template();
    let res = &t["Resources"];
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    for def in QUEUES {
        let q = &res[def.logical_id];
        assert_eq!(
            q["Type"].as_str(),
            Some("AWS::SQS::Queue"),
            "{}",
            def.logical_id
        );
        let p = &q["Properties"];
        assert_eq!(
            p["VisibilityTimeout"].as_u64(),
            Some(u64::from(def.visibility_timeout_s)),
            "{}",
            def.logical_id
        );
        assert_eq!(
            untag(&p["RedrivePolicy"]["maxReceiveCount"]).as_str(),
            Some("MaxReceiveCount")
        );
        let dlq = untag(&p["RedrivePolicy"]["deadLetterTargetArn"])
            .as_str()
            .unwrap();
        let dlq_id = dlq.trim_end_matches(".Arn");
        assert_eq!(
            res[dlq_id]["Type"].as_str(),
            Some("AWS::SQS::Queue"),
            "{dlq_id}"
        );
        assert_eq!(
            untag(&env[def.env]).as_str(),
            Some(def.logical_id),
            "{} is passed to the functions",
            def.env
        );
    }
    assert_eq!(
        t["Parameters"]["MaxReceiveCount"]["Default"].as_u64(),
        Some(u64::from(MAX_RECEIVE_COUNT))
    );
    assert_eq!(
        t["Parameters"]["MaxReceiveCount"]["Default"].as_u64(),
        Some(u64::from(MAX_RECEIVE_COUNT))
    );
    // Visibility is at least six times the deliver function's timeout.
    let deliver = &res["DeliverFunction"]["Properties"];
    assert_eq!(
        deliver["Timeout"].as_u64(),
        Some(u64::from(DELIVER_TIMEOUT_S))
    );
    for tier in converger_core::Tier::ALL {
        let def = converger_store::resources::tier_queue(tier);
        assert!(def.visibility_timeout_s >= 6 * DELIVER_TIMEOUT_S);
        // One event source mapping per tier, partial batch failures on, concurrency per tier.
        let events = deliver["Events"].as_mapping().unwrap();
        let mapping = events
            .values()
            .find(|e| {
                untag(&e["Properties"]["Queue"]).as_str()
                    == Some(&format!("{}.Arn", def.logical_id))
            })
            .unwrap_or_else(|| panic!("no mapping for {}", def.logical_id));
        let props = &mapping["Properties"];
        assert_eq!(
            props["FunctionResponseTypes"][0].as_str(),
            Some("ReportBatchItemFailures")
        );
        assert_eq!(
            props["ScalingConfig"]["MaximumConcurrency"].as_u64(),
            Some(tier.max_concurrency() as u64)
        );
    }
}

#[test]
fn every_function_is_in_the_template() {
    let t = template();
    let res = t["Resources"].as_mapping().unwrap();
    for dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let name = dir.unwrap().file_name().into_string().unwrap();
        let found = res.values().any(|r| {
            r["Type"].as_str() == Some("AWS::Serverless::Function")
                && r["Metadata"]["BuildProperties"]["Binary"].as_str() == Some(name.as_str())
                && r["Metadata"]["BuildMethod"].as_str() == Some("rust-cargolambda")
                && r["Properties"]["Policies"].is_sequence()
        });
        assert!(
            found,
            "functions/{name} has a function with its own policies in the template"
        );
    }
}

fn event(name: &str) -> String {
    std::fs::read_to_string(root().join("events").join(name)).unwrap()
}

#[test]
fn sample_events_parse() {
    let ingest: SqsEvent = serde_json::from_str(&event("ingest.json")).unwrap();
    let body = ingest.records[0].body.as_deref().unwrap();
    let _: IngestMessage = serde_json::from_str(body).unwrap();

    for f in ["retry-scheduler.json", "health.json"] {
        let _: aws_lambda_events::event::eventbridge::EventBridgeEvent<serde_json::Value> =
            serde_json::from_str(&event(f)).unwrap();
    }

    let deliver: SqsEvent = serde_json::from_str(&event("deliver.json")).unwrap();
    let body = deliver.records[0].body.as_deref().unwrap();
    let _: DeliveryMessage = serde_json::from_str(body).unwrap();

    let probe: SqsEvent = serde_json::from_str(&event("probe.json")).unwrap();
    let body = probe.records[0].body.as_deref().unwrap();
    let _: converger_store::FlowJob = serde_json::from_str(body).unwrap();

    for f in ["api.json", "admin.json"] {
        let req: ApiGatewayV2httpRequest = serde_json::from_str(&event(f)).unwrap();
        assert!(req.raw_path.is_some(), "{f}");
        // lambda_http accepts it as an API Gateway HTTP API request.
        let _: lambda_http::request::LambdaRequest = serde_json::from_str(&event(f)).unwrap();
    }
    let ws: aws_lambda_events::event::apigw::ApiGatewayWebsocketProxyRequest =
        serde_json::from_str(&event("websocket.json")).unwrap();
    assert_eq!(ws.request_context.route_key.as_deref(), Some("$default"));
    assert!(ws.request_context.connection_id.is_some());
    let names: Vec<String> = std::fs::read_dir(root().join("events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let f = dir.unwrap().file_name().into_string().unwrap();
        assert!(
            names.contains(&format!("{f}.json")),
            "events/{f}.json exists"
        );
    }
}
