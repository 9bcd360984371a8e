//! What the stack's bus carries, read by a rule of the chaos suite's own (an integration's
//! view of the events).

use super::SETTLE;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Instant;

/// A rule of our own on the stack's bus, feeding a queue with every `delivery.status_changed`
/// (what an integration reading the bus sees).
pub(super) struct BusTap {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

impl BusTap {
    pub(super) async fn start(endpoint: &str, stack: &str) -> Result<Self, String> {
        let sdk = converger_store::aws::load_config_for(Some(endpoint)).await;
        let (sqs, events) = (
            aws_sdk_sqs::Client::new(&sdk),
            aws_sdk_eventbridge::Client::new(&sdk),
        );
        let name = format!("{stack}-tap");
        let url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())?
            .queue_url
            .ok_or("no queue url")?;
        let arn = format!("arn:aws:sqs:us-east-1:{}:{name}", crate::LOCAL_ACCOUNT);
        let bus = format!("{}-events", crate::cfn::stack_name(stack));
        events
            .put_rule()
            .name(&name)
            .event_bus_name(&bus)
            .event_pattern(
                json!({"source": ["converger"], "detail-type": ["delivery.status_changed"]})
                    .to_string(),
            )
            .send()
            .await
            .map_err(|e| aws_sdk_eventbridge::error::DisplayErrorContext(&e).to_string())?;
        events
            .put_targets()
            .rule(&name)
            .event_bus_name(&bus)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("tap")
                    .arn(arn)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
            .send()
            .await
            .map_err(|e| aws_sdk_eventbridge::error::DisplayErrorContext(&e).to_string())?;
        Ok(Self { sqs, url })
    }

    /// The deliveries with a `sent` event, read until `want` have one or the stream's events
    /// stop coming (`SETTLE` at most).
    pub(super) async fn sent_deliveries(&self, want: usize) -> Result<usize, String> {
        let mut sent = HashSet::new();
        let deadline = Instant::now() + SETTLE;
        while sent.len() < want && Instant::now() < deadline {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())?;
            for m in out.messages.unwrap_or_default() {
                let v: Value = serde_json::from_str(m.body().unwrap_or("{}")).unwrap_or_default();
                if v["detail"]["status"] == "sent"
                    && let Some(id) = v["detail"]["delivery_id"].as_str()
                {
                    sent.insert(id.to_owned());
                }
                if let Some(h) = m.receipt_handle() {
                    let _ = self
                        .sqs
                        .delete_message()
                        .queue_url(&self.url)
                        .receipt_handle(h)
                        .send()
                        .await;
                }
            }
        }
        Ok(sent.len())
    }
}
