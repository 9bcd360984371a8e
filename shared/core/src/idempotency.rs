//! `Idempotency-Key` on the tenant API's POSTs: the same key and request within
//! [`KEY_TTL_S`] get the first answer again without the work being done twice; the same key
//! with another request is refused; a duplicate that arrives while the first is running
//! waits for its answer.

use crate::Invalid;

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
pub fn check_key(key: &str) -> Result<(), Invalid> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Invalid(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
        )));
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

/// An answer as it is kept: sealed (ChaCha20-Poly1305) under a key derived from the API key
/// that made the request, which the platform never stores (only its hash), so a kept answer
/// that carries a secret (a new channel's signing secret) cannot be read from the table.
/// `v1.` + base64 of the nonce and the ciphertext.
pub fn seal(api_key: &str, answer: &str, nonce: [u8; 12]) -> String {
    use base64::Engine;
    use chacha20poly1305::aead::{Aead, KeyInit};
    let cipher = chacha20poly1305::ChaCha20Poly1305::new(&answer_key(api_key).into());
    let sealed = cipher
        .encrypt(&nonce.into(), answer.as_bytes())
        .unwrap_or_default();
    let mut out = nonce.to_vec();
    out.extend(sealed);
    format!(
        "{SEALED_PREFIX}{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(out)
    )
}

/// [`seal`] with a fresh random nonce.
pub fn seal_fresh(api_key: &str, answer: &str) -> String {
    use rand::RngCore;
    let mut nonce = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut nonce);
    seal(api_key, answer, nonce)
}

/// What [`seal`] sealed, opened with the API key of the request replaying it; `None` when
/// it was sealed under another key (the tenant's key changed since) or is damaged. A kept
/// answer that is not sealed is returned as it is.
pub fn open(api_key: &str, kept: &str) -> Option<String> {
    use base64::Engine;
    use chacha20poly1305::aead::{Aead, KeyInit};
    let Some(b64) = kept.strip_prefix(SEALED_PREFIX) else {
        return Some(kept.to_owned());
    };
    let raw = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(b64)
        .ok()?;
    if raw.len() < 12 {
        return None;
    }
    let (nonce, sealed) = raw.split_at(12);
    let nonce: [u8; 12] = nonce.try_into().ok()?;
    let cipher = chacha20poly1305::ChaCha20Poly1305::new(&answer_key(api_key).into());
    let plain = cipher.decrypt(&nonce.into(), sealed).ok()?;
    String::from_utf8(plain).ok()
}

const SEALED_PREFIX: &str = "v1.";

/// The sealing key of the answers to one API key's requests.
fn answer_key(api_key: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"converger idempotency answer v1\0");
    h.update(api_key.as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod sealing {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_answer_is_kept_sealed_and_opens_only_with_the_same_api_key() {
        let answer = r#"{"id":"ch_1","signing_secret":"whsec_c2VjcmV0LXNpZ25pbmcta2V5"}"#;
        let kept = seal("cvg_key_one", answer, [7; 12]);
        assert!(!kept.contains("whsec_"), "{kept}");
        assert!(!kept.contains("signing_secret"), "{kept}");
        assert_eq!(open("cvg_key_one", &kept).as_deref(), Some(answer));
        assert_eq!(open("cvg_key_two", &kept), None);
        // Damaged, or cut short.
        let mut bad = kept.clone();
        bad.pop();
        bad.push('A');
        assert_eq!(open("cvg_key_one", &bad), None);
        assert_eq!(open("cvg_key_one", "v1.AAAA"), None);
        // Answers kept before sealing existed are returned as they are.
        assert_eq!(open("cvg_key_one", "{}").as_deref(), Some("{}"));
        // A fresh nonce each time: the same answer seals differently.
        assert_ne!(seal("cvg_key_one", answer, [8; 12]), kept);
    }
}
