//! Platform events on the EventBridge bus.

use crate::resources::EVENT_SOURCE;
use async_trait::async_trait;
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::error::DisplayErrorContext;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use converger_ports::{Events, PlatformEvent};

#[derive(Clone, Debug)]
pub struct EventBridgeEvents {
    client: Client,
    bus: String,
}

impl EventBridgeEvents {
    pub fn new(client: Client, bus: String) -> Self {
        Self { client, bus }
    }

    fn entry(&self, e: &PlatformEvent) -> PutEventsRequestEntry {
        PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(EVENT_SOURCE)
            .detail_type(e.detail_type.as_str())
            .detail(e.detail.to_string())
            .build()
    }
}

impl EventBridgeEvents {
    /// One `PutEvents` of at most ten entries; the first refused entry's place, if any (a
    /// refusal is logged here).
    async fn put(&self, chunk: &[PlatformEvent]) -> Result<(), usize> {
        let entries: Vec<PutEventsRequestEntry> = chunk.iter().map(|e| self.entry(e)).collect();
        match self
            .client
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await
        {
            Ok(out) if out.failed_entry_count > 0 => {
                tracing::warn!(failed = out.failed_entry_count, "platform events refused");
                Err(out
                    .entries
                    .unwrap_or_default()
                    .iter()
                    .position(|e| e.error_code.is_some())
                    .unwrap_or(0))
            }
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %DisplayErrorContext(&e), "platform events not published");
                Err(0)
            }
        }
    }
}

// PutEvents takes at most 10 entries per call.
#[async_trait]
impl Events for EventBridgeEvents {
    async fn try_publish(&self, events: Vec<PlatformEvent>) -> Result<(), usize> {
        for (i, chunk) in events.chunks(10).enumerate() {
            self.put(chunk).await.map_err(|at| i * 10 + at)?;
        }
        Ok(())
    }

    async fn publish(&self, events: Vec<PlatformEvent>) {
        // Best effort: a refused chunk is logged and the rest still go.
        for chunk in events.chunks(10) {
            let _ = self.put(chunk).await;
        }
    }
}
