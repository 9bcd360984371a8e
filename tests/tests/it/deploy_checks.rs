//! The deployer's own checks (`infra/local/deploy.py`), each shown to find its bug: what AWS
//! refuses at deployment and the emulator's services accept, put back into a copy of the
//! template (or a parameter) and deployed on the emulator. And the account's logging-role
//! paths deployed as an operator would choose them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_local::cfn::{SkippedMade, deploy_template};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn root() -> PathBuf {
    converger_local::emulator::root()
}

/// The template with `from` replaced by `to` once (it must be there), written beside the
/// build's other outputs.
fn changed(name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).unwrap();
    assert!(text.contains(from), "{from:?} is no longer in the template");
    let dir = root().join("target/deploy-checks");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Each case is deployed in turn (one emulator account: the `account` case must run before
/// a deployment sets the account's logging role).
#[tokio::test(flavor = "multi_thread")]
async fn each_deploy_time_check_finds_its_bug_and_the_logging_role_paths_deploy() {
    let (_em, endpoint) = converger_local::emulator::named_or_started(None)
        .await
        .unwrap();
    let template = root().join("infra/template.yaml");
    let cases: Vec<(&str, PathBuf, BTreeMap<String, String>, &str)> = vec![
        (
            "a route setting naming a route the API lacks",
            changed(
                "route",
                "\"POST /api/v1/channels/{id}/status\":",
                "\"POST /api/v1/nowhere\":",
            ),
            params(&[]),
            "RouteSettings name the route 'POST /api/v1/nowhere'",
        ),
        (
            "WebSocket access logs on an account without a logging role",
            template.clone(),
            params(&[("ApiGatewayCloudWatchRoleArn", "account")]),
            "need the account's API Gateway CloudWatch role",
        ),
        (
            "a logging role that does not trust API Gateway",
            changed(
                "trust",
                "Principal: { Service: apigateway.amazonaws.com }",
                "Principal: { Service: lambda.amazonaws.com }",
            ),
            params(&[("ApiGatewayCloudWatchRoleArn", "create")]),
            "does not trust apigateway.amazonaws.com",
        ),
        (
            "a generated secret Secrets Manager refuses",
            changed("secret", "PasswordLength: 48", "PasswordLength: 5000"),
            params(&[]),
            "Secrets Manager refuses GenerateSecretString",
        ),
        (
            "an alarm CloudWatch refuses (no period to evaluate)",
            changed("alarm", "EvaluationPeriods: 1", "EvaluationPeriods: 0"),
            params(&[]),
            "PutMetricAlarm refused it",
        ),
        (
            "an invoke config Lambda refuses (events kept under a minute)",
            changed(
                "invoke",
                "MaximumEventAgeInSeconds: 60",
                "MaximumEventAgeInSeconds: 30",
            ),
            params(&[]),
            "PutFunctionEventInvokeConfig refused it",
        ),
        (
            "a dashboard body PutDashboard refuses",
            changed("dashboard", "\"aws_sns\"]", "\"aws_sns\"]]"),
            params(&[]),
            "PutDashboard would refuse the body",
        ),
    ];
    for (n, (what, path, parameters, says)) in cases.iter().enumerate() {
        let name = converger_local::cfn::stack_name(&format!("chk{n}-{}", std::process::id()));
        let r = deploy_template(&endpoint, &name, path, parameters, SkippedMade::All).await;
        match r {
            Ok(_) => panic!("{what}: deployed"),
            Err(e) => assert!(e.contains(says), "{what}: {e}"),
        }
    }
    // An operator who asks the stack to make the logging role: made, trusted, set on the
    // account, and the WebSocket stage then logs.
    let name = converger_local::cfn::stack_name(&format!("chkok-{}", std::process::id()));
    let d = deploy_template(
        &endpoint,
        &name,
        &template,
        &params(&[("ApiGatewayCloudWatchRoleArn", "create")]),
        SkippedMade::All,
    )
    .await
    .unwrap();
    assert!(
        d.made.contains_key("ApiGatewayAccount"),
        "{:?}",
        d.made.keys()
    );
    assert!(d.made.contains_key("WebSocketStage"), "{:?}", d.made.keys());
}
