//! The stack on the emulator: the template deployed, each function's pipeline built from its
//! deployed environment with IAM-checked clients, its event source mappings played.

use super::*;

/// The AWS side of a stack on the emulator.
pub struct AwsStack {
    pub endpoint: String,
    /// Unchecked clients (the operator's and the tests' own).
    pub clients: Clients,
    /// The admin function's view of the resources (every table, queue and the bus).
    pub resources: Resources,
    /// What CloudFormation created.
    pub deployed: DeployedStack,
    /// How long the deployment took.
    pub deploy_time: Duration,
    pub(super) guards: BTreeMap<String, IamGuard>,
    pub(super) emulator: Option<Emulator>,
    /// The capacity-counting proxy the functions' DynamoDB calls go through, when the stack
    /// was asked to count units (`StackOptions::capacity`).
    pub capacity: Option<crate::capacity::proxy::CapacityProxy>,
}

impl AwsStack {
    /// The tier queue's URL, as deployed.
    pub fn queue_url(&self, tier: Tier) -> Result<String, String> {
        self.resources
            .queue_url(&converger_store::resources::tier_queue(tier))
            .map(str::to_owned)
            .map_err(|e| e.to_string())
    }

    /// A tier queue's dead-letter queue URL, as deployed (from the queue's redrive policy).
    pub fn dlq_url(&self, tier: Tier) -> Result<String, String> {
        let url = self.queue_url(tier)?;
        let q = self
            .deployed
            .queues
            .values()
            .find(|q| q.url == url)
            .ok_or_else(|| format!("no deployed queue has URL {url}"))?;
        let dlq_arn = q
            .redrive_policy
            .as_ref()
            .and_then(|r| r["deadLetterTargetArn"].as_str())
            .ok_or_else(|| format!("{url} has no redrive policy"))?;
        self.deployed
            .queue_by_arn(dlq_arn)
            .map(|(_, q)| q.url.clone())
            .ok_or_else(|| format!("no deployed queue has ARN {dlq_arn}"))
    }
}

/// One function's pipeline: its deployed names, IAM-checked clients (plus the request counter
/// when one is given), and websocket pushes for the functions that push.
async fn function_pipeline(
    sdk: &aws_config::SdkConfig,
    deployed: &DeployedStack,
    logical_id: &str,
    config: &PipelineConfig,
    counter: Option<&RequestCounter>,
    management_url: &str,
) -> Result<(Arc<Pipeline>, IamGuard), String> {
    let f = deployed.function(logical_id)?;
    let resources = f.resources()?;
    let guard = deployed.guard(logical_id)?;
    let mut interceptors = vec![SharedInterceptor::new(guard.clone())];
    if let Some(c) = counter {
        // The changes function's requests are per batch of the table's stream: counted
        // apart (`changes:<service>`), as their own share of a delivery.
        let c = if logical_id == fun::CHANGES {
            c.for_function("changes:")
        } else {
            c.clone()
        };
        interceptors.push(SharedInterceptor::new(c));
    }
    let mut clients = Clients::intercepted(sdk, interceptors);
    // Sends as a tenant's role are authorized by the tenant's policies, not the function's:
    // only counted.
    clients.tenant_interceptors = counter
        .map(|c| vec![SharedInterceptor::new(c.for_tenant_sends())])
        .unwrap_or_default();
    // The local gateway stands in for the WebSocket API the template's
    // WEBSOCKET_MANAGEMENT_URL names.
    clients.websocket_management_url = f
        .env(converger_store::MANAGEMENT_URL_ENV)
        .map(|_| management_url.to_owned());
    clients.email_configuration_set = f
        .env(converger_store::EMAIL_CONFIGURATION_SET_ENV)
        .map(|s| s.to_string());
    clients.payloads_bucket = f.env(converger_core::settings::PAYLOADS_BUCKET.name);
    // The emulator assumes any role with any external id (it does not evaluate trust
    // policies), so trying a wrong one would refuse every role: the check is shown by the
    // store's tests against an STS that judges the id, and only on AWS end to end.
    clients.role_external_id_check = false;
    clients.channel_key_secret_arn = f.env(converger_core::settings::CHANNEL_KEY_SECRET_ARN.name);
    let pipeline = bootstrap::aws_pipeline(&clients, &resources, config.clone())
        .await
        .map_err(|e| e.to_string())?;
    let pipeline = if pushes(logical_id) {
        let pipeline = if runs_attempts(logical_id) {
            bootstrap::with_tenant_aws(pipeline, &clients)
        } else {
            pipeline
        };
        bootstrap::with_email(bootstrap::with_websockets(pipeline, &clients), &clients)
    } else {
        pipeline
    };
    // Attempts' spans, where the function's environment names a collector (as
    // `bootstrap::from_env_with_websockets` reads it).
    let pipeline = bootstrap::with_spans(
        pipeline,
        f.env(converger_core::settings::SPAN_EXPORT_ENDPOINT.name)
            .as_deref(),
        logical_id,
    );
    Ok((Arc::new(pipeline), guard))
}

/// The functions that run attempts (and so may send as a tenant's role).
pub(super) fn runs_attempts(logical_id: &str) -> bool {
    matches!(logical_id, fun::DELIVER | fun::PROBE)
}

/// Attempts' spans on the in-process backend, which deploys no environment: as the
/// template's `SpanExportEndpoint` gives the functions that run attempts their
/// `SPAN_EXPORT_ENDPOINT`.
pub(super) fn with_parameter_spans(
    p: Pipeline,
    logical_id: &str,
    parameters: &std::collections::BTreeMap<String, String>,
) -> Result<Pipeline, String> {
    if !runs_attempts(logical_id) {
        return Ok(p);
    }
    Ok(bootstrap::with_spans(
        p,
        parameters.get("SpanExportEndpoint").map(String::as_str),
        logical_id,
    ))
}

/// The template deployed on the emulator; the queue-triggered functions started as their
/// deployed event source mappings say.
pub(super) async fn build_aws(
    opts: &StackOptions,
    management_url: &str,
    stop: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
    progress: &super::changes::Progress,
) -> Result<Built, String> {
    let (emulator, endpoint) = crate::emulator::named_or_started(opts.endpoint.as_deref()).await?;
    let sdk = converger_store::aws::load_config_for(Some(&endpoint)).await;
    let clients = Clients::new(&sdk);
    let mut parameters = BTreeMap::from([
        (
            "MaxReceiveCount".to_owned(),
            opts.queues.max_receive_count.to_string(),
        ),
        (
            "LiveStream".to_owned(),
            if opts.config.live_stream {
                "enabled"
            } else {
                "disabled"
            }
            .to_owned(),
        ),
        (
            "UsageFold".to_owned(),
            if opts.config.usage_fold {
                "enabled"
            } else {
                "disabled"
            }
            .to_owned(),
        ),
    ]);
    // The tiers' mappings run as this stack's pipeline sizes its windows.
    let tiers = opts.config.tier_concurrency;
    for (name, tier) in [
        ("DeliverConcurrencyHigh", converger_core::Tier::High),
        ("DeliverConcurrencyDefault", converger_core::Tier::Default),
        ("DeliverConcurrencyBulk", converger_core::Tier::Bulk),
    ] {
        parameters.insert(name.to_owned(), tiers.of(tier).to_string());
    }
    parameters.extend(opts.parameters.clone());
    let deploy_started = Instant::now();
    let deployed = cfn::deploy_with(
        &endpoint,
        &cfn::stack_name(&opts.prefix),
        &parameters,
        opts.skipped,
    )
    .await?;
    let deploy_time = deploy_started.elapsed();
    if let Some(v) = opts.queues.visibility_timeout_s {
        for q in deployed.queues.values() {
            clients
                .sqs
                .set_queue_attributes()
                .queue_url(&q.url)
                .attributes(
                    aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
                    v.to_string(),
                )
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())?;
        }
    }

    // Counting capacity units: the functions' calls go through the proxy (the harness's own
    // reads and the deployment do not).
    let capacity = match &opts.capacity {
        Some(meter) => {
            let logical = deployed
                .tables
                .iter()
                .map(|(id, t)| {
                    let name = id.trim_end_matches("Table").to_lowercase();
                    (t.name.clone(), name)
                })
                .collect();
            Some(
                crate::capacity::proxy::CapacityProxy::start(&endpoint, meter.clone(), logical)
                    .await?,
            )
        }
        None => None,
    };
    let function_sdk = match &capacity {
        Some(proxy) => converger_store::aws::load_config_for(Some(&proxy.url)).await,
        None => sdk.clone(),
    };
    let mut guards = BTreeMap::new();
    let mut build = async |id: &str| -> Result<Arc<Pipeline>, String> {
        let (p, g) = function_pipeline(
            &function_sdk,
            &deployed,
            id,
            &opts.config,
            opts.counter.as_ref(),
            management_url,
        )
        .await?;
        guards.insert(id.to_owned(), g);
        Ok(p)
    };
    let functions = Functions {
        ingest: build(fun::INGEST).await?,
        deliver: build(fun::DELIVER).await?,
        retry_scheduler: build(fun::RETRY_SCHEDULER).await?,
        replay: build(fun::REPLAY).await?,
        probe: build(fun::PROBE).await?,
        email_events: build(fun::EMAIL_EVENTS).await?,
        health: build(fun::HEALTH).await?,
        api: build(fun::API).await?,
        admin: build(fun::ADMIN).await?,
        websocket: build(fun::WEBSOCKET).await?,
        stream: build(fun::STREAM).await?,
        changes: build(fun::CHANGES).await?,
    };
    // The admin function's secrets, read as it reads them at init (through its policy).
    let admin = deployed.function(fun::ADMIN)?;
    let secret_arn = |var: &str| {
        admin
            .env(var)
            .ok_or_else(|| format!("{}: {var} is not set", admin.name))
    };
    let token_arn = secret_arn("ADMIN_TOKEN_SECRET_ARN")?;
    if let Some(token) = &opts.admin_token {
        converger_store::secrets::put_secret_value(&sdk, &token_arn, token)
            .await
            .map_err(|e| e.to_string())?;
    }
    let admin_guard = vec![SharedInterceptor::new(
        guards
            .get(fun::ADMIN)
            .cloned()
            .ok_or("the admin function has no guard")?,
    )];
    let admin_token = converger_store::secrets::secret_value(&sdk, &admin_guard, &token_arn)
        .await
        .map_err(|e| e.to_string())?;
    let session_secret = converger_store::secrets::secret_value(
        &sdk,
        &admin_guard,
        &secret_arn("SESSION_SECRET_ARN")?,
    )
    .await
    .map_err(|e| e.to_string())?;
    let resources = admin.resources()?;
    let ports =
        bootstrap::aws_ports(&clients, &resources, &opts.config).map_err(|e| e.to_string())?;
    let pipeline = Arc::new(converger_pipeline::Pipeline::new(
        ports.store.clone(),
        ports.queue.clone(),
        ports.events.clone(),
        converger_adapters::Adapters::standard(opts.config.allowlist.clone())
            .map_err(|e| format!("the HTTP client: {e}"))?,
        opts.config.clone(),
    ));

    // The queue-triggered functions, as their deployed event source mappings run them.
    if opts.run_functions {
        for (logical, f) in &deployed.functions {
            for m in f.event_source_mappings.iter().filter(|m| m.enabled) {
                if m.source == "dynamodb" {
                    if logical != fun::CHANGES {
                        return Err(format!(
                            "{logical} reads a table's stream, but the local runner has no \
                             handler for it"
                        ));
                    }
                    let dlq = match &m.on_failure {
                        Some(arn) => Some(
                            deployed
                                .queue_by_arn(arn)
                                .ok_or_else(|| format!("{logical}: no queue has ARN {arn}"))?
                                .1
                                .url
                                .clone(),
                        ),
                        None => None,
                    };
                    tasks.push(super::changes::spawn_aws(
                        aws_sdk_dynamodbstreams::Client::new(&sdk),
                        clients.sqs.clone(),
                        super::changes::StreamMapping::of(m, dlq),
                        functions.changes.clone(),
                        opts.invocations.clone(),
                        progress.clone(),
                        stop.clone(),
                    ));
                    continue;
                }
                let (_, queue) = deployed.queue_by_arn(&m.queue_arn).ok_or_else(|| {
                    format!("{logical}: no queue of the stack has ARN {}", m.queue_arn)
                })?;
                let function = match logical.as_str() {
                    fun::INGEST => Function::Ingest(functions.ingest.clone()),
                    fun::DELIVER => Function::Deliver(functions.deliver.clone()),
                    fun::REPLAY => Function::Replay(functions.replay.clone()),
                    fun::PROBE => Function::Probe(functions.probe.clone()),
                    fun::STREAM => Function::Stream(functions.stream.clone()),
                    other => {
                        return Err(format!(
                            "{other} is triggered by a queue, but the local runner has no \
                             handler for it"
                        ));
                    }
                };
                tasks.extend(spawn_pollers(
                    clients.sqs.clone(),
                    Mapping {
                        url: queue.url.clone(),
                        // Lambda's default when a mapping sets no maximum.
                        max_concurrency: m.maximum_concurrency.unwrap_or(1000) as usize,
                        batch_size: m.batch_size.clamp(1, 10) as i32,
                        partial_failures: m.report_batch_item_failures,
                    },
                    opts,
                    stop.clone(),
                    function,
                ));
            }
        }
    }
    Ok(Built {
        name: deployed.stack_name.clone(),
        functions,
        pipeline,
        store: ports.store,
        queue: ports.queue,
        admin_token,
        session_secret,
        api_routes: deployed.function(fun::API)?.routes.clone(),
        admin_routes: deployed.function(fun::ADMIN)?.routes.clone(),
        sweep_schedule: deployed.function(fun::RETRY_SCHEDULER)?.schedule_period(),
        health_schedule: deployed.function(fun::HEALTH)?.schedule_period(),
        backing: Backing::Aws(Box::new(AwsStack {
            endpoint,
            clients,
            resources,
            deployed,
            deploy_time,
            guards,
            emulator,
            capacity,
        })),
    })
}
