//! Every delivery the receiver took, and every dead letter, announced on the stack's bus, as
//! an integration reading the bus sees it (through [`crate::bus_tap::BusTap`]).

use super::SETTLE;
use crate::bus_tap::BusTap;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A tap of the stack's `delivery.status_changed` and `delivery.dead_lettered` events.
pub(super) async fn start(endpoint: &str, stack: &str) -> Result<BusTap, String> {
    let sdk = converger_store::aws::load_config_for(Some(endpoint)).await;
    let bus = format!("{}-events", crate::cfn::stack_name(stack));
    BusTap::start(
        aws_sdk_sqs::Client::new(&sdk),
        &aws_sdk_eventbridge::Client::new(&sdk),
        &bus,
        &format!("{stack}-tap"),
        &json!({"source": ["converger"],
                "detail-type": ["delivery.status_changed", "delivery.dead_lettered"]}),
    )
    .await
}

/// The deliveries the tap heard of: with a `sent` status event, and with a dead-letter event.
pub(super) struct Heard {
    pub sent: usize,
    pub dead_lettered: usize,
}

/// Reads the tap until `sent` deliveries have a `sent` event and `dead` a dead-letter event,
/// or `SETTLE` passes (one queue: both kinds are read together).
pub(super) async fn announced(tap: &BusTap, sent: usize, dead: usize) -> Result<Heard, String> {
    let (mut sent_ids, mut dead_ids) = (HashSet::new(), HashSet::new());
    let deadline = Instant::now() + SETTLE;
    while (sent_ids.len() < sent || dead_ids.len() < dead) && Instant::now() < deadline {
        for v in tap.receive().await? {
            let Some(id) = v["detail"]["delivery_id"].as_str().map(str::to_owned) else {
                continue;
            };
            match v["detail-type"].as_str() {
                Some("delivery.dead_lettered") => {
                    dead_ids.insert(id);
                }
                Some("delivery.status_changed") if v["detail"]["status"] == "sent" => {
                    sent_ids.insert(id);
                }
                _ => {}
            }
        }
    }
    Ok(Heard {
        sent: sent_ids.len(),
        dead_lettered: dead_ids.len(),
    })
}

/// How many of `channel`'s deliveries are dead letters, read through the tenant API until
/// `want` are or `SETTLE` passes (none for an empty `channel`).
pub(super) async fn failed_deliveries(
    api_url: &str,
    key: &str,
    channel: &str,
    want: usize,
) -> Result<usize, String> {
    if channel.is_empty() {
        return Ok(0);
    }
    let http = super::client()?;
    let deadline = Instant::now() + SETTLE;
    loop {
        let mut ids = HashSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let url = format!("{api_url}/api/v1/deliveries");
            let mut query = vec![
                ("status", "failed"),
                ("channel_id", channel),
                ("limit", "500"),
            ];
            if let Some(c) = &cursor {
                query.push(("cursor", c));
            }
            let resp = http
                .get(&url)
                .query(&query)
                .bearer_auth(key)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let page: Value = resp.json().await.map_err(|e| format!("{url}: {e}"))?;
            for d in page["data"].as_array().into_iter().flatten() {
                if let Some(id) = d["id"].as_str() {
                    ids.insert(id.to_owned());
                }
            }
            match page["next_cursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
                _ => break,
            }
        }
        if ids.len() >= want || Instant::now() > deadline {
            return Ok(ids.len());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
