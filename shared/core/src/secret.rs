//! Secrets: tenant API keys (stored only as a hash) and channel signing secrets.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use sha2::{Digest, Sha256};

fn random_bytes<const N: usize>() -> [u8; N] {
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
}
