#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

fn arns() -> Arns {
    Arns {
        partition: "aws".into(),
        region: "us-east-1".into(),
        account: "123456789012".into(),
        queues: HashMap::from([(
            "https://sqs.us-east-1.amazonaws.com/123456789012/s-Q-1".into(),
            "arn:aws:sqs:us-east-1:123456789012:s-Q-1".into(),
        )]),
        tables: HashMap::new(),
        hash_keys: HashMap::from([("T".into(), "pk".into())]),
        websocket_api: Some("ws123".into()),
        buckets: ["s-payloads-1".to_owned()].into(),
    }
}

#[test]
fn an_object_request_needs_its_action_on_the_objects_arn() {
    let p = policy(json!([{
        "Effect": "Allow", "Action": ["s3:GetObject"],
        "Resource": "arn:aws:s3:::s-payloads-1/payloads/*"
    }]));
    let a = |method: &str, uri: &str| arns().accesses(None, method, uri, b"")[0].clone();
    let get = a(
        "GET",
        "http://127.0.0.1:5000/s-payloads-1/payloads/ten_1/x?x-id=GetObject",
    );
    assert_eq!(get.action, "s3:GetObject");
    assert_eq!(get.resource, "arn:aws:s3:::s-payloads-1/payloads/ten_1/x");
    assert!(matches!(
        evaluate(&p, &get.action, &get.resource),
        Decision::Allow(_)
    ));
    // Another prefix, another action: refused.
    let upload = a(
        "GET",
        "http://127.0.0.1:5000/s-payloads-1/uploads/ten_1/up_1",
    );
    assert_eq!(
        evaluate(&p, &upload.action, &upload.resource),
        Decision::ImplicitDeny
    );
    let put = a("PUT", "http://127.0.0.1:5000/s-payloads-1/payloads/ten_1/x");
    assert_eq!(put.action, "s3:PutObject");
    assert_eq!(
        evaluate(&p, &put.action, &put.resource),
        Decision::ImplicitDeny
    );
    // A bucket that is not the stack's is no S3 request this check knows.
    let other = a("GET", "http://127.0.0.1:5000/elsewhere/k");
    assert!(other.action.starts_with("unknown:"), "{other:?}");
}

fn policy(statements: Value) -> Vec<Policy> {
    vec![Policy::parse("p", &json!({ "Statement": statements })).unwrap()]
}

#[test]
fn wildcards_match_as_iam_does() {
    assert!(wildcard("dynamodb:*", "dynamodb:GetItem", true));
    assert!(wildcard("DynamoDB:getitem", "dynamodb:GetItem", true));
    assert!(!wildcard("dynamodb:Get*", "dynamodb:PutItem", true));
    assert!(wildcard("arn:*:table/t-?", "arn:aws:table/t-1", false));
    assert!(!wildcard("arn:*:table/t-?", "arn:aws:table/t-12", false));
    assert!(wildcard("a*b*c", "axxbyyc", false));
    assert!(!wildcard("a*b*c", "axxbyy", false));
    assert!(wildcard("*", "", false));
    assert!(
        !wildcard("Table", "table", false),
        "resources are case-sensitive"
    );
}

#[test]
fn a_table_grant_does_not_cover_its_indexes() {
    let p = policy(json!([{
        "Effect": "Allow", "Action": ["dynamodb:Query"],
        "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/T"
    }]));
    let body = json!({"TableName": "T", "IndexName": "by_x"}).to_string();
    let a = arns().accesses(
        Some("DynamoDB_20120810.Query"),
        "POST",
        "/",
        body.as_bytes(),
    );
    assert_eq!(
        a[0].resource,
        "arn:aws:dynamodb:us-east-1:123456789012:table/T/index/by_x"
    );
    assert_eq!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::ImplicitDeny
    );
    let p = policy(json!([{
        "Effect": "Allow", "Action": "dynamodb:Query",
        "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/T/index/*"
    }]));
    assert!(matches!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::Allow(_)
    ));
}

#[test]
fn batch_and_transaction_requests_need_a_grant_per_table() {
    let body = json!({"RequestItems": {"A": [], "B": []}}).to_string();
    let a = arns().accesses(
        Some("DynamoDB_20120810.BatchWriteItem"),
        "POST",
        "/",
        body.as_bytes(),
    );
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(|x| x.action == "dynamodb:BatchWriteItem"));
    let body = json!({"TransactItems": [
        {"Update": {"TableName": "A"}},
        {"ConditionCheck": {"TableName": "B"}},
        {"Put": {"TableName": "B"}}
    ]})
    .to_string();
    let a = arns().accesses(
        Some("DynamoDB_20120810.TransactWriteItems"),
        "POST",
        "/",
        body.as_bytes(),
    );
    let actions: Vec<&str> = a.iter().map(|x| x.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:PutItem"
        ]
    );
    let p = policy(json!([{
        "Effect": "Allow", "Action": ["dynamodb:UpdateItem", "dynamodb:PutItem"],
        "Resource": ["arn:aws:dynamodb:us-east-1:123456789012:table/A",
                     "arn:aws:dynamodb:us-east-1:123456789012:table/B"]
    }]));
    assert!(matches!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::Allow(_)
    ));
    assert_eq!(
        evaluate(&p, &a[1].action, &a[1].resource),
        Decision::ImplicitDeny
    );
}

#[test]
fn sqs_batches_need_the_single_action_on_the_queue_arn() {
    let body =
        json!({"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/s-Q-1"}).to_string();
    let a = arns().accesses(
        Some("AmazonSQS.SendMessageBatch"),
        "POST",
        "/",
        body.as_bytes(),
    );
    assert_eq!(
        a,
        vec![Access {
            action: "sqs:SendMessage".into(),
            resource: "arn:aws:sqs:us-east-1:123456789012:s-Q-1".into(),
            leading_keys: None,
        }]
    );
}

#[test]
fn events_and_websocket_pushes_name_their_resources() {
    let body = json!({"Entries": [{"EventBusName": "bus"}, {"EventBusName": "bus"}]}).to_string();
    let a = arns().accesses(Some("AWSEvents.PutEvents"), "POST", "/", body.as_bytes());
    assert_eq!(
        a,
        vec![Access {
            action: "events:PutEvents".into(),
            resource: "arn:aws:events:us-east-1:123456789012:event-bus/bus".into(),
            leading_keys: None,
        }]
    );
    let a = arns().accesses(
        None,
        "POST",
        "http://127.0.0.1:3002/prod/@connections/abc%3D",
        b"",
    );
    assert_eq!(
        a[0].resource,
        "arn:aws:execute-api:us-east-1:123456789012:ws123/prod/POST/@connections/abc%3D"
    );
    let p = policy(json!([{
        "Effect": "Allow", "Action": "execute-api:ManageConnections",
        "Resource": "arn:aws:execute-api:us-east-1:123456789012:ws123/prod/POST/@connections/*"
    }]));
    assert!(matches!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::Allow(_)
    ));
}

#[test]
fn an_explicit_deny_wins_and_not_action_excludes() {
    let p = policy(json!([
        {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": "*"},
        {"Effect": "Allow", "NotAction": "sqs:*", "Resource": "arn:x"}
    ]));
    assert!(matches!(
        evaluate(&p, "dynamodb:GetItem", "arn:t"),
        Decision::Allow(_)
    ));
    assert_eq!(
        evaluate(&p, "dynamodb:DeleteItem", "arn:t"),
        Decision::ExplicitDeny("p".into())
    );
    assert!(matches!(
        evaluate(&p, "events:PutEvents", "arn:x"),
        Decision::Allow(_)
    ));
    assert_eq!(
        evaluate(&p, "sqs:SendMessage", "arn:x"),
        Decision::ImplicitDeny
    );
}

#[test]
fn a_guard_refuses_and_names_function_action_and_resource() {
    let p = policy(json!([{
        "Effect": "Allow", "Action": "dynamodb:GetItem",
        "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/T"
    }]));
    let g = IamGuard::private("IngestFunction", p, arns());
    let get = json!({"TableName": "T"}).to_string();
    assert!(
        g.check(
            Some("DynamoDB_20120810.GetItem"),
            "POST",
            "/",
            get.as_bytes()
        )
        .is_ok()
    );
    let err = g
        .check(
            Some("DynamoDB_20120810.PutItem"),
            "POST",
            "/",
            get.as_bytes(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "IngestFunction is not authorized to perform dynamodb:PutItem on \
         arn:aws:dynamodb:us-east-1:123456789012:table/T"
    );
    assert_eq!(g.violations(), vec![err]);
}

#[test]
fn a_request_that_names_nothing_or_an_unknown_service_is_refused() {
    let p = policy(json!([{"Effect": "Allow", "Action": "*", "Resource": "arn:*"}]));
    let g = IamGuard::private("ApiFunction", p, arns());
    let empty = json!({"RequestItems": {}}).to_string();
    assert!(
        g.check(
            Some("DynamoDB_20120810.BatchWriteItem"),
            "POST",
            "/",
            empty.as_bytes()
        )
        .is_err()
    );
    assert!(
        g.check(None, "GET", "https://s3.example/bucket/key", b"")
            .is_err()
    );
    assert_eq!(g.violations().len(), 2);
}

#[test]
fn policies_parse_single_values_and_refuse_conditions_not_evaluated() {
    let p = Policy::parse(
        "x",
        &json!({"Statement": {"Effect": "Allow", "Action": "a:b", "Resource": "r"}}),
    )
    .unwrap();
    assert_eq!(p.statements[0].actions, vec!["a:b"]);
    assert!(
        Policy::parse(
            "x",
            &json!({"Statement": [{"Effect": "Allow", "Action": "a:b", "Resource": "r",
                                   "Condition": {"Bool": {"aws:SecureTransport": "true"}}}]})
        )
        .is_err()
    );
}

#[test]
fn ses_sends_are_checked_against_the_identity_and_the_configuration_set() {
    let body = json!({"FromEmailAddress": "alerts@example.com",
                      "ConfigurationSetName": "s-email", "Content": {}})
    .to_string();
    let a = arns().accesses(
        None,
        "POST",
        "http://127.0.0.1:5000/v2/email/outbound-emails",
        body.as_bytes(),
    );
    let resources: Vec<&str> = a.iter().map(|a| a.resource.as_str()).collect();
    assert_eq!(
        resources,
        [
            "arn:aws:ses:us-east-1:123456789012:identity/alerts@example.com",
            "arn:aws:ses:us-east-1:123456789012:configuration-set/s-email"
        ]
    );
    assert!(a.iter().all(|a| a.action == "ses:SendEmail"));
    let on_behalf = json!({"FromEmailAddress": "alerts@example.com", "TenantName": "acme",
                           "Content": {}})
    .to_string();
    let b = arns().accesses(
        None,
        "POST",
        "http://127.0.0.1:5000/v2/email/outbound-emails",
        on_behalf.as_bytes(),
    );
    assert_eq!(
        b.last().unwrap().resource,
        "arn:aws:ses:us-east-1:123456789012:tenant/acme/id",
        "an SES tenant is a resource of the send"
    );
    let only_identities = policy(json!([{
        "Effect": "Allow", "Action": "ses:SendEmail",
        "Resource": "arn:aws:ses:us-east-1:123456789012:identity/*"
    }]));
    assert!(matches!(
        evaluate(&only_identities, &a[0].action, &a[0].resource),
        Decision::Allow(_)
    ));
    assert!(
        !matches!(
            evaluate(&only_identities, &a[1].action, &a[1].resource),
            Decision::Allow(_)
        ),
        "the configuration set needs its own grant"
    );
}

/// The deliver function may assume tenants' roles, never one of its own account's: the
/// template's `aws:ResourceAccount` condition is evaluated on the role's ARN.
#[test]
fn assume_role_is_allowed_only_outside_the_stacks_account() {
    let p = policy(json!([{
        "Effect": "Allow", "Action": ["sts:AssumeRole"],
        "Resource": "arn:aws:iam::*:role/*",
        "Condition": {"StringNotEquals": {"aws:ResourceAccount": "123456789012"}}
    }]));
    let body = "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A222233334444%3Arole%2Fsend&RoleSessionName=converger-t&ExternalId=cvg-1";
    let a = arns().accesses(
        None,
        "POST",
        "https://sts.us-east-1.amazonaws.com/",
        body.as_bytes(),
    );
    assert_eq!(
        a,
        vec![Access {
            action: "sts:AssumeRole".into(),
            resource: "arn:aws:iam::222233334444:role/send".into(),
            leading_keys: None,
        }]
    );
    assert!(matches!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::Allow(_)
    ));
    let own = body.replace("222233334444", "123456789012");
    let a = arns().accesses(
        None,
        "POST",
        "https://sts.us-east-1.amazonaws.com/",
        own.as_bytes(),
    );
    assert_eq!(
        evaluate(&p, &a[0].action, &a[0].resource),
        Decision::ImplicitDeny
    );
    // Any other condition is refused when the policy is read, not ignored.
    assert!(
        Policy::parse(
            "p",
            &json!({"Statement": [{
                "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}
            }]})
        )
        .is_err()
    );
}

/// `ForAllValues:StringLike` on `dynamodb:LeadingKeys`: an item request is allowed only on
/// partition keys the patterns match; one whose keys cannot be read is not allowed.
#[test]
fn leading_keys_narrow_a_statement_to_the_items_it_names() {
    let p = policy(json!([{
        "Effect": "Allow", "Action": ["dynamodb:UpdateItem", "dynamodb:Query"],
        "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/T",
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ten_*"]}}
    }]));
    let update = |pk: &str| {
        let body = json!({"TableName": "T", "Key": {"pk": {"S": pk}},
                          "UpdateExpression": "SET a = :a"})
        .to_string();
        let a = arns().accesses(
            Some("DynamoDB_20120810.UpdateItem"),
            "POST",
            "/",
            body.as_bytes(),
        );
        assert_eq!(a[0].leading_keys.as_deref(), Some(&[pk.to_owned()][..]));
        evaluate_keys(
            &p,
            &a[0].action,
            &a[0].resource,
            a[0].leading_keys.as_deref(),
        )
    };
    assert!(matches!(update("ten_abc"), Decision::Allow(_)));
    assert_eq!(update("user#admin#ops@example.com"), Decision::ImplicitDeny);
    // A transaction's items each name theirs.
    let body = json!({"TransactItems": [
        {"Update": {"TableName": "T", "Key": {"pk": {"S": "key#h"}}}}
    ]})
    .to_string();
    let a = arns().accesses(
        Some("DynamoDB_20120810.TransactWriteItems"),
        "POST",
        "/",
        body.as_bytes(),
    );
    assert_eq!(
        a[0].leading_keys.as_deref(),
        Some(&["key#h".to_owned()][..])
    );
    // A query's keys are not read here: not allowed under the condition.
    let body = json!({"TableName": "T", "KeyConditionExpression": "pk = :p"}).to_string();
    let a = arns().accesses(
        Some("DynamoDB_20120810.Query"),
        "POST",
        "/",
        body.as_bytes(),
    );
    assert_eq!(
        evaluate_keys(
            &p,
            &a[0].action,
            &a[0].resource,
            a[0].leading_keys.as_deref()
        ),
        Decision::ImplicitDeny
    );
}
