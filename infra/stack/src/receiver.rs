//! A real HTTP receiver on loopback for the demo and the tests: answers from a script,
//! records every request it gets.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Notify;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn body(mut self, b: &str) -> Self {
        self.body = b.into();
        self
    }

    /// Answers only after `d` (a slow or hanging endpoint).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

/// The largest request body a receiver reads (a 10 MiB payload in its envelope).
const RECEIVER_MAX_BODY: usize = 16 * 1024 * 1024;

/// A request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub at_system: SystemTime,
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
}

struct Inner {
    /// Answers for requests whose body contains a marker, before the script.
    rules: Mutex<Vec<(String, Reply)>>,
    /// Rules that answer once each (`answer_once_when`).
    once: Mutex<Vec<(String, Reply)>>,
    script: Mutex<VecDeque<Reply>>,
    fallback: Mutex<Reply>,
    seen: Mutex<Vec<Received>>,
    notify: Notify,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Open (`true`) unless the receiver holds its answers ([`Receiver::hold`]).
    gate: tokio::sync::watch::Sender<bool>,
}

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a Inner);

impl<'a> InFlight<'a> {
    fn new(inner: &'a Inner) -> Self {
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(inner)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _in_flight = InFlight::new(&inner);
    let text = String::from_utf8_lossy(&body);
    let once = inner.once.lock().ok().and_then(|mut rules| {
        let i = rules
            .iter()
            .position(|(marker, _)| text.contains(marker.as_str()))?;
        Some(rules.swap_remove(i).1)
    });
    let ruled = once.or_else(|| {
        inner.rules.lock().ok().and_then(|rules| {
            rules
                .iter()
                .find(|(marker, _)| text.contains(marker.as_str()))
                .map(|(_, reply)| reply.clone())
        })
    });
    let received = Received {
        at: Instant::now(),
        at_system: SystemTime::now(),
        method,
        uri,
        headers,
        body,
    };
    if let Ok(mut seen) = inner.seen.lock() {
        seen.push(received);
    }
    inner.notify.notify_waiters();
    let reply = ruled
        .or_else(|| inner.script.lock().ok().and_then(|mut s| s.pop_front()))
        .or_else(|| inner.fallback.lock().ok().map(|f| f.clone()))
        .unwrap_or_else(|| Reply::status(500));
    let mut gate = inner.gate.subscribe();
    let _ = gate.wait_for(|open| *open).await;
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        reply.body,
    )
        .into_response();
    for (k, v) in reply.headers {
        if let (Ok(k), Ok(v)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            axum::http::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

impl Receiver {
    /// Starts a receiver answering `script` in order, then `fallback` for ever.
    pub async fn start(script: Vec<Reply>, fallback: Reply) -> Result<Self, String> {
        let inner = Arc::new(Inner {
            rules: Mutex::new(Vec::new()),
            once: Mutex::new(Vec::new()),
            script: Mutex::new(script.into()),
            fallback: Mutex::new(fallback),
            seen: Mutex::new(Vec::new()),
            notify: Notify::new(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            gate: tokio::sync::watch::Sender::new(true),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // Receivers take what the platform sends: payloads up to 10 MiB, wrapped.
        let app = Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(RECEIVER_MAX_BODY))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url: format!("http://{addr}/hook"),
            inner,
            task: Arc::new(task),
        })
    }

    /// [`Self::start`] over HTTPS for `localhost` (a certificate of `server_ca`), admitting
    /// only connections whose client certificate `client_ca` signed: the receiver of a
    /// channel with a client certificate.
    pub async fn start_mtls(
        script: Vec<Reply>,
        fallback: Reply,
        server_ca: &crate::pki::Ca,
        client_ca: &crate::pki::Ca,
    ) -> Result<Self, String> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let plain = Self::start(script, fallback).await?;
        plain.task.abort();
        let server = server_ca.server("localhost")?;
        let bad = |e: &dyn std::fmt::Display| format!("the receiver's TLS: {e}");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(client_ca.pem().as_bytes()) {
            roots.add(c.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| bad(&e))?;
        let chain = CertificateDer::pem_slice_iter(server.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).map_err(|e| bad(&e))?;
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| bad(&e))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(RECEIVER_MAX_BODY))
            .with_state(plain.inner.clone());
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    // A client without a certificate the CA signed ends here.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
                });
            }
        });
        Ok(Self {
            url: format!("https://localhost:{}/hook", addr.port()),
            inner: plain.inner.clone(),
            task: Arc::new(task),
        })
    }

    /// Always answers `status`.
    pub async fn always(status: u16) -> Result<Self, String> {
        Self::start(Vec::new(), Reply::status(status)).await
    }

    /// Answers `reply` to every request whose body contains `marker`, whatever the script says.
    pub fn answer_when(&self, marker: &str, reply: Reply) {
        if let Ok(mut rules) = self.inner.rules.lock() {
            rules.push((marker.to_owned(), reply));
        }
    }

    /// Answers `reply` to the first request whose body contains `marker` (once), whatever
    /// the script says.
    pub fn answer_once_when(&self, marker: &str, reply: Reply) {
        if let Ok(mut rules) = self.inner.once.lock() {
            rules.push((marker.to_owned(), reply));
        }
    }

    /// Answers `reply` from now on (once the script is used up).
    pub fn set_fallback(&self, reply: Reply) {
        if let Ok(mut f) = self.inner.fallback.lock() {
            *f = reply;
        }
    }

    /// Holds every answer (requests are received and counted, and wait) until
    /// [`Self::release`].
    pub fn hold(&self) {
        self.inner.gate.send_replace(false);
    }

    /// Answers the held requests and every one after them.
    pub fn release(&self) {
        self.inner.gate.send_replace(true);
    }

    /// The most requests that were in flight at once.
    pub fn max_concurrent(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.inner.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.inner
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Waits until at least `n` requests arrived or `timeout` passed; returns what arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.inner.notify.notified();
            let seen = self.requests();
            if seen.len() >= n || Instant::now() >= deadline {
                return seen;
            }
            let _ = tokio::time::timeout(deadline - Instant::now(), notified).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}
