//! What happens to a delivery outside an attempt: bot replies posted into a conversation,
//! websocket hand-offs (connections, pushes, acknowledgements, replays of what is waiting)
//! and provider receipts. The pipeline is the adapters' [`Services`].

use crate::ingest::{IngestError, NewActivity};
use async_trait::async_trait;
use converger_adapters::websocket::{SocketFrame, activity_frame, socket_config};
use converger_adapters::{Push, Reply, Services};
use converger_core::providers::Receipt;
use converger_core::{ActivityId, ChannelId, ChannelType, DeliveryError, DeliveryId};
use converger_ports::{Ack, Channel, Connection, Delivery, Pushed, Receipted, StoreError};
use serde_json::Value;

/// Most waiting deliveries one replay request pushes again.
pub const SOCKET_REPLAY_LIMIT: usize = 500;

fn store_error(e: StoreError) -> DeliveryError {
    DeliveryError::transient(format!("store: {e}"))
}

/// Hand-offs: websocket clients, acknowledgements, provider receipts and email events; and the adapters' [`Services`].
#[derive(Clone, Copy)]
pub struct Handoff<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) activities: &'p dyn converger_ports::ActivityStore,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) listings: &'p dyn converger_ports::DeliveryQueries,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) handoffs: &'p dyn converger_ports::HandoffStore,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) mailer: &'p dyn converger_ports::Mailer,
    pub(crate) tenant_aws: &'p dyn converger_ports::TenantAws,
    pub(crate) platform_account: Option<&'p str>,
    pub(crate) sockets: &'p dyn converger_ports::Sockets,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) intake: crate::ingest::Intake<'p>,
}

impl Handoff<'_> {
    /// The tenant an adapter names (by its id as text), as stored now: a permanent error when
    /// it is gone, a transient one when storage fails.
    async fn adapter_tenant(
        &self,
        tenant_id: &str,
    ) -> Result<converger_ports::Tenant, DeliveryError> {
        let id = converger_core::TenantId::parse(tenant_id)
            .map_err(|e| DeliveryError::permanent(e.to_string()))?;
        self.tenants
            .get_tenant(&id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| DeliveryError::permanent("the tenant no longer exists"))
    }
}

#[async_trait]
impl Services for Handoff<'_> {
    async fn post_reply(&self, reply: Reply<'_>) -> Result<String, DeliveryError> {
        let tenant = self.adapter_tenant(reply.tenant_id).await?;
        // Never an echo channel (no bot answers a bot), never an inactive one.
        let mut targets = Vec::new();
        for id in reply.channel_ids {
            if let Some(ch) = self
                .cache
                .channel_in(converger_ports::Scope::Tenant(&tenant.id), id)
                .await
                .map_err(store_error)?
                && ch.active
                && ch.kind != ChannelType::Echo
            {
                targets.push(id.clone());
            }
        }
        let delivery = DeliveryId::parse(reply.delivery_id)
            .map_err(|e| DeliveryError::permanent(format!("echo: {e}")))?;
        let id = ActivityId::reply_for(&delivery);
        let new = NewActivity {
            event_type: None,
            id: Some(id.clone()),
            conversation_id: reply.conversation_id.to_owned(),
            seq: None,
            channel_ids: targets,
            payload_upload: None,
            payload: Some(reply.payload),
            traceparent: None,
            tracestate: None,
        };
        match self
            .intake
            .ingest_with(&tenant, new, crate::ingest::Origin::Bot)
            .await
        {
            Ok(done) => Ok(done.activity.id.to_string()),
            Err(IngestError::Store(e)) => Err(store_error(e)),
            Err(IngestError::Queue(e)) => Err(DeliveryError::transient(format!("queue: {e}"))),
            Err(e) => Err(DeliveryError::permanent(format!(
                "echo: reply refused: {e}"
            ))),
        }
    }

    async fn send_email(
        &self,
        tenant_id: &str,
        email: &converger_core::email::Email,
    ) -> Result<String, DeliveryError> {
        // Checked again here, at the one place mail leaves: the channel may have been written
        // before an operator took the identity away, or by a path that skipped the API.
        let tenant = self.adapter_tenant(tenant_id).await?;
        if !converger_core::email::sender_allowed(&email.from, &tenant.email_senders) {
            return Err(DeliveryError::permanent(format!(
                "email: {}",
                converger_core::email::sender_refused(&email.from)
            )));
        }
        let on_behalf = tenant.ses_tenant.as_deref();
        self.mailer
            .send(email, on_behalf)
            .await
            .map_err(|e| DeliveryError {
                reason: e.reason,
                status: e.status,
                retryable: e.retryable,
                retry_after_ms: None,
                response_snippet: None,
                timed_out: false,
            })
    }

    async fn send_to_aws(
        &self,
        tenant_id: &str,
        role: &converger_core::aws::Role,
        message: &converger_core::aws::AwsMessage<'_>,
    ) -> Result<converger_core::aws::AwsReceipt, DeliveryError> {
        use converger_core::aws;
        let service = message.destination.service;
        // Checked again here, where the role is assumed: a channel written before the rule,
        // or by a path that skipped the API, never borrows the platform's own rights.
        aws::check_role_account(role, self.platform_account)
            .map_err(|e| DeliveryError::permanent(format!("{}: {e}", service.channel_type())))?;
        let tenant = converger_core::TenantId::parse(tenant_id)
            .map_err(|e| DeliveryError::permanent(e.to_string()))?;
        let external_id = self.cache.external_id(&tenant).await.map_err(store_error)?;
        let Some(external_id) = external_id.as_deref() else {
            return Err(DeliveryError::permanent(format!(
                "{}: {}",
                service.channel_type(),
                aws::ASSUME_ROLE_ADVICE
            )));
        };
        let session = aws::session_name(tenant_id);
        let assumed = aws::AssumedRole {
            role_arn: &role.arn,
            external_id,
            session_name: &session,
        };
        self.tenant_aws.send(assumed, message).await.map_err(|e| {
            let c = aws::classify(service, e.stage, e.code.as_deref(), &e.message, e.status);
            DeliveryError {
                reason: c.reason,
                status: e.status,
                retryable: c.retryable,
                retry_after_ms: None,
                response_snippet: None,
                timed_out: false,
            }
        })
    }

    async fn connections(&self, channel_id: &str) -> Result<Vec<String>, DeliveryError> {
        let id =
            ChannelId::parse(channel_id).map_err(|e| DeliveryError::permanent(e.to_string()))?;
        let channel = self.cache.channel(&id).await.map_err(store_error)?;
        let mut live = Vec::new();
        for c in self
            .handoffs
            .channel_connections(&id)
            .await
            .map_err(store_error)?
        {
            if channel.as_deref().is_some_and(|ch| still_admitted(ch, &c)) {
                live.push(c.connection_id);
            } else {
                self.cut_off(&c).await;
            }
        }
        Ok(live)
    }

    async fn push(&self, connection_id: &str, frame: &[u8]) -> Result<Push, DeliveryError> {
        // A frame the WebSocket API cannot carry is refused here, without the call: an
        // attempt dead-letters with the reason, a replay passes over it.
        converger_core::websocket::check_message_size(frame.len())
            .map_err(|e| DeliveryError::permanent(format!("websocket: {e}")))?;
        match self.sockets.post(connection_id, frame).await {
            Ok(Pushed::Sent) => Ok(Push::Sent),
            Ok(Pushed::Gone) => {
                if let Err(e) = self.handoffs.delete_connection(connection_id).await {
                    tracing::warn!(connection_id, error = %e, "gone connection not removed");
                }
                Ok(Push::Gone)
            }
            // Never pushed, however often tried: the delivery dead-letters with the reason.
            Ok(Pushed::TooLarge) => Err(DeliveryError::permanent(format!(
                "websocket: the WebSocket API refused a {}-byte message as too large (413)",
                frame.len()
            ))),
            Err(e) => Err(DeliveryError::transient(format!("websocket: {e}"))),
        }
    }
}

/// Whether a connection may still receive and send: its channel is active and its token is the
/// one the client connected with (connections from before fingerprints were kept pass).
fn still_admitted(channel: &converger_ports::Channel, conn: &Connection) -> bool {
    let current = socket_config(&channel.config)
        .ok()
        .map(|c| converger_core::secret::token_fingerprint(&c.token));
    channel.active
        && conn
            .token_fp
            .as_ref()
            .is_none_or(|fp| current.as_ref() == Some(fp))
}

impl Handoff<'_> {
    /// Forgets a connection that may no longer receive (its token changed, its channel was
    /// deactivated): nothing is pushed to it again.
    async fn cut_off(&self, conn: &Connection) {
        tracing::info!(connection_id = %conn.connection_id, channel_id = %conn.channel_id, "websocket connection cut off: token changed or channel inactive");
        if let Err(e) = self.handoffs.delete_connection(&conn.connection_id).await {
            tracing::warn!(connection_id = %conn.connection_id, error = %e, "connection not removed");
        }
    }
}

/// Why a websocket connection is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConnectRefused {
    #[error("unknown channel")]
    UnknownChannel,
    #[error("invalid token")]
    BadToken,
    #[error("the channel has {0} client connections open, the most it may; close one first")]
    TooMany(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a batch of provider receipts did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReceiptSummary {
    pub applied: usize,
    pub ignored: usize,
    pub unknown: Vec<String>,
}

impl Handoff<'_> {
    /// A client opens a websocket connection to `channel_id` with the channel's `token`.
    pub async fn socket_connect(
        &self,
        connection_id: &str,
        channel_id: &str,
        token: &str,
    ) -> Result<Connection, ConnectRefused> {
        let id = ChannelId::parse(channel_id).map_err(|_| ConnectRefused::UnknownChannel)?;
        let ch = self
            .channel_store
            .get_channel(&id)
            .await?
            .filter(|c| c.kind == ChannelType::Websocket && c.active)
            .ok_or(ConnectRefused::UnknownChannel)?;
        let cfg = socket_config(&ch.config).map_err(|_| ConnectRefused::BadToken)?;
        if !converger_core::secret::constant_time_eq(cfg.token.as_bytes(), token.as_bytes()) {
            return Err(ConnectRefused::BadToken);
        }
        let open = self.handoffs.channel_connections(&ch.id).await?.len();
        if open >= converger_core::policy::MAX_CHANNEL_CONNECTIONS {
            return Err(ConnectRefused::TooMany(open));
        }
        let now = self.clock.now();
        let c = Connection {
            connection_id: connection_id.to_owned(),
            channel_id: ch.id.clone(),
            tenant_id: ch.tenant_id.clone(),
            connected_at: now,
            expires_at: now.secs() + converger_ports::CONNECTION_TTL_S,
            token_fp: Some(converger_core::secret::token_fingerprint(&cfg.token)),
        };
        self.handoffs.put_connection(&c).await?;
        tracing::info!(connection_id, channel_id, "websocket client connected");
        Ok(c)
    }

    pub async fn socket_disconnect(&self, connection_id: &str) -> Result<(), StoreError> {
        if let Some(c) = self.handoffs.delete_connection(connection_id).await? {
            tracing::info!(connection_id, channel_id = %c.channel_id, "websocket client disconnected");
        }
        Ok(())
    }

    /// A frame from a client: `{"action": "ack", "delivery_id": ...}` or
    /// `{"action": "replay"}`. The answer is the frame to send back.
    pub async fn socket_message(
        &self,
        connection_id: &str,
        body: &str,
    ) -> Result<SocketFrame, StoreError> {
        let Some(conn) = self.handoffs.get_connection(connection_id).await? else {
            return Ok(SocketFrame::error(
                "not_connected",
                "this connection is not registered",
            ));
        };
        let channel = self.cache.channel(&conn.channel_id).await?;
        if !channel
            .as_deref()
            .is_some_and(|ch| still_admitted(ch, &conn))
        {
            self.cut_off(&conn).await;
            return Ok(SocketFrame::error(
                "unauthorized",
                "the channel's token changed or the channel is inactive; connect again",
            ));
        }
        let Ok(msg) = serde_json::from_str::<Value>(body) else {
            return Ok(SocketFrame::error(
                "invalid_json",
                "frames must be JSON objects",
            ));
        };
        match msg.get("action").and_then(Value::as_str) {
            Some("ack") => {
                let Some(id) = msg
                    .get("delivery_id")
                    .and_then(Value::as_str)
                    .and_then(|s| DeliveryId::parse(s).ok())
                else {
                    return Ok(SocketFrame::error(
                        "invalid_request",
                        "ack needs a `delivery_id`",
                    ));
                };
                let d = match self.deliveries.get_delivery(&id).await? {
                    Some(d) if d.channel_id == conn.channel_id => d,
                    _ => {
                        return Ok(SocketFrame::error(
                            "not_found",
                            "no such delivery on this channel",
                        ));
                    }
                };
                Ok(match self.acknowledge(&d).await? {
                    Ack::Acked(d) | Ack::Already(d) => SocketFrame::Ack {
                        delivery_id: d.id.to_string(),
                        status: d.status,
                    },
                    Ack::NotAwaiting(d) => SocketFrame::error(
                        "not_awaiting_ack",
                        &format!(
                            "delivery {} is {} and not waiting for an ack",
                            d.id, d.status
                        ),
                    ),
                    Ack::Missing => {
                        SocketFrame::error("not_found", "no such delivery on this channel")
                    }
                })
            }
            Some("replay") => {
                // One replay per channel and interval, whichever of its connections asks and
                // whichever instance each frame reaches: clients sending replay frames in a
                // loop push each waiting delivery once per interval, not once a frame, and
                // a channel's hundred connections hold one invocation, not a hundred.
                let now = self.clock.now_ms();
                if let Some(last) = self.handoffs.begin_replay(&conn.channel_id, now).await? {
                    // Refused: wait as the rule says (at least a millisecond, whatever the
                    // instances' clocks).
                    let wait_ms =
                        converger_core::policy::socket_replay_wait_ms(Some(last), now).unwrap_or(1);
                    return Ok(SocketFrame::Error {
                        code: "replay_throttled".into(),
                        message: format!(
                            "one replay per {} ms on a channel; send it again in {wait_ms} ms",
                            converger_core::policy::SOCKET_REPLAY_INTERVAL_MS
                        ),
                        retry_after_ms: Some(wait_ms),
                    });
                }
                // One at a time: the turn is held until this one ends, whatever it ends with.
                let n = self.socket_replay(&conn).await;
                self.handoffs
                    .end_replay(&conn.channel_id, self.clock.now_ms())
                    .await?;
                let (count, more) = n?;
                Ok(SocketFrame::Replayed { count, more })
            }
            _ => Ok(SocketFrame::error(
                "unknown_action",
                "`action` must be \"ack\" or \"replay\"",
            )),
        }
    }

    /// Pushes the channel's handed-off deliveries to `conn` again, oldest first, at most
    /// [`SOCKET_REPLAY_LIMIT`] and for at most `policy::SOCKET_REPLAY_BUDGET_MS`: how many
    /// were pushed, and whether more wait. Without `require_ack`, each one the client
    /// received is `sent`.
    async fn socket_replay(&self, conn: &Connection) -> Result<(usize, bool), StoreError> {
        let began = self.clock.now_ms();
        let Some(ch) = self.cache.channel(&conn.channel_id).await? else {
            return Ok((0, false));
        };
        let require_ack = socket_config(&ch.config).is_ok_and(|c| c.require_ack);
        let mut waiting: Vec<Delivery> = Vec::new();
        let mut after = None;
        loop {
            // The channel's own index of what waits for an ack, whatever else the tenant has
            // pending.
            let page = self
                .listings
                .handed_off_deliveries(&conn.tenant_id, &conn.channel_id, 200, after)
                .await?;
            waiting.extend(page.items.into_iter().filter(|d| d.handed_off));
            after = page.next;
            if after.is_none() || waiting.len() >= SOCKET_REPLAY_LIMIT {
                break;
            }
        }
        let mut more = waiting.len() > SOCKET_REPLAY_LIMIT || after.is_some();
        waiting.truncate(SOCKET_REPLAY_LIMIT);
        let mut pushed = 0;
        for (tried, d) in waiting.into_iter().enumerate() {
            if !converger_core::policy::socket_replay_goes_on(began, self.clock.now_ms(), tried) {
                more = true;
                break;
            }
            let Some(mut a) = self
                .activities
                .get_activity(&d.tenant_id, &d.activity_id)
                .await?
            else {
                continue;
            };
            // A payload the bucket keeps is read for the frame (one at a time: replays are
            // sent in order); one that is gone is skipped, as an activity that is.
            let _read = match self.intake.payloads.read(&mut a).await {
                Ok(permit) => permit,
                Err(crate::payloads::ReadError::Gone(key)) => {
                    tracing::warn!(delivery_id = %d.id, %key, "replay skipped: payload gone");
                    continue;
                }
                Err(crate::payloads::ReadError::Store(e)) => return Err(e),
            };
            // What the hand-off sent: the channel's middleware over the stored payload, as an
            // attempt applies it (a client never gets fields the tenant's steps remove). A
            // step that halts now sends nothing; the delivery keeps waiting.
            let transformed = match crate::middleware::transform(&ch, &a, d.attempts.max(1)).await {
                Ok(t) => t,
                Err(why) => {
                    tracing::warn!(delivery_id = %d.id, reason = %why, "replay skipped: middleware halted");
                    continue;
                }
            };
            let mut frame = activity_frame(
                d.id.as_str(),
                a.id.as_str(),
                &a.conversation_id,
                a.seq,
                transformed.as_ref().unwrap_or(&a.payload),
                require_ack,
            );
            if let SocketFrame::Activity { replay, .. } = &mut frame {
                *replay = true;
            }
            let Ok(bytes) = serde_json::to_vec(&frame) else {
                continue;
            };
            match self.push(&conn.connection_id, &bytes).await {
                Ok(Push::Sent) => {
                    pushed += 1;
                    if !require_ack {
                        self.acknowledge(&d).await?;
                    }
                }
                Ok(Push::Gone) => break,
                // One delivery's failure (a refused size, a throttled push) does not hold back
                // the ones after it; the next replay tries it again.
                Err(e) => {
                    tracing::warn!(connection_id = %conn.connection_id, delivery_id = %d.id, error = %e, "replay push failed");
                }
            }
        }
        Ok((pushed, more))
    }

    /// A client confirms a handed-off delivery `d` (as the caller read it): it becomes
    /// `sent` (`delivery.status_changed`).
    pub async fn acknowledge(&self, d: &Delivery) -> Result<Ack, StoreError> {
        let ack = self.handoffs.acknowledge(d, self.clock.now()).await?;
        if let Ack::Acked(d) = &ack {
            tracing::info!(delivery_id = %d.id, "handed-off delivery acknowledged");
        }
        Ok(ack)
    }

    /// Applies provider receipts to `channel`'s deliveries; each change is published as
    /// `delivery.status_changed`.
    pub async fn apply_receipts(
        &self,
        channel: &Channel,
        receipts: &[Receipt],
    ) -> Result<ReceiptSummary, StoreError> {
        let mut summary = ReceiptSummary::default();
        for r in receipts {
            let now = self.clock.now();
            match self
                .handoffs
                .apply_receipt(
                    &channel.id,
                    &r.provider_message_id,
                    r.status,
                    r.error.as_deref(),
                    now,
                )
                .await?
            {
                Receipted::Applied { from, row } => {
                    tracing::info!(delivery_id = %row.id, from = %from, to = %row.status, "provider receipt applied");
                    summary.applied += 1;
                }
                Receipted::Ignored(_) => summary.ignored += 1,
                Receipted::Unknown => summary.unknown.push(r.provider_message_id.clone()),
            }
        }
        Ok(summary)
    }
}

/// What one batch of SES events came to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EmailEvents {
    /// Events that moved a delivery.
    pub applied: usize,
    /// Events a delivery had moved past already (duplicates, a delivery after a bounce).
    pub ignored: usize,
    /// Events that change nothing (opens, delays) or are not this stack's email channels'.
    pub skipped: usize,
    /// Message ids no delivery has (yet): a `Delivery` event can outrun the write of the
    /// message id it names.
    pub unknown: Vec<String>,
}

impl Handoff<'_> {
    /// Applies SES events (each the `detail` of an EventBridge event from `aws.ses`) to the
    /// deliveries of the email channels their tags name, through the receipts' forward-only
    /// rules: bounces, complaints and rejects fail a delivery, a delivery delivers it.
    pub async fn apply_email_events(&self, details: &[Value]) -> Result<EmailEvents, StoreError> {
        let mut out = EmailEvents::default();
        for detail in details {
            let Some((channel, receipt)) = converger_core::email::ses_event(detail) else {
                out.skipped += 1;
                continue;
            };
            let channel = match ChannelId::parse(&channel) {
                Ok(id) => self.cache.channel(&id).await?,
                Err(_) => None,
            };
            let Some(channel) = channel.filter(|c| c.kind == ChannelType::Email) else {
                tracing::info!(message_id = %receipt.provider_message_id, "SES event for no email channel of this stack; skipped");
                out.skipped += 1;
                continue;
            };
            let s = self
                .apply_receipts(&channel, std::slice::from_ref(&receipt))
                .await?;
            out.applied += s.applied;
            out.ignored += s.ignored;
            out.unknown.extend(s.unknown);
        }
        Ok(out)
    }
}
