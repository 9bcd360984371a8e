//! A typed client for Converger's tenant API (`docs/api.md`, `docs/openapi.json`):
//! channels, activities, deliveries and their attempts, replays, pause and resume, and the
//! AWS identity. Every call has a timeout; an error answer comes back as [`Error::Api`] with
//! its status and stable code.
//!
//! ```no_run
//! # async fn example() -> Result<(), converger_client::Error> {
//! use converger_client::{Client, NewActivity};
//! let api = Client::new("https://api.example.com", "cvg_...")?;
//! let posted = api
//!     .post_activity(&NewActivity {
//!         conversation_id: "order-42".into(),
//!         channel_ids: vec!["ch_...".into()],
//!         payload: serde_json::json!({"text": "paid"}),
//!         ..Default::default()
//!     })
//!     .await?;
//! let delivery = api.delivery(&posted.deliveries[0].id).await?;
//! # Ok(()) }
//! ```

pub mod cli;
mod types;

pub use types::*;

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API answered with an error: its status, stable code and message.
    #[error("{status} {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer: the network, a timeout, TLS.
    #[error("the request did not complete: {0}")]
    Transport(#[from] reqwest::Error),
    /// An answer that is not what the API documents.
    #[error("an answer that is not the documented one: {0}")]
    Decode(String),
    /// The client's own settings (the base URL).
    #[error("{0}")]
    Config(String),
}

/// An error answer as an [`Error::Api`]: the API's own (`{"error": {"code", "message"}}`),
/// or API Gateway's, which has no code: past a route's throttle it answers 429
/// `{"message": "Too Many Requests"}` (code `gateway_throttled`; it sends no `Retry-After`).
pub fn api_error(status: u16, bytes: &[u8]) -> Error {
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let code = match v["error"]["code"].as_str() {
        Some(c) => c.to_owned(),
        None if status == 429 => "gateway_throttled".to_owned(),
        None => "unknown".to_owned(),
    };
    let message = v["error"]["message"]
        .as_str()
        .or_else(|| v["message"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).chars().take(300).collect());
    Error::Api {
        status,
        code,
        message,
    }
}

/// One operation of the API: its method and path template (a test checks each is in
/// `docs/openapi.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
}

macro_rules! operations {
    ($($name:ident = $method:literal $path:literal;)*) => {
        $( pub const $name: Operation = Operation { method: $method, path: $path }; )*
        /// Every operation the client calls.
        pub const OPERATIONS: &[Operation] = &[$($name),*];
    };
}

/// The operations, by name.
pub mod op {
    use super::Operation;
    operations! {
        LIST_CHANNELS = "GET" "/api/v1/channels";
        CREATE_CHANNEL = "POST" "/api/v1/channels";
        GET_CHANNEL = "GET" "/api/v1/channels/{id}";
        PATCH_CHANNEL = "PATCH" "/api/v1/channels/{id}";
        DELETE_CHANNEL = "DELETE" "/api/v1/channels/{id}";
        PAUSE_CHANNEL = "POST" "/api/v1/channels/{id}/pause";
        RESUME_CHANNEL = "POST" "/api/v1/channels/{id}/resume";
        CHANNEL_DELIVERY = "GET" "/api/v1/channels/{id}/delivery";
        POST_ACTIVITY = "POST" "/api/v1/activities";
        POST_ACTIVITIES = "POST" "/api/v1/activities/batch";
        CREATE_UPLOAD = "POST" "/api/v1/payloads";
        LIST_DELIVERIES = "GET" "/api/v1/deliveries";
        GET_DELIVERY = "GET" "/api/v1/deliveries/{id}";
        RETRY_DELIVERY = "POST" "/api/v1/deliveries/{id}/retry";
        LIST_ATTEMPTS = "GET" "/api/v1/deliveries/{id}/attempts";
        ACK_DELIVERY = "POST" "/api/v1/deliveries/{id}/ack";
        AWS_IDENTITY = "GET" "/api/v1/aws-identity";
        USAGE = "GET" "/api/v1/usage";
        CHANNEL_SECRET = "GET" "/api/v1/channels/{id}/secret";
        LIST_EVENT_TYPES = "GET" "/api/v1/event-types";
        CREATE_EVENT_TYPE = "POST" "/api/v1/event-types";
        GET_EVENT_TYPE = "GET" "/api/v1/event-types/{name}";
        PATCH_EVENT_TYPE = "PATCH" "/api/v1/event-types/{name}";
    }
}

/// The tenant API, as one API key reaches it.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

/// Refuses a URL that would carry a credential in clear to another machine: `http://` and
/// `ws://` only to this machine (`localhost`, a loopback address), `https://` and `wss://`
/// anywhere.
pub fn check_transport(url: &str, what: &str) -> Result<(), Error> {
    let parsed = reqwest::Url::parse(url).map_err(|e| Error::Config(format!("{what}: {e}")))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" | "wss" => Ok(()),
        "http" | "ws" if loopback => Ok(()),
        "http" | "ws" => Err(Error::Config(format!(
            "{what} sends a credential in clear to another machine: use {}:// (got `{url}`)",
            if parsed.scheme() == "http" {
                "https"
            } else {
                "wss"
            }
        ))),
        other => Err(Error::Config(format!(
            "{what}: `{other}://` is not a scheme it takes"
        ))),
    }
}

/// The API key is a credential: a `Debug` print (a log line, a panic message) shows only its
/// first characters.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self.key.chars().take(6).collect();
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("key", &format_args!("{shown}…"))
            .finish_non_exhaustive()
    }
}

/// How long one call may take unless [`Client::with_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client of the API at `base_url` (`https://...`, without `/api`) with `api_key`.
    pub fn new(base_url: &str, api_key: &str) -> Result<Self, Error> {
        Self::with_timeout(base_url, api_key, DEFAULT_TIMEOUT)
    }

    /// [`Client::new`] with each call bounded by `timeout`.
    pub fn with_timeout(base_url: &str, api_key: &str, timeout: Duration) -> Result<Self, Error> {
        let base = base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Config(format!(
                "the API URL must start with http:// or https:// (got `{base}`)"
            )));
        }
        check_transport(base, "the API URL")?;
        let http = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(Self {
            http,
            base: base.to_owned(),
            key: api_key.to_owned(),
        })
    }

    /// The URL of `op`, with `id` in its `{id}` segment (percent-encoded by the URL parser).
    fn url(&self, op: Operation, id: Option<&str>) -> Result<reqwest::Url, Error> {
        let mut url = reqwest::Url::parse(&self.base)
            .map_err(|e| Error::Config(format!("the API URL: {e}")))?;
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|_| Error::Config("the API URL cannot have a path".into()))?;
            path.pop_if_empty();
            for segment in op.path.trim_start_matches('/').split('/') {
                path.push(if segment == "{id}" || segment == "{name}" {
                    id.unwrap_or_default()
                } else {
                    segment
                });
            }
        }
        Ok(url)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: Operation,
        id: Option<&str>,
        query: &[(&str, Option<String>)],
        body: Option<Value>,
    ) -> Result<T, Error> {
        let method =
            Method::from_bytes(op.method.as_bytes()).map_err(|e| Error::Config(e.to_string()))?;
        let mut url = self.url(op, id)?;
        for (k, v) in query {
            if let Some(v) = v {
                url.query_pairs_mut().append_pair(k, v);
            }
        }
        let mut req = self.http.request(method, url).bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await?;
        if !(200..300).contains(&status) {
            return Err(api_error(status, &bytes));
        }
        let bytes = if bytes.is_empty() {
            &b"null"[..]
        } else {
            &bytes[..]
        };
        serde_json::from_slice(bytes)
            .map_err(|e| Error::Decode(format!("{} {}: {e}", op.method, op.path)))
    }

    /// The tenant's channels, a page at a time (`cursor` from the previous page).
    pub async fn channels(&self, cursor: Option<&str>) -> Result<Page<Channel>, Error> {
        self.call(
            op::LIST_CHANNELS,
            None,
            &[("cursor", cursor.map(str::to_owned))],
            None,
        )
        .await
    }

    pub async fn create_channel(&self, channel: &NewChannel) -> Result<CreatedChannel, Error> {
        self.call(op::CREATE_CHANNEL, None, &[], Some(to_value(channel)?))
            .await
    }

    pub async fn channel(&self, id: &str) -> Result<Channel, Error> {
        self.call(op::GET_CHANNEL, Some(id), &[], None).await
    }

    /// Changes a channel: each field of `patch` is set (`null` removes an optional one).
    pub async fn patch_channel(&self, id: &str, patch: &Value) -> Result<Channel, Error> {
        self.call(op::PATCH_CHANNEL, Some(id), &[], Some(patch.clone()))
            .await
    }

    pub async fn delete_channel(&self, id: &str) -> Result<(), Error> {
        self.call::<Value>(op::DELETE_CHANNEL, Some(id), &[], None)
            .await
            .map(drop)
    }

    /// Parks the channel's deliveries until it is resumed.
    pub async fn pause_channel(&self, id: &str) -> Result<DeliveryState, Error> {
        self.call(op::PAUSE_CHANNEL, Some(id), &[], None).await
    }

    /// Resumes a channel: closes its breaker, releases what was parked.
    pub async fn resume_channel(&self, id: &str) -> Result<DeliveryState, Error> {
        self.call(op::RESUME_CHANNEL, Some(id), &[], None).await
    }

    pub async fn channel_delivery_state(&self, id: &str) -> Result<DeliveryState, Error> {
        self.call(op::CHANNEL_DELIVERY, Some(id), &[], None).await
    }

    pub async fn post_activity(&self, activity: &NewActivity) -> Result<Ingested, Error> {
        self.call(op::POST_ACTIVITY, None, &[], Some(to_value(activity)?))
            .await
    }

    /// Uploads `payload` (JSON bytes, up to 10 MiB) to the deployment's payload bucket and
    /// answers the upload's id, for [`Self::post_activity_with_upload`]: for a payload larger
    /// than a request carries.
    pub async fn upload_payload(&self, payload: Vec<u8>) -> Result<String, Error> {
        let up: Upload = self.call(op::CREATE_UPLOAD, None, &[], None).await?;
        let method =
            Method::from_bytes(up.method.as_bytes()).map_err(|e| Error::Config(e.to_string()))?;
        let mut req = self.http.request(method, &up.url).body(payload);
        for (k, v) in &up.headers {
            req = req.header(k, v);
        }
        let res = req.send().await?;
        let status = res.status().as_u16();
        if !(200..300).contains(&status) {
            let bytes = res.bytes().await?;
            return Err(api_error(status, &bytes));
        }
        Ok(up.upload_id)
    }

    /// `activity` with the upload `upload_id` ([`Self::upload_payload`]) as its payload
    /// (its own `payload` is not sent).
    pub async fn post_activity_with_upload(
        &self,
        activity: &NewActivity,
        upload_id: &str,
    ) -> Result<Ingested, Error> {
        let mut body = to_value(activity)?;
        if let Some(o) = body.as_object_mut() {
            o.remove("payload");
            o.insert("payload_upload".into(), Value::String(upload_id.to_owned()));
        }
        self.call(op::POST_ACTIVITY, None, &[], Some(body)).await
    }

    /// Up to 100 activities in one call, answered item by item, in order: an item's
    /// refusal is its own ([`BatchResult::Refused`]).
    pub async fn post_activities(
        &self,
        activities: &[NewActivity],
    ) -> Result<Vec<BatchResult>, Error> {
        let body = serde_json::json!({ "activities": to_value(&activities)? });
        let out: BatchResults = self
            .call(op::POST_ACTIVITIES, None, &[], Some(body))
            .await?;
        Ok(out.results)
    }

    pub async fn deliveries(&self, query: &DeliveryQuery) -> Result<Page<Delivery>, Error> {
        let q = [
            ("status", query.status.clone()),
            ("channel_id", query.channel_id.clone()),
            ("activity_id", query.activity_id.clone()),
            ("event_type", query.event_type.clone()),
            ("limit", query.limit.map(|n| n.to_string())),
            ("cursor", query.cursor.clone()),
        ];
        self.call(op::LIST_DELIVERIES, None, &q, None).await
    }

    pub async fn delivery(&self, id: &str) -> Result<Delivery, Error> {
        self.call(op::GET_DELIVERY, Some(id), &[], None).await
    }

    /// Replays a failed delivery (409 `not_failed` otherwise).
    pub async fn retry_delivery(&self, id: &str) -> Result<Delivery, Error> {
        self.call(op::RETRY_DELIVERY, Some(id), &[], None).await
    }

    /// A delivery's attempts, newest first.
    pub async fn attempts(&self, id: &str) -> Result<Page<Attempt>, Error> {
        self.call(op::LIST_ATTEMPTS, Some(id), &[], None).await
    }

    /// Acknowledges a delivery handed to a websocket client.
    pub async fn ack_delivery(&self, id: &str) -> Result<Delivery, Error> {
        self.call(op::ACK_DELIVERY, Some(id), &[], None).await
    }

    /// A channel's signing secrets: the current one first, then those a rotation retires.
    pub async fn channel_secrets(&self, id: &str) -> Result<Vec<String>, Error> {
        let v: Value = self.call(op::CHANNEL_SECRET, Some(id), &[], None).await?;
        let mut out: Vec<String> = v["signing_secret"]
            .as_str()
            .map(str::to_owned)
            .into_iter()
            .collect();
        for r in v["retiring"].as_array().into_iter().flatten() {
            if let Some(s) = r["signing_secret"].as_str() {
                out.push(s.to_owned());
            }
        }
        Ok(out)
    }

    /// What a role in the tenant's AWS account must trust.
    pub async fn aws_identity(&self) -> Result<AwsIdentity, Error> {
        self.call(op::AWS_IDENTITY, None, &[], None).await
    }

    /// The tenant's usage per day from `from` to `to` (`YYYY-MM-DD`, UTC; the last 30 days
    /// when both are `None`) and the estimate of its AWS cost.
    pub async fn usage(&self, from: Option<&str>, to: Option<&str>) -> Result<Usage, Error> {
        let q = [
            ("from", from.map(str::to_owned)),
            ("to", to.map(str::to_owned)),
        ];
        self.call(op::USAGE, None, &q, None).await
    }
}

impl Client {
    /// The tenant's event-type catalog, a page at a time (`cursor` from the previous page).
    pub async fn event_types(&self, cursor: Option<&str>) -> Result<Page<EventType>, Error> {
        self.call(
            op::LIST_EVENT_TYPES,
            None,
            &[("cursor", cursor.map(str::to_owned))],
            None,
        )
        .await
    }

    pub async fn create_event_type(&self, t: &NewEventType) -> Result<EventType, Error> {
        self.call(op::CREATE_EVENT_TYPE, None, &[], Some(to_value(t)?))
            .await
    }

    pub async fn event_type(&self, name: &str) -> Result<EventType, Error> {
        self.call(op::GET_EVENT_TYPE, Some(name), &[], None).await
    }

    /// Changes an event type: each field of `patch` is set (`null` removes `description` or
    /// `schema`).
    pub async fn patch_event_type(&self, name: &str, patch: &Value) -> Result<EventType, Error> {
        self.call(op::PATCH_EVENT_TYPE, Some(name), &[], Some(patch.clone()))
            .await
    }
}

fn to_value<T: Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::Decode(e.to_string()))
}

#[cfg(test)]
mod tests;
