//! `Idempotency-Key` on the tenant API's POSTs: the same key and request within
//! [`KEY_TTL_S`] get the first answer again without the work being done twice; the same key
//! with another request is refused; a duplicate that arrives while the first is running
//! waits for its answer.

use sha2::{Digest, Sha256};

/// How long a key is remembered (24 hours).
pub const KEY_TTL_S: i64 = 86_400;
/// How long the request that holds a key keeps it without an answer before another request
/// with that key may take over (a crashed instance): twice the API function's timeout.
pub const LOCK_MS: i64 = 60_000;
/// How long a duplicate waits for the first request's answer before it is told to retry.
pub const WAIT_MS: u64 = 10_000;
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// A key is 1 to [`MAX_KEY_LEN`] visible ASCII characters (a UUID, typically).
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
        ));
    }
    Ok(())
}

/// What makes two requests the same: method, path with query, and body, hashed.
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b" ");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(body);
    hex::encode(h.finalize())
}

/// Whether an answer is kept for the key. A server error or a rate limit is not: the request
/// did not do its work, and the same key may try again at once.
pub fn keeps(status: u16) -> bool {
    status < 500 && status != 429
}

/// What a request finds when its key is held already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen<'a> {
    /// The same request was answered: answer the same again.
    Replay { status: u16, body: &'a str },
    /// Another request used this key.
    Mismatch,
    /// The same request is running: wait for its answer.
    Running,
}

/// What a request with fingerprint `mine` makes of a key held by a request with
/// fingerprint `theirs`, answered with `answer` if it was.
pub fn seen<'a>(theirs: &str, mine: &str, answer: Option<(u16, &'a str)>) -> Seen<'a> {
    match answer {
        _ if theirs != mine => Seen::Mismatch,
        Some((status, body)) => Seen::Replay { status, body },
        None => Seen::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(check_key("6f1c0c1e-6a6e-4c1b-9d7e-2f1f0f6b8a11").is_ok());
        assert!(check_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
        for bad in ["", "with space", "tab\t", "é", &"k".repeat(MAX_KEY_LEN + 1)] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_same_request_matches_and_any_difference_does_not() {
        let a = fingerprint("POST", "/api/v1/activities", br#"{"x":1}"#);
        assert_eq!(a, fingerprint("POST", "/api/v1/activities", br#"{"x":1}"#));
        assert_ne!(a, fingerprint("POST", "/api/v1/activities", br#"{"x":2}"#));
        assert_ne!(a, fingerprint("POST", "/api/v1/channels", br#"{"x":1}"#));
        assert_ne!(a, fingerprint("PUT", "/api/v1/activities", br#"{"x":1}"#));
    }

    #[test]
    fn a_held_key_replays_waits_or_refuses() {
        assert_eq!(
            seen("f", "f", Some((201, "{}"))),
            Seen::Replay {
                status: 201,
                body: "{}"
            }
        );
        assert_eq!(seen("f", "f", None), Seen::Running);
        assert_eq!(seen("f", "g", Some((201, "{}"))), Seen::Mismatch);
        assert_eq!(seen("f", "g", None), Seen::Mismatch);
    }

    #[test]
    fn server_errors_and_rate_limits_are_not_kept() {
        for s in [200, 201, 202, 204, 400, 404, 409, 422] {
            assert!(keeps(s), "{s}");
        }
        for s in [429, 500, 503] {
            assert!(!keeps(s), "{s}");
        }
    }
}
