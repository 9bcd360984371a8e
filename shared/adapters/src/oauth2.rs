//! The bearer tokens of webhook channels that authenticate by OAuth 2.0's client-credentials
//! grant (`core::oauth2` has the rules): fetched from the channel's token endpoint through
//! the SSRF guard and under the attempt's timeout, kept in this instance's memory (never
//! stored) per channel and settings until shortly before they expire, one fetch at a time per
//! channel, so that the deliveries waiting for a token share the one that comes.

use crate::http::Guarded;
use converger_core::DeliveryError;
use converger_core::oauth2::{ClientCredentials, Token, token_from_response};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The label of a token request's errors.
const LABEL: &str = "webhook: oauth2 token";

/// Channels' tokens kept at once before stale ones are forgotten.
const MAX_KEPT: usize = 4096;

type Slot = Arc<tokio::sync::Mutex<Option<Token>>>;

/// Tokens by channel and settings ([`ClientCredentials::cache_key`]).
#[derive(Default)]
pub struct Tokens {
    slots: Mutex<HashMap<String, Slot>>,
}

impl Tokens {
    fn slot(&self, key: &str) -> Slot {
        let mut slots = match self.slots.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(s) = slots.get(key) {
            return s.clone();
        }
        if slots.len() >= MAX_KEPT {
            // Keep those in use or still fresh; a slot being filled is in use.
            let now = converger_core::time::now_ms();
            slots.retain(|_, s| match s.try_lock() {
                Ok(t) => t.as_ref().is_some_and(|t| t.fresh(now)),
                Err(_) => true,
            });
        }
        slots.entry(key.to_owned()).or_default().clone()
    }

    /// The token of `key` fresh at `now_ms()`, or the one `fetch` gets (then kept). While one
    /// fetch runs, other callers of the same key wait for its token rather than fetch their
    /// own. The second value says whether this call fetched it.
    pub async fn get<F, Fut>(
        &self,
        key: &str,
        now_ms: impl Fn() -> i64,
        fetch: F,
    ) -> Result<(String, bool), DeliveryError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, DeliveryError>>,
    {
        let slot = self.slot(key);
        let mut held = slot.lock().await;
        if let Some(t) = held.as_ref().filter(|t| t.fresh(now_ms())) {
            return Ok((t.access_token.clone(), false));
        }
        let t = fetch().await?;
        let access = t.access_token.clone();
        *held = Some(t);
        Ok((access, true))
    }

    /// A receiver refused `token` (a 401): it is dropped, unless another call has replaced it
    /// already.
    pub async fn refused(&self, key: &str, token: &str) {
        let slot = self.slot(key);
        let mut held = slot.lock().await;
        if held.as_ref().is_some_and(|t| t.access_token == token) {
            *held = None;
        }
    }
}

/// Asks the token endpoint of `c` for a token, within `timeout`. Whatever goes wrong is
/// retryable: the receiver was not reached, and credentials fixed at the endpoint (or on the
/// channel) let the waiting deliveries through without a replay. A destination the SSRF guard
/// refuses is not.
pub async fn fetch(
    http: &Guarded,
    c: &ClientCredentials,
    timeout: Duration,
) -> Result<Token, DeliveryError> {
    let url = c.token_url.clone();
    http.check_literal(&url, LABEL)?;
    let mut req = http
        .request(reqwest::Method::POST, url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(c.form());
    if let Some(basic) = c.basic_header() {
        req = req.header("authorization", basic);
    }
    let resp = http.send(req, timeout, LABEL).await?;
    if !resp.is_success() {
        // The endpoint's `error` code (RFC 6749 §5.2) says why; its description may quote
        // what was sent, so it is left out.
        let code = serde_json::from_slice::<serde_json::Value>(&resp.body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .filter(|c| c.len() <= 64 && c.chars().all(|ch| ch.is_ascii_graphic()));
        let mut e = DeliveryError::transient(format!(
            "{LABEL}: the token endpoint refused the request: HTTP {}{}",
            resp.status,
            code.map(|c| format!(" ({c})")).unwrap_or_default()
        ));
        e.retry_after_ms = resp.retry_after.as_deref().and_then(|v| {
            converger_core::error::parse_retry_after(v, std::time::SystemTime::now())
        });
        return Err(e);
    }
    token_from_response(&resp.body, converger_core::time::now_ms())
        .map_err(|e| DeliveryError::transient(format!("{LABEL}: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn token(name: &str, until: i64) -> Token {
        Token {
            access_token: name.into(),
            use_until_ms: until,
        }
    }

    #[tokio::test]
    async fn callers_waiting_for_a_token_share_one_fetch() {
        let tokens = Arc::new(Tokens::default());
        let fetches = Arc::new(AtomicUsize::new(0));
        let calls = (0..20).map(|_| {
            let tokens = tokens.clone();
            let fetches = fetches.clone();
            tokio::spawn(async move {
                tokens
                    .get(
                        "ch_1#k",
                        || 0,
                        || async move {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            Ok(token("t1", 1_000))
                        },
                    )
                    .await
                    .unwrap()
                    .0
            })
        });
        for c in calls {
            assert_eq!(c.await.unwrap(), "t1");
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_token_is_fetched_again_when_stale_or_refused_and_a_failure_keeps_nothing() {
        let tokens = Tokens::default();
        let got = |now: i64, name: &'static str| {
            let tokens = &tokens;
            async move {
                tokens
                    .get("k", move || now, || async move { Ok(token(name, 1_000)) })
                    .await
                    .unwrap()
            }
        };
        assert_eq!(got(0, "a").await, ("a".into(), true));
        assert_eq!(got(999, "b").await, ("a".into(), false));
        assert_eq!(
            got(1_000, "b").await,
            ("b".into(), true),
            "stale at its time"
        );
        // A refusal of an older token does not drop the newer one.
        tokens.refused("k", "a").await;
        assert_eq!(got(0, "c").await, ("b".into(), false));
        tokens.refused("k", "b").await;
        assert_eq!(got(0, "c").await, ("c".into(), true));
        // A failed fetch leaves nothing behind; the next call fetches.
        tokens.refused("k", "c").await;
        let failed = tokens
            .get(
                "k",
                || 0,
                || async { Err(DeliveryError::transient("down")) },
            )
            .await;
        assert!(failed.is_err());
        assert_eq!(got(0, "d").await, ("d".into(), true));
        // Another key is another token.
        assert_eq!(
            tokens
                .get("other", || 0, || async { Ok(token("x", 1_000)) })
                .await
                .unwrap(),
            ("x".into(), true)
        );
    }
}
