//! Local fakes of the providers that speak their wire formats: Meta's Cloud API
//! (`POST /{version}/{phone_number_id}/messages`, bearer token, `messages[0].id`, Graph
//! error bodies), Infobip's WhatsApp API (`POST /whatsapp/1/message/text`, `App` key,
//! `messageId` and a status group, `requestError` bodies) and Slack (`POST
//! /api/chat.postMessage` with a bearer token, `{ok, ts}` or `{ok: false, error}`; incoming
//! webhooks under `/services/...` answering `ok` or an error code as text). Each answers from
//! a script and records what it received.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One scripted answer of a provider fake.
#[derive(Debug, Clone)]
pub enum ProviderReply {
    /// Accept the message (with a fresh provider id).
    Accept,
    /// The provider's error body for `code` (Meta: a Graph error code; Infobip: an error id
    /// such as `BAD_REQUEST`) with an HTTP status.
    Error {
        status: u16,
        code: String,
        message: String,
    },
    /// Infobip only: 200 with the REJECTED status group.
    Rejected,
}

impl ProviderReply {
    pub fn error(status: u16, code: impl ToString, message: &str) -> Self {
        Self::Error {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }
}

/// A request a fake received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Clone)]
struct Fake {
    secret: String,
    script: Arc<Mutex<VecDeque<ProviderReply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    ids: Arc<Mutex<Vec<String>>>,
}

pub struct ProviderFake {
    pub url: String,
    fake: Fake,
    task: tokio::task::JoinHandle<()>,
}

impl ProviderFake {
    /// What it received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.fake.seen.lock().unwrap().clone()
    }

    /// The provider ids it handed out, in order.
    pub fn ids(&self) -> Vec<String> {
        self.fake.ids.lock().unwrap().clone()
    }

    /// Queues more scripted answers (after the script runs out, it accepts).
    pub fn then(&self, replies: Vec<ProviderReply>) {
        self.fake.script.lock().unwrap().extend(replies);
    }
}

impl Drop for ProviderFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start(fake: Fake, router: Router<Fake>) -> ProviderFake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router.with_state(fake.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    ProviderFake { url, fake, task }
}

fn record(f: &Fake, path: String, headers: &HeaderMap, body: &Bytes) -> Option<ProviderReply> {
    f.seen.lock().unwrap().push(Seen {
        path,
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    });
    f.script.lock().unwrap().pop_front()
}

fn status(s: u16) -> StatusCode {
    StatusCode::from_u16(s).unwrap()
}

/// Meta's Cloud API. `access_token` is the bearer token it accepts.
pub async fn meta(access_token: &str, script: Vec<ProviderReply>) -> ProviderFake {
    async fn messages(
        State(f): State<Fake>,
        Path((version, phone)): Path<(String, String)>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let path = format!("/{version}/{phone}/messages");
        let reply = record(&f, path, &headers, &body);
        let graph_error = |s: u16, code: i64, message: &str| {
            (
                status(s),
                axum::Json(json!({"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEf"}})),
            )
                .into_response()
        };
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(&format!("Bearer {}", f.secret))
        {
            return graph_error(401, 190, "Error validating access token");
        }
        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
            return graph_error(400, 100, "Invalid parameter");
        };
        if req["messaging_product"] != "whatsapp" || !req["to"].is_string() {
            return graph_error(400, 100, "Invalid parameter");
        }
        match reply.unwrap_or(ProviderReply::Accept) {
            ProviderReply::Error {
                status: s,
                code,
                message,
            } => graph_error(s, code.parse().unwrap_or(1), &message),
            _ => {
                let id = format!("wamid.HBgL{}", uuid::Uuid::new_v4().simple());
                f.ids.lock().unwrap().push(id.clone());
                axum::Json(json!({
                    "messaging_product": "whatsapp",
                    "contacts": [{"input": req["to"], "wa_id": req["to"]}],
                    "messages": [{"id": id}],
                }))
                .into_response()
            }
        }
    }
    let fake = Fake {
        secret: access_token.into(),
        script: Arc::new(Mutex::new(script.into())),
        seen: Arc::default(),
        ids: Arc::default(),
    };
    start(
        fake,
        Router::new().route("/{version}/{phone}/messages", post(messages)),
    )
    .await
}

/// Infobip's WhatsApp API. `api_key` is the key it accepts (`Authorization: App <key>`).
pub async fn infobip(api_key: &str, script: Vec<ProviderReply>) -> ProviderFake {
    async fn text(State(f): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
        let reply = record(&f, "/whatsapp/1/message/text".into(), &headers, &body);
        let error = |s: u16, id: &str, text: &str| {
            (
                status(s),
                axum::Json(
                    json!({"requestError": {"serviceException": {"messageId": id, "text": text}}}),
                ),
            )
                .into_response()
        };
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(&format!("App {}", f.secret))
        {
            return error(401, "UNAUTHORIZED", "Invalid login details");
        }
        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
            return error(400, "BAD_REQUEST", "Bad request");
        };
        if !req["from"].is_string() || !req["to"].is_string() || !req["content"]["text"].is_string()
        {
            return error(400, "BAD_REQUEST", "Bad request");
        }
        let id = req["messageId"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        match reply.unwrap_or(ProviderReply::Accept) {
            ProviderReply::Error {
                status: s,
                code,
                message,
            } => error(s, &code, &message),
            ProviderReply::Rejected => axum::Json(json!({
                "to": req["to"], "messageCount": 1, "messageId": id,
                "status": {"groupId": 5, "groupName": "REJECTED", "id": 12, "name": "REJECTED_NOT_ENOUGH_CREDITS", "description": "Not enough credits"},
            }))
            .into_response(),
            ProviderReply::Accept => {
                f.ids.lock().unwrap().push(id.clone());
                axum::Json(json!({
                    "to": req["to"], "messageCount": 1, "messageId": id,
                    "status": {"groupId": 1, "groupName": "PENDING", "id": 7, "name": "PENDING_ENROUTE", "description": "Message sent to next instance"},
                }))
                .into_response()
            }
        }
    }
    let fake = Fake {
        secret: api_key.into(),
        script: Arc::new(Mutex::new(script.into())),
        seen: Arc::default(),
        ids: Arc::default(),
    };
    start(
        fake,
        Router::new().route("/whatsapp/1/message/text", post(text)),
    )
    .await
}

/// Slack's Web API (`chat.postMessage`, `Authorization: Bearer <token>`) and incoming
/// webhooks (`POST /services/{team}/{bot}/{secret}`). A 429 carries `Retry-After: 1`.
pub async fn slack(token: &str, script: Vec<ProviderReply>) -> ProviderFake {
    fn limited(s: u16, resp: Response) -> Response {
        let mut resp = resp;
        *resp.status_mut() = status(s);
        if s == 429 {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
    async fn post_message(State(f): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
        let reply = record(&f, "/api/chat.postMessage".into(), &headers, &body);
        let refused = |s: u16, code: &str| {
            limited(
                s,
                axum::Json(json!({"ok": false, "error": code})).into_response(),
            )
        };
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(&format!("Bearer {}", f.secret))
        {
            return refused(200, "invalid_auth");
        }
        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
            return refused(200, "invalid_json");
        };
        if !req["channel"].is_string() {
            return refused(200, "channel_not_found");
        }
        if !req["text"].is_string() && !req["blocks"].is_array() {
            return refused(200, "no_text");
        }
        match reply.unwrap_or(ProviderReply::Accept) {
            ProviderReply::Error {
                status: s, code, ..
            } => refused(s, &code),
            _ => {
                let n = f.ids.lock().unwrap().len() + 1;
                let ts = format!("1764547200.{n:06}");
                f.ids.lock().unwrap().push(ts.clone());
                axum::Json(json!({
                    "ok": true, "channel": req["channel"], "ts": ts,
                    "message": {"type": "message", "bot_id": "B0TEST", "text": req["text"], "ts": ts},
                }))
                .into_response()
            }
        }
    }
    async fn incoming(
        State(f): State<Fake>,
        Path((team, bot, secret)): Path<(String, String, String)>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let path = format!("/services/{team}/{bot}/{secret}");
        let reply = record(&f, path, &headers, &body);
        if secret != f.secret {
            return limited(403, "invalid_token".into_response());
        }
        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
            return limited(400, "invalid_payload".into_response());
        };
        if !req["text"].is_string() && !req["blocks"].is_array() {
            return limited(400, "no_text".into_response());
        }
        match reply.unwrap_or(ProviderReply::Accept) {
            ProviderReply::Error {
                status: s, code, ..
            } => limited(s, code.into_response()),
            _ => "ok".into_response(),
        }
    }
    let fake = Fake {
        secret: token.into(),
        script: Arc::new(Mutex::new(script.into())),
        seen: Arc::default(),
        ids: Arc::default(),
    };
    start(
        fake,
        Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .route("/services/{team}/{bot}/{secret}", post(incoming)),
    )
    .await
}

/// A Cloud API webhook notification carrying `statuses` (id, status) for one phone number.
pub fn meta_statuses(statuses: &[(&str, &str)]) -> Value {
    let list: Vec<Value> = statuses
        .iter()
        .map(|(id, st)| {
            let mut s = json!({"id": id, "status": st, "timestamp": "1764495102", "recipient_id": "15551234567"});
            if *st == "failed" {
                s["errors"] = json!([{"code": 131026, "title": "Message undeliverable"}]);
            }
            s
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "statuses": list,
    }}]}]})
}

/// Infobip delivery reports: (message id, status group name).
pub fn infobip_reports(reports: &[(&str, &str)]) -> Value {
    let results: Vec<Value> = reports
        .iter()
        .map(|(id, group)| {
            if *group == "SEEN" {
                json!({"messageId": id, "to": "15551234567", "sentAt": "2026-11-30T10:00:00.000+0000", "seenAt": "2026-11-30T10:00:05.000+0000"})
            } else {
                json!({"messageId": id, "to": "15551234567", "status": {"groupName": group, "name": format!("{group}_X"), "description": "report"}})
            }
        })
        .collect();
    json!({"results": results})
}
