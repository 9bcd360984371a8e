//! A typed client of the tenant API, over the API's own views (`converger_http::views`): a
//! test reads `d.status` and `d.attempt_log`, not `d["status"]`, and an answer that drifts
//! from its view fails where it is read, naming the field. Error answers come back as
//! [`ApiError`], with the stable code the API documents.

use crate::{Answer, TestStack};
use converger_http::views::{ChannelView, CreatedChannel, DeliveryView, Ingested, Page};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// An error answer: its status and the body's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl Answer {
    /// The body as `T` when the status is `ok`, else the error.
    pub fn typed<T: DeserializeOwned>(&self, ok: u16) -> Result<T, ApiError> {
        if self.status != ok {
            return Err(ApiError {
                status: self.status,
                code: self.code().to_owned(),
                message: self.body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        Ok(crate::view(&self.body))
    }
}

/// A tenant, and the API as its key reaches it.
pub struct Tenant<'s> {
    stack: &'s TestStack,
    pub id: String,
    pub key: String,
}

impl TestStack {
    /// A new tenant of `tier`, with a typed client.
    pub async fn new_tenant(&self, tier: &str) -> Tenant<'_> {
        let (id, key) = self.tenant(tier).await;
        Tenant {
            stack: self,
            id,
            key,
        }
    }
}

/// Whether a delivery has reached an outcome (neither waiting nor paused).
pub fn is_settled(d: &DeliveryView) -> bool {
    d.status != "pending" && d.status != "paused"
}

impl<'s> Tenant<'s> {
    /// The stack this tenant is on.
    pub fn stack(&self) -> &'s TestStack {
        self.stack
    }
}

impl Tenant<'_> {
    /// A request of the tenant API with this tenant's key.
    pub async fn api(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.stack.api(method, path, &self.key, body).await
    }

    /// Creates a channel from its request body.
    pub async fn create_channel(&self, body: Value) -> Result<CreatedChannel, ApiError> {
        self.api("POST", "/api/v1/channels", Some(body))
            .await
            .typed(201)
    }

    /// A webhook channel to `url` with a retry policy (`{}` for the defaults).
    pub async fn webhook(&self, url: &str, policy: Value) -> CreatedChannel {
        self.stack.webhook(&self.key, url, policy).await
    }

    pub async fn channel(&self, id: &str) -> Result<ChannelView, ApiError> {
        self.api("GET", &format!("/api/v1/channels/{id}"), None)
            .await
            .typed(200)
    }

    /// Posts an activity from its request body (201 for a new one, 200 for an id seen before).
    pub async fn post_activity(&self, body: Value) -> Result<(u16, Ingested), ApiError> {
        let a = self.api("POST", "/api/v1/activities", Some(body)).await;
        let status = a.status;
        a.typed(if status == 200 { 200 } else { 201 })
            .map(|i| (status, i))
    }

    /// Posts `{"text": "hi"}` in conversation `conv-1` to `channels`.
    pub async fn activity(&self, channels: &[&str]) -> Ingested {
        self.stack.activity(&self.key, channels).await
    }

    pub async fn delivery(&self, id: &str) -> DeliveryView {
        self.stack.delivery(&self.key, id).await
    }

    /// Polls a delivery until `done` holds or `timeout` passes; returns the last read.
    pub async fn wait_delivery(
        &self,
        id: &str,
        timeout: Duration,
        done: impl Fn(&DeliveryView) -> bool,
    ) -> DeliveryView {
        self.stack.wait_delivery(&self.key, id, timeout, done).await
    }

    /// One page of the tenant's deliveries (`query` without the `?`).
    pub async fn deliveries(&self, query: &str) -> Page<DeliveryView> {
        self.api("GET", &format!("/api/v1/deliveries?{query}"), None)
            .await
            .typed(200)
            .unwrap()
    }
}
