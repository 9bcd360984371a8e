//! Builds the pipeline on the AWS backend from the environment: once per process.

use converger_adapters::Adapters;
use converger_pipeline::{Pipeline, PipelineConfig};
use converger_store::aws::Clients;
use converger_store::dynamo::DynamoStore;
use converger_store::events::EventBridgeEvents;
use converger_store::sqs::SqsQueue;
use converger_store::{ApiGatewaySockets, Resources, SesMailer};
use std::sync::Arc;
use tracing_subscriber::filter::{LevelFilter, Targets};

/// Why a function could not start: each keeps what it came from.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Setting(#[from] converger_core::settings::SettingError),
    #[error(transparent)]
    Resources(#[from] converger_store::resources::ResourceError),
    #[error(transparent)]
    Queue(#[from] converger_ports::QueueError),
    #[error("the HTTP client: {0}")]
    Http(#[from] converger_adapters::HttpClientError),
    #[error(transparent)]
    Secret(#[from] converger_store::secrets::SecretError),
    #[error(transparent)]
    ShortSecret(#[from] converger_core::secret::ShortSecret),
    #[error("the channel key: {0}")]
    ChannelKey(converger_core::Invalid),
}

pub async fn aws_pipeline(
    clients: &Clients,
    res: &Resources,
    config: PipelineConfig,
) -> Result<Pipeline, BootError> {
    let ports = aws_ports(clients, res, &config)?;
    let adapters = Adapters::standard_keyed(config.allowlist.clone(), channel_key(clients).await?)?;
    let pipeline = Pipeline::new(ports.store, ports.queue, ports.events, adapters, config);
    // Payloads over a row's share go to the payload bucket, where the template gives one.
    Ok(match &clients.payloads_bucket {
        Some(bucket) => pipeline.with_payloads(Arc::new(converger_store::S3Payloads::new(
            &clients.config,
            &clients.interceptors,
            bucket.clone(),
        ))),
        None => pipeline,
    })
}

/// The deployment's channel key, read once at init from Secrets Manager (the template
/// passes its ARN to the functions that seal or open client certificates), through the
/// clients' interceptors, or, for a process run by hand, its variable; `None` where neither
/// is set.
pub async fn channel_key(
    clients: &Clients,
) -> Result<Option<converger_core::mtls::ChannelKey>, BootError> {
    let text = match &clients.channel_key_secret_arn {
        Some(arn) => Some(
            converger_store::secrets::secret_value(&clients.config, &clients.interceptors, arn)
                .await?,
        ),
        None => converger_core::settings::Env::new(|k| std::env::var(k).ok())
            .text(&converger_core::settings::CHANNEL_KEY),
    };
    text.map(|t| converger_core::mtls::ChannelKey::derive(&t))
        .transpose()
        .map_err(BootError::ChannelKey)
}

/// The AWS ports a pipeline is built on.
pub struct AwsPorts {
    pub store: Arc<dyn converger_ports::Store>,
    pub queue: Arc<dyn converger_ports::Queue>,
    pub events: Arc<dyn converger_ports::Events>,
}

/// The store (DynamoDB), the queues (SQS) and the bus (EventBridge) on `clients`.
pub fn aws_ports(
    clients: &Clients,
    res: &Resources,
    config: &PipelineConfig,
) -> Result<AwsPorts, BootError> {
    Ok(AwsPorts {
        store: Arc::new(
            DynamoStore::new(clients.dynamodb.clone(), res.clone())
                .with_serial_transactions(config.serial_transactions),
        ),
        queue: Arc::new(SqsQueue::new(clients.sqs.clone(), res)?),
        events: Arc::new(EventBridgeEvents::new(
            clients.eventbridge.clone(),
            res.bus.clone(),
        )),
    })
}

/// Lets the pipeline push to websocket clients through the WebSocket API's management
/// endpoint, when there is one. Only the functions that run attempts or answer sockets
/// (deliver, probe, websocket) call it, so the others do not carry its client.
pub fn with_websockets(pipeline: Pipeline, clients: &Clients) -> Pipeline {
    match &clients.websocket_management_url {
        Some(url) => pipeline.with_sockets(Arc::new(ApiGatewaySockets::new(
            &clients.config,
            url,
            &clients.interceptors,
        ))),
        None => pipeline,
    }
}

/// Lets the pipeline send email through SES with the stack's configuration set, when the
/// function's environment names one (deliver and probe, which run attempts, and websocket,
/// whose replays and acknowledgements go through the same pipeline).
pub fn with_email(pipeline: Pipeline, clients: &Clients) -> Pipeline {
    match &clients.email_configuration_set {
        Some(set) => pipeline.with_mailer(Arc::new(SesMailer::new(
            &clients.config,
            &clients.interceptors,
            Some(set.clone()),
        ))),
        None => pipeline,
    }
}

/// Lets the pipeline send into tenants' own AWS accounts (the AWS channel types) as their
/// roles, assumed with STS (the functions that run attempts: deliver and probe).
pub fn with_tenant_aws(pipeline: Pipeline, clients: &Clients) -> Pipeline {
    pipeline.with_tenant_aws(Arc::new(
        converger_store::StsTenantAws::new(
            &clients.config,
            &clients.interceptors,
            &clients.tenant_interceptors,
        )
        .with_external_id_check(clients.role_external_id_check),
    ))
}

/// Exports attempts' spans to the collector `endpoint` names (`SPAN_EXPORT_ENDPOINT`), when
/// it names one: the functions that run attempts (deliver and probe). An endpoint the
/// exporter cannot use is logged and the function runs without export: an optional trace
/// setting never stops deliveries.
pub fn with_spans(pipeline: Pipeline, endpoint: Option<&str>, service: &str) -> Pipeline {
    match endpoint.filter(|e| !e.trim().is_empty()) {
        Some(url) => match converger_store::OtlpSpans::new(url, service) {
            Ok(spans) => pipeline.with_spans(Arc::new(spans)),
            Err(e) => {
                tracing::error!(error = %e, "attempts' spans are not exported");
                pipeline
            }
        },
        None => pipeline,
    }
}

/// The pipeline a Lambda function uses: names and settings from its environment.
pub async fn from_env() -> Result<Pipeline, BootError> {
    let config = PipelineConfig::from_env()?;
    let clients = Clients::from_env().await;
    let res = Resources::from_env()?;
    aws_pipeline(&clients, &res, config).await
}

/// [`from_env`] with websocket pushes ([`with_websockets`]), email ([`with_email`]) and sends
/// into tenants' accounts ([`with_tenant_aws`]).
pub async fn from_env_with_websockets() -> Result<Pipeline, BootError> {
    let config = PipelineConfig::from_env()?;
    let clients = Clients::from_env().await;
    let res = Resources::from_env()?;
    let pipeline = aws_pipeline(&clients, &res, config).await?;
    let pipeline = with_tenant_aws(pipeline, &clients);
    let endpoint = converger_core::settings::Env::new(|k| std::env::var(k).ok())
        .text(&converger_core::settings::SPAN_EXPORT_ENDPOINT);
    let service = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "converger".into());
    let pipeline = with_spans(pipeline, endpoint.as_deref(), &service);
    Ok(with_email(with_websockets(pipeline, &clients), &clients))
}

/// The admin function's secrets, read once at init: the admin token and the session key, each
/// from Secrets Manager (the template passes their ARNs) or, for a process run by hand, its
/// variable. Either one set but too short stops the start with an error naming it
/// (`core::secret`); unset, the admin API is disabled or sessions end with the process.
pub async fn admin_secrets() -> Result<(Option<String>, Option<String>), BootError> {
    use converger_core::{secret, settings};
    use converger_store::secrets::secret_or_env;
    let sdk = converger_store::aws::load_config().await;
    let token = secret_or_env(
        &sdk,
        settings::ADMIN_TOKEN_SECRET_ARN.name,
        settings::ADMIN_TOKEN.name,
    )
    .await?;
    let session = secret_or_env(
        &sdk,
        settings::SESSION_SECRET_ARN.name,
        settings::SESSION_SECRET.name,
    )
    .await?;
    Ok((
        secret::admin_token(token)?,
        secret::session_secret(session)?,
    ))
}

/// JSON logs for Lambda (CloudWatch), plain ones elsewhere; `RUST_LOG` filters.
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(json_logs())
        .with(log_filter(
            std::env::var("RUST_LOG").ok().as_deref(),
            std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
        ))
        .try_init();
}

/// The functions' log lines: JSON with their level and an RFC 3339 `timestamp` (without one,
/// Lambda's log-level filter classes every line INFO), each with the spans it is
/// in: Lambda's invocation (`requestId`, X-Ray trace id), the SQS record (`message_id`,
/// `receive_count`) and the attempt (`delivery_id`, `tenant_id`, `channel_id`, `attempt`),
/// so one delivery can be followed across functions without each line naming its ids.
pub fn json_logs<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    json_logs_to(std::io::stdout)
}

/// [`json_logs`] written to `writer` (the benchmarks count them, the tests read them).
pub fn json_logs_to<S, W>(writer: W) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(false)
        .with_span_list(true)
        .with_writer(writer)
}

/// What the functions log: `RUST_LOG` (`info,converger_store=debug`: a level per target), else
/// Lambda's log level setting (`AWS_LAMBDA_LOG_LEVEL`), else `info`. A value that does not
/// parse falls back to `info` rather than silencing the function.
fn log_filter(rust_log: Option<&str>, lambda_level: Option<&str>) -> Targets {
    let info = || Targets::new().with_default(LevelFilter::INFO);
    if let Some(spec) = rust_log.filter(|s| !s.trim().is_empty()) {
        return spec.parse().unwrap_or_else(|_| info());
    }
    match lambda_level.map(|l| l.trim().to_ascii_lowercase()) {
        // Lambda's FATAL has no tracing level: errors are the closest.
        Some(l) if l == "fatal" => Targets::new().with_default(LevelFilter::ERROR),
        Some(l) => l
            .parse::<LevelFilter>()
            .map(|lf| Targets::new().with_default(lf))
            .unwrap_or_else(|_| info()),
        None => info(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn the_log_filter_reads_rust_log_then_lambdas_level() {
        let f = log_filter(Some("warn,converger_store=debug"), Some("ERROR"));
        assert!(f.would_enable("converger_store::dynamo", &Level::DEBUG));
        assert!(!f.would_enable("converger_pipeline", &Level::INFO));
        assert!(f.would_enable("converger_pipeline", &Level::WARN));
        let f = log_filter(None, Some("DEBUG"));
        assert!(f.would_enable("anything", &Level::DEBUG));
        let f = log_filter(Some(" "), Some("FATAL"));
        assert!(!f.would_enable("anything", &Level::WARN));
        assert!(f.would_enable("anything", &Level::ERROR));
        let f = log_filter(None, None);
        assert!(f.would_enable("anything", &Level::INFO));
        assert!(!f.would_enable("anything", &Level::DEBUG));
        let f = log_filter(Some("converger=loud"), None);
        assert!(f.would_enable("anything", &Level::INFO));
    }
}
