//! The outbound HTTP client every network adapter shares: one connection pool, a timeout on
//! every request, no redirects, a capped response read, and the SSRF guard: a host is
//! resolved, special-purpose addresses are dropped unless allowlisted, and the connection
//! uses the vetted addresses only.

use converger_core::DeliveryError;
use converger_core::net::{Allowlist, check_destination};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Most of a response body that is read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Upper bound on any adapter request, whatever the channel asks.
pub const MAX_TIMEOUT_MS: u64 = converger_core::policy::ADAPTER_TIMEOUT_MAX_MS;

#[derive(Debug, thiserror::Error)]
#[error("destination {host} is not allowed ({reason} address)")]
pub struct Blocked {
    host: String,
    reason: &'static str,
}

#[derive(Debug, thiserror::Error)]
#[error("{host} did not resolve to any address")]
pub struct NoAddress {
    host: String,
}

/// DNS resolution that only hands out allowed addresses, so the vetted address is the one
/// connected to (no rebinding between check and connect).
struct GuardedResolver {
    allow: Arc<Allowlist>,
}

/// Why a host has no address the guard allows.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("{0}")]
    Lookup(#[from] std::io::Error),
    #[error(transparent)]
    NoAddress(NoAddress),
    #[error(transparent)]
    Blocked(Blocked),
}

impl Unreachable {
    /// The attempt's error: a blocked destination is permanent, the rest retryable.
    pub fn into_error(self, label: &str) -> DeliveryError {
        match self {
            Self::Blocked(b) => DeliveryError::permanent(format!("{label}: {b}")),
            other => DeliveryError::from_transport(other, label),
        }
    }
}

/// `host`'s addresses on `port` that the guard allows (an IP literal is checked as it is).
pub async fn vetted(
    host: &str,
    port: u16,
    allow: &Allowlist,
) -> Result<Vec<SocketAddr>, Unreachable> {
    let addrs: Vec<SocketAddr> = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port)).await?.collect(),
    };
    if addrs.is_empty() {
        return Err(Unreachable::NoAddress(NoAddress {
            host: host.to_owned(),
        }));
    }
    let mut reason = "";
    let ok: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match check_destination(a.ip(), allow) {
            Ok(()) => true,
            Err(r) => {
                reason = r;
                false
            }
        })
        .collect();
    if ok.is_empty() {
        return Err(Unreachable::Blocked(Blocked {
            host: host.to_owned(),
            reason,
        }));
    }
    Ok(ok)
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let allow = self.allow.clone();
        Box::pin(async move {
            // The inner error itself, so that `classify_transport` finds `Blocked` among
            // the sources.
            let ok = vetted(&host, 0, &allow).await.map_err(|e| match e {
                Unreachable::Lookup(io) => Box::new(io) as Box<dyn std::error::Error + Send + Sync>,
                Unreachable::NoAddress(n) => Box::new(n),
                Unreachable::Blocked(b) => Box::new(b),
            })?;
            Ok(Box::new(ok.into_iter()) as Addrs)
        })
    }
}

/// What came back: the status, `Retry-After`, and at most [`MAX_RESPONSE_BYTES`] of the body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// The guarded client.
pub struct Guarded {
    client: reqwest::Client,
    allow: Arc<Allowlist>,
}

impl Guarded {
    pub fn new(allow: Allowlist) -> Result<Self, reqwest::Error> {
        let allow = Arc::new(allow);
        let client = Self::builder(&allow).build()?;
        Ok(Self { client, allow })
    }

    /// A client of its own that presents a client certificate (`identity_pem`: the
    /// certificate chain and its private key) and, when `ca_pem` is given, trusts only that
    /// CA for the receiver's certificate; under the same guard.
    pub fn with_client_cert(
        &self,
        identity_pem: &str,
        ca_pem: Option<&str>,
    ) -> Result<Self, reqwest::Error> {
        let mut b = Self::builder(&self.allow)
            .identity(reqwest::Identity::from_pem(identity_pem.as_bytes())?);
        if let Some(ca) = ca_pem {
            b = b.tls_certs_only(reqwest::Certificate::from_pem_bundle(ca.as_bytes())?);
        }
        Ok(Self {
            client: b.build()?,
            allow: self.allow.clone(),
        })
    }

    fn builder(allow: &Arc<Allowlist>) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_millis(MAX_TIMEOUT_MS))
            .pool_idle_timeout(Duration::from_secs(50))
            .user_agent(concat!("Converger/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(GuardedResolver {
                allow: allow.clone(),
            })
    }

    /// Refuses a URL whose host is an IP literal the guard does not allow (a literal is
    /// never resolved, so the resolver cannot refuse it).
    pub fn check_literal(&self, url: &reqwest::Url, label: &str) -> Result<(), DeliveryError> {
        if let Some(Ok(ip)) = url
            .host_str()
            .map(|h| h.trim_matches(['[', ']']).parse::<IpAddr>())
            && let Err(reason) = check_destination(ip, &self.allow)
        {
            return Err(DeliveryError::permanent(format!(
                "{label}: destination {ip} is not allowed ({reason} address)"
            )));
        }
        Ok(())
    }

    pub fn request(&self, method: reqwest::Method, url: reqwest::Url) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// Sends with `timeout` and reads the answer. Transport failures are classified here:
    /// a blocked destination is permanent, everything else (timeouts, refused connections,
    /// unresolvable hosts) retryable.
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
        timeout: Duration,
        label: &str,
    ) -> Result<Response, DeliveryError> {
        let mut resp = match req.timeout(timeout).send().await {
            Ok(r) => r,
            Err(e) => return Err(classify_transport(&e, timeout, label)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body: Vec<u8> = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let room = MAX_RESPONSE_BYTES.saturating_sub(body.len());
                    body.extend_from_slice(&c[..c.len().min(room)]);
                    if body.len() >= MAX_RESPONSE_BYTES {
                        break;
                    }
                }
                Ok(None) => break,
                // A 2xx whose body breaks off was still accepted; the error is for the log.
                Err(e) if (200..300).contains(&status) => {
                    tracing::debug!(error = %e, "response body cut short");
                    break;
                }
                Err(e) => return Err(classify_transport(&e, timeout, label)),
            }
        }
        Ok(Response {
            status,
            retry_after,
            body,
        })
    }
}

fn classify_transport(e: &reqwest::Error, timeout: Duration, label: &str) -> DeliveryError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(b) = s.downcast_ref::<Blocked>() {
            return DeliveryError::permanent(format!("{label}: {b}"));
        }
        if let Some(n) = s.downcast_ref::<NoAddress>() {
            return DeliveryError::from_transport(n, label);
        }
        src = s.source();
    }
    if e.is_timeout() {
        return DeliveryError::timeout(timeout.as_millis(), label);
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    // The error names the URL; its query, fragment and credentials may hold secrets (a token
    // in a webhook URL), and the text is kept in `last_error`, the attempt log and exports.
    if let Some(u) = e.url() {
        msg = msg.replace(u.as_str(), &converger_core::web::redact_url(u.as_str()));
    }
    DeliveryError::from_transport(msg, label)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ipv6_literals_that_embed_or_reach_ipv4_are_refused_before_connecting() {
        let g = Guarded::new(Allowlist::default()).unwrap();
        for host in [
            "[::127.0.0.1]",
            "[::a9fe:a9fe]",
            "[2002:a9fe:a9fe::1]",
            "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
            "[64:ff9b:1::a9fe:a9fe]",
            "[fec0::1]",
        ] {
            let url = reqwest::Url::parse(&format!("http://{host}/hook")).unwrap();
            let err = g.check_literal(&url, "webhook").unwrap_err();
            assert!(!err.retryable, "{host}: {}", err.reason);
            assert!(
                err.reason.contains("is not allowed"),
                "{host}: {}",
                err.reason
            );
        }
        let public = reqwest::Url::parse("http://[2606:4700::1111]/hook").unwrap();
        assert!(g.check_literal(&public, "webhook").is_ok());
    }

    #[tokio::test]
    async fn transport_errors_name_the_url_without_its_secrets() {
        // Nothing listens on port 1: the connection is refused.
        let url = "http://user:hunter2@127.0.0.1:1/hook?token=s3cret#frag";
        let e = reqwest::Client::new().get(url).send().await.unwrap_err();
        let err = classify_transport(&e, Duration::from_secs(1), "webhook");
        assert!(err.reason.contains("127.0.0.1:1/hook"), "{}", err.reason);
        for secret in ["s3cret", "hunter2", "token=", "frag"] {
            assert!(!err.reason.contains(secret), "{secret} in {}", err.reason);
        }
        assert!(err.retryable);
    }
}
