//! A webhook channel's client certificate (`auth` of type `mtls`): the certificate chain and
//! its private key that the request presents to the receiver, and optionally the CA the
//! receiver's own certificate chains to (a private one, in place of the public roots).
//!
//! The private key is write-only: when a channel is written, the key is sealed (XChaCha20-
//! Poly1305) under the deployment's channel key, which is kept in Secrets Manager
//! (`CHANNEL_KEY_SECRET_ARN`); the store holds only the sealed text, reads show
//! `[REDACTED]`, and only the functions that read the channel key can open it. An OAuth 2.0
//! client's secret is sealed the same way where the deployment has the key.

use crate::Invalid;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// Largest `certificate` or `ca_certificate` (a chain of a few PEM certificates), and
/// largest `private_key`.
pub const MAX_PEM_BYTES: usize = 32 * 1024;

/// The prefix of a sealed private key.
pub const SEALED: &str = "sealed:v1:";

const KEYS: [&str; 4] = ["type", "certificate", "private_key", "ca_certificate"];
const AAD: &[u8] = b"converger channel mtls private_key v1";

/// The deployment's key that seals channels' private keys: derived from the secret's text.
#[derive(Clone)]
pub struct ChannelKey([u8; 32]);

impl fmt::Debug for ChannelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChannelKey([REDACTED])")
    }
}

/// The shortest secret a channel key is derived from.
pub const MIN_SECRET_CHARS: usize = 32;

impl ChannelKey {
    /// The key of a secret's text (at least [`MIN_SECRET_CHARS`] characters).
    pub fn derive(secret: &str) -> Result<Self, Invalid> {
        if secret.chars().count() < MIN_SECRET_CHARS {
            return Err(Invalid(format!(
                "the channel key's secret must be at least {MIN_SECRET_CHARS} characters"
            )));
        }
        let mut h = Sha256::new();
        h.update(b"converger channel key v1\0");
        h.update(secret.as_bytes());
        Ok(Self(h.finalize().into()))
    }

    /// `plaintext` sealed: [`SEALED`] and the nonce with the ciphertext, in base64.
    pub fn seal(&self, plaintext: &str) -> String {
        use chacha20poly1305::aead::{Aead, KeyInit, Payload};
        let cipher = chacha20poly1305::XChaCha20Poly1305::new(&self.0.into());
        let nonce = crate::secret::random_bytes::<24>();
        let sealed = cipher
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: AAD,
                },
            )
            .unwrap_or_default();
        format!(
            "{SEALED}{}",
            STANDARD.encode([&nonce[..], &sealed].concat())
        )
    }

    /// The plaintext of a sealed text; refused when it was sealed under another key.
    pub fn open(&self, sealed: &str) -> Result<String, Invalid> {
        use chacha20poly1305::aead::{Aead, KeyInit, Payload};
        let refused = || {
            Invalid::new(
                "the private key was sealed under another channel key: write the channel's `auth` again",
            )
        };
        let raw = sealed
            .strip_prefix(SEALED)
            .and_then(|b| STANDARD.decode(b).ok())
            .filter(|r| r.len() > 24)
            .ok_or_else(refused)?;
        let (nonce, ct) = raw.split_at(24);
        let cipher = chacha20poly1305::XChaCha20Poly1305::new(&self.0.into());
        let plain = cipher
            .decrypt(nonce.into(), Payload { msg: ct, aad: AAD })
            .map_err(|_| refused())?;
        String::from_utf8(plain).map_err(|_| refused())
    }
}

/// A webhook channel's `auth` of type `mtls`, checked for its shape (the PEM's contents
/// are checked where a TLS client is built of them).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub certificate: String,
    /// As written (PEM) before the channel is stored, sealed under the channel key after.
    pub private_key: String,
    pub ca_certificate: Option<String>,
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCert")
            .field("certificate", &self.certificate.len())
            .field("private_key", &"[REDACTED]")
            .field("ca_certificate", &self.ca_certificate.is_some())
            .finish()
    }
}

impl ClientCert {
    /// `auth` checked: every field named in the error where it does not fit.
    pub fn parse(auth: &Map<String, Value>) -> Result<Self, Invalid> {
        if let Some(k) = auth.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Invalid(format!(
                "unknown `auth` key `{k}` for mtls (allowed: {})",
                KEYS.join(", ")
            )));
        }
        let pem = |k: &str, marker: &str, required: bool| -> Result<Option<String>, Invalid> {
            match auth.get(k) {
                None | Some(Value::Null) if !required => Ok(None),
                None | Some(Value::Null) => Err(Invalid(format!("mtls `auth` needs `{k}`"))),
                Some(Value::String(s)) if s.len() <= MAX_PEM_BYTES && s.contains(marker) => {
                    Ok(Some(s.clone()))
                }
                Some(_) => Err(Invalid(format!(
                    "`auth.{k}` must be PEM (`{marker}`), at most {MAX_PEM_BYTES} bytes"
                ))),
            }
        };
        let certificate =
            pem("certificate", "-----BEGIN CERTIFICATE-----", true)?.unwrap_or_default();
        let private_key = match auth.get("private_key") {
            Some(Value::String(s)) if s.starts_with(SEALED) => s.clone(),
            _ => pem("private_key", "PRIVATE KEY-----", true)?.unwrap_or_default(),
        };
        Ok(Self {
            certificate,
            private_key,
            ca_certificate: pem("ca_certificate", "-----BEGIN CERTIFICATE-----", false)?,
        })
    }

    /// The private key's PEM: opened with `key` when sealed.
    pub fn key_pem(&self, key: Option<&ChannelKey>) -> Result<String, Invalid> {
        open_field(&self.private_key, key)
    }
}

/// The fields of a channel's `auth` that are kept sealed: a client certificate's private key
/// and an OAuth 2.0 client's secret.
pub const SEALED_FIELDS: [&str; 2] = ["private_key", "client_secret"];

/// The sealed text a channel's `config` holds in `auth.<field>`, if any.
pub fn sealed_field<'a>(config: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    let auth = config.get("auth")?.as_object()?;
    auth.get(field)?.as_str().filter(|k| k.starts_with(SEALED))
}

/// A written config may carry a sealed secret only where it is the channel's own, put back
/// where a read showed `[REDACTED]` (`current`: the stored config; `None` for a new channel):
/// a sealed text copied from elsewhere would present another channel's credentials.
pub fn check_sealed_origin(
    written: &Map<String, Value>,
    current: Option<&Map<String, Value>>,
) -> Result<(), Invalid> {
    for field in SEALED_FIELDS {
        if let Some(k) = sealed_field(written, field)
            && current.and_then(|c| sealed_field(c, field)) != Some(k)
        {
            return Err(Invalid(format!(
                "`auth.{field}` must be the secret itself (or `[REDACTED]` to keep the stored one)"
            )));
        }
    }
    Ok(())
}

/// `auth.<field>` sealed under `key` where it is not yet: required (a client certificate's
/// key is refused without a channel key) or only where there is a key (an OAuth 2.0 client
/// secret stays as written on a deployment without one).
pub fn seal_field(
    auth: &mut Map<String, Value>,
    field: &str,
    key: Option<&ChannelKey>,
    required: bool,
) -> Result<(), Invalid> {
    if let Some(Value::String(text)) = auth.get(field)
        && !text.starts_with(SEALED)
    {
        let sealed = match key {
            Some(k) => k.seal(text),
            None if required => return Err(no_key()),
            None => return Ok(()),
        };
        auth.insert(field.into(), Value::String(sealed));
    }
    Ok(())
}

/// A secret as the channel holds it, opened with `key` when it is sealed.
pub fn open_field(text: &str, key: Option<&ChannelKey>) -> Result<String, Invalid> {
    match (text.starts_with(SEALED), key) {
        (false, _) => Ok(text.to_owned()),
        (true, Some(k)) => k.open(text),
        (true, None) => Err(no_key()),
    }
}

/// The refusal of a client certificate where the deployment has no channel key.
pub fn no_key() -> Invalid {
    Invalid::new(
        "client certificates need the deployment's channel key (CHANNEL_KEY_SECRET_ARN), which this deployment does not have",
    )
}

/// `auth` with its private key sealed under `key` (a key already sealed is kept).
pub fn seal_auth(auth: &mut Map<String, Value>, key: Option<&ChannelKey>) -> Result<(), Invalid> {
    seal_field(auth, "private_key", key, true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

    fn key(s: &str) -> ChannelKey {
        ChannelKey::derive(&s.repeat(32)).unwrap()
    }

    #[test]
    fn a_private_key_is_sealed_once_and_opens_only_under_its_key() {
        let mut auth = json!({"type": "mtls", "certificate": CERT, "private_key": KEY})
            .as_object()
            .cloned()
            .unwrap();
        seal_auth(&mut auth, Some(&key("a"))).unwrap();
        let sealed = auth["private_key"].as_str().unwrap().to_owned();
        assert!(
            sealed.starts_with(SEALED) && !sealed.contains("MIIE"),
            "{sealed}"
        );
        // Sealing again keeps it.
        seal_auth(&mut auth, Some(&key("a"))).unwrap();
        assert_eq!(auth["private_key"], sealed.as_str());
        let c = ClientCert::parse(&auth).unwrap();
        assert_eq!(c.key_pem(Some(&key("a"))).unwrap(), KEY);
        assert!(
            c.key_pem(Some(&key("b")))
                .unwrap_err()
                .0
                .contains("another channel key")
        );
        assert!(
            c.key_pem(None)
                .unwrap_err()
                .0
                .contains("CHANNEL_KEY_SECRET_ARN")
        );
        assert!(!format!("{c:?}").contains("MIIE"));
        // No channel key, no client certificate.
        let mut plain = json!({"private_key": KEY}).as_object().cloned().unwrap();
        assert!(seal_auth(&mut plain, None).is_err());
        assert!(ChannelKey::derive("short").is_err());
    }

    #[test]
    fn a_sealed_key_is_taken_only_back_from_its_own_channel() {
        let mut auth = json!({"type": "mtls", "certificate": CERT, "private_key": KEY})
            .as_object()
            .cloned()
            .unwrap();
        seal_auth(&mut auth, Some(&key("a"))).unwrap();
        let ours = json!({"auth": auth}).as_object().cloned().unwrap();
        let mut theirs = ours.clone();
        seal_auth(theirs["auth"].as_object_mut().unwrap(), None).unwrap();
        theirs["auth"]["private_key"] = key("a").seal(KEY).into();
        assert!(check_sealed_origin(&ours, None).is_err(), "a new channel");
        assert!(
            check_sealed_origin(&ours, Some(&ours)).is_ok(),
            "its own, kept"
        );
        assert!(
            check_sealed_origin(&theirs, Some(&ours)).is_err(),
            "another's"
        );
        let plain = json!({"auth": {"private_key": KEY}})
            .as_object()
            .cloned()
            .unwrap();
        assert!(check_sealed_origin(&plain, Some(&ours)).is_ok());
        // A client secret likewise; without a channel key it stays as written.
        let mut oauth = json!({"client_secret": "s3cret"})
            .as_object()
            .cloned()
            .unwrap();
        seal_field(&mut oauth, "client_secret", None, false).unwrap();
        assert_eq!(oauth["client_secret"], "s3cret");
        seal_field(&mut oauth, "client_secret", Some(&key("a")), false).unwrap();
        let sealed = oauth["client_secret"].as_str().unwrap();
        assert_eq!(open_field(sealed, Some(&key("a"))).unwrap(), "s3cret");
        assert_eq!(open_field("plain", None).unwrap(), "plain");
        let copied = json!({"auth": {"client_secret": sealed}})
            .as_object()
            .cloned()
            .unwrap();
        assert!(
            check_sealed_origin(&copied, None)
                .unwrap_err()
                .0
                .contains("auth.client_secret")
        );
    }

    #[test]
    fn a_bad_client_certificate_is_refused_with_the_field_named() {
        let cases = [
            (
                json!({"certificate": "nope", "private_key": KEY}),
                "`auth.certificate` must be PEM",
            ),
            (json!({"certificate": CERT}), "needs `private_key`"),
            (
                json!({"certificate": CERT, "private_key": "x"}),
                "`auth.private_key` must be PEM",
            ),
            (
                json!({"certificate": CERT, "private_key": KEY, "ca_certificate": 3}),
                "`auth.ca_certificate`",
            ),
            (
                json!({"certificate": CERT, "private_key": KEY, "pin": "x"}),
                "unknown `auth` key `pin`",
            ),
        ];
        for (auth, want) in cases {
            let e = ClientCert::parse(auth.as_object().unwrap()).unwrap_err().0;
            assert!(e.contains(want), "{auth}: {e}");
        }
    }
}
