//! Why an attempt failed and whether retrying can help.

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// The outcome of a failed attempt, as the adapters report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct DeliveryError {
    /// Human-readable cause, stored as the delivery's `last_error`.
    pub reason: String,
    /// HTTP status when there was a response.
    pub status: Option<u16>,
    /// `false` dead-letters the delivery at once.
    pub retryable: bool,
    /// Provider-requested delay before the next attempt.
    pub retry_after_ms: Option<u64>,
    /// The first [`SNIPPET_CHARS`] characters of the response body, for the attempt log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_snippet: Option<String>,
    /// The endpoint did not answer within the timeout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// Longest response snippet kept in an error or the attempt log.
pub const SNIPPET_CHARS: usize = 500;

/// The first `SNIPPET_CHARS` characters of a response body, lossily decoded.
pub fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .take(SNIPPET_CHARS)
        .collect()
}

/// Longest response snippet an accepted call keeps in the attempt log: a success's body is
/// rarely read, and a first try's row with its log entry then stays under the 1 KB of one
/// DynamoDB write unit (a failure keeps [`SNIPPET_CHARS`]).
pub const SUCCESS_SNIPPET_CHARS: usize = 100;

/// An accepted call's snippet, cut to [`SUCCESS_SNIPPET_CHARS`].
pub fn success_snippet(snippet: Option<String>) -> Option<String> {
    snippet.map(|s| match s.char_indices().nth(SUCCESS_SNIPPET_CHARS) {
        Some((at, _)) => s[..at].to_owned(),
        None => s,
    })
}

/// Is this HTTP status worth retrying? 408, 425, 429 and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429) || (500..=599).contains(&status)
}

/// Parses a Retry-After header: delta-seconds or an IMF-fixdate. Dates in the past give 0.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs.saturating_mul(1000));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX),
    )
}

/// How one call ended, classified once (as Vector's `RetryLogic` is read by its retries and
/// its adaptive concurrency alike): the retry policy (`policy::RetryPolicy::next_after_failure`)
/// and the channel's window and breaker (`flow`) take this; the attempt's row write records
/// the failure's reason and what the policy decided from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The endpoint took it.
    Success,
    /// It failed: how.
    Failed(Failure),
}

/// How a failed call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// A retry may heal it (a transport error, a 5xx, 408, 425 or 429, a timeout); if not, the
    /// delivery is dead-lettered now and the breaker does not count it.
    pub retryable: bool,
    /// The endpoint said it is overloaded (a timeout, a 429, a `Retry-After`): the channel's
    /// window shrinks (`flow::window_after`).
    pub congested: bool,
    /// When it asked to be called again (`Retry-After`), in ms from the answer.
    pub retry_after_ms: Option<u64>,
}

impl Verdict {
    /// The verdict of a call that ended with `result`.
    pub fn of<T>(result: &Result<T, DeliveryError>) -> Self {
        match result {
            Ok(_) => Self::Success,
            Err(e) => Self::Failed(e.failure()),
        }
    }
}

impl DeliveryError {
    /// Classifies a non-2xx HTTP response.
    pub fn from_http(
        status: u16,
        retry_after: Option<&str>,
        body: &[u8],
        label: &str,
        now: SystemTime,
    ) -> Self {
        let body = snippet(body);
        let reason = if body.is_empty() {
            format!("{label}: HTTP {status}")
        } else {
            format!("{label}: HTTP {status}: {body}")
        };
        Self {
            reason,
            status: Some(status),
            retryable: is_retryable_status(status),
            retry_after_ms: retry_after.and_then(|v| parse_retry_after(v, now)),
            response_snippet: (!body.is_empty()).then_some(body),
            timed_out: false,
        }
    }

    /// A transport failure (timeout, refused connection, DNS error): always retryable.
    pub fn from_transport(reason: impl std::fmt::Display, label: &str) -> Self {
        Self {
            reason: format!("{label}: {reason}"),
            status: None,
            retryable: true,
            retry_after_ms: None,
            response_snippet: None,
            timed_out: false,
        }
    }

    /// No answer within `timeout_ms`: retryable, and a sign the endpoint is overloaded.
    pub fn timeout(timeout_ms: u128, label: &str) -> Self {
        Self {
            timed_out: true,
            ..Self::from_transport(format!("timed out after {timeout_ms} ms"), label)
        }
    }

    /// How the call this error ended ended, classified once: what the retry policy, the
    /// window, the breaker and the attempt all read (never the error's fields on their own).
    pub fn failure(&self) -> Failure {
        Failure {
            retryable: self.retryable,
            congested: self.timed_out || self.status == Some(429) || self.retry_after_ms.is_some(),
            retry_after_ms: self.retry_after_ms,
        }
    }

    /// A failure that retrying cannot heal (configuration errors, refused destinations).
    pub fn permanent(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            status: None,
            retryable: false,
            retry_after_ms: None,
            response_snippet: None,
            timed_out: false,
        }
    }

    /// Any other error: treated as retryable.
    pub fn transient(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            status: None,
            retryable: true,
            retry_after_ms: None,
            response_snippet: None,
            timed_out: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_call_is_classified_once_for_the_policy_the_window_and_the_breaker() {
        let now = SystemTime::UNIX_EPOCH;
        let busy = DeliveryError::from_http(429, Some("7"), b"", "webhook", now);
        assert_eq!(
            Verdict::of::<()>(&Err(busy)),
            Verdict::Failed(Failure {
                retryable: true,
                congested: true,
                retry_after_ms: Some(7_000)
            })
        );
        let bad = DeliveryError::from_http(400, None, b"no", "webhook", now).failure();
        assert!(!bad.retryable && !bad.congested);
        let down = DeliveryError::from_http(503, None, b"", "webhook", now).failure();
        assert!(down.retryable && !down.congested);
        let slow = DeliveryError::timeout(5_000, "webhook").failure();
        assert!(slow.retryable && slow.congested && slow.retry_after_ms.is_none());
        assert_eq!(Verdict::of(&Ok::<_, DeliveryError>(())), Verdict::Success);
    }

    #[test]
    fn http_classification() {
        let now = SystemTime::now();
        for s in [408, 425, 429, 500, 502, 503, 599] {
            assert!(
                DeliveryError::from_http(s, None, b"", "webhook", now).retryable,
                "{s}"
            );
        }
        for s in [300, 301, 400, 401, 403, 404, 410, 422] {
            assert!(
                !DeliveryError::from_http(s, None, b"", "webhook", now).retryable,
                "{s}"
            );
        }
        let e = DeliveryError::from_http(400, None, b"invalid recipient", "webhook", now);
        assert_eq!(e.reason, "webhook: HTTP 400: invalid recipient");
        assert_eq!(e.status, Some(400));
        assert_eq!(e.response_snippet.as_deref(), Some("invalid recipient"));
        assert!(DeliveryError::from_transport("connection refused", "webhook").retryable);
        assert!(!DeliveryError::permanent("no recipient").retryable);
    }

    #[test]
    fn retry_after_forms() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(parse_retry_after("120", now), Some(120_000));
        assert_eq!(parse_retry_after(" 2 ", now), Some(2_000));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(30_000)
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(0)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
        let e = DeliveryError::from_http(429, Some("2"), b"", "webhook", now);
        assert_eq!(e.retry_after_ms, Some(2_000));
    }

    #[test]
    fn a_success_keeps_a_shorter_snippet() {
        let long = "é".repeat(300);
        let kept = success_snippet(Some(long)).unwrap();
        assert_eq!(kept.chars().count(), SUCCESS_SNIPPET_CHARS);
        assert_eq!(success_snippet(Some("ok".into())).as_deref(), Some("ok"));
        assert_eq!(success_snippet(None), None);
    }

    #[test]
    fn snippet_is_capped() {
        let body = "é".repeat(2000);
        assert_eq!(snippet(body.as_bytes()).chars().count(), SNIPPET_CHARS);
    }

    proptest! {
        #[test]
        fn every_status_classifies(status in 100u16..1000) {
            let e = DeliveryError::from_http(status, None, b"", "x", SystemTime::now());
            prop_assert_eq!(e.retryable, status == 408 || status == 425 || status == 429 || (500..600).contains(&status));
        }

        #[test]
        fn delta_seconds_parse(secs in 0u64..10_000_000) {
            prop_assert_eq!(parse_retry_after(&secs.to_string(), SystemTime::now()), Some(secs * 1000));
        }
    }
}
