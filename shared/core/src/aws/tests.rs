use super::*;
use serde_json::json;

fn config(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

const ROLE: &str = "arn:aws:iam::222233334444:role/converger-delivery";

#[test]
fn each_type_names_its_target_and_the_region_comes_from_it() {
    let sqs = channel_config(
        Service::Sqs,
        &config(json!({
            "queue_url": "https://sqs.eu-west-1.amazonaws.com/222233334444/orders.fifo",
            "role_arn": ROLE,
        })),
    )
    .expect("a FIFO queue");
    assert_eq!(sqs.destination.region, "eu-west-1");
    assert_eq!(sqs.destination.account, "222233334444");
    assert!(sqs.destination.fifo);
    assert_eq!(sqs.role.account, "222233334444");
    assert_eq!(sqs.body, crate::payload::BodyShape::Envelope);

    let legacy = queue_url("https://us-east-2.queue.amazonaws.com/222233334444/plain").unwrap();
    assert_eq!(legacy.region, "us-east-2");
    assert!(!legacy.fifo);

    for (service, key, arn, region) in [
        (
            Service::EventBridge,
            "event_bus_arn",
            "arn:aws:events:us-west-2:222233334444:event-bus/tenant-bus",
            "us-west-2",
        ),
        (
            Service::Kinesis,
            "stream_arn",
            "arn:aws:kinesis:ap-south-1:222233334444:stream/activity",
            "ap-south-1",
        ),
        (
            Service::Sns,
            "topic_arn",
            "arn:aws:sns:us-gov-west-1:222233334444:alerts.fifo",
            "us-gov-west-1",
        ),
    ] {
        let c = channel_config(
            service,
            &config(json!({key: arn, "role_arn": ROLE, "body": "standard"})),
        )
        .unwrap_or_else(|e| panic!("{service:?}: {e}"));
        assert_eq!(c.destination.region, region);
        assert_eq!(c.destination.fifo, service == Service::Sns);
        assert_eq!(c.body, crate::payload::BodyShape::Standard);
    }
}

#[test]
fn a_config_that_names_no_usable_target_or_role_is_refused_with_the_shape_it_needs() {
    let refused = |service: Service, v: Value| -> String {
        channel_config(service, &config(v))
            .expect_err("refused")
            .to_string()
    };
    let url = "https://sqs.eu-west-1.amazonaws.com/222233334444/q";
    assert!(refused(Service::Sqs, json!({"role_arn": ROLE})).contains("needs `queue_url`"));
    assert!(refused(Service::Sqs, json!({"queue_url": url})).contains("needs `role_arn`"));
    for bad_url in [
        "http://sqs.eu-west-1.amazonaws.com/222233334444/q",
        "https://evil.example.com/222233334444/q",
        "https://sqs.eu-west-1.amazonaws.com/2222/q",
        "https://sqs.eu-west-1.amazonaws.com/222233334444/",
        "https://sqs.amazonaws.com/222233334444/q",
    ] {
        assert!(
            refused(
                Service::Sqs,
                json!({"queue_url": bad_url, "role_arn": ROLE})
            )
            .contains("queue_url must be an SQS queue URL"),
            "{bad_url}"
        );
    }
    for bad_role in [
        "arn:aws:iam::222233334444:user/someone",
        "arn:aws:iam:us-east-1:222233334444:role/r",
        "arn:aws:sts::222233334444:role/r",
        "role/r",
    ] {
        assert!(
            refused(
                Service::Sqs,
                json!({"queue_url": url, "role_arn": bad_role})
            )
            .contains("role_arn must be an IAM role ARN"),
            "{bad_role}"
        );
    }
    // An ARN of another service, or a bus ARN without its `event-bus/` part.
    assert!(
        refused(
            Service::EventBridge,
            json!({"event_bus_arn": "arn:aws:sns:us-east-1:222233334444:t", "role_arn": ROLE})
        )
        .contains("event_bus_arn must be an ARN")
    );
    assert!(
        refused(
            Service::Kinesis,
            json!({"stream_arn": "arn:aws:kinesis:us-east-1:222233334444:s", "role_arn": ROLE})
        )
        .contains("stream_arn must be an ARN")
    );
    assert!(
        refused(
            Service::Sqs,
            json!({"queue_url": url, "role_arn": ROLE, "access_key": "AKIA..."})
        )
        .contains("unknown aws_sqs config key `access_key`")
    );
    assert!(
        refused(
            Service::Sqs,
            json!({"queue_url": url, "role_arn": ROLE, "body": "xml"})
        )
        .contains("body must be")
    );
}

#[test]
fn a_role_in_the_platforms_own_account_is_never_assumed() {
    let theirs = role(ROLE).unwrap();
    let ours = role("arn:aws:iam::111122223333:role/converger-deliver").unwrap();
    assert!(check_role_account(&theirs, Some("111122223333")).is_ok());
    let e = check_role_account(&ours, Some("111122223333")).unwrap_err();
    assert!(e.to_string().contains("platform's own account"), "{e}");
    // Where the platform's account is not known (a process run by hand), nothing to compare.
    assert!(check_role_account(&ours, None).is_ok());
}

#[test]
fn fifo_targets_and_streams_bring_their_throughput_as_the_default_rate() {
    let d = |url: &str| queue_url(url).unwrap();
    assert_eq!(
        default_rate_limit(&d(
            "https://sqs.eu-west-1.amazonaws.com/222233334444/o.fifo"
        )),
        "300/s".parse().ok()
    );
    assert_eq!(
        default_rate_limit(&d("https://sqs.eu-west-1.amazonaws.com/222233334444/o")),
        None
    );
    let stream = target_arn(
        Service::Kinesis,
        "arn:aws:kinesis:us-east-1:222233334444:stream/s",
    )
    .unwrap();
    assert_eq!(default_rate_limit(&stream), "1000/s".parse().ok());
    let bus = target_arn(
        Service::EventBridge,
        "arn:aws:events:us-east-1:222233334444:event-bus/b",
    )
    .unwrap();
    assert_eq!(default_rate_limit(&bus), None);
}

#[test]
fn a_fifo_message_is_deduplicated_by_its_delivery_until_it_is_replayed() {
    assert_eq!(deduplication_id("dl_1", 0), "dl_1");
    assert_eq!(deduplication_id("dl_1", 2), "dl_1.r2");
    assert_eq!(group_id("conv 1\n"), "conv_1_");
    assert_eq!(group_id(""), "_");
    assert_eq!(group_id(&"c".repeat(300)).len(), 128);
    let a = attributes("dl_1", 1_700_000_000, "v1,abc", Some("order.paid"), "c1");
    assert_eq!(
        a.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "conversation-id",
            "event-type"
        ]
    );
}

#[test]
fn messages_over_the_services_limit_are_refused_before_sending() {
    assert!(check_size(Service::Sqs, 256 * 1024).is_ok());
    let e = check_size(Service::Sns, 256 * 1024 + 1).unwrap_err();
    assert!(e.message().contains("SNS takes at most 262144"), "{e}");
    assert!(check_size(Service::Kinesis, 1024 * 1024).is_ok());
    assert!(check_size(Service::Kinesis, 1024 * 1024 + 1).is_err());
}

#[test]
fn errors_are_classified_by_code_then_status_with_advice_for_the_tenant() {
    let c = |stage, code, status| classify(Service::Sqs, stage, code, "m", status);
    for code in [
        "ThrottlingException",
        "ServiceUnavailable",
        "InternalError",
        "KMSThrottlingException",
        "ExpiredToken",
    ] {
        assert!(c(Stage::Send, Some(code), Some(400)).retryable, "{code}");
    }
    for code in [
        "AccessDenied",
        "QueueDoesNotExist",
        "ResourceNotFoundException",
        "InvalidParameterValue",
    ] {
        assert!(!c(Stage::Send, Some(code), Some(400)).retryable, "{code}");
    }
    let missing = c(Stage::Send, Some("QueueDoesNotExist"), Some(400));
    assert!(
        missing
            .reason
            .starts_with("SQS: QueueDoesNotExist: m — the target does not exist"),
        "{}",
        missing.reason
    );
    // A refused AssumeRole tells the tenant how to make the role trust the platform.
    let refused = c(Stage::AssumeRole, Some("AccessDenied"), Some(403));
    assert!(!refused.retryable);
    assert!(refused.reason.starts_with("sts:AssumeRole: AccessDenied"));
    assert!(refused.reason.contains("external id"), "{}", refused.reason);
    // STS failing is retried.
    assert!(c(Stage::AssumeRole, Some("InternalFailure"), Some(500)).retryable);
    // Unknown codes by status; no answer at all is retried.
    assert!(c(Stage::Send, Some("Novel"), Some(503)).retryable);
    assert!(!c(Stage::Send, Some("Novel"), Some(400)).retryable);
    assert!(c(Stage::Send, None, None).retryable);
    // No code is in two rows.
    let mut all: Vec<&str> = ERRORS
        .iter()
        .flat_map(|r| r.codes.iter().copied())
        .collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n);
}

#[test]
fn the_role_template_trusts_the_platform_only_with_the_external_id() {
    let id = new_external_id();
    assert!(id.starts_with(EXTERNAL_ID_PREFIX) && id.len() == 4 + 48);
    assert_ne!(id, new_external_id());
    let t = role_template("111122223333", &id);
    assert!(t.contains("AWS: arn:aws:iam::111122223333:root"));
    assert!(t.contains(&format!("sts:ExternalId: {id}")));
    for action in Service::ALL.map(Service::send_action) {
        assert!(t.contains(action), "{action}");
    }
    assert_eq!(session_name("tn_abc"), "converger-tn_abc");
    assert!(session_name(&"x".repeat(100)).len() <= 64);
}

/// `docs/channels/aws.md` shows the error table as the code classifies
/// (`UPDATE_DOCS=1` rewrites it).
#[test]
fn the_docs_show_the_error_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/channels/aws.md");
    let page = std::fs::read_to_string(path).expect("docs/channels/aws.md");
    let (start, end) = ("<!-- errors:start -->\n", "<!-- errors:end -->");
    let (before, rest) = page.split_once(start).expect("the start marker");
    let (_, after) = rest.split_once(end).expect("the end marker");
    let current = format!("{before}{start}{}{end}{after}", errors_markdown());
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, &current).expect("docs/channels/aws.md written");
    }
    assert!(
        page == current,
        "docs/channels/aws.md's error table is stale: run with UPDATE_DOCS=1"
    );
}

/// Delivery `dl_1` of `conv-1`, signed, with the trace context given.
fn signed<'a>(traceparent: Option<&'a str>, tracestate: Option<&'a str>) -> Signed<'a> {
    Signed {
        delivery_id: "dl_1",
        timestamp: 1_700_000_000,
        signature: "v1,abc",
        event_type: None,
        conversation_id: "conv-1",
        traceparent,
        tracestate,
    }
}

#[test]
fn each_service_gets_its_message_and_its_size_counted_as_it_counts_it() {
    let signed = signed(None, None);
    let sqs = outgoing(Service::Sqs, "{\"a\":1}".into(), &signed);
    assert_eq!(sqs.text, "{\"a\":1}");
    let attrs: usize = sqs
        .attributes
        .iter()
        .map(|(k, v)| k.len() + 6 + v.len())
        .sum();
    assert_eq!(sqs.size, sqs.text.len() + attrs);
    let bus = outgoing(Service::EventBridge, "{\"a\":1}".into(), &signed);
    let record: Value = serde_json::from_str(&bus.text).unwrap();
    assert_eq!(record["id"], "dl_1");
    assert_eq!(record["body"], "{\"a\":1}");
    assert_eq!(bus.detail_type, DEFAULT_DETAIL_TYPE);
    assert_eq!(
        bus.size,
        bus.text.len() + EVENT_SOURCE.len() + DEFAULT_DETAIL_TYPE.len()
    );
    let stream = outgoing(Service::Kinesis, "{}".into(), &signed);
    assert_eq!(stream.group_id, "conv-1");
    assert_eq!(stream.size, stream.text.len() + "conv-1".len());
}

#[test]
fn the_trace_context_rides_in_each_service_s_own_place() {
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let signed = signed(Some(traceparent), Some("congo=t61rcWkgMzE"));
    let sqs = outgoing(Service::Sqs, "{}".into(), &signed);
    let attr = |k: &str| {
        sqs.attributes
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(attr("traceparent").as_deref(), Some(traceparent));
    assert_eq!(attr("tracestate").as_deref(), Some("congo=t61rcWkgMzE"));
    // SQS takes ten attributes a message.
    assert!(sqs.attributes.len() <= 10, "{:?}", sqs.attributes);
    assert_eq!(sqs.trace_header, None);
    let bus = outgoing(Service::EventBridge, "{}".into(), &signed);
    let record: Value = serde_json::from_str(&bus.text).unwrap();
    assert_eq!(record["traceparent"], traceparent);
    assert_eq!(
        bus.trace_header.as_deref(),
        Some("Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1")
    );
    let stream = outgoing(Service::Kinesis, "{}".into(), &signed);
    let record: Value = serde_json::from_str(&stream.text).unwrap();
    assert_eq!(record["tracestate"], "congo=t61rcWkgMzE");
}

#[test]
fn a_destination_names_its_target() {
    let role = "arn:aws:iam::222233334444:role/r";
    let name = |service: Service, key: &str, target: &str| {
        let mut config = serde_json::Map::new();
        config.insert(key.into(), target.into());
        config.insert("role_arn".into(), role.into());
        if service == Service::S3 {
            config.insert("region".into(), "eu-west-1".into());
        }
        channel_config(service, &config)
            .unwrap()
            .destination
            .name()
            .to_owned()
    };
    assert_eq!(
        name(
            Service::Firehose,
            "delivery_stream_arn",
            "arn:aws:firehose:eu-west-1:222233334444:deliverystream/archive"
        ),
        "archive"
    );
    assert_eq!(
        name(
            Service::StepFunctions,
            "state_machine_arn",
            "arn:aws:states:eu-west-1:222233334444:stateMachine:flow"
        ),
        "flow"
    );
    assert_eq!(name(Service::S3, "bucket", "acme-events"), "acme-events");
    assert_eq!(
        name(
            Service::Sqs,
            "queue_url",
            "https://sqs.eu-west-1.amazonaws.com/222233334444/q1"
        ),
        "q1"
    );
}
