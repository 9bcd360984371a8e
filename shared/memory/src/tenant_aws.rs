//! Tenants' AWS accounts in process: roles that trust the platform with one external id,
//! and queues, buses, streams and topics that keep what they receive. The AWS backend's
//! rules are modelled: a role is assumed once and its session reused; a wrong external id is
//! refused; a missing target answers the service's own error code; a FIFO target drops a
//! message whose deduplication id it has seen.

use async_trait::async_trait;
use converger_core::aws::{AssumedRole, AwsMessage, AwsReceipt, AwsSendError, Service, Stage};
use converger_ports::TenantAws;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// One message a target received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub body: String,
    pub attributes: Vec<(String, String)>,
    /// EventBridge's detail-type.
    pub detail_type: Option<String>,
    /// A FIFO target's group, a Kinesis record's partition key.
    pub group_id: Option<String>,
    pub deduplication_id: Option<String>,
    /// The role whose session sent it.
    pub role_arn: String,
}

#[derive(Default)]
struct Target {
    received: Vec<Received>,
    /// A FIFO target's deduplication ids, with the answer each first got.
    seen: HashMap<String, AwsReceipt>,
    /// Failures to answer before the next sends succeed: (code, status).
    fail: Vec<(String, u16)>,
}

#[derive(Default)]
struct State {
    /// Role ARN -> the external id its trust policy requires (`None`: any, the condition
    /// left out).
    roles: HashMap<String, Option<String>>,
    /// Queue URL or ARN -> what it holds.
    targets: HashMap<String, Target>,
    sessions: HashSet<(String, String)>,
    assumed: u64,
}

/// The in-process backend of [`TenantAws`].
#[derive(Default)]
pub struct MemTenantAws {
    state: Mutex<State>,
}

impl MemTenantAws {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Option<T> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }

    /// A role in a tenant's account that trusts the platform with `external_id`.
    pub fn add_role(&self, role_arn: &str, external_id: &str) {
        self.with(|s| {
            s.roles
                .insert(role_arn.to_owned(), Some(external_id.to_owned()))
        });
    }

    /// A role that trusts the platform's account with any external id (its trust policy
    /// without the `sts:ExternalId` condition): the platform refuses to send as it.
    pub fn add_role_without_external_id(&self, role_arn: &str) {
        self.with(|s| s.roles.insert(role_arn.to_owned(), None));
    }

    /// A queue (by URL), bus, stream or topic (by ARN).
    pub fn add_target(&self, target: &str) {
        self.with(|s| {
            s.targets.entry(target.to_owned()).or_default();
        });
    }

    /// The next `n` sends to `target` fail with `code` and `status`.
    pub fn fail_next(&self, target: &str, code: &str, status: u16, n: usize) {
        self.with(|s| {
            let t = s.targets.entry(target.to_owned()).or_default();
            t.fail.extend((0..n).map(|_| (code.to_owned(), status)));
        });
    }

    /// What `target` received, in order.
    pub fn received(&self, target: &str) -> Vec<Received> {
        self.with(|s| {
            s.targets
                .get(target)
                .map(|t| t.received.clone())
                .unwrap_or_default()
        })
        .unwrap_or_default()
    }

    /// How many times a role was assumed.
    pub fn assumed(&self) -> u64 {
        self.with(|s| s.assumed).unwrap_or(0)
    }

    /// Ends every session (as their expiry would): the next sends assume again.
    pub fn expire_sessions(&self) {
        self.with(|s| s.sessions.clear());
    }
}

fn not_found(service: Service) -> (&'static str, u16) {
    match service {
        Service::Sqs => ("AWS.SimpleQueueService.NonExistentQueue", 400),
        Service::EventBridge | Service::Kinesis => ("ResourceNotFoundException", 400),
        Service::Sns => ("NotFound", 404),
        Service::Firehose => ("ResourceNotFoundException", 400),
        Service::StepFunctions => ("StateMachineDoesNotExist", 400),
        Service::S3 => ("NoSuchBucket", 404),
    }
}

#[async_trait]
impl TenantAws for MemTenantAws {
    async fn send(
        &self,
        role: AssumedRole<'_>,
        message: &AwsMessage<'_>,
    ) -> Result<AwsReceipt, AwsSendError> {
        let d = message.destination;
        let unavailable = || AwsSendError {
            stage: Stage::Send,
            code: None,
            message: "the in-process accounts are unavailable".into(),
            status: None,
        };
        self.with(|s| {
            let key = (role.role_arn.to_owned(), role.external_id.to_owned());
            if !s.sessions.contains(&key) {
                // As the platform checks a role before its session: a wrong id admitted is
                // a role any tenant could name.
                if let Some(None) = s.roles.get(role.role_arn) {
                    return Err(converger_core::aws::external_id_not_required(role.role_arn));
                }
                if s.roles.get(role.role_arn).and_then(Option::as_deref) != Some(role.external_id) {
                    return Err(AwsSendError {
                        stage: Stage::AssumeRole,
                        code: Some("AccessDenied".into()),
                        message: format!(
                            "not authorized to perform sts:AssumeRole on {}",
                            role.role_arn
                        ),
                        status: Some(403),
                    });
                }
                s.assumed += 1;
                s.sessions.insert(key);
            }
            let Some(t) = s.targets.get_mut(&d.target) else {
                let (code, status) = not_found(d.service);
                return Err(AwsSendError {
                    stage: Stage::Send,
                    code: Some(code.into()),
                    message: format!("{} does not exist", d.target),
                    status: Some(status),
                });
            };
            if !t.fail.is_empty() {
                let (code, status) = t.fail.remove(0);
                return Err(AwsSendError {
                    stage: Stage::Send,
                    code: Some(code),
                    message: "failed as the test asked".into(),
                    status: Some(status),
                });
            }
            let n = t.received.len() + 1;
            let fifo = d.fifo;
            if fifo && let Some(first) = t.seen.get(message.deduplication_id) {
                // As SQS answers a duplicate: accepted, with the first send's answer.
                return Ok(first.clone());
            }
            let kinesis = d.service == Service::Kinesis;
            t.received.push(Received {
                body: message.body.to_owned(),
                attributes: match d.service {
                    Service::Sqs | Service::Sns => message
                        .attributes
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.clone()))
                        .collect(),
                    _ => Vec::new(),
                },
                detail_type: (d.service == Service::EventBridge)
                    .then(|| message.detail_type.to_owned()),
                group_id: (fifo || kinesis).then(|| message.group_id.to_owned()),
                deduplication_id: fifo.then(|| message.deduplication_id.to_owned()),
                role_arn: role.role_arn.to_owned(),
            });
            let receipt = AwsReceipt {
                message_id: Some(format!("mem-{n}")),
                sequence_number: (fifo || kinesis).then(|| n.to_string()),
            };
            if fifo {
                t.seen
                    .insert(message.deduplication_id.to_owned(), receipt.clone());
            }
            Ok(receipt)
        })
        .unwrap_or_else(|| Err(unavailable()))
    }
}
