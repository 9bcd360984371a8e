//! The fixture and helpers every use-case test shares: in-memory tables and queues, a
//! manual clock, loopback receivers.

pub use converger_adapters::Adapters;
pub use converger_core::query::{Actor, ActorKind};
pub use converger_core::time::{Clock, ManualClock};
pub use converger_core::{ChannelType, DeliveryStatus, Tier};
pub use converger_memory::{MemEvents, MemQueue, MemStore};
pub use converger_pipeline::ingest::NewActivity;
pub use converger_pipeline::{Pipeline, PipelineConfig};
pub use converger_ports::prelude::*;
pub use converger_ports::{Channel, EventType, FlowJobKind, Tenant};
pub use serde_json::json;
pub use std::sync::Arc;
pub struct Fixture {
    pub pipeline: Pipeline,
    pub store: Arc<MemStore>,
    pub queue: Arc<MemQueue>,
    /// What the pipeline published on the bus.
    pub events: Arc<MemEvents>,
    /// The last record of the deliveries' change feed the fixture consumed.
    pub changes_read: std::sync::atomic::AtomicU64,
}

impl Fixture {
    /// Consumes the deliveries' change feed as the `changes` function would (events, counts
    /// and frames follow from the rows' changes, never from the writes themselves).
    pub async fn consume_changes(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let after = self.changes_read.load(Ordering::SeqCst);
            let batch = self.store.row_changes(after, 100).unwrap();
            let Some(last) = batch.last() else { return };
            let last: u64 = last.seq.trim_start_matches('0').parse().unwrap();
            self.pipeline
                .changes()
                .apply(converger_memory::CHANGES_SHARD, &batch)
                .await
                .unwrap();
            self.changes_read.store(last, Ordering::SeqCst);
        }
    }
}

pub fn fixture() -> Fixture {
    fixture_with(PipelineConfig::default())
}

pub fn fixture_with(config: PipelineConfig) -> Fixture {
    let store = Arc::new(MemStore::new());
    let queue = Arc::new(MemQueue::new());
    let events = Arc::new(MemEvents::default());
    let adapters = Adapters::standard(config.allowlist.clone()).unwrap();
    let pipeline = Pipeline::new(
        store.clone(),
        queue.clone(),
        events.clone(),
        adapters,
        config,
    );
    Fixture {
        pipeline,
        store,
        queue,
        events,
        changes_read: Default::default(),
    }
}

pub fn operator() -> Actor {
    Actor {
        kind: ActorKind::Admin,
        id: "ops".into(),
    }
}

pub async fn tenant(f: &Fixture) -> Tenant {
    f.pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap()
        .0
}

pub async fn webhook(f: &Fixture, t: &Tenant) -> Channel {
    let config = json!({"url": "https://receiver.example/hook"});
    let c = Channel::new(
        t.id.clone(),
        ChannelType::Webhook,
        "hook",
        config.as_object().cloned().unwrap(),
        converger_core::Timestamp::now(),
    );
    f.pipeline.channels().create_channel(&c).await.unwrap();
    c
}

pub fn activity(id: Option<&str>, channels: &[&Channel]) -> NewActivity {
    NewActivity {
        id: id.map(|i| converger_core::ActivityId::parse(i).unwrap()),
        conversation_id: "conv-1".into(),
        seq: None,
        channel_ids: channels.iter().map(|c| c.id.clone()).collect(),
        event_type: None,
        payload_upload: None,
        payload: Some(json!({"text": "hello"})),
        traceparent: None,
        tracestate: None,
    }
}

/// Every message the queues hold now or later, by delivery id.
pub fn queued(q: &MemQueue) -> Vec<String> {
    queued_with_watch(q).0
}

/// Every message queued (taken): the deliveries' ids, sorted, and those of the first tries'
/// watch copies (`core::policy::WATCH_DELAY_S`), sorted.
pub fn queued_with_watch(q: &MemQueue) -> (Vec<String>, Vec<String>) {
    let (mut ids, mut watched) = (Vec::new(), Vec::new());
    for m in q.take_due(i64::MAX) {
        if m.watch {
            watched.push(m.delivery_id.to_string());
        } else {
            ids.push(m.delivery_id.to_string());
        }
    }
    ids.sort();
    watched.sort();
    (ids, watched)
}

/// A pipeline, queue and store whose time is `clock`'s, with deliveries allowed to loopback.
pub fn fixture_on(clock: Arc<ManualClock>) -> Fixture {
    fixture_on_with(clock, |_| {})
}

pub fn fixture_on_with(
    clock: Arc<ManualClock>,
    adjust: impl FnOnce(&mut PipelineConfig),
) -> Fixture {
    fixture_on_store(clock, MemStore::new(), adjust)
}

/// [`fixture_on_with`] over `store` (one with DynamoDB's capacity model, say).
pub fn fixture_on_store(
    clock: Arc<ManualClock>,
    store: MemStore,
    adjust: impl FnOnce(&mut PipelineConfig),
) -> Fixture {
    let store = Arc::new(store);
    let queue = Arc::new(MemQueue::new().clocked(clock.clone()));
    let mut config = PipelineConfig {
        allowlist: converger_core::net::Allowlist::loopback(),
        ..PipelineConfig::default()
    };
    adjust(&mut config);
    let events = Arc::new(MemEvents::default());
    let adapters = Adapters::standard(config.allowlist.clone()).unwrap();
    let pipeline = Pipeline::new(
        store.clone(),
        queue.clone(),
        events.clone(),
        adapters,
        config,
    )
    .with_clock(clock);
    Fixture {
        pipeline,
        store,
        queue,
        events,
        changes_read: Default::default(),
    }
}

/// A webhook channel to a loopback port nobody listens on (every call is refused at once, a
/// transient failure), with these settings.
pub async fn refused(
    f: &Fixture,
    t: &Tenant,
    policy: serde_json::Value,
    breaker: serde_json::Value,
) -> Channel {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let settings = json!({"retry_policy": policy, "circuit_breaker": breaker});
    hook_to(f, t, &url, settings).await
}

/// Runs every delivery message due at the clock's time; how many ran.
pub async fn run_due(f: &Fixture, clock: &ManualClock) -> usize {
    let due = f.queue.take_due(clock.now_ms());
    for m in &due {
        f.pipeline.attempts().deliver(m.clone()).await.unwrap();
    }
    due.len()
}

/// A receiver on loopback answering every request with the status it holds at that moment.
pub struct Responder {
    pub url: String,
    pub status: Arc<std::sync::atomic::AtomicU16>,
    /// Every request's body, in the order they came.
    pub bodies: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Responder {
    pub async fn start(status: u16) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let status = Arc::new(std::sync::atomic::AtomicU16::new(status));
        let bodies: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let answer = status.clone();
        let seen = bodies.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let answer = answer.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    // The request's head, then as much body as it announces.
                    let mut got = Vec::new();
                    let mut buf = [0u8; 8192];
                    loop {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        got.extend_from_slice(&buf[..n]);
                        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if got.len() >= end + 4 + length {
                            seen.lock()
                                .unwrap()
                                .push(String::from_utf8_lossy(&got[end + 4..]).into_owned());
                            break;
                        }
                    }
                    let code = answer.load(std::sync::atomic::Ordering::SeqCst);
                    let reply = format!(
                        "HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self {
            url,
            status,
            bodies,
        }
    }

    /// The `text` of each request's payload, in the order they came.
    pub fn texts(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_str(b).unwrap_or_default();
                v.pointer("/payload/text")
                    .or_else(|| v.pointer("/text"))
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    pub fn answer(&self, status: u16) {
        self.status
            .store(status, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A webhook channel to `url` with these settings (JSON objects as the API takes them).
pub async fn hook_to(f: &Fixture, t: &Tenant, url: &str, settings: serde_json::Value) -> Channel {
    let mut c = Channel::new(
        t.id.clone(),
        ChannelType::Webhook,
        "hook",
        json!({"url": url}).as_object().cloned().unwrap(),
        f.pipeline.clock().now(),
    );
    c.retry_policy = serde_json::from_value(settings["retry_policy"].clone()).unwrap();
    c.circuit_breaker = serde_json::from_value(settings["circuit_breaker"].clone()).unwrap();
    f.pipeline.channels().create_channel(&c).await.unwrap();
    c
}

/// Runs what is due at the clock's time, delivery messages and flow jobs, until nothing is.
pub async fn pump(f: &Fixture, clock: &ManualClock) {
    for _ in 0..50 {
        let ran = run_due(f, clock).await;
        let jobs = f.queue.take_flow_jobs(clock.now_ms());
        for job in &jobs {
            f.pipeline.flow_jobs().flow_job(job).await.unwrap();
        }
        f.consume_changes().await;
        if ran == 0 && jobs.is_empty() {
            return;
        }
    }
    panic!("still running after 50 rounds");
}

/// Ingests one activity to `c` and runs it to its end; the delivery as it ended.
pub async fn one(
    f: &Fixture,
    clock: &ManualClock,
    t: &Tenant,
    c: &Channel,
) -> converger_ports::Delivery {
    let done = f
        .pipeline
        .intake()
        .ingest(t, activity(None, &[c]))
        .await
        .unwrap();
    pump(f, clock).await;
    f.store
        .get_delivery(&done.deliveries[0].id)
        .await
        .unwrap()
        .unwrap()
}

/// The `delivery.status_changed` events of `conversation`, in order: (delivery id, status,
/// attempts, awaiting_ack), each checked to carry the conversation and the time.
pub fn status_changes(f: &Fixture, conversation: &str) -> Vec<(String, String, u64, bool)> {
    f.events
        .published
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.detail_type == EventType::DeliveryStatusChanged)
        .filter(|e| e.detail["conversation_id"] == conversation)
        .map(|e| {
            let d = &e.detail;
            assert!(
                d["at"]
                    .as_str()
                    .and_then(converger_core::Timestamp::parse)
                    .is_some(),
                "{d}"
            );
            (
                d["delivery_id"].as_str().unwrap().to_owned(),
                d["status"].as_str().unwrap().to_owned(),
                d["attempts"].as_u64().unwrap(),
                d["awaiting_ack"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The `dead_letters` gauge of the last health run, for webhook channels.
pub fn dead_letters_gauge() -> f64 {
    let lines = converger_pipeline::metrics::captured();
    let last = lines
        .iter()
        .rev()
        .find(|l| {
            l.get(converger_pipeline::metrics::DEAD_LETTERS).is_some()
                && l["ChannelType"] == "webhook"
        })
        .expect("a dead_letters line");
    last[converger_pipeline::metrics::DEAD_LETTERS]
        .as_f64()
        .unwrap()
}

/// An ordered webhook channel to `url` (`on_dead_letter` as given), a fixed 1 s backoff.
pub async fn ordered_hook(f: &Fixture, t: &Tenant, url: &str, on_dead: &str) -> Channel {
    let mut c = Channel::new(
        t.id.clone(),
        ChannelType::Webhook,
        "ordered",
        json!({"url": url}).as_object().cloned().unwrap(),
        f.pipeline.clock().now(),
    );
    c.retry_policy =
        serde_json::from_value(json!({"backoff": "fixed", "base_ms": 1000, "max_attempts": 3}))
            .unwrap();
    c.circuit_breaker = serde_json::from_value(json!({"failure_threshold": 1000})).unwrap();
    c.ordering = Some(
        converger_core::lanes::Ordering::parse(
            &json!({"by": "conversation", "on_dead_letter": on_dead}),
        )
        .unwrap(),
    );
    f.pipeline.channels().create_channel(&c).await.unwrap();
    c
}

/// Ingests one activity of `conversation` with `text` to `c`; its delivery.
pub async fn said(
    f: &Fixture,
    t: &Tenant,
    c: &Channel,
    conversation: &str,
    text: &str,
) -> converger_ports::Delivery {
    let done = f
        .pipeline
        .intake()
        .ingest(
            t,
            NewActivity {
                id: None,
                conversation_id: conversation.into(),
                seq: None,
                channel_ids: vec![c.id.clone()],
                event_type: None,
                payload_upload: None,
                payload: Some(json!({"text": text})),
                traceparent: None,
                tracestate: None,
            },
        )
        .await
        .unwrap();
    done.deliveries[0].clone()
}
