//! Platform events of a batch of attempts sent together: `PutEvents` takes ten entries a
//! request, and a region allows about 10,000 requests a second (2,400 or fewer outside the
//! largest), so one request per status change would cap a region near 10,000 deliveries a
//! second. The deliver function's events are held until ten are waiting, [`LINGER`] has
//! passed since the first of them, or its batch ends ([`Events::flush`]), whichever comes
//! first. Events stay off the delivery's critical path either way.

use async_trait::async_trait;
use converger_ports::{Events, PlatformEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an event waits for others to go with it.
pub const LINGER: Duration = Duration::from_millis(100);
/// Entries in one `PutEvents` request.
pub const BATCH: usize = 10;

/// Events held for a batch request, sent through `inner`.
pub struct BatchedEvents {
    inner: Arc<dyn Events>,
    held: Arc<Mutex<Vec<PlatformEvent>>>,
}

impl BatchedEvents {
    pub fn new(inner: Arc<dyn Events>) -> Self {
        Self {
            inner,
            held: Arc::default(),
        }
    }

    fn take(held: &Mutex<Vec<PlatformEvent>>, all: bool) -> Vec<PlatformEvent> {
        let Ok(mut h) = held.lock() else {
            return Vec::new();
        };
        if all {
            std::mem::take(&mut *h)
        } else {
            let full = h.len() - h.len() % BATCH;
            h.drain(..full).collect()
        }
    }
}

#[async_trait]
impl Events for BatchedEvents {
    async fn publish(&self, events: Vec<PlatformEvent>) {
        if events.is_empty() {
            return;
        }
        let first = {
            let Ok(mut h) = self.held.lock() else {
                return self.inner.publish(events).await;
            };
            let first = h.is_empty();
            h.extend(events);
            first
        };
        // Whole requests go now; the rest within the linger (or at the batch's end).
        let full = Self::take(&self.held, false);
        if !full.is_empty() {
            self.inner.publish(full).await;
        }
        if first {
            let (inner, held) = (self.inner.clone(), self.held.clone());
            tokio::spawn(async move {
                tokio::time::sleep(LINGER).await;
                let rest = Self::take(&held, true);
                if !rest.is_empty() {
                    inner.publish(rest).await;
                }
            });
        }
    }

    async fn try_publish(&self, events: Vec<PlatformEvent>) -> Result<(), usize> {
        self.inner.try_publish(events).await
    }

    async fn flush(&self) {
        let rest = Self::take(&self.held, true);
        if !rest.is_empty() {
            self.inner.publish(rest).await;
        }
        self.inner.flush().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// `docs/operations.md`'s table of events lists exactly the declared detail-types.
    #[test]
    fn the_documented_events_are_the_declared_ones() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let documented: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.trim().strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|t| t.starts_with("delivery.") || t.starts_with("channel."))
            .collect();
        let declared: Vec<&str> = converger_ports::EventType::ALL
            .iter()
            .map(|e| e.as_str())
            .collect();
        assert_eq!(documented, declared);
    }

    #[derive(Default)]
    struct Requests(Mutex<Vec<usize>>);

    #[async_trait]
    impl Events for Requests {
        async fn publish(&self, events: Vec<PlatformEvent>) {
            self.0.lock().unwrap().push(events.len());
        }
    }

    fn event(n: usize) -> Vec<PlatformEvent> {
        (0..n)
            .map(|i| PlatformEvent {
                detail_type: converger_ports::EventType::DeliveryStatusChanged,
                detail: serde_json::json!({ "i": i }),
            })
            .collect()
    }

    #[tokio::test]
    async fn events_go_ten_a_request_and_the_rest_at_the_end_of_the_batch() {
        let sent = Arc::new(Requests::default());
        let b = BatchedEvents::new(sent.clone());
        for _ in 0..23 {
            b.publish(event(1)).await;
        }
        assert_eq!(*sent.0.lock().unwrap(), vec![10, 10]);
        b.flush().await;
        assert_eq!(*sent.0.lock().unwrap(), vec![10, 10, 3]);
        // Nothing is sent twice when the linger runs out after the flush.
        tokio::time::sleep(LINGER * 2).await;
        assert_eq!(sent.0.lock().unwrap().iter().sum::<usize>(), 23);
    }

    #[tokio::test]
    async fn a_lone_event_goes_within_the_linger() {
        let sent = Arc::new(Requests::default());
        let b = BatchedEvents::new(sent.clone());
        b.publish(event(1)).await;
        assert!(sent.0.lock().unwrap().is_empty());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while sent.0.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*sent.0.lock().unwrap(), vec![1]);
    }
}
