//! The test kit for Converger's end-to-end tests: a whole local stack per test (its own
//! resource prefix, so tests never share a queue or see each other's rows), against the
//! emulator named by `AWS_ENDPOINT_URL` or one it starts itself, with real HTTP receivers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub use converger_local::receiver::{Receiver, Reply};
use converger_local::{Stack, StackOptions};
use converger_pipeline::PipelineConfig;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub struct TestStack {
    pub stack: Stack,
    pub http: reqwest::Client,
}

/// An HTTP answer: status and JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl TestStack {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// A stack whose options `f` adjusts.
    pub async fn with(f: impl FnOnce(&mut StackOptions)) -> Self {
        let mut opts = StackOptions {
            prefix: format!("t{}-", &uuid_like()[..12]),
            config: PipelineConfig {
                allowlist: converger_core::net::Allowlist::loopback(),
                channel_cache_ttl: Duration::ZERO,
                serial_transactions: true,
                ..PipelineConfig::default()
            },
            ..StackOptions::default()
        };
        f(&mut opts);
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .try_init();
        converger_pipeline::metrics::set_enabled(false);
        let stack = Stack::start(opts).await.expect("stack starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        Self { stack, http }
    }

    pub async fn stop(self) {
        self.stack.stop().await;
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
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Answer {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
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

    /// A webhook channel to `url` with an optional retry policy; returns the created body.
    pub async fn webhook(&self, key: &str, url: &str, policy: Value) -> Value {
        let a = self
            .api(
                "POST",
                "/api/v1/channels",
                key,
                Some(json!({"type": "webhook", "name": "hook", "config": {"url": url}, "retry_policy": policy})),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        a.body
    }

    /// Posts an activity to `channels`; returns the answer body.
    pub async fn activity(&self, key: &str, channels: &[&str]) -> Value {
        let a = self
            .api(
                "POST",
                "/api/v1/activities",
                key,
                Some(json!({"conversation_id": "conv-1", "channel_ids": channels, "payload": {"text": "hi"}})),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        a.body
    }

    pub async fn delivery(&self, key: &str, id: &str) -> Value {
        let a = self
            .api("GET", &format!("/api/v1/deliveries/{id}"), key, None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        a.body
    }

    /// A delivery row written straight to the store with its activity (no queue message), due
    /// at `due_ms`.
    pub async fn bare_delivery(
        &self,
        tenant_id: &str,
        channel_id: &str,
        due_ms: i64,
    ) -> converger_store::Delivery {
        use converger_core::{ActivityId, ChannelId, TenantId, time};
        let p = &self.stack.pipeline;
        let tenant = p
            .store
            .get_tenant(&TenantId::parse(tenant_id).unwrap())
            .await
            .unwrap()
            .unwrap();
        let channel = p
            .store
            .get_channel(&ChannelId::parse(channel_id).unwrap())
            .await
            .unwrap()
            .unwrap();
        let activity = converger_store::Activity {
            id: ActivityId::generate(),
            tenant_id: tenant.id.clone(),
            conversation_id: "conv-bare".into(),
            seq: 1,
            payload: json!({"text": "bare"}),
            channel_ids: vec![channel.id.clone()],
            created_at: time::now_rfc3339(),
        };
        let d = converger_store::Delivery::new(
            &activity,
            &channel,
            tenant.tier,
            due_ms,
            &activity.created_at,
        );
        p.store
            .create_activity(&activity, std::slice::from_ref(&d))
            .await
            .unwrap();
        d
    }

    /// Polls a delivery until `done` holds or `timeout` passes; returns the last row.
    pub async fn wait_delivery(
        &self,
        key: &str,
        id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
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

fn uuid_like() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Settled: anything but pending.
pub fn settled(d: &Value) -> bool {
    d["status"] != "pending"
}
