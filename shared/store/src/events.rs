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
}

#[async_trait]
impl Events for EventBridgeEvents {
    async fn publish(&self, events: Vec<PlatformEvent>) {
        // PutEvents takes at most 10 entries per call.
        for chunk in events.chunks(10) {
            let entries: Vec<PutEventsRequestEntry> = chunk
                .iter()
                .map(|e| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&self.bus)
                        .source(EVENT_SOURCE)
                        .detail_type(e.detail_type.as_str())
                        .detail(e.detail.to_string())
                        .build()
                })
                .collect();
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
