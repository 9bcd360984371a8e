//! `bench throughput`: deliveries as fast as the pipeline takes them, ingested through the
//! pipeline with many producers at once and spread over 20 channels of one default-tier
//! tenant, to a receiver on its own thread (its CPU is not counted as ours).
//! - On the in-process backend with its latency model: deliveries per second and the CPU
//!   seconds of this process (ingest, attempts, the in-process store) per 1,000 deliveries;
//!   the ceiling Converger's own code sets.
//! - On the local stack: the same for a smaller run, with the emulator's CPU seconds beside
//!   ours, which says who the bottleneck is there.

use super::{IsolatedReceiver, activity, cpu_seconds, tenant, webhook};
use converger_core::Tier;
use converger_memory::LatencyModel;
use converger_pipeline::{Pipeline, PipelineConfig};
use converger_stack::inprocess::InProcess;
use converger_stack::stack::{Stack, StackOptions};
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries on the in-process backend (0: skip).
    pub in_process: usize,
    /// Deliveries on the local stack (0: skip).
    pub emulator: usize,
}

const CHANNELS: usize = 20;
/// Producers ingesting at once (API Gateway would run this many ingest Lambdas).
const PRODUCERS: usize = 200;

pub async fn run(o: Options) -> Result<Value, String> {
    converger_pipeline::metrics::set_enabled(false);
    let config = PipelineConfig {
        allowlist: converger_core::net::Allowlist::loopback(),
        ..PipelineConfig::default()
    };
    let mut line = json!({
        "scenario": "throughput",
        "channels": CHANNELS,
        "producers": PRODUCERS,
        "target_cpu_ms_per_delivery": 0.5,
    });
    if o.in_process > 0 {
        let model = LatencyModel::from_env()?;
        let rt = InProcess::start(Some(model), config.clone(), None)?;
        let r = measure(&rt.pipeline, o.in_process, None).await;
        rt.stop().await;
        line["in_process"] = r?;
        line["in_process"]["backend"] = json!("in-process (latency model)");
        line["in_process"]["latency_model_ms"] = model.to_json();
    }
    if o.emulator > 0 {
        let stack = Stack::start(StackOptions::bench("tput")).await?;
        let pid = stack.emulator_pid();
        let r = measure(&stack.pipeline, o.emulator, pid).await;
        stack.stop().await;
        line["emulator"] = r?;
        line["emulator"]["backend"] = json!("local stack on the emulator");
    }
    Ok(super::emit(line))
}

async fn measure(p: &Pipeline, n: usize, emulator_pid: Option<u32>) -> Result<Value, String> {
    let receiver = IsolatedReceiver::start().await?;
    let (t, _) = tenant(p, Tier::Default).await?;
    let mut channels = Vec::with_capacity(CHANNELS);
    for _ in 0..CHANNELS {
        channels.push(webhook(p, &t, &receiver.url, json!({})).await?.id);
    }
    let em_cpu = || emulator_pid.and_then(|pid| cpu_seconds(&pid.to_string()));
    let ours = || {
        cpu_seconds("self")
            .zip(receiver.cpu_seconds())
            .map(|(all, rx)| all - rx)
    };
    let (cpu0, em0, rx0, t0) = (ours(), em_cpu(), receiver.cpu_seconds(), Instant::now());
    let refused = futures::stream::iter(0..n)
        .map(|i| {
            let ch = &channels[i % CHANNELS];
            let t = &t;
            async move { p.intake().ingest(t, activity(ch, i)).await.is_err() }
        })
        .buffer_unordered(PRODUCERS)
        .filter(|refused| futures::future::ready(*refused))
        .count()
        .await;
    if refused > 0 {
        return Err(format!("{refused} of {n} activities were refused"));
    }
    let ingested = t0.elapsed();
    let got = receiver.wait_for(n, Duration::from_secs(600)).await;
    let took = t0.elapsed();
    let (cpu1, em1, rx1) = (ours(), em_cpu(), receiver.cpu_seconds());
    if got < n {
        return Err(format!("{got} of {n} deliveries arrived within 600 s"));
    }
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let ours = cpu1.zip(cpu0).map(|(a, b)| a - b);
    let theirs = em1.zip(em0).map(|(a, b)| a - b);
    let receiver_cpu = rx1.zip(rx0).map(|(a, b)| a - b);
    Ok(json!({
        "deliveries": n,
        "seconds": round(took.as_secs_f64()),
        "ingest_seconds": round(ingested.as_secs_f64()),
        "deliveries_per_s": (n as f64 / took.as_secs_f64()).round(),
        "cpu_s": ours.map(round),
        // CPU seconds per 1,000 deliveries, which is also CPU milliseconds per delivery.
        "cpu_s_per_1000_deliveries": ours.map(|c| round(c * 1000.0 / n as f64)),
        "emulator_cpu_s": theirs.map(round),
        "receiver_cpu_s": receiver_cpu.map(round),
    }))
}
