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

#[async_trait]
impl Events for EventBridgeEvents {
    async fn try_publish(&self, events: Vec<PlatformEvent>) -> Result<(), usize> {
        // PutEvents takes at most 10 entries per call, and answers for each entry.
        for (i, chunk) in events.chunks(10).enumerate() {
            let entries: Vec<PutEventsRequestEntry> = chunk.iter().map(|e| self.entry(e)).collect();
            let refused = match self
                .client
                .put_events()
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) if out.failed_entry_count > 0 => {
                    let first = out
                        .entries
                        .unwrap_or_default()
                        .iter()
                        .position(|e| e.error_code.is_some())
                        .unwrap_or(0);
                    tracing::warn!(failed = out.failed_entry_count, "platform events refused");
                    Some(first)
                }
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(error = %DisplayErrorContext(&e), "platform events not published");
                    Some(0)
                }
            };
            if let Some(at) = refused {
                return Err(i * 10 + at);
            }
        }
        Ok(())
    }

    async fn publish(&self, events: Vec<PlatformEvent>) {
        // PutEvents takes at most 10 entries per call.
        for chunk in events.chunks(10) {
            let entries: Vec<PutEventsRequestEntry> = chunk.iter().map(|e| self.entry(e)).collect();
            match self
                .client
                .put_events()
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) if out.failed_entry_count > 0 => {
                    tracing::warn!(
                        failed = out.failed_entry_count,
                        "some platform events were refused"
                    )
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %DisplayErrorContext(&e), "platform events not published")
                }
            }
        }
    }
}
