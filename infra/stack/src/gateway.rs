//! The API Gateway WebSocket API on one machine: clients connect to `ws://.../prod?channel_id=
//! ...&token=...` (a channel's) or `ws://.../prod` with an API key (the live stream's), and every `$connect`, frame and `$disconnect` is handed to the `websocket`
//! function's handler as the Lambda event API Gateway would send. The management endpoint
//! (`POST /prod/@connections/{id}`, what `PostToConnection` calls; `DELETE` and `GET` too)
//! is served on the same port, so the deliver function's adapter pushes through the real SDK
//! client exactly as on AWS.

use aws_lambda_events::encodings::Body;
use aws_lambda_events::event::apigw::ApiGatewayWebsocketProxyRequest;
use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use converger_pipeline::Pipeline;
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The stage name in the URL paths (as in `infra/template.yaml`).
pub const STAGE: &str = "prod";

enum Out {
    Frame(String),
    Close,
}

#[derive(Clone)]
struct Gateway {
    pipeline: Arc<Pipeline>,
    open: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Out>>>>,
    /// The stage's route throttles (`WebSocketThrottleRate`, `WebSocketThrottleBurst`).
    throttles: Option<Arc<crate::throttle::RouteThrottles>>,
}

impl Gateway {
    fn admit(&self, route: &str) -> bool {
        self.throttles.as_ref().is_none_or(|t| t.admit_key(route))
    }
}

/// API Gateway's answer to a message past its route's throttle: the message is dropped, the
/// connection stays.
fn too_many(connection_id: &str) -> String {
    serde_json::json!({
        "message": "Too Many Requests",
        "connectionId": connection_id,
        "requestId": new_connection_id(),
    })
    .to_string()
}

fn event(
    route: &str,
    event_type: &str,
    connection_id: &str,
    query: HashMap<String, String>,
    body: Option<String>,
) -> ApiGatewayWebsocketProxyRequest {
    let mut req = ApiGatewayWebsocketProxyRequest::default();
    req.query_string_parameters = query.into();
    req.body = body;
    let ctx = &mut req.request_context;
    ctx.route_key = Some(route.to_owned());
    ctx.event_type = Some(event_type.to_owned());
    ctx.connection_id = Some(connection_id.to_owned());
    ctx.stage = Some(STAGE.to_owned());
    ctx.connected_at = converger_core::time::now_ms();
    ctx.request_time_epoch = converger_core::time::now_ms();
    req
}

fn body_text(b: Option<Body>) -> String {
    match b {
        Some(Body::Text(t)) => t,
        Some(Body::Binary(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    }
}

fn new_connection_id() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    // API Gateway's ids look like `GXLKAfX1oAMCJxA=`.
    let id: String = (0..15)
        .map(|_| {
            let c = rng.gen_range(0..62u8);
            char::from(match c {
                0..=9 => b'0' + c,
                10..=35 => b'A' + c - 10,
                _ => b'a' + c - 36,
            })
        })
        .collect();
    format!("{id}=")
}

async fn connect(
    State(g): State<Gateway>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<std::net::SocketAddr>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // A handshake past the `$connect` route's throttle is refused before the function runs.
    if !g.admit("$connect") {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(serde_json::json!({"message": "Too Many Requests"})),
        )
            .into_response();
    }
    let id = new_connection_id();
    // API Gateway hands `$connect` the upgrade request's headers (`Authorization` among them)
    // and the client's address.
    let mut req = event("$connect", "CONNECT", &id, query, None);
    req.headers = headers;
    req.request_context.identity.source_ip = Some(peer.ip().to_string());
    let resp = converger_lambda::handlers::websocket_event(&g.pipeline, req).await;
    if resp.status_code != 200 {
        // API Gateway refuses the handshake with the route's status.
        let status = StatusCode::from_u16(u16::try_from(resp.status_code).unwrap_or(500))
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, body_text(resp.body)).into_response();
    }
    let (tx, rx) = mpsc::unbounded_channel();
    if let Ok(mut open) = g.open.lock() {
        open.insert(id.clone(), tx.clone());
    }
    // API Gateway closes a connection whose client sends a message past 128 KB, or a frame
    // past 32 KB.
    ws.max_message_size(converger_core::websocket::MAX_MESSAGE_BYTES)
        .max_frame_size(converger_core::websocket::MAX_FRAME_BYTES)
        .on_upgrade(move |socket| run(g, id, socket, tx, rx))
}

async fn run(
    g: Gateway,
    id: String,
    socket: WebSocket,
    tx: mpsc::UnboundedSender<Out>,
    mut rx: mpsc::UnboundedReceiver<Out>,
) {
    let (mut sink, mut stream) = socket.split();
    let writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let r = match out {
                Out::Frame(t) => sink.send(Message::Text(t.into())).await,
                Out::Close => {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            };
            if r.is_err() {
                break;
            }
        }
    });
    while let Some(Ok(msg)) = stream.next().await {
        let text = match msg {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => break,
            _ => continue,
        };
        if !g.admit("$default") {
            let _ = tx.send(Out::Frame(too_many(&id)));
            continue;
        }
        let resp = converger_lambda::handlers::websocket_event(
            &g.pipeline,
            event("$default", "MESSAGE", &id, HashMap::new(), Some(text)),
        )
        .await;
        let answer = body_text(resp.body);
        if !answer.is_empty() {
            let _ = tx.send(Out::Frame(answer));
        }
    }
    if let Ok(mut open) = g.open.lock() {
        open.remove(&id);
    }
    let _ = converger_lambda::handlers::websocket_event(
        &g.pipeline,
        event("$disconnect", "DISCONNECT", &id, HashMap::new(), None),
    )
    .await;
    writer.abort();
}

fn gone(id: &str) -> Response {
    (
        StatusCode::GONE,
        [("x-amzn-errortype", "GoneException")],
        axum::Json(serde_json::json!({"message": format!("connection {id} is gone")})),
    )
        .into_response()
}

async fn post_to_connection(
    State(g): State<Gateway>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let tx = g.open.lock().ok().and_then(|o| o.get(&id).cloned());
    // API Gateway's limit: a message past 128 KB is refused with 413 (the connection stays).
    if tx.is_some() && body.len() > converger_core::websocket::MAX_MESSAGE_BYTES {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            [("x-amzn-errortype", "PayloadTooLargeException")],
            axum::Json(serde_json::json!({"message": format!(
                "the message is {} bytes; at most {} are carried",
                body.len(),
                converger_core::websocket::MAX_MESSAGE_BYTES
            )})),
        )
            .into_response();
    }
    match tx {
        Some(tx)
            if tx
                .send(Out::Frame(String::from_utf8_lossy(&body).into_owned()))
                .is_ok() =>
        {
            StatusCode::OK.into_response()
        }
        _ => gone(&id),
    }
}

async fn delete_connection(State(g): State<Gateway>, Path(id): Path<String>) -> Response {
    let tx = g.open.lock().ok().and_then(|mut o| o.remove(&id));
    match tx {
        Some(tx) => {
            let _ = tx.send(Out::Close);
            StatusCode::NO_CONTENT.into_response()
        }
        None => gone(&id),
    }
}

async fn get_connection(State(g): State<Gateway>, Path(id): Path<String>) -> Response {
    let known = g.open.lock().is_ok_and(|o| o.contains_key(&id));
    if known {
        axum::Json(serde_json::json!({"connectionId": id})).into_response()
    } else {
        gone(&id)
    }
}

/// The gateway's routes: the WebSocket endpoint and the management endpoint, the client's
/// routes held to `throttles` (the stage's, as API Gateway holds them) when given.
pub fn router(
    pipeline: Arc<Pipeline>,
    throttles: Option<Arc<crate::throttle::RouteThrottles>>,
) -> Router {
    let g = Gateway {
        pipeline,
        open: Arc::default(),
        throttles,
    };
    Router::new()
        .route(&format!("/{STAGE}"), get(connect))
        .route(
            &format!("/{STAGE}/@connections/{{id}}"),
            post(post_to_connection)
                .delete(delete_connection)
                .get(get_connection),
        )
        .with_state(g)
}
