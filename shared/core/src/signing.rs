//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64 part of a `whsec_` secret.

use crate::Invalid;

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

/// The `webhook-signature` header for a message signed by each of `secrets` (the channel's
/// current secret and those a rotation is retiring): space-separated `v1,` signatures, so a
/// receiver that knows any one of the secrets verifies the message.
pub fn signature_header(
    secrets: &[&str],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SigningError> {
    let mut out = Vec::with_capacity(secrets.len());
    for secret in secrets {
        out.push(Signer::new(secret)?.sign(msg_id, timestamp, body));
    }
    Ok(out.join(" "))
}

/// A signing secret a rotation replaced, which still signs until `until_ms`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RetiringSecret {
    pub secret: String,
    pub until_ms: i64,
}

/// Longest grace a rotation may give the secret it replaces (seven days).
pub const MAX_GRACE_MS: i64 = 7 * 86_400_000;
/// The grace a rotation gives the secret it replaces unless told otherwise (24 hours).
pub const DEFAULT_GRACE_MS: i64 = 86_400_000;
/// Most secrets a channel signs with at once: the current one and four retiring.
pub const MAX_SIGNING_SECRETS: usize = 5;

/// The secrets that sign a message sent at `now_ms`: the current one first, then each
/// retiring one whose grace has not ended.
pub fn signing_secrets<'a>(
    current: &'a str,
    retiring: &'a [RetiringSecret],
    now_ms: i64,
) -> Vec<&'a str> {
    std::iter::once(current)
        .chain(still_signing(retiring, now_ms).map(|r| r.secret.as_str()))
        .collect()
}

/// The retiring secrets whose grace has not ended at `now_ms`.
pub fn still_signing(
    retiring: &[RetiringSecret],
    now_ms: i64,
) -> impl Iterator<Item = &RetiringSecret> {
    retiring.iter().filter(move |r| r.until_ms > now_ms)
}

/// The retiring secrets after `current` is replaced at `now_ms` with `grace_ms` of overlap:
/// the ended ones drop out, `current` joins (unless the grace is zero), and the oldest go
/// first when more than [`MAX_SIGNING_SECRETS`] would sign.
pub fn retire(
    current: &str,
    retiring: &[RetiringSecret],
    grace_ms: i64,
    now_ms: i64,
) -> Vec<RetiringSecret> {
    let mut out: Vec<RetiringSecret> = still_signing(retiring, now_ms)
        .filter(|r| r.secret != current)
        .cloned()
        .collect();
    if grace_ms > 0 {
        out.push(RetiringSecret {
            secret: current.to_owned(),
            until_ms: now_ms.saturating_add(grace_ms.min(MAX_GRACE_MS)),
        });
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.until_ms));
    out.truncate(MAX_SIGNING_SECRETS - 1);
    out
}

/// Checks a secret a tenant brings to a rotation: `whsec_` and base64 of 24 to 64 bytes.
pub fn check_secret(secret: &str) -> Result<(), Invalid> {
    let b64 = secret
        .strip_prefix("whsec_")
        .ok_or("signing_secret must start with `whsec_`")?;
    let key = STANDARD
        .decode(b64)
        .map_err(|_| "signing_secret must be `whsec_` followed by base64")?;
    if !(24..=64).contains(&key.len()) {
        return Err(Invalid::new("signing_secret must hold 24 to 64 bytes"));
    }
    Ok(())
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
    fn each_secret_of_a_rotation_verifies_the_same_message() {
        let (old, new) = (new_signing_secret(), new_signing_secret());
        let body = br#"{"a":1}"#;
        let ts = chrono::Utc::now().timestamp();
        let header = signature_header(&[&new, &old], "msg_9", ts, body).unwrap();
        assert_eq!(header.split(' ').count(), 2);
        for secret in [&old, &new] {
            let wh = standardwebhooks::Webhook::new(secret).unwrap();
            let mut headers = http::HeaderMap::new();
            headers.insert("webhook-id", "msg_9".parse().unwrap());
            headers.insert("webhook-timestamp", ts.to_string().parse().unwrap());
            headers.insert("webhook-signature", header.parse().unwrap());
            wh.verify(body, &headers).unwrap();
        }
        let other = standardwebhooks::Webhook::new(&new_signing_secret()).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert("webhook-id", "msg_9".parse().unwrap());
        headers.insert("webhook-timestamp", ts.to_string().parse().unwrap());
        headers.insert("webhook-signature", header.parse().unwrap());
        assert!(other.verify(body, &headers).is_err());
    }

    #[test]
    fn a_retired_secret_signs_until_its_grace_ends_and_no_longer() {
        let now = 1_000_000;
        let retiring = retire("whsec_old", &[], DEFAULT_GRACE_MS, now);
        assert_eq!(retiring[0].until_ms, now + DEFAULT_GRACE_MS);
        assert_eq!(
            signing_secrets("whsec_new", &retiring, now + DEFAULT_GRACE_MS - 1),
            ["whsec_new", "whsec_old"]
        );
        assert_eq!(
            signing_secrets("whsec_new", &retiring, now + DEFAULT_GRACE_MS),
            ["whsec_new"]
        );
        // No grace: the old secret stops at once.
        assert!(retire("whsec_old", &[], 0, now).is_empty());
        // The grace is bounded.
        assert_eq!(
            retire("whsec_old", &[], i64::MAX, now)[0].until_ms,
            now + MAX_GRACE_MS
        );
    }

    #[test]
    fn rotations_keep_at_most_four_retiring_secrets_newest_grace_first() {
        let mut current = "whsec_0".to_owned();
        let mut retiring = Vec::new();
        for i in 1..=7 {
            retiring = retire(&current, &retiring, DEFAULT_GRACE_MS, i * 1000);
            current = format!("whsec_{i}");
        }
        let kept: Vec<&str> = retiring.iter().map(|r| r.secret.as_str()).collect();
        assert_eq!(kept, ["whsec_6", "whsec_5", "whsec_4", "whsec_3"]);
        assert_eq!(
            signing_secrets(&current, &retiring, 8000).len(),
            MAX_SIGNING_SECRETS
        );
    }

    #[test]
    fn a_brought_secret_must_be_whsec_base64_of_24_to_64_bytes() {
        assert!(check_secret(&new_signing_secret()).is_ok());
        assert!(check_secret("whsec_c2hvcnQ=").is_err());
        assert!(check_secret("nope").is_err());
        assert!(check_secret("whsec_!!!").is_err());
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
