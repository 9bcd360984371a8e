//! What the provider adapters share to read a channel's `config`: allowed keys, strings,
//! base URLs, and the request timeout.

use converger_core::Invalid;

use crate::Target;
use crate::http::MAX_TIMEOUT_MS;
use serde_json::{Map, Value};
use std::time::Duration;

pub(crate) fn keys_allowed(
    config: &Map<String, Value>,
    allowed: &[&str],
    kind: &str,
) -> Result<(), Invalid> {
    match config.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Invalid(format!(
            "unknown {kind} config key `{k}` (allowed: {})",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

pub(crate) fn string<'a>(
    config: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, Invalid> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
        Some(_) => Err(Invalid(format!("`{key}` must be a non-empty string"))),
    }
}

/// A shared secret a provider's callbacks must carry (`verify_token`, `receipt_token`): at
/// least as long as a websocket channel's token, so that it cannot be guessed.
pub(crate) fn callback_token<'a>(
    config: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, Invalid> {
    let min = crate::websocket::MIN_TOKEN_CHARS;
    match string(config, key)? {
        Some(t) if t.chars().count() < min => Err(Invalid(format!(
            "`{key}` must be at least {min} characters"
        ))),
        t => Ok(t),
    }
}

pub(crate) fn required<'a>(
    config: &'a Map<String, Value>,
    key: &str,
    kind: &str,
) -> Result<&'a str, Invalid> {
    string(config, key)?.ok_or_else(|| Invalid(format!("{kind} config needs `{key}`")))
}

pub(crate) fn base_url(raw: &str) -> Result<reqwest::Url, Invalid> {
    let url = reqwest::Url::parse(raw).map_err(|e| Invalid(format!("invalid base_url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Invalid::new("base_url must be http(s) with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::new("base_url must not carry credentials"));
    }
    Ok(url)
}

/// `base` with `segments` appended to its path.
pub(crate) fn join(base: &reqwest::Url, segments: &[&str]) -> Result<reqwest::Url, Invalid> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|_| "base_url cannot have a path".to_owned())?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

pub(crate) fn timeout(target: &Target<'_>) -> Duration {
    Duration::from_millis(
        u64::try_from(target.timeout.as_millis())
            .unwrap_or(MAX_TIMEOUT_MS)
            .min(MAX_TIMEOUT_MS),
    )
}
