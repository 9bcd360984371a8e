//! Delivery into a tenant's own AWS account: the channel types `aws_sqs`, `aws_eventbridge`,
//! `aws_kinesis` and `aws_sns`. The platform stores no key of the tenant's: it assumes the
//! role the channel names (`role_arn`) with the tenant's external id, and sends with the
//! role's short-lived credentials. Everything here is a rule without I/O: what a channel's
//! configuration must hold, where its target lives, what is sent with a message, how big a
//! message may be, how the service's answers are classified, and the role a tenant creates.

use crate::{ChannelType, Invalid, RateLimit};
use serde_json::{Map, Value};

/// The AWS service a channel type sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Sqs,
    EventBridge,
    Kinesis,
    Sns,
    Firehose,
    StepFunctions,
    S3,
}

impl Service {
    pub const ALL: [Service; 7] = [
        Self::Sqs,
        Self::EventBridge,
        Self::Kinesis,
        Self::Sns,
        Self::Firehose,
        Self::StepFunctions,
        Self::S3,
    ];

    /// The service of an AWS channel type; `None` for the other types.
    pub fn of(kind: ChannelType) -> Option<Self> {
        match kind {
            ChannelType::AwsSqs => Some(Self::Sqs),
            ChannelType::AwsEventbridge => Some(Self::EventBridge),
            ChannelType::AwsKinesis => Some(Self::Kinesis),
            ChannelType::AwsSns => Some(Self::Sns),
            ChannelType::AwsFirehose => Some(Self::Firehose),
            ChannelType::AwsStepfunctions => Some(Self::StepFunctions),
            ChannelType::AwsS3 => Some(Self::S3),
            _ => None,
        }
    }

    pub fn channel_type(self) -> ChannelType {
        match self {
            Self::Sqs => ChannelType::AwsSqs,
            Self::EventBridge => ChannelType::AwsEventbridge,
            Self::Kinesis => ChannelType::AwsKinesis,
            Self::Sns => ChannelType::AwsSns,
            Self::Firehose => ChannelType::AwsFirehose,
            Self::StepFunctions => ChannelType::AwsStepfunctions,
            Self::S3 => ChannelType::AwsS3,
        }
    }

    /// The configuration key that names the target.
    pub fn target_key(self) -> &'static str {
        match self {
            Self::Sqs => "queue_url",
            Self::EventBridge => "event_bus_arn",
            Self::Kinesis => "stream_arn",
            Self::Sns => "topic_arn",
            Self::Firehose => "delivery_stream_arn",
            Self::StepFunctions => "state_machine_arn",
            Self::S3 => "bucket",
        }
    }

    /// The one action the tenant's role must allow on the target.
    pub fn send_action(self) -> &'static str {
        match self {
            Self::Sqs => "sqs:SendMessage",
            Self::EventBridge => "events:PutEvents",
            Self::Kinesis => "kinesis:PutRecord",
            Self::Sns => "sns:Publish",
            Self::Firehose => "firehose:PutRecord",
            Self::StepFunctions => "states:StartExecution",
            Self::S3 => "s3:PutObject",
        }
    }

    /// The largest message the service takes, in bytes (body and attributes together).
    pub fn max_message_bytes(self) -> usize {
        match self {
            Self::Sqs | Self::EventBridge | Self::Sns | Self::StepFunctions => 256 * 1024,
            Self::Kinesis => 1024 * 1024,
            // A record of 1,000 KiB, before base64.
            Self::Firehose => 1000 * 1024,
            // Far below an object's limit: the payload is at most 256 KiB.
            Self::S3 => 5 * 1024 * 1024,
        }
    }

    /// The name the docs and error texts give it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Sqs => "SQS",
            Self::EventBridge => "EventBridge",
            Self::Kinesis => "Kinesis",
            Self::Sns => "SNS",
            Self::Firehose => "Firehose",
            Self::StepFunctions => "Step Functions",
            Self::S3 => "S3",
        }
    }

    fn arn_service(self) -> &'static str {
        match self {
            Self::Sqs => "sqs",
            Self::EventBridge => "events",
            Self::Kinesis => "kinesis",
            Self::Sns => "sns",
            Self::Firehose => "firehose",
            Self::StepFunctions => "states",
            Self::S3 => "s3",
        }
    }
}

/// The parts of an ARN (`arn:partition:service:region:account:resource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arn<'a> {
    pub partition: &'a str,
    pub service: &'a str,
    pub region: &'a str,
    pub account: &'a str,
    pub resource: &'a str,
}

impl<'a> Arn<'a> {
    pub fn parse(arn: &'a str) -> Option<Self> {
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(partition), Some(service), Some(region), Some(account)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let resource = parts.next()?;
        Some(Self {
            partition,
            service,
            region,
            account,
            resource,
        })
    }
}

/// Whether `s` is an AWS account id: 12 digits.
pub fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_region(s: &str) -> bool {
    // `us-east-1`, `eu-central-2`, `us-gov-west-1`, `cn-north-1`...
    !s.is_empty()
        && s.len() <= 32
        && s.split('-').count() >= 3
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().last().is_some_and(|b| b.is_ascii_digit())
}

fn is_partition(s: &str) -> bool {
    matches!(s, "aws" | "aws-cn" | "aws-us-gov")
}

/// Where a channel sends: the target as configured, and what it says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub service: Service,
    /// The queue URL or the target's ARN, as configured.
    pub target: String,
    pub region: String,
    pub account: String,
    /// A FIFO queue or topic (its name ends `.fifo`): messages carry a group and a
    /// deduplication id.
    pub fifo: bool,
    /// An S3 channel's `key_prefix`: where its objects go in the bucket.
    pub key_prefix: String,
}

impl Destination {
    /// The target's own name: a delivery stream's (Firehose's `PutRecord` takes the name), a
    /// state machine's, a bucket's; the last part of a queue URL or an ARN otherwise.
    pub fn name(&self) -> &str {
        self.target
            .rsplit(['/', ':'])
            .next()
            .unwrap_or(&self.target)
    }
}

/// A role that may be assumed: its ARN and its account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub arn: String,
    pub account: String,
}

/// What an AWS channel's `config` holds, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelConfig {
    pub destination: Destination,
    pub role: Role,
    /// What the message's body is (`body`: `envelope`, `payload` or `standard`, as a
    /// webhook's).
    pub body: crate::payload::BodyShape,
}

/// `https://sqs.<region>.amazonaws.com/<account>/<name>` (or the legacy
/// `https://<region>.queue.amazonaws.com/...`, or `.amazonaws.com.cn`).
fn queue_url(url: &str) -> Result<Destination, Invalid> {
    let bad = || {
        Invalid(format!(
            "queue_url must be an SQS queue URL, `https://sqs.<region>.amazonaws.com/<account id>/<queue name>` (got `{}`)",
            url.chars().take(200).collect::<String>()
        ))
    };
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').ok_or_else(bad)?;
    let host = host
        .strip_suffix(".amazonaws.com")
        .or_else(|| host.strip_suffix(".amazonaws.com.cn"))
        .ok_or_else(bad)?;
    let region = host
        .strip_prefix("sqs.")
        .or_else(|| host.strip_suffix(".queue"))
        .ok_or_else(bad)?;
    let (account, name) = path.split_once('/').ok_or_else(bad)?;
    let name_ok = !name.is_empty()
        && name.len() <= 80
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !is_region(region) || !is_account(account) || !name_ok {
        return Err(bad());
    }
    Ok(Destination {
        service: Service::Sqs,
        target: url.to_owned(),
        region: region.to_owned(),
        account: account.to_owned(),
        fifo: name.ends_with(".fifo"),
        key_prefix: String::new(),
    })
}

/// An event bus, stream or topic ARN of `service`.
fn target_arn(service: Service, arn: &str) -> Result<Destination, Invalid> {
    let (shape, prefix) = match service {
        Service::EventBridge => (
            "arn:aws:events:<region>:<account id>:event-bus/<name>",
            "event-bus/",
        ),
        Service::Kinesis => (
            "arn:aws:kinesis:<region>:<account id>:stream/<name>",
            "stream/",
        ),
        Service::Sns => ("arn:aws:sns:<region>:<account id>:<topic name>", ""),
        Service::Firehose => (
            "arn:aws:firehose:<region>:<account id>:deliverystream/<name>",
            "deliverystream/",
        ),
        Service::StepFunctions => (
            "arn:aws:states:<region>:<account id>:stateMachine:<name>",
            "stateMachine:",
        ),
        Service::Sqs | Service::S3 => ("", ""),
    };
    let key = service.target_key();
    let bad = || {
        Invalid(format!(
            "{key} must be an ARN, `{shape}` (got `{}`)",
            arn.chars().take(200).collect::<String>()
        ))
    };
    let a = Arn::parse(arn).ok_or_else(bad)?;
    let name = a.resource.strip_prefix(prefix).ok_or_else(bad)?;
    let name_ok = !name.is_empty()
        && name.len() <= 256
        && !name.contains(':')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if !is_partition(a.partition)
        || a.service != service.arn_service()
        || !is_region(a.region)
        || !is_account(a.account)
        || !name_ok
    {
        return Err(bad());
    }
    Ok(Destination {
        service,
        target: arn.to_owned(),
        region: a.region.to_owned(),
        account: a.account.to_owned(),
        fifo: service == Service::Sns && name.ends_with(".fifo"),
        key_prefix: String::new(),
    })
}

/// An S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens, starting and
/// ending with a letter or digit, not an IP address.
fn bucket(name: &str, region: &str, key_prefix: Option<&str>) -> Result<Destination, Invalid> {
    let ok = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err();
    if !ok {
        return Err(Invalid(format!(
            "bucket must be an S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens (got `{}`)",
            name.chars().take(100).collect::<String>()
        )));
    }
    if !is_region(region) {
        return Err(Invalid(format!(
            "region must be the bucket's AWS region, such as `eu-west-1` (got `{}`)",
            region.chars().take(40).collect::<String>()
        )));
    }
    let key_prefix = key_prefix.unwrap_or_default();
    if key_prefix.len() > 512
        || key_prefix.starts_with('/')
        || key_prefix
            .chars()
            .any(|c| c.is_control() || "\\{}^%`[]\"<>~#|".contains(c))
    {
        return Err(Invalid::new(
            "key_prefix must be at most 512 characters of a safe S3 key (letters, digits, `/`, `!`, `-`, `_`, `.`, `*`, `'`, `(`, `)`...), not starting with `/`",
        ));
    }
    Ok(Destination {
        service: Service::S3,
        target: name.to_owned(),
        region: region.to_owned(),
        account: String::new(),
        fifo: false,
        key_prefix: key_prefix.to_owned(),
    })
}

/// An S3 channel's object key for one delivery: under its prefix, the delivery id (with the
/// replay's number after a replay, as the FIFO deduplication id has it), so that a send
/// repeated after a crash writes the same object again.
pub fn object_key(key_prefix: &str, deduplication_id: &str) -> String {
    format!("{key_prefix}{deduplication_id}.json")
}

/// A role ARN, `arn:aws:iam::<account id>:role/<name>` (a path may come before the name).
pub fn role(arn: &str) -> Result<Role, Invalid> {
    let bad = || {
        Invalid(format!(
            "role_arn must be an IAM role ARN, `arn:aws:iam::<account id>:role/<name>` (got `{}`)",
            arn.chars().take(200).collect::<String>()
        ))
    };
    let a = Arn::parse(arn).ok_or_else(bad)?;
    let name = a.resource.strip_prefix("role/").ok_or_else(bad)?;
    let name_ok = !name.is_empty()
        && name.len() <= 512
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-/".contains(&b));
    if !is_partition(a.partition)
        || a.service != "iam"
        || !a.region.is_empty()
        || !is_account(a.account)
        || !name_ok
    {
        return Err(bad());
    }
    Ok(Role {
        arn: arn.to_owned(),
        account: a.account.to_owned(),
    })
}

/// Checks an AWS channel's `config`: the target (`queue_url`, `event_bus_arn`, `stream_arn`,
/// `topic_arn`, `delivery_stream_arn`, `state_machine_arn`, or an S3 channel's `bucket` with
/// its `region` and optional `key_prefix`), `role_arn`, and optionally `body`.
pub fn channel_config(
    service: Service,
    config: &Map<String, Value>,
) -> Result<ChannelConfig, Invalid> {
    let key = service.target_key();
    let allowed: &[&str] = if service == Service::S3 {
        &["bucket", "region", "key_prefix", "role_arn", "body"]
    } else {
        &[key, "role_arn", "body"]
    };
    if let Some(k) = config.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Invalid(format!(
            "unknown {} config key `{k}` (allowed: {})",
            service.channel_type(),
            allowed.join(", ")
        )));
    }
    let text = |k: &str| -> Result<&str, Invalid> {
        match config.get(k) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.as_str()),
            None | Some(Value::Null) => Err(Invalid(format!(
                "{} config needs `{k}`",
                service.channel_type()
            ))),
            Some(_) => Err(Invalid(format!("`{k}` must be a non-empty string"))),
        }
    };
    let target = text(key)?;
    let destination = match service {
        Service::Sqs => queue_url(target)?,
        Service::S3 => {
            let prefix = match config.get("key_prefix") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => Some(p.as_str()),
                Some(_) => return Err(Invalid::new("`key_prefix` must be a string")),
            };
            bucket(target, text("region")?, prefix)?
        }
        other => target_arn(other, target)?,
    };
    let role = role(text("role_arn")?)?;
    let body = crate::payload::BodyShape::parse(config.get("body"))?;
    Ok(ChannelConfig {
        destination,
        role,
        body,
    })
}

/// The confused-deputy rule: a role in the platform's own account is never assumed, so a
/// tenant cannot borrow the platform's rights by naming one of its roles.
pub fn check_role_account(role: &Role, platform_account: Option<&str>) -> Result<(), Invalid> {
    match platform_account {
        Some(p) if p == role.account => Err(Invalid(format!(
            "role_arn is in the platform's own account ({p}); name a role in your account"
        ))),
        _ => Ok(()),
    }
}

/// The channel's outbound rate limit where it sets none: a FIFO queue or topic takes 300
/// messages a second (without batching), a Kinesis shard 1,000 records. Standard queues and
/// topics, and event buses (whose quota is the tenant's account's, per region), have none.
pub fn default_rate_limit(d: &Destination) -> Option<RateLimit> {
    let per_s = match (d.service, d.fifo) {
        (Service::Sqs | Service::Sns, true) => 300,
        (Service::Kinesis, _) => 1_000,
        // An S3 prefix takes 3,500 writes a second.
        (Service::S3, _) => 3_500,
        _ => return None,
    };
    format!("{per_s}/s").parse().ok()
}

/// The source of the events sent to a tenant's event bus.
pub const EVENT_SOURCE: &str = "converger";

/// The prefix of every external id.
pub const EXTERNAL_ID_PREFIX: &str = "cvg-";

/// A tenant's new external id: 24 random bytes, hex, behind [`EXTERNAL_ID_PREFIX`].
pub fn new_external_id() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    format!("{EXTERNAL_ID_PREFIX}{}", hex::encode(b))
}

/// The session name the platform's sessions in a tenant's role carry (it shows in the
/// tenant's CloudTrail): `converger-<tenant id>`, within STS's 64 characters.
pub fn session_name(tenant_id: &str) -> String {
    let safe: String = tenant_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(*c))
        .take(53)
        .collect();
    format!("converger-{safe}")
}

/// What a message carries besides its body, for SQS and SNS message attributes (all
/// strings): the Standard Webhooks id, timestamp and signature, the event type and the
/// conversation.
pub fn attributes(
    delivery_id: &str,
    timestamp: i64,
    signature: &str,
    event_type: Option<&str>,
    conversation_id: &str,
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("webhook-id", delivery_id.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signature.to_owned()),
        ("conversation-id", conversation_id.to_owned()),
    ];
    if let Some(t) = event_type {
        out.push(("event-type", t.to_owned()));
    }
    out
}

/// A FIFO message's deduplication id: the delivery's id, so that a send repeated after a
/// crash is dropped by the queue; after a replay, the replay's number behind it, so that the
/// replay arrives.
pub fn deduplication_id(delivery_id: &str, replays: u32) -> String {
    if replays == 0 {
        delivery_id.to_owned()
    } else {
        format!("{delivery_id}.r{replays}")
    }
}

/// A FIFO message's group (and a Kinesis record's partition key): the conversation, so that
/// its messages keep their order and other conversations do not wait for it. Characters the
/// services refuse are replaced, and it is cut at 128 (256 for Kinesis is more than enough).
pub fn group_id(conversation_id: &str) -> String {
    let g: String = conversation_id
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .take(128)
        .collect();
    if g.is_empty() { "_".to_owned() } else { g }
}

/// EventBridge's `detail-type` for an activity sent without an event type.
pub const DEFAULT_DETAIL_TYPE: &str = "activity";

/// What is sent for one delivery, and how big the service counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// SQS's and SNS's message and an S3 object: the body; EventBridge's detail, a Kinesis or
    /// Firehose record (a line) and a Step Functions execution's input: the record
    /// `{id, timestamp, signature, event_type, conversation_id, body}`, with the body as the
    /// string that was signed (the others carry those in attributes, an S3 object in its
    /// metadata).
    pub text: String,
    /// String attributes (SQS, SNS; an S3 object's metadata; see [`attributes`]).
    pub attributes: Vec<(&'static str, String)>,
    /// EventBridge's `detail-type`: the event type, or [`DEFAULT_DETAIL_TYPE`].
    pub detail_type: String,
    /// A FIFO target's group, a Kinesis record's partition key.
    pub group_id: String,
    /// The size the service holds against its limit: the text with the attributes' names,
    /// types and values (SQS, SNS), the source and detail-type (EventBridge), or the
    /// partition key (Kinesis).
    pub size: usize,
    /// EventBridge's entry's `TraceHeader` (X-Ray's form of the trace context).
    pub trace_header: Option<String>,
}

/// What a body was signed with, and what its message says of itself.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    pub delivery_id: &'a str,
    pub timestamp: i64,
    /// The `webhook-signature` value.
    pub signature: &'a str,
    pub event_type: Option<&'a str>,
    pub conversation_id: &'a str,
    /// The attempt's W3C trace context (`core::trace`), if its activity has one.
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

/// The message for `service` of a signed `body` (see [`Outgoing`]). The trace context goes
/// in the attributes (SQS, SNS), in the record (EventBridge, Kinesis) and, for EventBridge,
/// in X-Ray's form as the entry's trace header.
pub fn outgoing(service: Service, body: String, s: &Signed<'_>) -> Outgoing {
    let mut attributes = attributes(
        s.delivery_id,
        s.timestamp,
        s.signature,
        s.event_type,
        s.conversation_id,
    );
    let trace = [("traceparent", s.traceparent), ("tracestate", s.tracestate)];
    attributes.extend(
        trace
            .iter()
            .filter_map(|(k, v)| v.map(|v| (*k, v.to_owned()))),
    );
    let text = match service {
        Service::Sqs | Service::Sns | Service::S3 => body,
        Service::EventBridge | Service::Kinesis | Service::Firehose | Service::StepFunctions => {
            let mut record = serde_json::json!({
                "id": s.delivery_id,
                "timestamp": s.timestamp,
                "signature": s.signature,
                "event_type": s.event_type,
                "conversation_id": s.conversation_id,
                "body": body,
            });
            for (k, v) in trace {
                if let Some(v) = v {
                    record[k] = serde_json::Value::from(v);
                }
            }
            // A delivery stream concatenates its records: one per line.
            if service == Service::Firehose {
                format!("{record}\n")
            } else {
                record.to_string()
            }
        }
    };
    let trace_header = match service {
        Service::EventBridge => s
            .traceparent
            .and_then(crate::trace::TraceContext::xray_header),
        _ => None,
    };
    let detail_type = s.event_type.unwrap_or(DEFAULT_DETAIL_TYPE).to_owned();
    let group_id = group_id(s.conversation_id);
    let size = text.len()
        + match service {
            Service::Sqs | Service::Sns => attributes
                .iter()
                .map(|(k, v)| k.len() + "String".len() + v.len())
                .sum(),
            Service::EventBridge => EVENT_SOURCE.len() + detail_type.len(),
            Service::Kinesis => group_id.len(),
            Service::Firehose | Service::StepFunctions | Service::S3 => 0,
        };
    Outgoing {
        text,
        attributes,
        detail_type,
        group_id,
        size,
        trace_header,
    }
}

/// Refuses a message the service would refuse for its size.
pub fn check_size(service: Service, bytes: usize) -> Result<(), crate::Invalid> {
    let max = service.max_message_bytes();
    if bytes > max {
        Err(crate::Invalid(format!(
            "the message is {bytes} bytes; {} takes at most {max} (make the payload smaller, or send a reference to it)",
            service.label()
        )))
    } else {
        Ok(())
    }
}

mod errors;
pub use errors::*;

/// The role a send is made as.
#[derive(Debug, Clone, Copy)]
pub struct AssumedRole<'a> {
    pub role_arn: &'a str,
    /// The tenant's external id, which the role's trust policy requires.
    pub external_id: &'a str,
    /// The session's name (`core::aws::session_name`): it shows in the tenant's CloudTrail.
    pub session_name: &'a str,
}

/// One message for one target.
#[derive(Debug, Clone)]
pub struct AwsMessage<'a> {
    pub destination: &'a Destination,
    /// The body (SQS, SNS), the event's detail (EventBridge) or the record (Kinesis).
    pub body: &'a str,
    /// String attributes (SQS, SNS).
    pub attributes: &'a [(&'static str, String)],
    /// EventBridge's `detail-type`.
    pub detail_type: &'a str,
    /// A FIFO target's message group, a Kinesis record's partition key.
    pub group_id: &'a str,
    /// A FIFO target's deduplication id.
    pub deduplication_id: &'a str,
    /// EventBridge's `TraceHeader`.
    pub trace_header: Option<&'a str>,
}

/// What the service answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsReceipt {
    /// SQS's and SNS's message id, EventBridge's event id, Kinesis's shard id, Firehose's
    /// record id, a Step Functions execution's ARN, an S3 object's ETag.
    pub message_id: Option<String>,
    /// A FIFO queue's or topic's sequence number, a Kinesis record's.
    pub sequence_number: Option<String>,
}

/// Why a message was not accepted: the call that failed and the service's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSendError {
    pub stage: Stage,
    /// The service's error code (`AccessDenied`, `QueueDoesNotExist`...), when it answered.
    pub code: Option<String>,
    pub message: String,
    /// The HTTP status, when it answered.
    pub status: Option<u16>,
}

/// The CloudFormation template a tenant deploys in its account: a role that trusts the
/// platform's account only with the tenant's external id, allowed only the one send action
/// on the one target it is given (and the target's KMS key where it names one).
pub fn role_template(platform_account: &str, external_id: &str) -> String {
    format!(
        r#"AWSTemplateFormatVersion: "2010-09-09"
Description: A role Converger assumes to deliver into this account.
Parameters:
  TargetArn:
    Type: String
    Description: The ARN the channel sends to (its queue, event bus, stream, topic, delivery stream or state machine; for S3, arn:aws:s3:::<bucket>/<key prefix>*).
  SendAction:
    Type: String
    AllowedValues: [sqs:SendMessage, events:PutEvents, kinesis:PutRecord, sns:Publish, firehose:PutRecord, states:StartExecution, s3:PutObject]
  KmsKeyArn:
    Type: String
    Default: ""
    Description: The target's KMS key, if it is encrypted with a customer managed key.
Conditions:
  Encrypted: !Not [!Equals [!Ref KmsKeyArn, ""]]
Resources:
  ConvergerDeliveryRole:
    Type: AWS::IAM::Role
    Properties:
      MaxSessionDuration: 3600
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal:
              AWS: arn:aws:iam::{platform_account}:root
            Action: sts:AssumeRole
            Condition:
              StringEquals:
                sts:ExternalId: {external_id}
      Policies:
        - PolicyName: converger-send
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Effect: Allow
                Action: !Ref SendAction
                Resource: !Ref TargetArn
              - !If
                - Encrypted
                - Effect: Allow
                  Action: [kms:GenerateDataKey, kms:Decrypt]
                  Resource: !Ref KmsKeyArn
                - !Ref AWS::NoValue
Outputs:
  RoleArn:
    Description: The channel's role_arn.
    Value: !GetAtt ConvergerDeliveryRole.Arn
"#
    )
}

#[cfg(test)]
mod tests;
