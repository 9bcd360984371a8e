//! Every delivery the receiver took announced on the stack's bus, as an integration reading
//! the bus sees it (through [`crate::bus_tap::BusTap`]).

use super::SETTLE;
use crate::bus_tap::BusTap;
use serde_json::json;
use std::collections::HashSet;
use std::time::Instant;

/// A tap of the stack's `delivery.status_changed` events.
pub(super) async fn start(endpoint: &str, stack: &str) -> Result<BusTap, String> {
    let sdk = converger_store::aws::load_config_for(Some(endpoint)).await;
    let bus = format!("{}-events", crate::cfn::stack_name(stack));
    BusTap::start(
        aws_sdk_sqs::Client::new(&sdk),
        &aws_sdk_eventbridge::Client::new(&sdk),
        &bus,
        &format!("{stack}-tap"),
        &json!({"source": ["converger"], "detail-type": ["delivery.status_changed"]}),
    )
    .await
}

/// The deliveries with a `sent` event, read until `want` have one or `SETTLE` passes.
pub(super) async fn sent_deliveries(tap: &BusTap, want: usize) -> Result<usize, String> {
    let mut sent = HashSet::new();
    let deadline = Instant::now() + SETTLE;
    while sent.len() < want && Instant::now() < deadline {
        for v in tap.receive().await? {
            if v["detail"]["status"] == "sent"
                && let Some(id) = v["detail"]["delivery_id"].as_str()
            {
                sent.insert(id.to_owned());
            }
        }
    }
    Ok(sent.len())
}
