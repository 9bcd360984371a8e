//! Rules of the web pages (operators' admin and tenants' portal): roles and what they may do,
//! signed session cookies, CSRF tokens, the redacted payload preview and CSV cells that a
//! spreadsheet cannot evaluate.

use crate::Invalid;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use std::fmt;
use std::str::FromStr;

/// Which side a user signs in to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Realm {
    /// Operators, at `/admin`.
    Admin,
    /// A tenant's users, at `/portal`.
    Portal,
}

impl Realm {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Portal => "portal",
        }
    }
}

/// A user's role. Admin users: super_admin, admin, viewer. Tenant users: owner, admin,
/// member, viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    SuperAdmin,
    Admin,
    Owner,
    Member,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SuperAdmin => "super_admin",
            Self::Admin => "admin",
            Self::Owner => "owner",
            Self::Member => "member",
            Self::Viewer => "viewer",
        }
    }

    /// Whether the role exists in `realm`.
    pub fn valid_in(self, realm: Realm) -> bool {
        match realm {
            Realm::Admin => matches!(self, Self::SuperAdmin | Self::Admin | Self::Viewer),
            Realm::Portal => matches!(
                self,
                Self::Owner | Self::Admin | Self::Member | Self::Viewer
            ),
        }
    }

    /// Browse and export deliveries: every role (the portal only its own tenant's).
    pub fn can_browse(self) -> bool {
        true
    }

    /// Retry dead letters, pause and resume channels: everyone but viewers.
    pub fn can_act(self) -> bool {
        self != Self::Viewer
    }

    /// Manage tenants (create, tier, alert URL, API key): admin users but viewers.
    pub fn can_manage_tenants(self, realm: Realm) -> bool {
        realm == Realm::Admin && matches!(self, Self::SuperAdmin | Self::Admin)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = Invalid;
    fn from_str(s: &str) -> Result<Self, Invalid> {
        [
            Self::SuperAdmin,
            Self::Admin,
            Self::Owner,
            Self::Member,
            Self::Viewer,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
        .ok_or_else(|| Invalid(format!("unknown role `{s}`")))
    }
}

/// The rules for a new user: an email address (returned lower-cased), a password of at
/// least [`MIN_PASSWORD_CHARS`], a role of the realm, and a tenant exactly for portal users.
pub fn check_new_user(
    realm: Realm,
    email: &str,
    password: &str,
    role: Role,
    has_tenant: bool,
) -> Result<String, Invalid> {
    let email = email.trim().to_ascii_lowercase();
    if !email.contains('@') || email.len() > 254 {
        return Err(Invalid::new("email must be an address"));
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Invalid(format!(
            "password must be at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if !role.valid_in(realm) {
        return Err(Invalid(format!(
            "role `{role}` does not exist in the {} realm",
            realm.as_str()
        )));
    }
    if (realm == Realm::Portal) != has_tenant {
        return Err(Invalid::new(
            "tenant users need a tenant; admin users have none",
        ));
    }
    Ok(email)
}

pub const MIN_PASSWORD_CHARS: usize = 12;

/// What a session cookie carries: who, where, until when, and a nonce the CSRF token is
/// bound to. The user is read again on every request, so a removed user's cookie stops
/// working at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub realm: Realm,
    pub email: String,
    /// Seconds since the epoch.
    pub expires: i64,
    pub nonce: String,
}

/// Sign-in attempts are counted before the password is checked, so that guesses sent in
/// parallel count one each. Per account and source address: this many within
/// [`SIGN_IN_WINDOW_S`] lock that account *from that address* for [`SIGN_IN_LOCK_S`], during
/// which even the right password is refused (with the same words as a wrong one, so that the
/// lock tells a guesser nothing). A lock keyed by address means a guesser elsewhere cannot keep
/// an operator out. A success clears the account's count from that address.
pub const SIGN_IN_MAX_FAILURES: u32 = 5;
/// Attempts one source address may make within [`SIGN_IN_WINDOW_S`], at every account
/// together (successes included), before its attempts are refused for [`SIGN_IN_LOCK_S`].
pub const SIGN_IN_SOURCE_MAX: u32 = 50;
pub const SIGN_IN_WINDOW_S: i64 = 900;
pub const SIGN_IN_LOCK_S: i64 = 900;

/// The sign-in attempts counted under one key (an account from one source, or one source).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInState {
    /// Attempts counted since `since`.
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_until: Option<i64>,
}

impl SignInState {
    pub fn is_clear(&self) -> bool {
        *self == Self::default()
    }

    /// Whether sign-in is refused at `now_s` (seconds).
    pub fn locked(&self, now_s: i64) -> bool {
        self.locked_until.is_some_and(|u| u > now_s)
    }

    /// The state after one more attempt at `now_s`: counted in the current window (a new one
    /// when the last began more than [`SIGN_IN_WINDOW_S`] ago), locking at `limit`.
    pub fn after_failure(self, now_s: i64, limit: u32) -> Self {
        let (failures, since) = match self.since {
            Some(s) if now_s - s < SIGN_IN_WINDOW_S => (self.failures.saturating_add(1), s),
            _ => (1, now_s),
        };
        if failures >= limit {
            Self {
                failures: 0,
                since: None,
                locked_until: Some(now_s + SIGN_IN_LOCK_S),
            }
        } else {
            Self {
                failures,
                since: Some(since),
                locked_until: self.locked_until.filter(|u| *u > now_s),
            }
        }
    }

    /// An attempt at `now_s`, before its password is checked: `None` if it is refused (the
    /// key is locked), else the state that counts it. The attempt that reaches `limit` is
    /// still checked (and a success clears the lock it set); the next is refused.
    pub fn admit(self, now_s: i64, limit: u32) -> Option<Self> {
        (!self.locked(now_s)).then(|| self.after_failure(now_s, limit))
    }

    /// When the state means nothing any more (its window and its lock are over): the time to
    /// let storage forget it.
    pub fn expires_s(&self, now_s: i64) -> i64 {
        let window_end = self.since.map_or(now_s, |s| s + SIGN_IN_WINDOW_S);
        window_end
            .max(self.locked_until.unwrap_or(now_s))
            .max(now_s)
    }
}

/// How long a session lasts.
pub const SESSION_SECONDS: i64 = 8 * 3600;

fn mac(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(secret) else {
        return Vec::new();
    };
    for p in parts {
        m.update(p);
        m.update(b"\0");
    }
    m.finalize().into_bytes().to_vec()
}

impl Session {
    /// The cookie value: `<base64 JSON>.<base64 HMAC-SHA256>`.
    pub fn seal(&self, secret: &[u8]) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default());
        let sig = URL_SAFE_NO_PAD.encode(mac(secret, &[b"session", body.as_bytes()]));
        format!("{body}.{sig}")
    }

    /// The session a cookie value carries, if its signature holds and it has not expired.
    pub fn open(value: &str, secret: &[u8], now_s: i64) -> Option<Self> {
        let (body, sig) = value.split_once('.')?;
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        let expected = mac(secret, &[b"session", body.as_bytes()]);
        if expected.is_empty() || !crate::secret::constant_time_eq(&expected, &sig) {
            return None;
        }
        let s: Session = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        (s.expires > now_s).then_some(s)
    }

    /// The CSRF token of this session: every form carries it, every POST must.
    pub fn csrf(&self, secret: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(mac(secret, &[b"csrf", self.nonce.as_bytes()]))
    }

    pub fn csrf_ok(&self, secret: &[u8], given: &str) -> bool {
        crate::secret::constant_time_eq(self.csrf(secret).as_bytes(), given.as_bytes())
    }
}

/// Keys whose values the payload preview and the channel view hide (header names count too:
/// `X-Api-Key` reads as `x_api_key`).
pub fn is_sensitive_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    matches!(
        k.as_str(),
        "api_key" | "apikey" | "password" | "passwd" | "secret" | "token" | "cookie"
            // A Slack incoming webhook's URL is its credential (the secret is in the path).
            | "webhook_url"
    ) || k.ends_with("authorization")
        || k.ends_with("_token")
        || k.ends_with("_secret")
        || k.ends_with("_password")
        || k.ends_with("_key") && k != "idempotency_key" && k != "routing_key"
}

/// A URL without what may carry a secret: `user:pass@`, the query and the fragment are shown
/// as `[REDACTED]`. Text that is not a URL is returned as is.
pub fn redact_url(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let (rest, tail) = match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], "?[REDACTED]"),
        None => (rest, ""),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("[REDACTED]@{host}"),
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{path}{tail}")
}

/// `value` with every sensitive key's value replaced by `"[REDACTED]"`, and the secrets of
/// every URL under a `*url` key (`url`, `notify_url`, `base_url`) hidden ([`redact_url`]),
/// at any depth.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    if is_sensitive_key(k) {
                        (k.clone(), Value::String("[REDACTED]".into()))
                    } else if let (true, Value::String(u)) =
                        (k.to_ascii_lowercase().ends_with("url"), v)
                    {
                        (k.clone(), Value::String(redact_url(u)))
                    } else {
                        (k.clone(), redact(v))
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// `new` (a changed config) with each `"[REDACTED]"` that stands where [`redact`] hid a
/// sensitive value put back to `old`'s value at the same place: a config read through the API
/// and written back unchanged keeps its secrets. A `[REDACTED]` with nothing behind it stays.
pub fn keep_redacted(new: &Value, old: &Value) -> Value {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => Value::Object(
            n.iter()
                .map(|(k, v)| {
                    let kept = match (v, o.get(k)) {
                        (Value::String(s), Some(was))
                            if s == "[REDACTED]" && is_sensitive_key(k) =>
                        {
                            was.clone()
                        }
                        (_, Some(was)) => keep_redacted(v, was),
                        (_, None) => v.clone(),
                    };
                    (k.clone(), kept)
                })
                .collect(),
        ),
        _ => new.clone(),
    }
}

/// A CSV cell a spreadsheet will not evaluate: text starting with `=`, `+`, `-` or `@` gets
/// a leading `'`.
pub fn csv_safe(cell: &str) -> String {
    if cell.starts_with(['=', '+', '-', '@']) {
        format!("'{cell}")
    } else {
        cell.to_owned()
    }
}

/// The export's columns, in order.
pub const EXPORT_COLUMNS: [&str; 13] = [
    "id",
    "tenant_id",
    "channel_id",
    "channel_name",
    "activity_id",
    "status",
    "attempts",
    "last_error",
    "retry_count",
    "retried_by",
    "retried_at",
    "inserted_at",
    "updated_at",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_written_back_as_read_keeps_its_secrets() {
        let stored = serde_json::json!({"url": "https://r.example/h", "headers": {"Authorization": "Bearer a"},
            "auth": {"client_id": "id", "client_secret": "s1"}});
        let read = redact(&stored);
        assert_eq!(read["auth"]["client_secret"], "[REDACTED]");
        assert_eq!(keep_redacted(&read, &stored), stored);
        // A new secret replaces; a redacted mark with nothing behind it stays as written.
        let mut changed = read.clone();
        changed["auth"]["client_secret"] = "s2".into();
        changed["headers"]["X-Api-Key"] = "[REDACTED]".into();
        let kept = keep_redacted(&changed, &stored);
        assert_eq!(kept["auth"]["client_secret"], "s2");
        assert_eq!(kept["headers"]["Authorization"], "Bearer a");
        assert_eq!(kept["headers"]["X-Api-Key"], "[REDACTED]");
        // Only a sensitive key's value is put back.
        let odd = serde_json::json!({"name": "[REDACTED]"});
        assert_eq!(keep_redacted(&odd, &serde_json::json!({"name": "x"})), odd);
    }

    #[test]
    fn five_failures_within_the_window_lock_sign_in_for_a_while() {
        let t0 = 1_000_000;
        let max = SIGN_IN_MAX_FAILURES;
        let mut s = SignInState::default();
        for n in 1..max {
            s = s.after_failure(t0 + i64::from(n), max);
            assert!(!s.locked(t0 + i64::from(n)), "{n} failures");
        }
        s = s.after_failure(t0 + 10, max);
        assert!(s.locked(t0 + 10));
        assert!(s.locked(t0 + 10 + SIGN_IN_LOCK_S - 1));
        assert!(!s.locked(t0 + 10 + SIGN_IN_LOCK_S));
        assert_eq!(s.expires_s(t0 + 10), t0 + 10 + SIGN_IN_LOCK_S);
        // Failures spread wider than the window never lock.
        let mut s = SignInState::default();
        for n in 0..20 {
            s = s.after_failure(t0 + n * SIGN_IN_WINDOW_S / 2, max);
            assert!(!s.locked(t0 + n * SIGN_IN_WINDOW_S / 2), "{n}");
        }
        assert!(SignInState::default().is_clear());
    }

    #[test]
    fn attempts_are_admitted_up_to_the_limit_then_refused_until_the_lock_ends() {
        let t0 = 1_000_000;
        let mut s = SignInState::default();
        for n in 1..=3 {
            s = s
                .admit(t0, 3)
                .unwrap_or_else(|| panic!("attempt {n} is checked"));
        }
        assert!(s.locked(t0), "the third reached the limit");
        assert_eq!(s.admit(t0 + 1, 3), None, "the fourth is refused");
        assert_eq!(s.admit(t0 + SIGN_IN_LOCK_S - 1, 3), None);
        let after = s.admit(t0 + SIGN_IN_LOCK_S, 3).unwrap();
        assert_eq!(
            (after.failures, after.locked_until),
            (1, None),
            "a fresh count"
        );
        assert_eq!(
            after.expires_s(t0 + SIGN_IN_LOCK_S),
            t0 + SIGN_IN_LOCK_S + SIGN_IN_WINDOW_S
        );
    }

    use serde_json::json;

    #[test]
    fn roles_follow_the_reference_table() {
        for r in [Role::SuperAdmin, Role::Admin] {
            assert!(r.can_browse() && r.can_act() && r.can_manage_tenants(Realm::Admin));
        }
        assert!(Role::Viewer.can_browse());
        assert!(!Role::Viewer.can_act());
        for r in [Role::Owner, Role::Admin, Role::Member] {
            assert!(r.can_act());
            assert!(!r.can_manage_tenants(Realm::Portal));
        }
        assert!(Role::Owner.valid_in(Realm::Portal) && !Role::Owner.valid_in(Realm::Admin));
        assert!(
            Role::SuperAdmin.valid_in(Realm::Admin) && !Role::SuperAdmin.valid_in(Realm::Portal)
        );
        assert_eq!("member".parse::<Role>().unwrap(), Role::Member);
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn new_users_follow_the_rules() {
        let ok = check_new_user(
            Realm::Portal,
            " A@B.example ",
            "twelve chars!",
            Role::Owner,
            true,
        );
        assert_eq!(ok.as_deref(), Ok("a@b.example"));
        assert!(
            check_new_user(Realm::Admin, "nobody", "twelve chars!", Role::Admin, false).is_err()
        );
        assert!(check_new_user(Realm::Admin, "a@b.c", "short", Role::Admin, false).is_err());
        assert!(
            check_new_user(Realm::Admin, "a@b.c", "twelve chars!", Role::Owner, false).is_err()
        );
        assert!(
            check_new_user(Realm::Portal, "a@b.c", "twelve chars!", Role::Owner, false).is_err()
        );
        assert!(
            check_new_user(Realm::Admin, "a@b.c", "twelve chars!", Role::Viewer, true).is_err()
        );
    }

    #[test]
    fn sessions_are_signed_and_expire() {
        let s = Session {
            realm: Realm::Portal,
            email: "a@b.c".into(),
            expires: 1_000,
            nonce: "n1".into(),
        };
        let v = s.seal(b"secret");
        assert_eq!(Session::open(&v, b"secret", 999), Some(s.clone()));
        assert_eq!(Session::open(&v, b"secret", 1_000), None, "expired");
        assert_eq!(Session::open(&v, b"other", 999), None, "wrong key");
        let (body, sig) = v.split_once('.').unwrap();
        let forged = Session {
            realm: Realm::Admin,
            ..s.clone()
        }
        .seal(b"attacker");
        let (fbody, _) = forged.split_once('.').unwrap();
        assert_eq!(
            Session::open(&format!("{fbody}.{sig}"), b"secret", 999),
            None
        );
        assert_eq!(Session::open(body, b"secret", 999), None);
        assert!(s.csrf_ok(b"secret", &s.csrf(b"secret")));
        assert!(!s.csrf_ok(b"secret", "guess"));
        let other = Session {
            nonce: "n2".into(),
            ..s.clone()
        };
        assert!(
            !s.csrf_ok(b"secret", &other.csrf(b"secret")),
            "bound to the session"
        );
    }

    #[test]
    fn payload_previews_hide_secrets_at_any_depth() {
        let v = json!({"text": "hi", "api_key": "k", "user": {"password": "p", "auth_token": "t",
            "name": "n"}, "list": [{"client_secret": "s"}], "idempotency_key": "i"});
        let r = redact(&v);
        assert_eq!(r["text"], "hi");
        assert_eq!(r["api_key"], "[REDACTED]");
        let view = redact(&serde_json::json!({
            "url": "https://user:pw@hooks.example.com/in/abc?token=s3cret#x",
            "notify_url": "https://example.com/status?sig=abc",
            "base_url": "https://api.infobip.com",
            "headers": {"X-Api-Key": "k1", "X-Auth-Token": "t1", "Proxy-Authorization": "p",
                        "Cookie": "c", "X-Request-Source": "converger"},
        }));
        assert_eq!(
            view["url"],
            "https://[REDACTED]@hooks.example.com/in/abc?[REDACTED]"
        );
        assert_eq!(view["notify_url"], "https://example.com/status?[REDACTED]");
        assert_eq!(view["base_url"], "https://api.infobip.com");
        for h in ["X-Api-Key", "X-Auth-Token", "Proxy-Authorization", "Cookie"] {
            assert_eq!(view["headers"][h], "[REDACTED]", "{h}");
        }
        assert_eq!(view["headers"]["X-Request-Source"], "converger");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(r["user"]["password"], "[REDACTED]");
        assert_eq!(r["user"]["auth_token"], "[REDACTED]");
        assert_eq!(r["user"]["name"], "n");
        assert_eq!(r["list"][0]["client_secret"], "[REDACTED]");
        assert_eq!(r["idempotency_key"], "i");
    }

    #[test]
    fn csv_cells_never_start_a_formula() {
        assert_eq!(csv_safe("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(csv_safe("+1"), "'+1");
        assert_eq!(csv_safe("-2"), "'-2");
        assert_eq!(csv_safe("@SUM"), "'@SUM");
        assert_eq!(csv_safe("HTTP 500"), "HTTP 500");
        assert_eq!(csv_safe(""), "");
    }
}
