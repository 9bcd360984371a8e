//! Sending into tenants' own AWS accounts: `sts:AssumeRole` on the channel's role with the
//! tenant's external id, then `SendMessage`, `PutEvents`, `PutRecord` or `Publish` with the
//! role's credentials. A role's session is kept (per process) until five minutes before it
//! expires and shared by every channel that names the role; concurrent sends for a role wait
//! for one `AssumeRole`, not one each.

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
/// then the map is cleared.
const MAX_ROLES: usize = 10_000;

#[derive(Clone)]
enum Client {
    Sqs(aws_sdk_sqs::Client),
    Events(aws_sdk_eventbridge::Client),
    Kinesis(aws_sdk_kinesis::Client),
    Sns(aws_sdk_sns::Client),
}

struct Session {
    credentials: aws_sdk_sts::config::Credentials,
    renew_at: SystemTime,
    clients: HashMap<(String, Service), Client>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Session>>>;

/// The AWS backend of [`TenantAws`].
pub struct StsTenantAws {
    config: aws_config::SdkConfig,
    sts: aws_sdk_sts::Client,
    /// Interceptors of the clients that send with a tenant's credentials (the request
    /// counter; not the local stack's IAM check of the platform's own policy).
    send_interceptors: Vec<SharedInterceptor>,
    sessions: Mutex<HashMap<(String, String), Slot>>,
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
        }
    }

    fn slot(&self, role: &AssumedRole<'_>) -> Slot {
        let key = (role.role_arn.to_owned(), role.external_id.to_owned());
        let Ok(mut map) = self.sessions.lock() else {
            return Arc::new(tokio::sync::Mutex::new(None));
        };
        if map.len() >= MAX_ROLES && !map.contains_key(&key) {
            let now = SystemTime::now();
            map.retain(|_, s| {
                s.try_lock()
                    .map_or(true, |s| s.as_ref().is_some_and(|s| s.renew_at > now))
            });
            if map.len() >= MAX_ROLES {
                map.clear();
            }
        }
        map.entry(key).or_default().clone()
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
            ($sdk:ident, $variant:ident) => {{
                let mut b = $sdk::config::Builder::from(&self.config)
                    .region(region)
                    .credentials_provider(creds);
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
        };
        session.clients.insert(key, client.clone());
        client
    }
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
            let mut session = slot.lock().await;
            if session
                .as_ref()
                .is_none_or(|s| s.renew_at <= SystemTime::now())
            {
                *session = Some(self.assume(&role).await?);
            }
            let Some(s) = session.as_mut() else {
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
            *slot.lock().await = None;
        }
        out
    }
}
