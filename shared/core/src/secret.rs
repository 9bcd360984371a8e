//! Secrets: tenant API keys (stored only as a hash), channel signing secrets, and the
//! operators' configured ones (the admin token, the session key), checked at start.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use sha2::{Digest, Sha256};

pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand::thread_rng().fill_bytes(&mut b);
    b
}

/// A new tenant API key, shown to its owner once.
pub fn new_api_key() -> String {
    format!("cvg_{}", hex::encode(random_bytes::<24>()))
}

/// A short fingerprint of a websocket channel's token, kept with each connection made with
/// it: a connection whose fingerprint is not the channel's current token's is cut off.
pub fn token_fingerprint(token: &str) -> String {
    let digest = Sha256::digest([b"ws-token:".as_slice(), token.as_bytes()].concat());
    hex::encode(&digest[..8])
}

/// What the store keeps of an API key.
pub fn hash_api_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new random token (32 random bytes, URL-safe base64): session nonces, generated
/// passwords and tokens.
pub fn new_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<32>())
}

/// A new random key for signing (the web pages' sessions when none is configured).
pub fn new_key() -> Vec<u8> {
    random_bytes::<32>().to_vec()
}

/// A new Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_signing_secret() -> String {
    format!("whsec_{}", STANDARD.encode(random_bytes::<32>()))
}

/// Compares two secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The admin API's bearer token is at least this long.
pub const ADMIN_TOKEN_MIN: usize = 16;
/// The web pages' session key is at least this long.
pub const SESSION_SECRET_MIN: usize = 32;

/// A configured secret too short to be one: refused when the process starts, rather than
/// quietly ignored (an admin API that answers `admin_disabled`, sessions that end with the
/// process).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is {len} characters long and must be at least {min}; leave it unset to {unset}")]
pub struct ShortSecret {
    pub name: &'static str,
    pub len: usize,
    pub min: usize,
    pub unset: &'static str,
}

/// The secret configured as `name`: `None` when unset or blank, the trimmed value when it has
/// at least `min` characters, else [`ShortSecret`] (`unset` says what leaving it unset does).
pub fn configured(
    name: &'static str,
    value: Option<String>,
    min: usize,
    unset: &'static str,
) -> Result<Option<String>, ShortSecret> {
    let Some(value) = value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let len = value.chars().count();
    if len < min {
        return Err(ShortSecret {
            name,
            len,
            min,
            unset,
        });
    }
    Ok(Some(value))
}

/// The admin token configured as `ADMIN_TOKEN` (or its secret): unset disables the admin API.
pub fn admin_token(value: Option<String>) -> Result<Option<String>, ShortSecret> {
    configured(
        "ADMIN_TOKEN",
        value,
        ADMIN_TOKEN_MIN,
        "disable the admin API",
    )
}

/// The session key configured as `SESSION_SECRET` (or its secret): unset, sessions last as
/// long as the process.
pub fn session_secret(value: Option<String>) -> Result<Option<String>, ShortSecret> {
    configured(
        "SESSION_SECRET",
        value,
        SESSION_SECRET_MIN,
        "keep sessions for this process only",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hash_stably() {
        let a = new_api_key();
        let b = new_api_key();
        assert_ne!(a, b);
        assert!(a.starts_with("cvg_"));
        assert_eq!(hash_api_key(&a), hash_api_key(&a));
        assert_ne!(hash_api_key(&a), hash_api_key(&b));
        assert!(new_signing_secret().starts_with("whsec_"));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn a_configured_secret_is_long_enough_or_refused_by_name() {
        assert_eq!(admin_token(None), Ok(None));
        assert_eq!(admin_token(Some("  ".into())), Ok(None));
        let ok = "x".repeat(ADMIN_TOKEN_MIN);
        assert_eq!(admin_token(Some(format!(" {ok}\n"))), Ok(Some(ok)));
        let e = admin_token(Some("short-token".into())).unwrap_err();
        assert_eq!((e.name, e.len, e.min), ("ADMIN_TOKEN", 11, ADMIN_TOKEN_MIN));
        assert!(
            e.to_string().contains("ADMIN_TOKEN is 11 characters"),
            "{e}"
        );
        let e = session_secret(Some("x".repeat(SESSION_SECRET_MIN - 1))).unwrap_err();
        assert_eq!(e.name, "SESSION_SECRET");
        assert!(session_secret(Some("x".repeat(SESSION_SECRET_MIN))).is_ok());
    }
}
