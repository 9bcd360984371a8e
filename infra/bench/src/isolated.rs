//! A receiver on a thread of its own, for the in-process benchmarks.

use super::cpu_seconds;
use converger_stack::receiver::Receiver;

/// A receiver on its own thread with its own runtime, so that its CPU time can be told apart
/// from ours (`/proc/self/task/<tid>/stat`). Answers 200.
pub struct IsolatedReceiver {
    pub url: String,
    receiver: std::sync::Arc<Receiver>,
    tid: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl IsolatedReceiver {
    pub async fn start() -> Result<Self, String> {
        Self::start_with(converger_stack::receiver::Reply::status(200)).await
    }

    /// One that answers every request with `reply` (a delay standing for a receiver's work).
    pub async fn start_with(reply: converger_stack::receiver::Reply) -> Result<Self, String> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            rt.block_on(async move {
                let tid = std::fs::read_link("/proc/thread-self")
                    .ok()
                    .and_then(|p| p.file_name().map(|t| t.to_string_lossy().into_owned()))
                    .unwrap_or_default();
                match Receiver::start(Vec::new(), reply).await {
                    Ok(r) => {
                        let _ = ready_tx.send(Ok((std::sync::Arc::new(r), tid)));
                        let _ = stopped.await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        });
        let (receiver, tid) = ready_rx
            .await
            .map_err(|_| "the receiver thread stopped".to_string())??;
        Ok(Self {
            url: receiver.url.clone(),
            receiver,
            tid,
            stop: Some(stop),
        })
    }

    /// Waits until the receiver has had `n` requests (or `timeout` passes); the count.
    pub async fn wait_for(&self, n: usize, timeout: std::time::Duration) -> usize {
        self.receiver.wait_for(n, timeout).await.len()
    }

    /// Waits until the receiver has had `n` distinct benchmark activities (a duplicate send
    /// does not stand for a missing one), or `within` has passed.
    pub async fn wait_for_unique(&self, n: usize, within: std::time::Duration) {
        let unique = |rs: &[converger_stack::receiver::Received]| {
            rs.iter()
                .filter_map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
                .filter_map(|b| super::hot_tenant::find_n(&b))
                .collect::<std::collections::HashSet<u64>>()
                .len()
        };
        let deadline = std::time::Instant::now() + within;
        while unique(&self.requests()) < n && std::time::Instant::now() < deadline {
            self.wait_for(
                self.requests().len() + 1,
                std::time::Duration::from_millis(500),
            )
            .await;
        }
    }

    /// Each distinct benchmark activity the receiver had, with the time it arrived after it
    /// was sent (`sent`, by activity; ms) and when it was sent: how many, and those.
    pub fn first_arrivals(
        &self,
        sent: &std::collections::HashMap<u64, std::time::Instant>,
    ) -> (usize, Vec<(std::time::Instant, f64)>) {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for r in &self.requests() {
            let Some(i) = serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|b| super::hot_tenant::find_n(&b))
            else {
                continue;
            };
            if seen.insert(i)
                && let Some(at) = sent.get(&i)
            {
                out.push((
                    *at,
                    r.at.saturating_duration_since(*at).as_secs_f64() * 1000.0,
                ));
            }
        }
        (seen.len(), out)
    }

    /// What the receiver has had so far.
    pub fn requests(&self) -> Vec<converger_stack::receiver::Received> {
        self.receiver.requests()
    }

    /// The receiver thread's CPU seconds so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(&format!("self/task/{}", self.tid))
    }
}

impl Drop for IsolatedReceiver {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}
