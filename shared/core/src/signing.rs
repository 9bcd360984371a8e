//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64 part of a `whsec_` secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    #[error("signing secret must be `whsec_` followed by base64")]
    BadSecret,
}

/// A channel's signer, built from its `whsec_` secret.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer([REDACTED])")
    }
}

impl Signer {
    pub fn new(secret: &str) -> Result<Self, SigningError> {
        let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
        let key = STANDARD.decode(b64).map_err(|_| SigningError::BadSecret)?;
        if key.is_empty() {
            return Err(SigningError::BadSecret);
        }
        Ok(Self { key })
    }

    /// The `webhook-signature` header value.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(m) => m,
            Err(_) => return String::new(),
        };
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::new_signing_secret;

    #[test]
    fn signatures_verify_with_an_independent_implementation() {
        let secret = new_signing_secret();
        let signer = Signer::new(&secret).unwrap();
        let body = br#"{"hello":"world"}"#;
        let ts = chrono::Utc::now().timestamp();
        let sig = signer.sign("msg_1", ts, body);
        let wh = standardwebhooks::Webhook::new(&secret).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert("webhook-id", "msg_1".parse().unwrap());
        headers.insert("webhook-timestamp", ts.to_string().parse().unwrap());
        headers.insert("webhook-signature", sig.parse().unwrap());
        wh.verify(body, &headers).unwrap();
        headers.insert("webhook-id", "msg_2".parse().unwrap());
        assert!(wh.verify(body, &headers).is_err());
    }

    #[test]
    fn known_vector() {
        // Vector from the Standard Webhooks specification's examples.
        let signer = Signer::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = signer.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn bad_secrets_are_refused() {
        assert!(Signer::new("whsec_!!!").is_err());
        assert!(Signer::new("whsec_").is_err());
    }
}
