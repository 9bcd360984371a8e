//! The use cases over the in-process backend alone: no stack, no receiver, no emulator. Each
//! test builds a pipeline on fresh in-memory tables and queues and drives one use case
//! through its type, reading the outcome from the store and the queues.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_adapters::Adapters;
use converger_core::query::{Actor, ActorKind};
use converger_core::time::{Clock, ManualClock};
use converger_core::{ChannelType, DeliveryStatus, Tier};
use converger_memory::{MemEvents, MemQueue, MemStore};
use converger_pipeline::ingest::NewActivity;
use converger_pipeline::{Pipeline, PipelineConfig};
use converger_ports::prelude::*;
use converger_ports::{Channel, EventType, FlowJobKind, Tenant};
use serde_json::json;
use std::sync::Arc;

struct Fixture {
    pipeline: Pipeline,
    store: Arc<MemStore>,
    queue: Arc<MemQueue>,
    /// What the pipeline published on the bus.
    events: Arc<MemEvents>,
}

fn fixture() -> Fixture {
    fixture_with(PipelineConfig::default())
}

fn fixture_with(config: PipelineConfig) -> Fixture {
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
    }
}

fn operator() -> Actor {
    Actor {
        kind: ActorKind::Admin,
        id: "ops".into(),
    }
}

async fn tenant(f: &Fixture) -> Tenant {
    f.pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap()
        .0
}

async fn webhook(f: &Fixture, t: &Tenant) -> Channel {
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

fn activity(id: Option<&str>, channels: &[&Channel]) -> NewActivity {
    NewActivity {
        id: id.map(|i| converger_core::ActivityId::parse(i).unwrap()),
        conversation_id: "conv-1".into(),
        seq: None,
        channel_ids: channels.iter().map(|c| c.id.clone()).collect(),
        event_type: None,
        payload: json!({"text": "hello"}),
    }
}

/// Every message the queues hold now or later, by delivery id.
fn queued(q: &MemQueue) -> Vec<String> {
    let mut ids: Vec<String> = q
        .take_due(i64::MAX)
        .into_iter()
        .map(|m| m.delivery_id.to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_rotated_api_key_resolves_and_the_old_one_does_not() {
    let f = fixture();
    let (t, first) = f
        .pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap();
    let hash = converger_core::secret::hash_api_key;
    let reads = f.pipeline.reads();
    assert_eq!(
        reads.api_key_tenant(&hash(&first)).await.unwrap(),
        Some(t.id.clone())
    );
    let second = f
        .pipeline
        .tenants()
        .rotate_api_key(&t.id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first, second);
    assert_eq!(reads.api_key_tenant(&hash(&first)).await.unwrap(), None);
    assert_eq!(
        reads.api_key_tenant(&hash(&second)).await.unwrap(),
        Some(t.id)
    );
}

#[tokio::test]
async fn an_activity_becomes_one_queued_delivery_per_channel_once() {
    let f = fixture();
    let t = tenant(&f).await;
    let (a, b) = (webhook(&f, &t).await, webhook(&f, &t).await);
    let intake = f.pipeline.intake();
    let done = intake
        .ingest(&t, activity(Some("act_1"), &[&a, &b]))
        .await
        .unwrap();
    assert!(done.created);
    assert_eq!(done.deliveries.len(), 2);
    let mut ids: Vec<String> = done.deliveries.iter().map(|d| d.id.to_string()).collect();
    ids.sort();
    assert_eq!(queued(&f.queue), ids);
    for d in &done.deliveries {
        assert_eq!(d.status, DeliveryStatus::Pending);
    }
    // The same activity id again creates nothing new: it answers with the stored deliveries
    // and sends their messages again (the first ingest may have died before sending them;
    // a claim makes the duplicate harmless).
    let again = intake
        .ingest(&t, activity(Some("act_1"), &[&a, &b]))
        .await
        .unwrap();
    assert!(!again.created);
    let mut again_ids: Vec<String> = again.deliveries.iter().map(|d| d.id.to_string()).collect();
    again_ids.sort();
    assert_eq!(again_ids, ids);
    assert_eq!(queued(&f.queue), ids);
    assert_eq!(f.store.delivery_count(), 2);
}

#[tokio::test]
async fn a_paused_channel_parks_new_deliveries_and_resume_releases_them() {
    let f = fixture();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    f.pipeline.flow().pause(&c, &operator()).await.unwrap();
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    // Parked: written paused, nothing sent.
    assert_eq!(queued(&f.queue), Vec::<String>::new());
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!(row.status, DeliveryStatus::Paused);

    f.pipeline.flow().resume(&c, &operator()).await.unwrap();
    let jobs = f.queue.take_flow_jobs(i64::MAX);
    assert!(
        jobs.iter().any(|j| j.kind == FlowJobKind::Release),
        "{jobs:?}"
    );
    for job in jobs.iter().filter(|j| j.kind == FlowJobKind::Release) {
        f.pipeline.flow_jobs().flow_job(job).await.unwrap();
    }
    assert_eq!(queued(&f.queue), vec![id.to_string()]);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!(row.status, DeliveryStatus::Pending);
}

#[tokio::test]
async fn a_deleted_channel_is_let_go_and_leaves_the_tenants_reads() {
    let f = fixture();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    f.pipeline.flow().pause(&c, &operator()).await.unwrap();
    assert!(
        f.pipeline
            .channels()
            .delete_channel(&c, &operator())
            .await
            .unwrap()
    );
    // Its pause is lifted and a release is on its way, so what waited reaches an attempt
    // (which dead-letters it as `channel deleted`).
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(flow.circuit_state, converger_core::CircuitState::Closed);
    let jobs = f.queue.take_flow_jobs(i64::MAX);
    assert!(
        jobs.iter().any(|j| j.kind == FlowJobKind::Release),
        "{jobs:?}"
    );
    let scope = converger_core::Scope::Tenant(&t.id);
    assert!(
        f.pipeline
            .reads()
            .channel_in(scope, &c.id)
            .await
            .unwrap()
            .is_none()
    );
    // Deleting it again finds nothing.
    assert!(
        !f.pipeline
            .channels()
            .delete_channel(&c, &operator())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn the_sweep_enqueues_a_due_delivery_whose_message_was_lost() {
    // No grace: a delivery due now counts as overdue (deployed, the sweep waits 5 minutes
    // past a delivery's due time before it calls its message lost).
    let f = fixture_with(PipelineConfig {
        sweep_grace: std::time::Duration::ZERO,
        ..PipelineConfig::default()
    });
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    // The message is lost; the row stays pending and due (and a moment later, overdue).
    assert_eq!(queued(&f.queue).len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let report = f.pipeline.sweeper().sweep().await.unwrap();
    assert_eq!(report.enqueued, 1, "{report:?}");
    assert_eq!(queued(&f.queue), vec![done.deliveries[0].id.to_string()]);
}

/// A pipeline, queue and store whose time is `clock`'s, with deliveries allowed to loopback.
fn fixture_on(clock: Arc<ManualClock>) -> Fixture {
    fixture_on_with(clock, |_| {})
}

fn fixture_on_with(clock: Arc<ManualClock>, adjust: impl FnOnce(&mut PipelineConfig)) -> Fixture {
    let store = Arc::new(MemStore::new());
    let queue = Arc::new(MemQueue::with_clock(clock.clone()));
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
    }
}

/// A webhook channel to a loopback port nobody listens on (every call is refused at once, a
/// transient failure), with these settings.
async fn refused(
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
async fn run_due(f: &Fixture, clock: &ManualClock) -> usize {
    let due = f.queue.take_due(clock.now_ms());
    for m in &due {
        f.pipeline.attempts().deliver(m.clone()).await.unwrap();
    }
    due.len()
}

#[tokio::test]
async fn a_retry_waits_out_its_backoff_on_the_pipelines_clock() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let c = refused(
        &f,
        &t,
        json!({"schedule": [60000], "max_attempts": 2}),
        json!({"failure_threshold": 1000}),
    )
    .await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    let id = done.deliveries[0].id.clone();
    assert_eq!(run_due(&f, &clock).await, 1);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 1));
    assert_eq!(row.next_attempt_at, clock.now_ms() + 60_000);
    // A second short of the backoff, nothing is due; at the backoff, the retry runs and,
    // being the last attempt, dead-letters.
    clock.advance(std::time::Duration::from_secs(59));
    assert_eq!(run_due(&f, &clock).await, 0);
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(run_due(&f, &clock).await, 1);
    let row = f.store.get_delivery(&id).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (DeliveryStatus::Failed, 2));
}

#[tokio::test]
async fn an_open_breaker_probes_after_its_cooldown_on_the_pipelines_clock() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    // The tenant has an alert webhook: it hears of the first opening only.
    let alerts = Responder::start(200).await;
    let t = f
        .pipeline
        .tenants()
        .set_alert_webhook(&t, Some(&alerts.url))
        .await
        .unwrap();
    let c = refused(
        &f,
        &t,
        json!({"schedule": [1000], "max_attempts": 5}),
        json!({"failure_threshold": 1, "cooldown_ms": 30000}),
    )
    .await;
    f.pipeline
        .intake()
        .ingest(&t, activity(None, &[&c]))
        .await
        .unwrap();
    assert_eq!(run_due(&f, &clock).await, 1);
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(flow.circuit_state, converger_core::CircuitState::Open);
    let opened = clock.now_ms();
    // The probe comes at the end of the cooldown, not before.
    clock.advance(std::time::Duration::from_secs(29));
    assert!(
        f.queue
            .take_flow_jobs(clock.now_ms())
            .iter()
            .all(|j| j.kind != FlowJobKind::Probe)
    );
    clock.advance(std::time::Duration::from_secs(1));
    let jobs = f.queue.take_flow_jobs(clock.now_ms());
    let probe = jobs
        .iter()
        .find(|j| j.kind == FlowJobKind::Probe)
        .expect("a probe at the end of the cooldown");
    assert_eq!(clock.now_ms() - opened, 30_000);
    f.pipeline.flow_jobs().flow_job(probe).await.unwrap();
    // The probe's attempt was refused too: the breaker is open again, from the probe's time.
    let _ = run_due(&f, &clock).await;
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Open,
        "{flow:?}"
    );
    assert!(flow.circuit_changed_at >= opened + 30_000, "{flow:?}");
    // Each opening is on the bus, the re-open with its reason and the probe's time; the
    // alert webhook got the first alone.
    let opened_events: Vec<serde_json::Value> = f
        .events
        .published
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.detail_type == EventType::ChannelCircuitOpened)
        .map(|e| e.detail.clone())
        .collect();
    assert_eq!(opened_events.len(), 2, "{opened_events:?}");
    assert_eq!(opened_events[0]["reason"], "failures");
    assert_eq!(opened_events[1]["reason"], "probe_failed");
    assert_eq!(opened_events[1]["channel_id"], c.id.as_str());
    assert_eq!(
        opened_events[1]["changed_at"],
        converger_core::time::ms_to_rfc3339(flow.circuit_changed_at)
    );
    let (alerted, _) = f
        .pipeline
        .reads()
        .conversation_activities(&t.id, "alerts", None, 10)
        .await
        .unwrap();
    assert_eq!(alerted.len(), 1, "{alerted:?}");
    assert_eq!(alerted[0].payload["reason"], "failures");
}

/// A receiver on loopback answering every request with the status it holds at that moment.
struct Responder {
    url: String,
    status: Arc<std::sync::atomic::AtomicU16>,
    /// Every request's body, in the order they came.
    bodies: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Responder {
    async fn start(status: u16) -> Self {
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
    fn texts(&self) -> Vec<String> {
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

    fn answer(&self, status: u16) {
        self.status
            .store(status, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A webhook channel to `url` with these settings (JSON objects as the API takes them).
async fn hook_to(f: &Fixture, t: &Tenant, url: &str, settings: serde_json::Value) -> Channel {
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
async fn pump(f: &Fixture, clock: &ManualClock) {
    for _ in 0..50 {
        let ran = run_due(f, clock).await;
        let jobs = f.queue.take_flow_jobs(clock.now_ms());
        for job in &jobs {
            f.pipeline.flow_jobs().flow_job(job).await.unwrap();
        }
        if ran == 0 && jobs.is_empty() {
            return;
        }
    }
    panic!("still running after 50 rounds");
}

/// Ingests one activity to `c` and runs it to its end; the delivery as it ended.
async fn one(
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

#[tokio::test]
async fn a_success_starts_the_auto_disable_count_again() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 1000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let active = |f: &Fixture| {
        let id = c.id.clone();
        let store = f.store.clone();
        async move { store.get_channel(&id).await.unwrap().unwrap() }
    };
    for _ in 0..19 {
        assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Failed);
    }
    rx.answer(200);
    assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Sent);
    // The success is a day old when the failures start again: only the count can spare the
    // channel now, and it started over at the success.
    clock.advance(std::time::Duration::from_secs(25 * 3600));
    rx.answer(503);
    for _ in 0..19 {
        assert_eq!(one(&f, &clock, &t, &c).await.status, DeliveryStatus::Failed);
    }
    assert!(
        active(&f).await.active,
        "nineteen in a row since the success"
    );
    one(&f, &clock, &t, &c).await;
    let disabled = active(&f).await;
    assert!(!disabled.active, "the twentieth in a row disables it");
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some(converger_core::health::AUTO_DISABLED)
    );
}

#[tokio::test]
async fn a_close_replays_only_the_dead_letters_of_its_window() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 3, "cooldown_ms": 30000,
                            "replay_dead_letters_on_close": true, "replay_window_ms": 60000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let old = one(&f, &clock, &t, &c).await;
    clock.advance(std::time::Duration::from_secs(120));
    let recent = [one(&f, &clock, &t, &c).await, one(&f, &clock, &t, &c).await];
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Open,
        "{flow:?}"
    );
    // Parked behind the open breaker; after the cooldown it is the probe, which succeeds.
    let parked = one(&f, &clock, &t, &c).await;
    assert_eq!(parked.status, DeliveryStatus::Paused);
    rx.answer(200);
    clock.advance(std::time::Duration::from_secs(30));
    pump(&f, &clock).await;
    let row = |id: converger_core::DeliveryId| {
        let store = f.store.clone();
        async move { store.get_delivery(&id).await.unwrap().unwrap() }
    };
    assert_eq!(row(parked.id.clone()).await.status, DeliveryStatus::Sent);
    let flow = f.pipeline.reads().flow(&c.id).await.unwrap();
    assert_eq!(
        flow.circuit_state,
        converger_core::CircuitState::Closed,
        "{flow:?}"
    );
    // The two that failed 30 s before the close are replayed and sent; the one that failed
    // two and a half minutes before it, outside the 60 s window, stays dead.
    for d in &recent {
        let d = row(d.id.clone()).await;
        assert_eq!(
            (d.status, d.retry_count),
            (DeliveryStatus::Sent, 1),
            "{d:?}"
        );
    }
    let d = row(old.id.clone()).await;
    assert_eq!(
        (d.status, d.retry_count),
        (DeliveryStatus::Failed, 0),
        "{d:?}"
    );
}

/// The `delivery.status_changed` events of `conversation`, in order: (delivery id, status,
/// attempts, awaiting_ack), each checked to carry the conversation and the time.
fn status_changes(f: &Fixture, conversation: &str) -> Vec<(String, String, u64, bool)> {
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

/// Every status change of a delivery is announced with its conversation: parked behind an
/// open breaker, pending again when the probe takes it or the close releases it, sent, failed,
/// and pending after a single and after a bulk replay.
#[tokio::test]
async fn every_status_change_is_announced_with_its_conversation() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"schedule": [1000], "max_attempts": 5},
        "circuit_breaker": {"failure_threshold": 1, "cooldown_ms": 30000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let ingest = || async {
        f.pipeline
            .intake()
            .ingest(&t, activity(None, &[&c]))
            .await
            .unwrap()
            .deliveries[0]
            .id
            .to_string()
    };
    // The first attempt fails and opens the breaker: its retry is parked. The second
    // activity is written parked, which is announced too (its conversation sees it wait).
    let first = ingest().await;
    pump(&f, &clock).await;
    let second = ingest().await;
    assert_eq!(
        status_changes(&f, "conv-1"),
        vec![
            (first.clone(), "paused".into(), 1, false),
            (second.clone(), "paused".into(), 0, false)
        ]
    );
    // After the cooldown the probe takes one of the two parked deliveries (either: both
    // wait in the parked index) and the close releases the other: each is pending again,
    // then sent.
    rx.answer(200);
    clock.advance(std::time::Duration::from_secs(30));
    pump(&f, &clock).await;
    let of = |id: &str| -> Vec<(String, u64)> {
        status_changes(&f, "conv-1")
            .into_iter()
            .filter(|(d, ..)| d == id)
            .map(|(_, status, attempts, _)| (status, attempts))
            .collect()
    };
    assert_eq!(
        of(&first),
        [
            ("paused".into(), 1),
            ("pending".into(), 1),
            ("sent".into(), 2)
        ]
    );
    assert_eq!(
        of(&second),
        [
            ("paused".into(), 0),
            ("pending".into(), 0),
            ("sent".into(), 1)
        ]
    );

    // A permanent failure, then a single replay and a bulk replay of it.
    rx.answer(400);
    let third = ingest().await;
    pump(&f, &clock).await;
    let replays = f.pipeline.replays();
    replays
        .replay_one(
            Some(&t.id),
            &converger_core::DeliveryId::parse(&third).unwrap(),
            &operator(),
        )
        .await
        .unwrap();
    pump(&f, &clock).await;
    clock.advance(std::time::Duration::from_secs(1));
    let r = replays
        .replay_channel(&t.id, &c.id, Default::default(), &operator())
        .await
        .unwrap();
    assert_eq!(r.retried, 1);
    assert_eq!(
        of(&third),
        [
            ("failed".into(), 1),
            ("pending".into(), 0),
            ("failed".into(), 1),
            ("pending".into(), 0)
        ]
    );
    assert!(status_changes(&f, "conv-1").iter().all(|(.., ack)| !ack));
}

/// The `dead_letters` gauge of the last health run, for webhook channels.
fn dead_letters_gauge() -> f64 {
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

#[tokio::test]
async fn the_dead_letters_gauge_counts_every_stored_dead_letter() {
    converger_pipeline::metrics::capture();
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on_with(clock.clone(), |c| {
        c.health_flush = std::time::Duration::ZERO;
    });
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let settings = json!({
        "retry_policy": {"max_attempts": 1},
        "circuit_breaker": {"failure_threshold": 1000},
    });
    let c = hook_to(&f, &t, &rx.url, settings).await;
    let mut dead = Vec::new();
    for _ in 0..3 {
        let d = one(&f, &clock, &t, &c).await;
        assert_eq!(d.status, DeliveryStatus::Failed);
        dead.push(d);
    }
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 3.0);
    // Two days on, far outside the health window (and past the per-minute counters' two
    // hours), all three are still stored: still counted.
    clock.advance(std::time::Duration::from_secs(2 * 86_400));
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 3.0);
    // A replayed one is no longer a dead letter.
    f.pipeline
        .replays()
        .replay_one(Some(&t.id), &dead[0].id, &operator())
        .await
        .unwrap();
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 2.0);
    // Past the retention they have expired with their rows.
    let retention = PipelineConfig::default().retention;
    clock.advance(retention + std::time::Duration::from_secs(86_400));
    f.pipeline.health().health_check().await.unwrap();
    assert_eq!(dead_letters_gauge(), 0.0);
}

/// An ordered webhook channel to `url` (`on_dead_letter` as given), a fixed 1 s backoff.
async fn ordered_hook(f: &Fixture, t: &Tenant, url: &str, on_dead: &str) -> Channel {
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
async fn said(
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
                payload: json!({"text": text}),
            },
        )
        .await
        .unwrap();
    done.deliveries[0].clone()
}

#[tokio::test]
async fn a_retrying_head_holds_only_its_own_conversation() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(503).await;
    let c = ordered_hook(&f, &t, &rx.url, "hold").await;
    said(&f, &t, &c, "a", "a1").await;
    pump(&f, &clock).await;
    // a1 failed and waits for its retry; its conversation waits behind it, the other does not.
    rx.answer(200);
    let a2 = said(&f, &t, &c, "a", "a2").await;
    said(&f, &t, &c, "a", "a3").await;
    said(&f, &t, &c, "b", "b1").await;
    said(&f, &t, &c, "b", "b2").await;
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a1", "b1", "b2"]);
    let waiting = f.store.get_delivery(&a2.id).await.unwrap().unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
    assert_eq!(waiting.attempts, 0, "never tried while a1 holds the lane");
    // The retry is due: a1 goes, then a2 and a3 in their order, one at a time.
    clock.advance(std::time::Duration::from_millis(1000));
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a1", "b1", "b2", "a1", "a2", "a3"]);
}

#[tokio::test]
async fn a_lane_moves_on_after_a_crash_between_its_heads_outcome_and_the_hand_on() {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let t = tenant(&f).await;
    let rx = Responder::start(200).await;
    let c = ordered_hook(&f, &t, &rx.url, "hold").await;
    let a1 = said(&f, &t, &c, "a", "a1").await;
    said(&f, &t, &c, "a", "a2").await;
    said(&f, &t, &c, "a", "a3").await;
    // The deliver function takes a1's message, records it sent, and dies before it hands
    // the lane on: nothing is queued for a2 or a3.
    let msgs = f.queue.take_due(clock.now_ms());
    assert_eq!(
        msgs.iter()
            .map(|m| m.delivery_id.clone())
            .collect::<Vec<_>>(),
        std::slice::from_ref(&a1.id),
        "only the head is enqueued"
    );
    let now = clock.now();
    let converger_ports::Claim::Claimed(row) =
        f.store.claim(&a1.id, "crashed", now, 10_000).await.unwrap()
    else {
        panic!("a1 claims")
    };
    let log = converger_ports::LogUpdate {
        recent: Vec::new(),
        spill: Vec::new(),
    };
    let info = converger_ports::SentInfo::default();
    assert!(
        f.store
            .mark_sent(&row, "crashed", &info, &log, now)
            .await
            .unwrap()
    );
    pump(&f, &clock).await;
    assert!(rx.texts().is_empty(), "nothing was due");
    // At their first look the waiting deliveries are swept, find a1 ended, and go in order.
    clock.advance(
        PipelineConfig::default().lane_recheck
            + PipelineConfig::default().sweep_grace
            + std::time::Duration::from_secs(1),
    );
    f.pipeline.sweeper().sweep().await.unwrap();
    pump(&f, &clock).await;
    assert_eq!(rx.texts(), ["a2", "a3"]);
}
