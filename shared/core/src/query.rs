//! Pieces of list queries: actors, UTC-day bounds and opaque keyset cursors.

use crate::Invalid;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Who did something, as audit entries and `retried_by` record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `admin`, `tenant_api`, `tenant_user` or `system`.
    #[serde(rename = "type")]
    pub kind: ActorKind,
    pub id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Admin,
    TenantApi,
    TenantUser,
    System,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::TenantApi => "tenant_api",
            Self::TenantUser => "tenant_user",
            Self::System => "system",
        }
    }
}

impl fmt::Display for Actor {
    /// `<type>:<id>`, the form of `retried_by`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id)
    }
}

/// Sort keys of a UTC day: every `<rfc3339 time>#<id>` key of that day is within
/// `[day_start(d), day_end(d)]`.
pub fn day_start(day: &str) -> Result<String, Invalid> {
    let d = parse_day(day)?;
    Ok(format!("{}T00:00:00.000000Z", d.format("%Y-%m-%d")))
}

pub fn day_end(day: &str) -> Result<String, Invalid> {
    let d = parse_day(day)?;
    // `$` sorts just after the `#` that separates the time from the id.
    Ok(format!("{}T23:59:59.999999Z$", d.format("%Y-%m-%d")))
}

/// The sort key bound of an instant (`since`, inclusive; `until`, exclusive): RFC 3339 with
/// any offset, read to the microsecond. Every `<rfc3339 time>#<id>` key at or after `since`
/// is `>= instant_key(since)`, and every key before `until` is `<= instant_key(until)`.
pub fn instant_key(at: &str) -> Result<String, Invalid> {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| crate::time::rfc3339(t.with_timezone(&chrono::Utc)))
        .map_err(|_| {
            Invalid(format!(
                "`{at}` is not an RFC 3339 time (2026-12-01T09:30:00Z)"
            ))
        })
}

/// The narrower of two optional lower bounds, and of two upper bounds.
fn tighter(a: Option<String>, b: Option<String>, lower: bool) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if lower { a.max(b) } else { a.min(b) }),
        (a, b) => a.or(b),
    }
}

/// The sort-key bounds of a listing asked for by day (`from`, `to`: whole UTC days, both
/// included) and by instant (`since` included, `until` excluded); where both bound a side,
/// the tighter one holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyBounds {
    pub from: Option<String>,
    pub to: Option<String>,
}

impl KeyBounds {
    /// Bounds by day only.
    pub fn days(from: Option<&str>, to: Option<&str>) -> Result<Self, Invalid> {
        Self::parse(from, to, None, None)
    }

    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        since: Option<&str>,
        until: Option<&str>,
    ) -> Result<Self, Invalid> {
        Ok(Self {
            from: tighter(
                from.map(day_start).transpose()?,
                since.map(instant_key).transpose()?,
                true,
            ),
            to: tighter(
                to.map(day_end).transpose()?,
                until.map(instant_key).transpose()?,
                false,
            ),
        })
    }
}

/// What a deliveries search asks for: an exact activity id when the text is one, else a part
/// of `last_error`. Blank text searches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Search {
    pub activity: Option<crate::ActivityId>,
    pub error_contains: Option<String>,
}

impl Search {
    pub fn parse(text: Option<&str>) -> Self {
        match text.map(str::trim).filter(|s| !s.is_empty()) {
            None => Self::default(),
            Some(s) => match crate::ActivityId::parse(s) {
                Ok(a) => Self {
                    activity: Some(a),
                    error_contains: None,
                },
                Err(_) => Self {
                    activity: None,
                    error_contains: Some(s.to_owned()),
                },
            },
        }
    }
}

/// A list's order: `newest` (the default) or `oldest` first; true for newest first.
pub fn newest_first(sort: Option<&str>) -> Result<bool, Invalid> {
    match sort.map(str::trim).filter(|s| !s.is_empty()) {
        None | Some("newest") => Ok(true),
        Some("oldest") => Ok(false),
        Some(other) => Err(Invalid(format!("sort `{other}` is not newest or oldest"))),
    }
}

fn parse_day(day: &str) -> Result<NaiveDate, Invalid> {
    NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .map_err(|_| Invalid(format!("`{day}` is not a UTC day (YYYY-MM-DD)")))
}

/// A position in a keyset-paginated list: the last row's sort key and id (stored as is in a
/// replay job's progress; given to clients only through [`Cursor::encode`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "k")]
    pub sort_key: String,
    #[serde(rename = "i")]
    pub id: String,
}

/// A cursor as clients carry it: the position and a fingerprint of the list it pages through
/// (the tenant and the query's filters), so that a cursor is refused by any other list.
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "k")]
    sort_key: String,
    #[serde(rename = "i")]
    id: String,
    #[serde(rename = "s")]
    scope: String,
}

/// The first 8 bytes of SHA-256 of `scope`, in hex.
fn fingerprint(scope: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(scope.as_bytes());
    hex::encode(&digest[..8])
}

const FOREIGN: &str = "cursor is not one this API gave for this list";

impl Cursor {
    /// The opaque form given to clients, bound to `scope`: the tenant and every filter of the
    /// query (not the page size), as the list names them.
    pub fn encode(&self, scope: &str) -> String {
        let wire = Wire {
            sort_key: self.sort_key.clone(),
            id: self.id.clone(),
            scope: fingerprint(scope),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).unwrap_or_default())
    }

    /// A cursor this API gave for the list `scope` names; any other (garbled, another
    /// tenant's, another query's) is refused.
    pub fn decode(s: &str, scope: &str) -> Result<Self, Invalid> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s.trim())
            .map_err(|_| FOREIGN.to_owned())?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| FOREIGN.to_owned())?;
        if wire.scope != fingerprint(scope) {
            return Err(Invalid::new(FOREIGN));
        }
        Ok(Self {
            sort_key: wire.sort_key,
            id: wire.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bounds_keep_the_tighter_of_a_day_and_an_instant() {
        let b = KeyBounds::parse(
            Some("2026-12-01"),
            Some("2026-12-03"),
            Some("2026-12-01T10:00:00Z"),
            Some("2026-12-04T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(b.from.as_deref(), Some("2026-12-01T10:00:00.000000Z"));
        assert_eq!(b.to.as_deref(), Some("2026-12-03T23:59:59.999999Z$"));
        assert_eq!(KeyBounds::days(None, None).unwrap(), KeyBounds::default());
        assert!(KeyBounds::days(Some("yesterday"), None).is_err());
        assert!(KeyBounds::parse(None, None, None, Some("noon")).is_err());
    }
    use proptest::prelude::*;

    #[test]
    fn instants_bound_keys_since_inclusive_until_exclusive() {
        let since = instant_key("2026-12-01T10:30:00+01:00").unwrap();
        assert_eq!(since, "2026-12-01T09:30:00.000000Z");
        let at = "2026-12-01T09:30:00.000000Z#dlv_1";
        let before = "2026-12-01T09:29:59.999999Z#dlv_2";
        assert!(at >= since.as_str() && before < since.as_str());
        // `until` the same instant leaves that instant's keys out.
        assert!(at > since.as_str() && before <= since.as_str());
        assert!(instant_key("2026-12-01").is_err());
        assert!(instant_key("yesterday").is_err());
        let day = day_start("2026-12-01").unwrap();
        assert_eq!(
            tighter(Some(day.clone()), Some(since.clone()), true),
            Some(since.clone())
        );
        assert_eq!(
            tighter(Some(day.clone()), Some(since.clone()), false),
            Some(day)
        );
        assert_eq!(tighter(None, Some(since.clone()), true), Some(since));
    }

    #[test]
    fn a_search_is_an_activity_id_or_error_text() {
        let id = crate::ActivityId::generate();
        let s = Search::parse(Some(&format!(" {id} ")));
        assert_eq!((s.activity, s.error_contains), (Some(id), None));
        let s = Search::parse(Some("HTTP 503"));
        assert_eq!(s.error_contains.as_deref(), Some("HTTP 503"));
        assert_eq!(s.activity, None);
        assert_eq!(Search::parse(Some("  ")), Search::default());
        assert_eq!(Search::parse(None), Search::default());
        assert_eq!(newest_first(None), Ok(true));
        assert_eq!(newest_first(Some("oldest")), Ok(false));
        assert!(newest_first(Some("sideways")).is_err());
    }

    #[test]
    fn day_bounds_hold_every_key_of_the_day() {
        let lo = day_start("2026-11-30").unwrap();
        let hi = day_end("2026-11-30").unwrap();
        for t in [
            "2026-11-30T00:00:00.000000Z#dlv_a",
            "2026-11-30T23:59:59.999999Z#dlv_z",
        ] {
            assert!(lo.as_str() <= t && t <= hi.as_str(), "{t}");
        }
        assert!("2026-11-29T23:59:59.999999Z#dlv_z" < lo.as_str());
        assert!("2026-12-01T00:00:00.000000Z#dlv_a" > hi.as_str());
        assert!(day_start("2026-13-01").is_err());
        assert!(day_end("yesterday").is_err());
    }

    #[test]
    fn actors_display_as_type_and_id() {
        let a = Actor {
            kind: ActorKind::System,
            id: "circuit_breaker".into(),
        };
        assert_eq!(a.to_string(), "system:circuit_breaker");
    }

    proptest! {
        #[test]
        fn cursors_round_trip_in_their_own_list_only(
            k in ".{0,60}",
            i in "[a-z_0-9]{0,40}",
            scope in ".{0,40}",
            other in ".{0,40}",
        ) {
            let c = Cursor { sort_key: k, id: i };
            let wire = c.encode(&scope);
            prop_assert_eq!(Cursor::decode(&wire, &scope).unwrap(), c);
            if other != scope {
                prop_assert!(Cursor::decode(&wire, &other).is_err());
            }
        }

        #[test]
        fn garbage_cursors_are_refused(s in "[^A-Za-z0-9_-]{1,20}") {
            prop_assert!(Cursor::decode(&s, "").is_err());
        }
    }
}
