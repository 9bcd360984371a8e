//! Sending into tenants' own AWS accounts: `sts:AssumeRole` on the channel's role with the
//! tenant's external id, then `SendMessage`, `PutEvents`, `PutRecord` or `Publish` with the
//! role's credentials. A role's session is kept (per process) until five minutes before it
//! expires and shared by every channel that names the role; concurrent sends for a role wait
//! for one `AssumeRole`, not one each. A refused `AssumeRole` is remembered for
//! [`FAILED_FOR`], so a tenant's broken role costs the platform one STS call a while, not one
//! per delivery; and a tenant keeps at most [`MAX_ROLES_PER_TENANT`] roles' sessions, so no
//! tenant's many roles push another's out. Before each new session the role is tried with an
//! external id that is no tenant's ([`converger_core::aws::PROBE_EXTERNAL_ID`]): a role that
//! admits it does not require the external id, any tenant could name it, and nothing is sent
//! as it (`ExternalIdNotRequired`, remembered like a refusal). A tenant's new sessions are
//! held to [`converger_core::aws::ASSUME_RATE`] per process, whatever roles it names: a tenant cycling through
//! roles pays a throttled attempt (retried), the platform's STS rate is not its to spend.

use async_trait::async_trait;
use aws_sdk_dynamodb::config::SharedInterceptor;
use aws_sdk_sts::config::http::HttpResponse;
use aws_sdk_sts::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use converger_core::aws::{AssumedRole, AwsMessage, AwsReceipt, AwsSendError, Service, Stage};
use converger_ports::TenantAws;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A session is renewed this long before it expires.
pub const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// How long a session is asked for (STS's default and a role's default maximum).
pub const SESSION_SECONDS: i32 = 3600;

/// Most roles whose sessions one process keeps; past it, expired ones are dropped first,
/// then the least recently used.
const MAX_ROLES: usize = 10_000;

/// Most roles one tenant (its external id) has sessions kept for; past it, its own least
/// recently used one is dropped.
pub const MAX_ROLES_PER_TENANT: usize = 100;

/// How long a refused `AssumeRole` is answered from memory.
pub const FAILED_FOR: Duration = Duration::from_secs(30);

#[derive(Clone)]
enum Client {
    Sqs(aws_sdk_sqs::Client),
    Events(aws_sdk_eventbridge::Client),
    Kinesis(aws_sdk_kinesis::Client),
    Sns(aws_sdk_sns::Client),
    Firehose(aws_sdk_firehose::Client),
    Sfn(aws_sdk_sfn::Client),
    S3(aws_sdk_s3::Client),
}

struct Session {
    credentials: aws_sdk_sts::config::Credentials,
    renew_at: SystemTime,
    clients: HashMap<(String, Service), Client>,
}

/// A role's session, or why it could not be had and until when that is the answer.
#[derive(Default)]
struct RoleState {
    session: Option<Session>,
    failed: Option<(SystemTime, AwsSendError)>,
}

type Slot = Arc<tokio::sync::Mutex<RoleState>>;

/// A kept slot and when it was last asked for.
struct Kept {
    slot: Slot,
    used: std::time::Instant,
}

/// The AWS backend of [`TenantAws`].
pub struct StsTenantAws {
    config: aws_config::SdkConfig,
    sts: aws_sdk_sts::Client,
    /// Interceptors of the clients that send with a tenant's credentials (the request
    /// counter; not the local stack's IAM check of the platform's own policy).
    send_interceptors: Vec<SharedInterceptor>,
    /// By (role, external id): the external id is the tenant's.
    sessions: Mutex<HashMap<(String, String), Kept>>,
    /// Whether a role is tried with a wrong external id before a session is taken (off only
    /// on an emulator that does not evaluate trust policies).
    check_external_id: bool,
    /// Each tenant's `ASSUME_RATE` schedule (its theoretical arrival time, µs), kept as long
    /// as a schedule can run ahead of now.
    budgets: converger_core::cache::TtlCache<String, i64>,
}

impl StsTenantAws {
    /// `interceptors` go on the STS client (the platform's own calls); `send_interceptors`
    /// on the clients that send as a tenant's role.
    pub fn new(
        config: &aws_config::SdkConfig,
        interceptors: &[SharedInterceptor],
        send_interceptors: &[SharedInterceptor],
    ) -> Self {
        let mut conf = aws_sdk_sts::config::Builder::from(config);
        for i in interceptors {
            conf.push_interceptor(i.clone());
        }
        Self {
            config: config.clone(),
            sts: aws_sdk_sts::Client::from_conf(conf.build()),
            send_interceptors: send_interceptors.to_vec(),
            sessions: Mutex::new(HashMap::new()),
            check_external_id: true,
            budgets: converger_core::cache::TtlCache::new(Duration::from_millis(
                converger_core::aws::ASSUME_RATE.per_ms,
            )),
        }
    }

    /// Spends one of the tenant's new sessions, or says when the next may be taken.
    fn spend_assumption(&self, external_id: &str) -> Result<(), AwsSendError> {
        let now_us = converger_core::time::now_ms() * 1000;
        let key = external_id.to_owned();
        let next = converger_core::aws::ASSUME_RATE
            .decide(self.budgets.get(&key), now_us)
            .map_err(|at_us| converger_core::aws::assume_rate_spent(at_us, now_us))?;
        self.budgets.insert(key, next);
        Ok(())
    }

    /// Whether roles are tried with a wrong external id first (`ROLE_EXTERNAL_ID_CHECK`).
    pub fn with_external_id_check(mut self, on: bool) -> Self {
        self.check_external_id = on;
        self
    }

    /// A role's session, once the role has shown that it requires the tenant's external id:
    /// refused with a wrong one.
    async fn checked_session(&self, role: &AssumedRole<'_>) -> Result<Session, AwsSendError> {
        if self.check_external_id {
            let probe = AssumedRole {
                external_id: converger_core::aws::PROBE_EXTERNAL_ID,
                ..*role
            };
            match self.assume(&probe).await {
                Ok(_) => {
                    return Err(converger_core::aws::external_id_not_required(role.role_arn));
                }
                // Refused (as it should be), or the role is not there: the tenant's own
                // assumption gives the answer. STS failing or not answering: tried again.
                Err(e) if sts_failed(&e) => return Err(e),
                Err(_) => {}
            }
        }
        self.assume(role).await
    }

    fn slot(&self, role: &AssumedRole<'_>) -> Slot {
        let key = (role.role_arn.to_owned(), role.external_id.to_owned());
        let Ok(mut map) = self.sessions.lock() else {
            return Arc::default();
        };
        let now = std::time::Instant::now();
        if let Some(k) = map.get_mut(&key) {
            k.used = now;
            return k.slot.clone();
        }
        // The tenant's own least recently used role makes room for its new one.
        let own: Vec<(&(String, String), std::time::Instant)> = map
            .iter()
            .filter(|((_, ext), _)| ext == role.external_id)
            .map(|(k, v)| (k, v.used))
            .collect();
        if own.len() >= MAX_ROLES_PER_TENANT
            && let Some(oldest) = own
                .iter()
                .min_by_key(|(_, used)| *used)
                .map(|(k, _)| (*k).clone())
        {
            map.remove(&oldest);
        }
        if map.len() >= MAX_ROLES {
            let wall = SystemTime::now();
            map.retain(|_, k| {
                k.slot.try_lock().map_or(true, |s| {
                    s.session.as_ref().is_some_and(|s| s.renew_at > wall)
                })
            });
            while map.len() >= MAX_ROLES {
                let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, k)| k.used)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                map.remove(&oldest);
            }
        }
        let slot = Slot::default();
        map.insert(
            key,
            Kept {
                slot: slot.clone(),
                used: now,
            },
        );
        slot
    }

    async fn assume(&self, role: &AssumedRole<'_>) -> Result<Session, AwsSendError> {
        let out = self
            .sts
            .assume_role()
            .role_arn(role.role_arn)
            .role_session_name(role.session_name)
            .external_id(role.external_id)
            .duration_seconds(SESSION_SECONDS)
            .send()
            .await
            .map_err(|e| failure(Stage::AssumeRole, &e))?;
        let c = out.credentials.ok_or_else(|| AwsSendError {
            stage: Stage::AssumeRole,
            code: None,
            message: "the answer has no credentials".into(),
            status: None,
        })?;
        let expires = SystemTime::try_from(c.expiration)
            .unwrap_or_else(|_| SystemTime::now() + Duration::from_secs(900));
        Ok(Session {
            credentials: aws_sdk_sts::config::Credentials::new(
                c.access_key_id,
                c.secret_access_key,
                Some(c.session_token),
                Some(expires),
                "converger-tenant-role",
            ),
            renew_at: expires
                .checked_sub(RENEW_BEFORE)
                .unwrap_or_else(SystemTime::now),
            clients: HashMap::new(),
        })
    }

    fn client(&self, session: &mut Session, service: Service, region: &str) -> Client {
        let key = (region.to_owned(), service);
        if let Some(c) = session.clients.get(&key) {
            return c.clone();
        }
        let region = aws_config::Region::new(region.to_owned());
        let creds = session.credentials.clone();
        macro_rules! build {
            ($sdk:ident, $variant:ident) => {
                build!($sdk, $variant, |b| b)
            };
            ($sdk:ident, $variant:ident, $tweak:expr) => {{
                let b = $sdk::config::Builder::from(&self.config)
                    .region(region)
                    .credentials_provider(creds);
                let mut b = $tweak(b);
                for i in &self.send_interceptors {
                    b.push_interceptor(i.clone());
                }
                Client::$variant($sdk::Client::from_conf(b.build()))
            }};
        }
        let client = match service {
            Service::Sqs => build!(aws_sdk_sqs, Sqs),
            Service::EventBridge => build!(aws_sdk_eventbridge, Events),
            Service::Kinesis => build!(aws_sdk_kinesis, Kinesis),
            Service::Sns => build!(aws_sdk_sns, Sns),
            Service::Firehose => build!(aws_sdk_firehose, Firehose),
            Service::StepFunctions => build!(aws_sdk_sfn, Sfn),
            // An endpoint of its own (the local emulator) takes the bucket in the path; AWS's
            // own, in the host name.
            Service::S3 => build!(aws_sdk_s3, S3, |b: aws_sdk_s3::config::Builder| b
                .force_path_style(self.config.endpoint_url().is_some())),
        };
        session.clients.insert(key, client.clone());
        client
    }
}

/// Whether an `AssumeRole` failed for STS's own reasons (throttled, down, no answer), not
/// for the role's.
fn sts_failed(e: &AwsSendError) -> bool {
    converger_core::aws::classify(
        Service::Sqs,
        Stage::AssumeRole,
        e.code.as_deref(),
        &e.message,
        e.status,
    )
    .retryable
}

/// A failed call as the port reports it: the service's code and message, and its status.
fn failure<E>(stage: Stage, e: &SdkError<E, HttpResponse>) -> AwsSendError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    match e.as_service_error() {
        Some(se) => AwsSendError {
            stage,
            code: se.code().map(str::to_owned),
            message: se.message().unwrap_or_default().to_owned(),
            status,
        },
        None => AwsSendError {
            stage,
            code: None,
            message: DisplayErrorContext(e).to_string(),
            status,
        },
    }
}

fn missing(what: &str) -> AwsSendError {
    AwsSendError {
        stage: Stage::Send,
        code: Some("InvalidParameterValue".into()),
        message: format!("the message could not be built: {what}"),
        status: None,
    }
}

async fn send_with(client: Client, m: &AwsMessage<'_>) -> Result<AwsReceipt, AwsSendError> {
    let d = m.destination;
    match client {
        Client::Sqs(c) => {
            let mut req = c.send_message().queue_url(&d.target).message_body(m.body);
            for (name, value) in m.attributes {
                let v = aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value)
                    .build()
                    .map_err(|e| missing(&e.to_string()))?;
                req = req.message_attributes(*name, v);
            }
            if d.fifo {
                req = req
                    .message_group_id(m.group_id)
                    .message_deduplication_id(m.deduplication_id);
            }
            let out = req.send().await.map_err(|e| failure(Stage::Send, &e))?;
            Ok(AwsReceipt {
                message_id: out.message_id,
                sequence_number: out.sequence_number,
            })
        }
        Client::Sns(c) => {
            let mut req = c.publish().topic_arn(&d.target).message(m.body);
            for (name, value) in m.attributes {
                let v = aws_sdk_sns::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value)
                    .build()
                    .map_err(|e| missing(&e.to_string()))?;
                req = req.message_attributes(*name, v);
            }
            if d.fifo {
                req = req
                    .message_group_id(m.group_id)
                    .message_deduplication_id(m.deduplication_id);
            }
            let out = req.send().await.map_err(|e| failure(Stage::Send, &e))?;
            Ok(AwsReceipt {
                message_id: out.message_id,
                sequence_number: out.sequence_number,
            })
        }
        Client::Events(c) => {
            let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                .event_bus_name(&d.target)
                .source(converger_core::aws::EVENT_SOURCE)
                .detail_type(m.detail_type)
                .detail(m.body)
                .set_trace_header(m.trace_header.map(str::to_owned))
                .build();
            let out = c
                .put_events()
                .entries(entry)
                .send()
                .await
                .map_err(|e| failure(Stage::Send, &e))?;
            // PutEvents answers 200 with the entry's own failure inside.
            let first = out.entries.unwrap_or_default().into_iter().next();
            match first {
                Some(e) if e.error_code.is_some() => Err(AwsSendError {
                    stage: Stage::Send,
                    code: e.error_code,
                    message: e.error_message.unwrap_or_default(),
                    status: None,
                }),
                Some(e) => Ok(AwsReceipt {
                    message_id: e.event_id,
                    sequence_number: None,
                }),
                None => Err(AwsSendError {
                    stage: Stage::Send,
                    code: None,
                    message: "the answer has no entry".into(),
                    status: None,
                }),
            }
        }
        Client::Firehose(c) => {
            let record = aws_sdk_firehose::types::Record::builder()
                .data(aws_smithy_types::Blob::new(m.body.as_bytes()))
                .build()
                .map_err(|e| missing(&e.to_string()))?;
            let out = c
                .put_record()
                .delivery_stream_name(d.name())
                .record(record)
                .send()
                .await
                .map_err(|e| failure(Stage::Send, &e))?;
            Ok(AwsReceipt {
                message_id: Some(out.record_id),
                sequence_number: None,
            })
        }
        Client::Sfn(c) => {
            let started = c
                .start_execution()
                .state_machine_arn(&d.target)
                // The delivery's own name: a start repeated after a crash is refused.
                .name(m.deduplication_id)
                .input(m.body)
                .send()
                .await;
            match started {
                Ok(out) => Ok(AwsReceipt {
                    message_id: Some(out.execution_arn),
                    sequence_number: None,
                }),
                // Started by an earlier attempt whose answer was lost: it is there.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|se| se.is_execution_already_exists()) =>
                {
                    Ok(AwsReceipt {
                        message_id: Some(format!("{} (started before)", m.deduplication_id)),
                        sequence_number: None,
                    })
                }
                Err(e) => Err(failure(Stage::Send, &e)),
            }
        }
        Client::S3(c) => {
            let mut req = c
                .put_object()
                .bucket(&d.target)
                .key(converger_core::aws::object_key(
                    &d.key_prefix,
                    m.deduplication_id,
                ))
                .content_type("application/json")
                .body(aws_sdk_s3::primitives::ByteStream::from(
                    m.body.as_bytes().to_vec(),
                ));
            for (name, value) in m.attributes {
                req = req.metadata(*name, value);
            }
            let out = req.send().await.map_err(|e| failure(Stage::Send, &e))?;
            Ok(AwsReceipt {
                message_id: out.e_tag,
                sequence_number: None,
            })
        }
        Client::Kinesis(c) => {
            let out = c
                .put_record()
                .stream_arn(&d.target)
                .partition_key(m.group_id)
                .data(aws_smithy_types::Blob::new(m.body.as_bytes()))
                .send()
                .await
                .map_err(|e| failure(Stage::Send, &e))?;
            Ok(AwsReceipt {
                message_id: Some(out.shard_id),
                sequence_number: Some(out.sequence_number),
            })
        }
    }
}

#[async_trait]
impl TenantAws for StsTenantAws {
    async fn send(
        &self,
        role: AssumedRole<'_>,
        message: &AwsMessage<'_>,
    ) -> Result<AwsReceipt, AwsSendError> {
        let slot = self.slot(&role);
        let client = {
            let mut state = slot.lock().await;
            let now = SystemTime::now();
            if let Some((until, e)) = &state.failed
                && *until > now
            {
                return Err(e.clone());
            }
            if state.session.as_ref().is_none_or(|s| s.renew_at <= now) {
                self.spend_assumption(role.external_id)?;
                match self.checked_session(&role).await {
                    Ok(s) => {
                        state.session = Some(s);
                        state.failed = None;
                    }
                    Err(e) => {
                        state.session = None;
                        // A refusal (the role's trust, a missing role) is the answer for a
                        // while; a failure that is retried (STS throttled or down, no
                        // answer) is not remembered.
                        if !sts_failed(&e) {
                            state.failed = Some((now + FAILED_FOR, e.clone()));
                        }
                        return Err(e);
                    }
                }
            }
            let Some(s) = state.session.as_mut() else {
                return Err(missing("no session"));
            };
            let d = message.destination;
            self.client(s, d.service, &d.region)
        };
        let out = send_with(client, message).await;
        if let Err(e) = &out
            && matches!(
                e.code.as_deref(),
                Some("ExpiredToken" | "ExpiredTokenException" | "RequestExpired")
            )
        {
            // The session ended early (revoked): the retry takes a new one.
            slot.lock().await.session = None;
        }
        out
    }
}

#[cfg(test)]
mod tests;
