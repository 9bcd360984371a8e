//! RabbitMQ channels (`rabbitmq`): one message per delivery, published over AMQP 0-9-1 (see
//! `converger_core::amqp` for the rules). The body is a webhook's (`config.body`), signed the
//! same way, with the signature and the delivery's id in the message's headers.
//!
//! Connections are kept between deliveries, one per broker and user (at most [`MAX_LINKS`]
//! per process, the least recently used closed first), each with a few confirm-mode
//! channels that carry one message at a time: the broker's `ack`, `nack` or `return` that
//! follows a publish is that message's. A connection found dead (the process was frozen
//! between invocations past the heartbeat, the broker restarted) is opened again once
//! within the attempt. The broker's address is resolved and checked by the SSRF guard once
//! per connection, and the connection goes to the checked address.

use crate::{Accepted, Adapter, Delivered, Envelope, Target};
use amqprs::callbacks::ChannelCallback;
use amqprs::channel::{BasicPublishArguments, Channel, ConfirmSelectArguments};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::tls::TlsAdaptor;
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, FieldTable, FieldValue, Nack, Return};
use async_trait::async_trait;
use converger_core::amqp::{self, Settings};
use converger_core::net::Allowlist;
use converger_core::signing::signature_header;
use converger_core::{ChannelType, DeliveryError, Invalid};
use serde_json::{Map, Value};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tokio::sync::mpsc;

/// Most broker connections one process keeps.
pub const MAX_LINKS: usize = 32;
/// Most idle confirm-mode channels one connection keeps.
const MAX_IDLE_CHANNELS: usize = 16;
/// Heartbeat asked of the broker, in seconds.
const HEARTBEAT_S: u16 = 30;
const LABEL: &str = "rabbitmq";

/// The adapter, with its connections.
pub struct RabbitMqAdapter {
    allow: Arc<Allowlist>,
    links: Mutex<Vec<Arc<Link>>>,
}

impl RabbitMqAdapter {
    pub fn new(allow: Arc<Allowlist>) -> Self {
        Self {
            allow,
            links: Mutex::new(Vec::new()),
        }
    }

    /// Connections open now (for tests).
    pub fn open_links(&self) -> usize {
        self.links.lock().map(|l| l.len()).unwrap_or(0)
    }
}

/// A channel's configuration as the adapter uses it: the settings, the TLS connector built
/// from them, and who it connects as: channels of the same broker, user, password and CA
/// share a connection.
struct Parsed {
    settings: Settings,
    tls: Option<tokio_rustls::TlsConnector>,
    who: Who,
}

#[derive(Clone, PartialEq, Eq)]
struct Who {
    broker: amqp::Broker,
    username: String,
    password: String,
    ca: Option<String>,
}

fn parse(config: &Map<String, Value>) -> Result<Parsed, Invalid> {
    let settings = amqp::settings(config)?;
    let tls = settings
        .broker
        .tls
        .then(|| connector(settings.ca_certificate.as_deref()))
        .transpose()?;
    let who = Who {
        broker: settings.broker.clone(),
        username: settings.username.clone(),
        password: settings.password.clone(),
        ca: settings.ca_certificate.clone(),
    };
    Ok(Parsed { settings, tls, who })
}

/// TLS that trusts the public roots, or only the channel's own CA when it gives one.
fn connector(ca: Option<&str>) -> Result<tokio_rustls::TlsConnector, Invalid> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| Invalid(format!("`ca_certificate`: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| Invalid(format!("`ca_certificate`: {e}")))?;
            }
            if roots.is_empty() {
                return Err(Invalid::new("`ca_certificate` holds no certificate"));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Invalid(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// One connection to a broker, and its idle confirm-mode channels.
struct Link {
    who: Who,
    conn: Connection,
    idle: Mutex<Vec<Confirming>>,
    used: Mutex<Instant>,
}

/// A channel in confirm mode, and what the broker says on it.
struct Confirming {
    channel: Channel,
    events: mpsc::UnboundedReceiver<Event>,
}

#[derive(Debug)]
enum Event {
    Ack,
    Nack,
    Returned(u16, String),
    Closed(u16, String),
}

struct Events(mpsc::UnboundedSender<Event>);

#[async_trait]
impl ChannelCallback for Events {
    async fn close(
        &mut self,
        _: &Channel,
        close: CloseChannel,
    ) -> Result<(), amqprs::error::Error> {
        let _ = self.0.send(Event::Closed(
            close.reply_code(),
            close.reply_text().to_owned(),
        ));
        Ok(())
    }
    async fn cancel(&mut self, _: &Channel, _: Cancel) -> Result<(), amqprs::error::Error> {
        Ok(())
    }
    async fn flow(&mut self, _: &Channel, active: bool) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }
    async fn publish_ack(&mut self, _: &Channel, _: Ack) {
        let _ = self.0.send(Event::Ack);
    }
    async fn publish_nack(&mut self, _: &Channel, _: Nack) {
        let _ = self.0.send(Event::Nack);
    }
    async fn publish_return(&mut self, _: &Channel, ret: Return, _: BasicProperties, _: Vec<u8>) {
        let _ = self.0.send(Event::Returned(
            ret.reply_code(),
            ret.reply_text().to_owned(),
        ));
    }
}

/// Why a publish failed: the connection (opened again once when it was an old one), or
/// the broker's answer.
enum Fail {
    Link(String),
    Refused(DeliveryError),
}

impl Fail {
    fn into_error(self) -> DeliveryError {
        match self {
            Self::Link(why) => DeliveryError::from_transport(why, LABEL),
            Self::Refused(e) => e,
        }
    }
}

impl Link {
    async fn channel(&self) -> Result<Confirming, Fail> {
        if let Some(c) = self.idle.lock().ok().and_then(|mut i| i.pop())
            && c.channel.is_open()
        {
            return Ok(c);
        }
        let channel = self
            .conn
            .open_channel(None)
            .await
            .map_err(|e| Fail::Link(e.to_string()))?;
        let (tx, events) = mpsc::unbounded_channel();
        channel
            .register_callback(Events(tx))
            .await
            .map_err(|e| Fail::Link(e.to_string()))?;
        channel
            .confirm_select(ConfirmSelectArguments::default())
            .await
            .map_err(|e| Fail::Link(e.to_string()))?;
        Ok(Confirming { channel, events })
    }

    fn put_back(&self, c: Confirming) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE_CHANNELS
        {
            idle.push(c);
        }
    }

    /// Publishes one message and waits for the broker's confirmation.
    async fn publish(
        &self,
        s: &Settings,
        props: BasicProperties,
        body: Vec<u8>,
    ) -> Result<(), Fail> {
        if let Ok(mut u) = self.used.lock() {
            *u = Instant::now();
        }
        let mut c = self.channel().await?;
        let mut args = BasicPublishArguments::new(&s.exchange, &s.routing_key);
        args.mandatory(true);
        c.channel
            .basic_publish(props, body, args.finish())
            .await
            .map_err(|e| Fail::Link(e.to_string()))?;
        let mut returned = None;
        loop {
            match c.events.recv().await {
                Some(Event::Returned(code, text)) => returned = Some((code, text)),
                Some(Event::Ack) => {
                    self.put_back(c);
                    return match returned {
                        Some((code, text)) => Err(refused(code, &text)),
                        None => Ok(()),
                    };
                }
                Some(Event::Nack) => {
                    self.put_back(c);
                    return Err(Fail::Refused(DeliveryError::transient(
                        "rabbitmq: the broker could not take the message (nack)",
                    )));
                }
                Some(Event::Closed(code, text)) => return Err(refused(code, &text)),
                None => return Err(Fail::Link("the connection was lost".into())),
            }
        }
    }
}

fn refused(code: u16, text: &str) -> Fail {
    Fail::Refused(amqp::refusal_error(code, text))
}

impl RabbitMqAdapter {
    /// The broker's address, resolved and checked by the SSRF guard (the first allowed).
    async fn address(&self, b: &amqp::Broker) -> Result<SocketAddr, DeliveryError> {
        let addrs = crate::http::vetted(&b.host, b.port, &self.allow)
            .await
            .map_err(|e| e.into_error(LABEL))?;
        addrs.first().copied().ok_or_else(|| {
            DeliveryError::from_transport(format!("{} has no address", b.host), LABEL)
        })
    }

    async fn connect(&self, p: &Parsed) -> Result<Arc<Link>, DeliveryError> {
        let s = &p.settings;
        let addr = self.address(&s.broker).await?;
        let host = match addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let mut args = OpenConnectionArguments::new(&host, addr.port(), &s.username, &s.password);
        args.virtual_host(&s.broker.vhost)
            .heartbeat(HEARTBEAT_S)
            .connection_name(concat!("converger/", env!("CARGO_PKG_VERSION")));
        if let Some(tls) = &p.tls {
            args.tls_adaptor(TlsAdaptor::new(tls.clone(), s.broker.host.clone()));
        }
        // The handshake reads what the broker (the tenant's) sends, and the client library
        // unwraps some of it: in a task of its own, so that a hostile broker's answer ends
        // this attempt, not the batch; bounded, so that a silent one does not keep the task.
        let args = args.finish();
        let bound =
            std::time::Duration::from_millis(converger_core::policy::ADAPTER_TIMEOUT_MAX_MS);
        let opened =
            tokio::spawn(async move { tokio::time::timeout(bound, Connection::open(&args)).await })
                .await;
        let conn = match opened {
            Ok(Ok(Ok(conn))) => conn,
            Ok(Ok(Err(e))) => return Err(amqp::connect_failure(&e.to_string(), &s.broker)),
            Ok(Err(_)) => return Err(DeliveryError::timeout(bound.as_millis(), LABEL)),
            Err(_) => {
                return Err(DeliveryError::permanent(format!(
                    "{LABEL}: {} answered the AMQP handshake with what no broker sends",
                    s.broker.host
                )));
            }
        };
        // AMQP's smallest frame is 4,096 bytes: a broker that asks for less is not one (and
        // the client library cannot split a message into smaller frames).
        let frame_max = conn.frame_max();
        if (1..4096).contains(&frame_max) {
            drop(conn);
            return Err(DeliveryError::permanent(format!(
                "{LABEL}: {} asked for frames of {frame_max} bytes; AMQP's smallest is 4096",
                s.broker.host
            )));
        }
        let link = Arc::new(Link {
            who: p.who.clone(),
            conn,
            idle: Mutex::new(Vec::new()),
            used: Mutex::new(Instant::now()),
        });
        if let Ok(mut links) = self.links.lock() {
            links.retain(|l| l.who != p.who);
            if links.len() >= MAX_LINKS
                && let Some(oldest) = links
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, l)| {
                        l.used.lock().map(|u| *u).unwrap_or_else(|_| Instant::now())
                    })
                    .map(|(i, _)| i)
            {
                // Dropping the last handle closes the connection.
                links.swap_remove(oldest);
            }
            links.push(link.clone());
        }
        Ok(link)
    }

    fn cached(&self, who: &Who) -> Option<Arc<Link>> {
        let mut links = self.links.lock().ok()?;
        links.retain(|l| l.conn.is_open());
        links.iter().find(|l| l.who == *who).cloned()
    }

    fn forget(&self, link: &Arc<Link>) {
        if let Ok(mut links) = self.links.lock() {
            links.retain(|l| !Arc::ptr_eq(l, link));
        }
    }

    async fn send(
        &self,
        p: &Parsed,
        props: BasicProperties,
        body: Vec<u8>,
    ) -> Result<(), DeliveryError> {
        if let Some(link) = self.cached(&p.who) {
            match link.publish(&p.settings, props.clone(), body.clone()).await {
                Err(Fail::Link(_)) => self.forget(&link),
                other => return other.map_err(Fail::into_error),
            }
        }
        let link = self.connect(p).await?;
        let out = link.publish(&p.settings, props, body).await;
        if matches!(out, Err(Fail::Link(_))) {
            self.forget(&link);
        }
        out.map_err(Fail::into_error)
    }
}

#[async_trait]
impl Adapter for RabbitMqAdapter {
    fn kind(&self) -> ChannelType {
        ChannelType::Rabbitmq
    }

    fn validate_config(&self, config: &Map<String, Value>) -> Result<(), Invalid> {
        parse(config).map(drop)
    }

    async fn deliver(
        &self,
        env: Envelope<'_>,
        target: Target<'_>,
    ) -> Result<Delivered, DeliveryError> {
        let p = target
            .config_as(parse)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let body = p.settings.body.value(crate::body_parts(&env));
        let body = serde_json::to_vec(&body)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let signature = signature_header(target.signing_secrets, env.delivery_id, ts as i64, &body)
            .map_err(|e| DeliveryError::permanent(format!("{LABEL}: {e}")))?;
        let mut headers = FieldTable::new();
        let attributes = converger_core::aws::attributes(
            env.delivery_id,
            ts as i64,
            &signature,
            env.event_type,
            env.conversation_id,
        );
        let trace = [
            ("traceparent", env.traceparent),
            ("tracestate", env.tracestate),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v.to_owned())));
        for (k, v) in attributes.into_iter().chain(trace) {
            let (Ok(k), Ok(v)) = (k.try_into(), amqprs::LongStr::try_from(v)) else {
                return Err(DeliveryError::permanent(format!(
                    "{LABEL}: header `{k}` does not fit AMQP"
                )));
            };
            headers.insert(k, FieldValue::S(v));
        }
        let mut props = BasicProperties::default();
        props
            .with_content_type("application/json")
            .with_persistence(p.settings.persistent)
            .with_message_id(&converger_core::aws::deduplication_id(
                env.delivery_id,
                env.replays,
            ))
            .with_timestamp(ts)
            .with_app_id("converger")
            .with_headers(headers);
        if let Some(t) = env.event_type {
            props.with_message_type(t);
        }
        tokio::time::timeout(target.timeout, self.send(&p, props.finish(), body))
            .await
            .map_err(|_| DeliveryError::timeout(target.timeout.as_millis(), LABEL))??;
        Ok(Delivered::Sent(Accepted {
            provider_message_id: None,
            status_code: None,
            response_snippet: Some("confirmed by the broker".into()),
        }))
    }
}
