//! The bus in memory.

use super::*;

/// Platform events, kept in memory, and handed to whoever taps the bus (the in-process
/// stack's stand-in for the bus's rule to the stream queue).
#[derive(Default)]
pub struct MemEvents {
    pub published: Mutex<Vec<PlatformEvent>>,
    taps: Mutex<Vec<tokio::sync::mpsc::UnboundedSender<PlatformEvent>>>,
}

impl MemEvents {
    /// Every event published from now on, as it is published.
    pub fn tap(&self) -> tokio::sync::mpsc::UnboundedReceiver<PlatformEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if let Ok(mut t) = self.taps.lock() {
            t.push(tx);
        }
        rx
    }
}

#[async_trait]
impl Events for MemEvents {
    async fn publish(&self, events: Vec<PlatformEvent>) {
        if let Ok(mut t) = self.taps.lock() {
            t.retain(|tx| events.iter().all(|e| tx.send(e.clone()).is_ok()));
        }
        if let Ok(mut p) = self.published.lock() {
            p.extend(events);
        }
    }
}
