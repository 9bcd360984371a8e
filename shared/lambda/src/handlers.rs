//! The Lambda events each function takes, turned into use-case calls: SQS batches (with
//! partial batch responses) and the WebSocket API's routes. The local runner feeds its
//! queues through these same handlers.

use crate::batch;
use aws_lambda_events::event::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::event::dynamodb::{
    EventRecord as DynamoEventRecord, TimeWindowEvent, TimeWindowEventResponse,
};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;
use converger_core::TenantId;
use converger_http::error::{ApiError, ErrorCode};
use converger_pipeline::Pipeline;
use converger_pipeline::ingest::{IngestError, NewActivity};
use converger_ports::DeliveryMessage;
use serde::Deserialize;

/// A message on the `activities` queue: an activity submitted asynchronously by a producer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestMessage {
    pub tenant_id: TenantId,
    pub activity: NewActivity,
}

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("message body is not valid: {0}")]
    Body(String),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Attempt(#[from] converger_pipeline::attempt::AttemptError),
    #[error(transparent)]
    FlowJob(#[from] converger_pipeline::flow_jobs::FlowJobError),
    #[error(transparent)]
    Store(#[from] converger_ports::StoreError),
    #[error(transparent)]
    Replay(#[from] converger_pipeline::replay::ReplayError),
}

fn body<T: serde::de::DeserializeOwned>(m: &SqsMessage) -> Result<T, HandlerError> {
    serde_json::from_str(text(m)?).map_err(|e| HandlerError::Body(e.to_string()))
}

/// One of the platform's own messages (versioned: see `ports::message`).
fn message<T: converger_ports::message::QueueMessage>(m: &SqsMessage) -> Result<T, HandlerError> {
    converger_ports::message::decode(text(m)?).map_err(|e| HandlerError::Body(e.to_string()))
}

fn text(m: &SqsMessage) -> Result<&str, HandlerError> {
    m.body
        .as_deref()
        .ok_or_else(|| HandlerError::Body("empty".into()))
}

/// The `deliver` function: one attempt per record.
pub async fn deliver_batch(p: &Pipeline, event: SqsEvent) -> SqsBatchResponse {
    let resp = batch::process(event, p.config().batch_concurrency, |m| async move {
        let msg: DeliveryMessage = message(&m)?;
        let report = p.attempts().deliver(msg).await?;
        tracing::debug!(?report, "attempt done");
        Ok::<(), HandlerError>(())
    })
    .await;
    // The batch's attempts' spans and metrics, before the instance can be frozen.
    p.flush_telemetry().await;
    resp
}

/// The `changes` function: one batch of the deliveries table's stream, from one shard, in a
/// tumbling window (which is what names the shard). What follows from each record is done
/// in order (`pipeline::changes`); a record that cannot be read, or from which an event or a
/// count could not be written, is reported with every record after it, and the mapping hands
/// them out again (bisecting, up to its retries, then to its dead-letter queue). The window's
/// state is not used: every batch writes its own counts.
pub async fn changes_batch(p: &Pipeline, event: TimeWindowEvent) -> TimeWindowEventResponse {
    let shard = event
        .time_window_properties
        .shard_id
        .clone()
        .unwrap_or_else(|| "unnamed".into());
    let records = &event.dynamo_db_event.records;
    let mut changes = Vec::with_capacity(records.len());
    let mut unreadable = None;
    for (i, r) in records.iter().enumerate() {
        match row_change(r) {
            Ok(c) => changes.push(c),
            Err(e) => {
                tracing::error!(event_id = %r.event_id, error = %e, "stream record unreadable");
                unreadable = Some(i);
                break;
            }
        }
    }
    let failed_from = match p.changes().apply(&shard, &changes).await {
        Ok(done) => {
            tracing::debug!(?done, "stream batch done");
            unreadable
        }
        Err(u) => {
            tracing::warn!(from = u.from, reason = %u.reason, "stream batch unfinished");
            Some(u.from)
        }
    };
    let mut resp = TimeWindowEventResponse::default();
    if let Some(i) = failed_from
        && let Some(r) = records.get(i)
    {
        // The first failed record: the mapping goes on from it (later ones come again).
        let mut f = DynamoDbBatchItemFailure::default();
        f.item_identifier = r.change.sequence_number.clone();
        resp.batch_item_failures.push(f);
    }
    resp
}

/// Why a stream record is not a row change.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("a record without a sequence number")]
    NoSequence,
    #[error("an image that is no delivery row: {0}")]
    Image(#[from] serde_dynamo::Error),
}

/// A row image (none when the record has none).
fn image(item: &serde_dynamo::Item) -> Result<Option<converger_ports::Delivery>, RecordError> {
    if item.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_dynamo::from_item(item.clone())?))
}

/// A stream record as the row change it is.
fn row_change(r: &DynamoEventRecord) -> Result<converger_ports::RowChange, RecordError> {
    let seq = r
        .change
        .sequence_number
        .as_deref()
        .ok_or(RecordError::NoSequence)?;
    Ok(converger_ports::RowChange {
        event_id: r.event_id.clone(),
        seq: converger_ports::seq_key(seq),
        old: image(&r.change.old_image)?,
        new: image(&r.change.new_image)?,
    })
}

/// The `stream` function: each record is one platform event, as the bus's rule puts it on the
/// stream queue (the EventBridge envelope, `detail-type` and `detail`), sent to the live
/// stream's clients that follow its topic. Storage failures return the record to the queue.
pub async fn stream_batch(p: &Pipeline, event: SqsEvent) -> SqsBatchResponse {
    #[derive(Deserialize)]
    struct BusEvent {
        #[serde(rename = "detail-type")]
        detail_type: String,
        detail: serde_json::Value,
    }
    batch::process(event, p.config().batch_concurrency, |m| async move {
        let e: BusEvent = body(&m)?;
        let out = p.streams().fan_out(&e.detail_type, &e.detail).await?;
        tracing::debug!(detail_type = %e.detail_type, ?out, "event streamed");
        Ok::<(), HandlerError>(())
    })
    .await
}

/// The `replay` function: one chunk of a replay job per record.
pub async fn replay_batch(p: &Pipeline, event: SqsEvent) -> SqsBatchResponse {
    batch::process(event, 1, |m| async move {
        let msg: converger_ports::ReplayMessage = message(&m)?;
        p.replays().run_replay_job(&msg.job_id).await?;
        Ok::<(), HandlerError>(())
    })
    .await
}

/// The `probe` function: one flow job (probe, release) per record.
pub async fn flow_batch(p: &Pipeline, event: SqsEvent) -> SqsBatchResponse {
    let resp = batch::process(event, p.config().batch_concurrency, |m| async move {
        let job: converger_ports::FlowJob = message(&m)?;
        p.flow_jobs().flow_job(&job).await?;
        Ok::<(), HandlerError>(())
    })
    .await;
    // A probe is an attempt: its span goes before the instance can be frozen.
    p.flush_telemetry().await;
    resp
}

/// The `ingest` function: one activity per record. An activity that can never be accepted
/// (invalid, unknown channel) is logged and dropped; storage failures are redelivered.
pub async fn ingest_batch(p: &Pipeline, event: SqsEvent) -> SqsBatchResponse {
    batch::process(event, p.config().batch_concurrency, |m| ingest_record(p, m)).await
}

async fn ingest_record(p: &Pipeline, m: SqsMessage) -> Result<(), HandlerError> {
    let msg: IngestMessage = body(&m)?;
    let Some(tenant) = p.reads().tenant(&msg.tenant_id).await? else {
        tracing::error!(tenant_id = %msg.tenant_id, "activity for an unknown tenant dropped");
        return Ok(());
    };
    match p.intake().ingest(&tenant, msg.activity).await {
        Ok(done) => {
            tracing::info!(activity_id = %done.activity.id, deliveries = done.deliveries.len(), "activity ingested");
            Ok(())
        }
        Err(e @ (IngestError::Store(_) | IngestError::Queue(_))) => Err(e.into()),
        Err(e) => {
            tracing::error!(tenant_id = %tenant.id, error = %e, "activity refused and dropped");
            Ok(())
        }
    }
}

/// A `$connect` refusal or an error answer of the WebSocket API.
fn ws_response(status: i64, body: &serde_json::Value) -> ApiGatewayProxyResponse {
    let mut r = ApiGatewayProxyResponse::default();
    r.status_code = status;
    r.body = Some(aws_lambda_events::encodings::Body::Text(body.to_string()));
    r
}

/// The `websocket` function: the WebSocket API's routes, for two kinds of client. A
/// websocket channel's client connects with the query parameters `channel_id` and `token`
/// and sends `ack` and `replay` frames. A live stream client (`docs/stream.md`) connects with
/// `Authorization: Bearer <tenant API key>` or the query parameter `token` (a stream token)
/// and sends `subscribe`, `unsubscribe` and `ping` frames. `$disconnect` forgets either.
pub async fn websocket_event(
    p: &Pipeline,
    req: ApiGatewayWebsocketProxyRequest,
) -> ApiGatewayProxyResponse {
    let ctx = &req.request_context;
    let Some(conn) = ctx.connection_id.as_deref() else {
        return ws_response(
            400,
            &ws_error(ErrorCode::InvalidRequest, "no connection id"),
        );
    };
    let route = ctx.route_key.as_deref().unwrap_or("$default");
    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(connection_id = conn, route, error = %e, "websocket route failed");
        ws_response(500, &ws_error(ErrorCode::Unavailable, "try again"))
    };
    // A `$connect` is answered unread while its source is throttled for refused connects
    // (or refused API calls: one schedule per address), and its refusal spends from it.
    if route == "$connect" {
        let source = converger_core::net::client_source(
            ctx.identity
                .source_ip
                .as_deref()
                .and_then(|ip| ip.parse().ok()),
        );
        if let Some(wait_s) = p.sources().throttled(&source) {
            return ws_response(
                429,
                &ws_error(
                    ErrorCode::SourceThrottled,
                    converger_http::limits::source_throttled_message(wait_s),
                ),
            );
        }
        // A channel's client names its channel with its token: an unknown channel is refused
        // as a receipt's is.
        let by_channel = req.query_string_parameters.first("channel_id").is_some();
        let res = connect(p, &req, conn, by_channel, &failed).await;
        if converger_core::api_limit::refused(
            u16::try_from(res.status_code).unwrap_or(500),
            by_channel,
        ) {
            p.sources().refused(&source).await;
        }
        return res;
    }
    match route {
        "$disconnect" => {
            // Either kind of client: both records are tried.
            let (handoff, streams) = (p.handoff(), p.streams());
            let (channel, stream) =
                tokio::join!(handoff.socket_disconnect(conn), streams.disconnect(conn));
            match channel.err().or(stream.err()) {
                None => ws_response(200, &serde_json::json!({})),
                Some(e) => failed(&e),
            }
        }
        _ if converger_core::stream::ClientFrame::is_stream_action(
            req.body.as_deref().unwrap_or(""),
        ) =>
        {
            match p
                .streams()
                .message(conn, req.body.as_deref().unwrap_or(""))
                .await
            {
                Ok(frame) => ws_response(
                    200,
                    &serde_json::to_value(&frame).unwrap_or_else(|_| serde_json::json!({})),
                ),
                Err(e) => failed(&e),
            }
        }
        _ => match p
            .handoff()
            .socket_message(conn, req.body.as_deref().unwrap_or(""))
            .await
        {
            Ok(frame) => ws_response(
                200,
                &serde_json::to_value(&frame).unwrap_or_else(|_| serde_json::json!({})),
            ),
            Err(e) => failed(&e),
        },
    }
}

/// A `$connect`: a live stream client's (an API key or a stream token) or a channel's
/// websocket client's (`?channel_id=&token=`).
async fn connect(
    p: &Pipeline,
    req: &ApiGatewayWebsocketProxyRequest,
    conn: &str,
    by_channel: bool,
    failed: &(dyn Fn(&dyn std::fmt::Display) -> ApiGatewayProxyResponse + Sync),
) -> ApiGatewayProxyResponse {
    if !by_channel {
        let key = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let token = req.query_string_parameters.first("token");
        let auth = match (key, token) {
            (Some(k), _) => converger_pipeline::stream::StreamAuth::ApiKey(k),
            (None, Some(t)) => converger_pipeline::stream::StreamAuth::Token(t),
            (None, None) => {
                return ws_response(
                    401,
                    &ws_error(
                        ErrorCode::Unauthorized,
                        "connect with `Authorization: Bearer <API key>`, `?token=<stream token>`, or a channel's `?channel_id=&token=`",
                    ),
                );
            }
        };
        match p.streams().connect(conn, auth).await {
            Ok(c) => {
                tracing::info!(connection_id = conn, tenant_id = %c.tenant_id, "stream client connected");
                ws_response(200, &serde_json::json!({"connected": true}))
            }
            Err(converger_pipeline::stream::StreamRefused::Store(e)) => failed(&e),
            Err(e @ converger_pipeline::stream::StreamRefused::Disabled) => {
                ws_response(403, &ws_error(ErrorCode::StreamDisabled, e.to_string()))
            }
            Err(e @ converger_pipeline::stream::StreamRefused::BadCredentials) => {
                ws_response(401, &ws_error(ErrorCode::Unauthorized, e.to_string()))
            }
            Err(e @ converger_pipeline::stream::StreamRefused::TooMany(_)) => {
                ws_response(429, &ws_error(ErrorCode::TooManyConnections, e.to_string()))
            }
        }
    } else {
        let q = &req.query_string_parameters;
        let channel = q.first("channel_id").unwrap_or_default();
        let token = q.first("token").unwrap_or_default();
        match p.handoff().socket_connect(conn, channel, token).await {
            Ok(_) => ws_response(200, &serde_json::json!({"connected": true})),
            Err(converger_pipeline::handoff::ConnectRefused::Store(e)) => failed(&e),
            Err(e @ converger_pipeline::handoff::ConnectRefused::UnknownChannel) => {
                ws_response(404, &ws_error(ErrorCode::NotFound, e.to_string()))
            }
            Err(e @ converger_pipeline::handoff::ConnectRefused::BadToken) => {
                ws_response(401, &ws_error(ErrorCode::Unauthorized, e.to_string()))
            }
            Err(e @ converger_pipeline::handoff::ConnectRefused::TooMany(_)) => {
                ws_response(429, &ws_error(ErrorCode::TooManyConnections, e.to_string()))
            }
        }
    }
}

/// How long an SES event naming an unknown message fails its invocation (Lambda retries it
/// twice, about one and three minutes later): a `Delivery` can outrun the write of the
/// message id; past this, the message is not this stack's and the event is dropped.
pub const EMAIL_EVENT_RETRY_MINUTES: i64 = 10;

/// Why an SES event was not applied; either one fails the invocation, so Lambda retries it.
#[derive(Debug, thiserror::Error)]
pub enum EmailEventError {
    #[error(transparent)]
    Store(#[from] converger_ports::StoreError),
    #[error("no delivery has message id {} yet; Lambda retries the event", .0.join(", "))]
    NotYetKnown(Vec<String>),
}

/// The `email-events` function: one SES event from EventBridge (a bounce, a complaint, a
/// delivery...) applied to its delivery. An event whose message is not known yet fails the
/// invocation, so that Lambda retries it, while it is younger than
/// [`EMAIL_EVENT_RETRY_MINUTES`].
pub async fn email_event(
    p: &Pipeline,
    event: aws_lambda_events::event::eventbridge::EventBridgeEvent<serde_json::Value>,
) -> Result<converger_pipeline::handoff::EmailEvents, EmailEventError> {
    let out = p
        .handoff()
        .apply_email_events(std::slice::from_ref(&event.detail))
        .await?;
    let young = event.time.is_none_or(|t| {
        chrono::Utc::now().signed_duration_since(t)
            < chrono::Duration::minutes(EMAIL_EVENT_RETRY_MINUTES)
    });
    if !out.unknown.is_empty() && young {
        return Err(EmailEventError::NotYetKnown(out.unknown));
    }
    if !out.unknown.is_empty() {
        tracing::warn!(unknown = ?out.unknown, detail_type = %event.detail_type, "SES event for a message no delivery has; dropped");
    }
    Ok(out)
}

/// A WebSocket route's refusal, in the HTTP API's error shape.
fn ws_error(code: ErrorCode, message: impl Into<String>) -> serde_json::Value {
    ApiError::of(code, message).body()
}
