//! Endpoint authentication by OAuth 2.0's client-credentials grant (RFC 6749 §4.4): a webhook
//! channel's `auth` names a token endpoint and the client's credentials; each request carries
//! `Authorization: Bearer <token>`, the token fetched once and kept until shortly before it
//! expires (`docs/channels/webhook-auth.md`).
//!
//! The rules here: the settings and their checks, the token request's form, what a token
//! response must hold, and how long a token is used.

use crate::Invalid;
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Longest `client_id`, `scope` or `audience`.
pub const MAX_FIELD_CHARS: usize = 1024;
/// Longest `client_secret`.
pub const MAX_SECRET_CHARS: usize = 4096;
/// Longest access token taken from a token endpoint.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// How long a token without `expires_in` is used.
pub const DEFAULT_LIFETIME_S: u64 = 300;
/// The longest a token is used, whatever its `expires_in`.
pub const MAX_LIFETIME_S: u64 = 86_400;
/// A token is dropped this long before it expires (or at half its lifetime, if sooner), so
/// that a request never goes with one that expires on the way.
pub const EXPIRY_MARGIN_S: u64 = 60;

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// HTTP Basic with the URL-encoded id and secret (`client_secret_basic`, the default).
    Basic,
    /// `client_id` and `client_secret` in the form (`client_secret_post`).
    Post,
}

/// A webhook channel's `auth` of type `oauth2_client_credentials`, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    pub token_url: url::Url,
    pub client_id: String,
    pub client_secret: String,
    pub scope: Option<String>,
    pub audience: Option<String>,
    pub client_auth: ClientAuth,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_url", &self.token_url.as_str())
            .field("client_id", &self.client_id)
            .field("client_secret", &"[REDACTED]")
            .field("scope", &self.scope)
            .field("audience", &self.audience)
            .field("client_auth", &self.client_auth)
            .finish()
    }
}

const KEYS: [&str; 7] = [
    "type",
    "token_url",
    "client_id",
    "client_secret",
    "scope",
    "audience",
    "client_auth",
];

impl ClientCredentials {
    /// `auth` checked: every field named in the error where it does not fit.
    pub fn parse(auth: &Map<String, Value>) -> Result<Self, Invalid> {
        if let Some(k) = auth.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Invalid(format!(
                "unknown key `auth.{k}` (allowed: {})",
                KEYS.join(", ")
            )));
        }
        match auth.get("type").and_then(Value::as_str) {
            Some("oauth2_client_credentials") => {}
            _ => {
                return Err(Invalid::new(
                    "`auth.type` must be `oauth2_client_credentials`",
                ));
            }
        }
        let text = |k: &str, max: usize, required: bool| -> Result<Option<String>, Invalid> {
            match auth.get(k) {
                None | Some(Value::Null) if !required => Ok(None),
                Some(Value::String(s))
                    if !s.is_empty()
                        && s.chars().count() <= max
                        && !s.chars().any(char::is_control) =>
                {
                    Ok(Some(s.clone()))
                }
                _ => Err(Invalid(format!(
                    "`auth.{k}` must be text of 1 to {max} characters, no control characters"
                ))),
            }
        };
        let token_url = text("token_url", 2048, true)?.unwrap_or_default();
        let token_url = url::Url::parse(&token_url)
            .map_err(|e| Invalid(format!("`auth.token_url` is not a URL: {e}")))?;
        if !matches!(token_url.scheme(), "http" | "https") || token_url.host_str().is_none() {
            return Err(Invalid::new("`auth.token_url` must be http(s) with a host"));
        }
        if !token_url.username().is_empty() || token_url.password().is_some() {
            return Err(Invalid::new(
                "`auth.token_url` must not carry credentials; give `client_id` and `client_secret`",
            ));
        }
        let client_auth = match auth.get("client_auth") {
            None | Some(Value::Null) => ClientAuth::Basic,
            Some(Value::String(s)) if s == "basic" => ClientAuth::Basic,
            Some(Value::String(s)) if s == "post" => ClientAuth::Post,
            Some(_) => {
                return Err(Invalid::new(
                    "`auth.client_auth` must be `basic` (HTTP Basic, the default) or `post` (in the form)",
                ));
            }
        };
        Ok(Self {
            token_url,
            client_id: text("client_id", MAX_FIELD_CHARS, true)?.unwrap_or_default(),
            // Sealed under the channel key when the channel was written (`mtls::seal_field`).
            client_secret: match auth.get("client_secret") {
                Some(Value::String(s))
                    if s.starts_with(crate::mtls::SEALED) && s.len() <= 4 * MAX_SECRET_CHARS =>
                {
                    s.clone()
                }
                _ => text("client_secret", MAX_SECRET_CHARS, true)?.unwrap_or_default(),
            },
            scope: text("scope", MAX_FIELD_CHARS, false)?,
            audience: text("audience", MAX_FIELD_CHARS, false)?,
            client_auth,
        })
    }

    /// These settings with the client secret opened with `key` where it is sealed.
    pub fn opened(&self, key: Option<&crate::mtls::ChannelKey>) -> Result<Self, Invalid> {
        Ok(Self {
            client_secret: crate::mtls::open_field(&self.client_secret, key)?,
            ..self.clone()
        })
    }

    /// What identifies the token these settings get: a change of any of them is another
    /// token (the secret enters only through a hash).
    pub fn cache_key(&self, channel_id: &str) -> String {
        let mut h = Sha256::new();
        for part in [
            self.token_url.as_str(),
            &self.client_id,
            &self.client_secret,
            self.scope.as_deref().unwrap_or(""),
            self.audience.as_deref().unwrap_or(""),
            if self.client_auth == ClientAuth::Post {
                "post"
            } else {
                "basic"
            },
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        format!("{channel_id}#{}", hex::encode(h.finalize()))
    }

    /// The token request's form (`application/x-www-form-urlencoded`).
    pub fn form(&self) -> String {
        let mut f = url::form_urlencoded::Serializer::new(String::new());
        f.append_pair("grant_type", "client_credentials");
        if let Some(s) = &self.scope {
            f.append_pair("scope", s);
        }
        if let Some(a) = &self.audience {
            f.append_pair("audience", a);
        }
        if self.client_auth == ClientAuth::Post {
            f.append_pair("client_id", &self.client_id);
            f.append_pair("client_secret", &self.client_secret);
        }
        f.finish()
    }

    /// The `Authorization` header of the token request, with HTTP Basic: the id and the
    /// secret form-encoded first, as RFC 6749 §2.3.1 asks.
    pub fn basic_header(&self) -> Option<String> {
        use base64::Engine;
        (self.client_auth == ClientAuth::Basic).then(|| {
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", enc(&self.client_id), enc(&self.client_secret));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        })
    }
}

/// A token to send, and until when to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub access_token: String,
    /// Milliseconds since the epoch after which it is not sent.
    pub use_until_ms: i64,
}

impl Token {
    pub fn fresh(&self, now_ms: i64) -> bool {
        now_ms < self.use_until_ms
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: Option<String>,
    token_type: Option<String>,
    expires_in: Option<Value>,
}

/// The token a token endpoint's successful answer carries, received at `now_ms`; the error
/// says what is wrong with the answer (never the token itself).
pub fn token_from_response(body: &[u8], now_ms: i64) -> Result<Token, Invalid> {
    let r: TokenResponse = serde_json::from_slice(body)
        .map_err(|_| Invalid::new("the token endpoint's answer is not a JSON object"))?;
    let token = r
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or("the token endpoint's answer has no `access_token`")?;
    if token.len() > MAX_TOKEN_BYTES || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(Invalid::new(
            "the token endpoint's `access_token` cannot be sent as a header",
        ));
    }
    if let Some(t) = r.token_type
        && !t.eq_ignore_ascii_case("bearer")
    {
        return Err(Invalid(format!(
            "the token endpoint gave a `{}` token; only bearer tokens are sent",
            crate::error::snippet(t.as_bytes())
        )));
    }
    // `expires_in` is a number; some servers send it as text.
    let lifetime_s = match r.expires_in {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
    .unwrap_or(DEFAULT_LIFETIME_S)
    .min(MAX_LIFETIME_S);
    let margin_s = EXPIRY_MARGIN_S.min(lifetime_s / 2);
    let use_s = i64::try_from(lifetime_s - margin_s).unwrap_or(0);
    Ok(Token {
        access_token: token,
        use_until_ms: now_ms.saturating_add(use_s * 1000),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn auth(v: Value) -> Result<ClientCredentials, Invalid> {
        ClientCredentials::parse(v.as_object().unwrap())
    }

    fn good() -> Value {
        json!({"type": "oauth2_client_credentials", "token_url": "https://idp.example/token",
               "client_id": "converger", "client_secret": "s3cret/+"})
    }

    #[test]
    fn settings_are_checked_field_by_field() {
        let c = auth(good()).unwrap();
        assert_eq!(c.client_auth, ClientAuth::Basic);
        assert_eq!(c.scope, None);
        for (change, word) in [
            (json!({"type": "basic"}), "auth.type"),
            (
                json!({"token_url": "ftp://idp.example/t"}),
                "auth.token_url",
            ),
            (
                json!({"token_url": "https://u:p@idp.example/t"}),
                "credentials",
            ),
            (json!({"client_id": ""}), "auth.client_id"),
            (json!({"client_secret": 5}), "auth.client_secret"),
            (json!({"scope": "a\nb"}), "auth.scope"),
            (json!({"client_auth": "jwt"}), "auth.client_auth"),
            (json!({"password": "x"}), "auth.password"),
        ] {
            let mut v = good();
            for (k, x) in change.as_object().unwrap() {
                v[k] = x.clone();
            }
            let e = auth(v).unwrap_err();
            assert!(e.message().contains(word), "{change}: {e}");
        }
        let mut v = good();
        v.as_object_mut().unwrap().remove("client_secret");
        assert!(auth(v).is_err());
    }

    #[test]
    fn the_token_request_authenticates_as_asked() {
        let mut c = auth(good()).unwrap();
        assert_eq!(c.form(), "grant_type=client_credentials");
        // id:secret, each form-encoded first ("/" and "+" are), then base64.
        assert_eq!(
            c.basic_header().unwrap(),
            format!(
                "Basic {}",
                base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    "converger:s3cret%2F%2B"
                )
            )
        );
        c.client_auth = ClientAuth::Post;
        c.scope = Some("events:write read".into());
        c.audience = Some("https://api.example".into());
        assert_eq!(c.basic_header(), None);
        assert_eq!(
            c.form(),
            "grant_type=client_credentials&scope=events%3Awrite+read&audience=https%3A%2F%2Fapi.example&client_id=converger&client_secret=s3cret%2F%2B"
        );
    }

    #[test]
    fn the_cache_key_changes_with_any_setting_and_hides_the_secret() {
        let a = auth(good()).unwrap();
        let mut b = a.clone();
        b.client_secret = "other".into();
        assert_ne!(a.cache_key("ch_1"), b.cache_key("ch_1"));
        assert_ne!(a.cache_key("ch_1"), a.cache_key("ch_2"));
        assert!(!a.cache_key("ch_1").contains("s3cret"));
    }

    #[test]
    fn a_token_is_used_until_shortly_before_it_expires() {
        let t = token_from_response(
            br#"{"access_token": "abc", "token_type": "Bearer", "expires_in": 3600}"#,
            1_000,
        )
        .unwrap();
        assert_eq!(t.access_token, "abc");
        assert_eq!(t.use_until_ms, 1_000 + 3_540_000);
        assert!(t.fresh(1_000 + 3_539_999) && !t.fresh(1_000 + 3_540_000));
        // A short token keeps half its life; text lifetimes are read; none is five minutes.
        let short = token_from_response(br#"{"access_token": "a", "expires_in": 20}"#, 0).unwrap();
        assert_eq!(short.use_until_ms, 10_000);
        let text =
            token_from_response(br#"{"access_token": "a", "expires_in": "120"}"#, 0).unwrap();
        assert_eq!(text.use_until_ms, 60_000);
        let none = token_from_response(br#"{"access_token": "a"}"#, 0).unwrap();
        assert_eq!(none.use_until_ms, 240_000);
        let long =
            token_from_response(br#"{"access_token": "a", "expires_in": 9999999}"#, 0).unwrap();
        assert_eq!(long.use_until_ms, (86_400 - 60) * 1000);
    }

    #[test]
    fn an_answer_without_a_bearer_token_is_refused_without_echoing_it() {
        for (body, word) in [
            (&b"<html>"[..], "JSON"),
            (br#"{"error": "invalid_client"}"#, "access_token"),
            (br#"{"access_token": "a b"}"#, "header"),
            (br#"{"access_token": "tok", "token_type": "mac"}"#, "bearer"),
        ] {
            let e = token_from_response(body, 0).unwrap_err();
            assert!(e.message().contains(word), "{e}");
            assert!(!e.message().contains("tok\""), "{e}");
        }
        let _ = json!(null);
    }
}
