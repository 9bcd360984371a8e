//! The test kit for Converger's end-to-end tests: a whole local stack per test (its own
//! resource prefix, so tests never share a queue or see each other's rows), with real HTTP
//! receivers. The use-case scenarios run on the in-process backend ([`TestStack::start`]);
//! the tests of AWS code paths run on the template deployed on the emulator named by
//! `AWS_ENDPOINT_URL` or one the stack starts itself ([`TestStack::on_emulator`]); the store's
//! own tests on the template's tables alone ([`TestTables`]).
//! `CONVERGER_TEST_BACKEND=emulator` runs every scenario on the emulator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod client;
pub mod fakes;
pub mod stream;

pub use client::is_settled;
pub use converger_http::views;

use converger_http::views::{CreatedChannel, DeliveryView, Ingested, Page};
pub use converger_local::receiver::{Received, Receiver, Reply};
use converger_local::stack::{AwsStack, Backend};
use converger_local::{Stack, StackOptions};
use converger_pipeline::PipelineConfig;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// One test's stack and an HTTP client for it; the stack stops (servers, pollers, an emulator
/// it started) when this goes out of scope.
pub struct TestStack {
    pub stack: Stack,
    pub http: reqwest::Client,
}

/// An HTTP answer: status and JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// The `Retry-After` header, where the answer has one.
    pub retry_after: Option<String>,
}

impl Answer {
    /// Reads a response: its status, `Retry-After` and JSON body (`Null` when not JSON).
    pub async fn read(resp: reqwest::Response) -> Self {
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await.unwrap_or_default();
        Answer {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            retry_after,
        }
    }

    /// The error code of an error answer (`""` when there is none).
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

impl TestStack {
    /// A stack on the in-process backend (unless `CONVERGER_TEST_BACKEND=emulator`).
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// A stack on the in-process backend whose time is a manual clock (its backoffs,
    /// cooldowns and queue delays pass when the test moves the clock), and that clock.
    pub async fn on_clock() -> (Self, std::sync::Arc<converger_core::time::ManualClock>) {
        let clock = std::sync::Arc::new(converger_core::time::ManualClock::starting_now());
        let shared: std::sync::Arc<dyn converger_core::time::Clock> = clock.clone();
        let t = Self::with(|o| {
            o.backend = Backend::Memory;
            o.clock = Some(shared);
        })
        .await;
        (t, clock)
    }

    /// A stack on the emulator: the template deployed, every request IAM-checked.
    pub async fn on_emulator() -> Self {
        Self::with(|o| o.backend = Backend::Emulator).await
    }

    /// A stack whose options `f` adjusts (on the in-process backend unless `f` or
    /// `CONVERGER_TEST_BACKEND=emulator` says otherwise).
    pub async fn with(f: impl FnOnce(&mut StackOptions)) -> Self {
        let backend = match std::env::var("CONVERGER_TEST_BACKEND").as_deref() {
            Ok("emulator") => Backend::Emulator,
            _ => Backend::Memory,
        };
        let mut opts = StackOptions {
            backend,
            prefix: format!("t{}-", &uuid_like()[..12]),
            // The test command's reference deployment makes every skipped resource; a test's
            // stack needs its APIs only.
            skipped: converger_local::cfn::SkippedMade::Apis,
            poll_wait_s: converger_local::stack::POLL_WAIT_STOPPED_S,
            config: PipelineConfig {
                allowlist: converger_core::net::Allowlist::loopback(),
                channel_cache_ttl: Duration::ZERO,
                // An operator's change of a tenant reaches the API within a second.
                tenant_cache_ttl: Duration::from_secs(1),
                // The live stream's tests connect to it.
                live_stream: true,
                platform_account: Some(converger_local::LOCAL_ACCOUNT.to_owned()),
                // Usage counts too: the charts' and the usage page's tests read them at once.
                usage_flush: Duration::ZERO,
                serial_transactions: true,
                // The tests poll the API far faster than a producer calls it; the limits'
                // own test sets a tenant's override, which wins.
                api_limits: converger_core::api_limit::Defaults::uniform(
                    converger_core::RateLimit {
                        count: 1_000_000,
                        per_ms: 1_000,
                    },
                ),
                ..PipelineConfig::default()
            },
            ..StackOptions::default()
        };
        f(&mut opts);
        init_tracing();
        converger_pipeline::metrics::set_enabled(false);
        let stack = Stack::start(opts).await.expect("stack starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        Self { stack, http }
    }

    /// The typed client of the stack's API with `key`, each call bounded as the raw calls
    /// are (a shared emulator under a full test run answers slowly; the bound only ends a
    /// wait).
    pub fn client(&self, key: &str) -> converger_client::Client {
        converger_client::Client::with_timeout(&self.stack.api_url, key, Duration::from_secs(120))
            .expect("the stack's API URL")
    }

    /// The emulator side of a stack started with [`Self::on_emulator`].
    pub fn aws(&self) -> &AwsStack {
        self.stack.aws().unwrap()
    }

    /// The SDK configuration of another account of the emulator (a tenant's), in `region`:
    /// the emulator files the requests of an assumed role's session under the role's account.
    pub async fn account(&self, account: &str, region: &str) -> aws_config::SdkConfig {
        converger_local::emulator::account_config(&self.aws().clients.config, account, region)
            .await
            .unwrap()
    }

    /// Sends a request with an optional bearer token and a raw body.
    pub async fn raw(
        &self,
        method: &str,
        url: String,
        token: Option<&str>,
        body: Option<String>,
    ) -> Answer {
        let mut req = self
            .http
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        Answer::read(req.send().await.expect("request sent")).await
    }

    /// POSTs Infobip delivery reports to a channel's receipt endpoint with `token`.
    pub async fn infobip_reports(&self, ch: &str, token: &str, reports: &[(&str, &str)]) -> Answer {
        let url = format!(
            "{}/api/v1/channels/{ch}/status?token={token}",
            self.stack.api_url
        );
        let body = fakes::infobip_reports(reports).to_string();
        self.raw("POST", url, None, Some(body)).await
    }

    pub async fn api(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> Answer {
        self.raw(
            method,
            format!("{}{path}", self.stack.api_url),
            Some(key),
            body.map(|b| b.to_string()),
        )
        .await
    }

    /// A new tenant; returns (id, API key).
    pub async fn tenant(&self, tier: &str) -> (String, String) {
        let a = self
            .raw(
                "POST",
                format!("{}/admin/api/tenants", self.stack.admin_url),
                Some(&self.stack.admin_token),
                Some(json!({"name": "test tenant", "tier": tier}).to_string()),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        (
            a.body["id"].as_str().unwrap().to_owned(),
            a.body["api_key"].as_str().unwrap().to_owned(),
        )
    }

    /// A `GET` of the admin API.
    pub async fn admin_get(&self, path: &str) -> Answer {
        self.raw(
            "GET",
            format!("{}{path}", self.stack.admin_url),
            Some(&self.stack.admin_token),
            None,
        )
        .await
    }

    /// An operator's change to a tenant (`PATCH /admin/api/tenants/<id>`).
    pub async fn patch_tenant(&self, tenant: &str, body: Value) -> Answer {
        self.raw(
            "PATCH",
            format!("{}/admin/api/tenants/{tenant}", self.stack.admin_url),
            Some(&self.stack.admin_token),
            Some(body.to_string()),
        )
        .await
    }

    /// A webhook channel to `url` with an optional retry policy; returns the created channel.
    pub async fn webhook(&self, key: &str, url: &str, policy: Value) -> CreatedChannel {
        let a = self
            .api(
                "POST",
                "/api/v1/channels",
                key,
                Some(json!({"type": "webhook", "name": "hook", "config": {"url": url}, "retry_policy": policy})),
            )
            .await;
        a.typed(201).unwrap()
    }

    /// Posts an activity to `channels`; returns what ingest answered.
    pub async fn activity(&self, key: &str, channels: &[&str]) -> Ingested {
        let a = self
            .api(
                "POST",
                "/api/v1/activities",
                key,
                Some(json!({"conversation_id": "conv-1", "channel_ids": channels, "payload": {"text": "hi"}})),
            )
            .await;
        a.typed(201).unwrap()
    }

    /// Delivery `id` once it settled (a bound on the wait only: 60 s, for a shared emulator
    /// under a full run).
    pub async fn settled(&self, key: &str, id: &str) -> DeliveryView {
        self.wait_delivery(key, id, Duration::from_secs(60), is_settled)
            .await
    }

    /// Posts an activity with `payload` to one channel and waits until its delivery settles;
    /// returns the delivery.
    pub async fn deliver_settled(&self, key: &str, channel: &str, payload: Value) -> DeliveryView {
        let a = self
            .api(
                "POST",
                "/api/v1/activities",
                key,
                Some(json!({"conversation_id": "conv-1", "channel_ids": [channel], "payload": payload})),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let id = a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone();
        self.settled(key, &id).await
    }

    pub async fn delivery(&self, key: &str, id: &str) -> DeliveryView {
        self.delivery_json(key, id).await.typed(200).unwrap()
    }

    /// A delivery's answer as the API wrote it, for a test of the wire form.
    pub async fn delivery_json(&self, key: &str, id: &str) -> Answer {
        let a = self
            .api("GET", &format!("/api/v1/deliveries/{id}"), key, None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        a
    }

    /// A tenant and one of its channels as stored.
    pub async fn stored(
        &self,
        tenant_id: &str,
        channel_id: &str,
    ) -> (converger_ports::Tenant, converger_ports::Channel) {
        use converger_core::{ChannelId, TenantId};
        let store = &self.stack.store;
        let tenant = store
            .get_tenant(&TenantId::parse(tenant_id).unwrap())
            .await
            .unwrap()
            .unwrap();
        let channel = store
            .get_channel(&ChannelId::parse(channel_id).unwrap())
            .await
            .unwrap()
            .unwrap();
        (tenant, channel)
    }

    /// A delivery row written straight to the store with its activity (no queue message), due
    /// at `due_ms`.
    pub async fn bare_delivery(
        &self,
        tenant_id: &str,
        channel_id: &str,
        due_ms: i64,
    ) -> converger_ports::Delivery {
        let (activity, d) = self.unwritten_delivery(tenant_id, channel_id, due_ms).await;
        self.stack
            .store
            .create_activity(&activity, std::slice::from_ref(&d))
            .await
            .unwrap();
        d
    }

    /// An activity and its delivery to one channel, not written yet.
    pub async fn unwritten_delivery(
        &self,
        tenant_id: &str,
        channel_id: &str,
        due_ms: i64,
    ) -> (converger_ports::Activity, converger_ports::Delivery) {
        use converger_core::{ActivityId, Timestamp};
        let (tenant, channel) = self.stored(tenant_id, channel_id).await;
        let now = Timestamp::now();
        let activity = converger_ports::Activity {
            event_type: None,
            id: ActivityId::generate(),
            tenant_id: tenant.id.clone(),
            conversation_id: "conv-bare".into(),
            seq: 1,
            payload_ref: None,
            payload: json!({"text": "bare"}),
            channel_ids: vec![channel.id.clone()],
            created_at: now,
            expires_at: None,
            trace: None,
        };
        let mut d = converger_ports::Delivery::new(&activity, &channel, tenant.tier, now);
        d.next_attempt_at = due_ms;
        (activity, d)
    }

    /// Polls a delivery until `done` holds or `timeout` passes; returns the last row.
    pub async fn wait_delivery(
        &self,
        key: &str,
        id: &str,
        timeout: Duration,
        done: impl Fn(&DeliveryView) -> bool,
    ) -> DeliveryView {
        let deadline = Instant::now() + timeout;
        loop {
            let d = self.delivery(key, id).await;
            if done(&d) || Instant::now() > deadline {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The platform events the pipeline published: on the emulator, a queue subscribed to the
/// stack's bus (a rule for `source: converger`); in process, the events kept in memory, in
/// the shape EventBridge delivers them (`source`, `detail-type`, `detail`).
pub struct EventTap {
    from: TapSource,
    seen: std::sync::Mutex<Vec<Value>>,
}

enum TapSource {
    Queue(converger_local::bus_tap::BusTap),
    Memory {
        events: std::sync::Arc<converger_memory::MemEvents>,
        from: usize,
    },
}

impl EventTap {
    /// Events received until `done` holds for them or `timeout` passed.
    pub async fn wait(&self, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.seen.lock().unwrap().clone();
            if done(&seen) || Instant::now() >= deadline {
                return seen;
            }
            match &self.from {
                TapSource::Queue(tap) => {
                    let received = tap.receive().await.unwrap();
                    self.seen.lock().unwrap().extend(received);
                }
                TapSource::Memory { events, from } => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let published = events.published.lock().unwrap();
                    *self.seen.lock().unwrap() = published
                        .iter()
                        .skip(*from)
                        .map(|e| {
                            json!({
                                "source": converger_store::resources::EVENT_SOURCE,
                                "detail-type": e.detail_type.as_str(),
                                "detail": e.detail,
                            })
                        })
                        .collect();
                }
            }
        }
    }

    /// An event's `detail` as its type (`converger_ports::events`); panics with the event
    /// when it is not one.
    pub fn detail<T: DeserializeOwned>(event: &Value) -> T {
        Self::detail_of(event).unwrap_or_else(|| panic!("not that event's detail: {event}"))
    }

    /// An event's `detail` as its type, `None` when it is another event's.
    pub fn detail_of<T: DeserializeOwned>(event: &Value) -> Option<T> {
        serde_json::from_value(event["detail"].clone()).ok()
    }

    /// The received events of one `detail-type`.
    pub fn of(events: &[Value], kind: &str) -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["detail-type"] == kind)
            .cloned()
            .collect()
    }
}

impl TestStack {
    /// Starts reading the platform events published from now on (see [`EventTap`]).
    pub async fn tap_events(&self) -> EventTap {
        if let Some(m) = self.stack.memory() {
            let from = m.events.published.lock().unwrap().len();
            return EventTap {
                from: TapSource::Memory {
                    events: m.events.clone(),
                    from,
                },
                seen: std::sync::Mutex::new(Vec::new()),
            };
        }
        let aws = self.aws();
        let tap = converger_local::bus_tap::BusTap::start(
            aws.clients.sqs.clone(),
            &aws.clients.eventbridge,
            &aws.resources.bus,
            &format!("{}-events-tap", self.stack.name()),
            &json!({"source": ["converger"]}),
        )
        .await
        .unwrap();
        EventTap {
            from: TapSource::Queue(tap),
            seen: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Creates a channel from a full request body; returns the created channel.
    pub async fn channel(&self, key: &str, body: Value) -> CreatedChannel {
        let a = self.api("POST", "/api/v1/channels", key, Some(body)).await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        a.typed(201).unwrap()
    }

    /// Posts `n` activities to one channel, `concurrency` at a time; returns the delivery ids.
    pub async fn activities(
        &self,
        key: &str,
        channel: &str,
        n: usize,
        concurrency: usize,
    ) -> Vec<String> {
        use futures::StreamExt;
        futures::stream::iter(0..n)
            .map(|_| async move {
                let a = self.activity(key, &[channel]).await;
                a.deliveries[0].id.clone()
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await
    }

    /// Writes `n` activities of one channel with their deliveries straight into the store,
    /// waiting as ingest leaves them when the channel's breaker is open (`parked`) or its
    /// window is full (in the backlog); see `converger_local::seed`.
    pub async fn seed_waiting(
        &self,
        tenant_id: &str,
        channel_id: &str,
        n: usize,
        parked: bool,
    ) -> Vec<String> {
        let (tenant, channel) = self.stored(tenant_id, channel_id).await;
        let how = if parked {
            converger_bench::seed::SeedAs::Parked
        } else {
            converger_bench::seed::SeedAs::Backlog
        };
        converger_bench::seed::write(&self.stack, &tenant, &channel, n, how)
            .await
            .unwrap()
    }

    /// Counts a tenant's deliveries of one channel by status.
    pub async fn status_counts(
        &self,
        key: &str,
        channel: &str,
    ) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/deliveries?channel_id={channel}&limit=100");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page: Page<DeliveryView> =
                self.api("GET", &path, key, None).await.typed(200).unwrap();
            for d in page.data {
                *counts.entry(d.status).or_insert(0) += 1;
            }
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return counts,
            }
        }
    }
}

impl TestStack {
    /// A web user (`realm` admin or portal) with the password `correct horse battery`.
    pub async fn web_user(&self, realm: &str, email: &str, role: &str, tenant: Option<&str>) {
        let mut body =
            json!({"realm": realm, "email": email, "password": WEB_PASSWORD, "role": role});
        if let Some(t) = tenant {
            body["tenant_id"] = json!(t);
        }
        let a = self
            .raw(
                "POST",
                format!("{}/admin/api/users", self.stack.admin_url),
                Some(&self.stack.admin_token),
                Some(body.to_string()),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
    }

    /// A tenant with a webhook channel named `name` to `rx` and no retries, and `n` of its
    /// activities, waited for until their deliveries failed (make `rx` answer an error).
    pub async fn failing_tenant(&self, rx: &Receiver, name: &str, n: usize) -> FailingTenant {
        let (tenant, key) = self.tenant("default").await;
        let channel = self
            .channel(
                &key,
                json!({"type": "webhook", "name": name, "config": {"url": rx.url}, "retry_policy": {"max_attempts": 1}}),
            )
            .await
            .id
            .clone();
        let deliveries = self.activities(&key, &channel, n, 4).await;
        for id in &deliveries {
            let d = self
                .wait_delivery(&key, id, Duration::from_secs(20), is_settled)
                .await;
            assert_eq!(d.status, "failed", "{d:?}");
        }
        FailingTenant {
            tenant,
            key,
            channel,
            deliveries,
        }
    }
}

/// The password [`TestStack::web_user`] gives.
pub const WEB_PASSWORD: &str = "correct horse battery";

/// What [`TestStack::failing_tenant`] made.
pub struct FailingTenant {
    pub tenant: String,
    pub key: String,
    pub channel: String,
    /// The failed deliveries' ids.
    pub deliveries: Vec<String>,
}

/// The template's DynamoDB tables alone, made on the emulator under a prefix of their own
/// (no stack, no functions): for the tests of the store itself. The emulator is the one
/// `AWS_ENDPOINT_URL` names, or one started for these tables and stopped with them.
pub struct TestTables {
    pub config: aws_config::SdkConfig,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub resources: converger_store::Resources,
    _emulator: Option<converger_local::emulator::Emulator>,
}

impl TestTables {
    pub async fn on_emulator() -> Self {
        init_tracing();
        let (emulator, endpoint) = converger_local::emulator::named_or_started(None)
            .await
            .expect("the emulator starts");
        let config = converger_store::aws::load_config_for(Some(&endpoint)).await;
        // The emulator answers one request at a time per table under the tests' parallel
        // load, so one call may wait past the functions' 10 s attempt bound on a busy machine:
        // the tests' own calls get a wider bound (the functions keep theirs).
        let config = config
            .to_builder()
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .operation_attempt_timeout(Duration::from_secs(60))
                    .operation_timeout(Duration::from_secs(120))
                    .build(),
            )
            .build();
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let prefix = format!("t{}-", &uuid_like()[..12]);
        let resources = converger_local::tables::create_tables(&dynamodb, &endpoint, &prefix)
            .await
            .expect("the template's tables are made");
        Self {
            config,
            dynamodb,
            resources,
            _emulator: emulator,
        }
    }

    /// The SDK configuration of another account of the emulator (see [`TestStack::account`]).
    pub async fn account(&self, account: &str, region: &str) -> aws_config::SdkConfig {
        converger_local::emulator::account_config(&self.config, account, region)
            .await
            .unwrap()
    }
}

fn uuid_like() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A delivery read through the typed client until it settles (neither pending nor paused),
/// for at most 30 s (a deadline only: it answers as it stands then).
pub async fn settled_delivery(
    api: &converger_client::Client,
    id: &str,
) -> converger_client::Delivery {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = api.delivery(id).await.expect("the delivery reads");
        if d.is_settled() || Instant::now() > deadline {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `signature` (a `webhook-signature` value) holds a signature of `body` for message
/// `id` at `ts` under the channel's `secret`.
pub fn verifies(secret: &str, id: &str, ts: &str, body: &str, signature: &str) -> bool {
    let signer = converger_core::signing::Signer::new(secret).expect("a signing secret");
    let Ok(ts) = ts.parse() else {
        return false;
    };
    signature
        .split(' ')
        .any(|s| s == signer.sign(id, ts, body.as_bytes()))
}

/// Polls `check` every 200 ms until it holds (`true`) or `timeout` passes (`false`).
pub async fn wait_until<F: std::future::Future<Output = bool>>(
    timeout: Duration,
    mut check: impl FnMut() -> F,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The tests' logs (warnings, or `RUST_LOG`), and the count of what the functions would log
/// that the `cost` benchmark prices.
pub fn init_tracing() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_test_writer()
                .with_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
                ),
        )
        .with(converger_bench::cost::log_layer())
        .try_init();
}

/// A JSON answer read as its view; panics with the answer when it is not.
pub fn view<T: DeserializeOwned>(body: &Value) -> T {
    serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("an answer that is not its view ({e}): {body}"))
}
