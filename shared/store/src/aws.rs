//! Shared AWS SDK configuration: built once per process, honours `AWS_ENDPOINT_URL`, and puts
//! a timeout on every call.

use aws_config::BehaviorVersion;
use aws_config::timeout::TimeoutConfig;
pub use aws_sdk_dynamodb::config::SharedInterceptor;
use std::time::Duration;

/// A failed AWS request as a [`converger_ports::StoreError`] that keeps the SDK's error as
/// its source (every SDK's `SdkError` is the same type).
pub(crate) fn sdk_err<E, R>(
    e: aws_sdk_dynamodb::error::SdkError<E, R>,
) -> converger_ports::StoreError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    converger_ports::StoreError::Service {
        message: aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string(),
        source: Box::new(e),
    }
}

/// Loads the SDK configuration from the environment with Converger's timeouts.
pub async fn load_config() -> aws_config::SdkConfig {
    load_config_for(None).await
}

/// Like [`load_config`], pointed at an emulator when `endpoint` is given. An emulator gets
/// a default region and dummy credentials unless the environment sets them.
pub async fn load_config_for(endpoint: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    let endpoint = endpoint
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    if let Some(ep) = endpoint {
        loader = loader.endpoint_url(ep);
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            loader = loader.region(aws_config::Region::new("us-east-1"));
        }
        if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "emulator",
            ));
        }
    }
    loader
        // Throttling and transient server errors are retried with backoff, five tries in all.
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(5))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(10))
                .operation_timeout(Duration::from_secs(30))
                .build(),
        )
        .load()
        .await
}

/// The clients every function needs, built once.
#[derive(Clone, Debug)]
pub struct Clients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub eventbridge: aws_sdk_eventbridge::Client,
    /// The configuration they were built from (for clients built later, such as the
    /// WebSocket management API's, whose endpoint is the API's own).
    pub config: aws_config::SdkConfig,
    /// The WebSocket API's management endpoint (`WEBSOCKET_MANAGEMENT_URL`), if any.
    pub websocket_management_url: Option<String>,
    /// The SES configuration set email is sent with (`EMAIL_CONFIGURATION_SET`), set for
    /// the functions that send email.
    pub email_configuration_set: Option<String>,
    /// The payload bucket (`PAYLOADS_BUCKET`), where the deployment has one.
    pub payloads_bucket: Option<String>,
    /// Interceptors that clients built later (the management API's, SES's) get too.
    pub interceptors: Vec<SharedInterceptor>,
    /// Interceptors of the clients that send as a tenant's role (`tenant_aws`): those
    /// requests are authorized by the tenant's policies, not the function's.
    pub tenant_interceptors: Vec<SharedInterceptor>,
    /// Whether a tenant's role is tried with a wrong external id before a session is taken
    /// (`ROLE_EXTERNAL_ID_CHECK`, on unless set `false`).
    pub role_external_id_check: bool,
    /// The secret of the channel key (`CHANNEL_KEY_SECRET_ARN`), set for the functions that
    /// seal or open client certificates.
    pub channel_key_secret_arn: Option<String>,
}

fn channel_key_secret_arn() -> Option<String> {
    converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .text(&converger_core::settings::CHANNEL_KEY_SECRET_ARN)
}

fn role_external_id_check() -> bool {
    converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .flag(&converger_core::settings::ROLE_EXTERNAL_ID_CHECK)
        .ok()
        .flatten()
        .unwrap_or(true)
}

fn payloads_bucket() -> Option<String> {
    converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .text(&converger_core::settings::PAYLOADS_BUCKET)
}

fn email_configuration_set() -> Option<String> {
    converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .text(&converger_core::settings::EMAIL_CONFIGURATION_SET)
}

fn management_url() -> Option<String> {
    converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .text(&converger_core::settings::WEBSOCKET_MANAGEMENT_URL)
}

impl Clients {
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            eventbridge: aws_sdk_eventbridge::Client::new(config),
            config: config.clone(),
            websocket_management_url: management_url(),
            email_configuration_set: email_configuration_set(),
            payloads_bucket: payloads_bucket(),
            interceptors: Vec::new(),
            tenant_interceptors: Vec::new(),
            role_external_id_check: role_external_id_check(),
            channel_key_secret_arn: channel_key_secret_arn(),
        }
    }

    /// Clients whose every request is counted by `counter` (the `requests` benchmark).
    pub fn counted(
        config: &aws_config::SdkConfig,
        counter: &crate::counter::RequestCounter,
    ) -> Self {
        Self::intercepted(config, vec![SharedInterceptor::new(counter.clone())])
    }

    /// Clients whose every request passes `interceptors` first (the request counter; the
    /// local stack's check of each request against the calling function's IAM policy).
    pub fn intercepted(
        config: &aws_config::SdkConfig,
        interceptors: Vec<SharedInterceptor>,
    ) -> Self {
        let with = |mut b: aws_sdk_dynamodb::config::Builder| {
            for i in &interceptors {
                b.push_interceptor(i.clone());
            }
            b.build()
        };
        let with_sqs = |mut b: aws_sdk_sqs::config::Builder| {
            for i in &interceptors {
                b.push_interceptor(i.clone());
            }
            b.build()
        };
        let with_eb = |mut b: aws_sdk_eventbridge::config::Builder| {
            for i in &interceptors {
                b.push_interceptor(i.clone());
            }
            b.build()
        };
        Self {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(with(
                aws_sdk_dynamodb::config::Builder::from(config),
            )),
            sqs: aws_sdk_sqs::Client::from_conf(with_sqs(aws_sdk_sqs::config::Builder::from(
                config,
            ))),
            eventbridge: aws_sdk_eventbridge::Client::from_conf(with_eb(
                aws_sdk_eventbridge::config::Builder::from(config),
            )),
            config: config.clone(),
            websocket_management_url: management_url(),
            email_configuration_set: email_configuration_set(),
            payloads_bucket: payloads_bucket(),
            tenant_interceptors: interceptors.clone(),
            interceptors,
            role_external_id_check: role_external_id_check(),
            channel_key_secret_arn: channel_key_secret_arn(),
        }
    }

    pub async fn from_env() -> Self {
        Self::new(&load_config().await)
    }
}
