//! Who is signed in: password hashes, the realms' session cookies, the [`Viewer`] extractor,
//! the CSRF-checked [`Posted`] form, the admin IP allowlist, and the sign-in pages.

use super::admin_ip_allowed;
use super::page::{CSS, page_error, unavailable};
use crate::AppState;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::{Form, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::query::{Actor, ActorKind};
use converger_core::secret::new_token;
use converger_core::web::{self, Realm, SESSION_SECONDS, Session};
use converger_core::{TenantId, time};
use converger_ports::User;
use maud::{DOCTYPE, PreEscaped, html};
use serde::Deserialize;
use std::collections::HashMap;

/// Hashes a password (argon2id, a random salt).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::encode_b64(&converger_core::secret::new_key()[..16])?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
}

fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A hash no password matches, verified for unknown emails so that they take as long.
const DECOY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$hQ1J6nZ9yJb2i1M1i2b4xv9Q4iY6uQe1QvXbJ0m2bGk";

pub(super) fn prefix(realm: Realm) -> &'static str {
    match realm {
        Realm::Admin => "/admin",
        Realm::Portal => "/portal",
    }
}

fn cookie_name(realm: Realm) -> &'static str {
    match realm {
        Realm::Admin => "cvg_admin",
        Realm::Portal => "cvg_portal",
    }
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

fn set_cookie(
    state: &AppState,
    realm: Realm,
    name: &str,
    value: &str,
    max_age: i64,
) -> HeaderValue {
    let secure = if state.web.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={}; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        prefix(realm)
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A signed-in user of the realm the path names.
pub struct Viewer {
    pub realm: Realm,
    pub user: User,
    pub session: Session,
}

impl Viewer {
    pub(super) fn csrf(&self, state: &AppState) -> String {
        self.session.csrf(&state.web.session_secret)
    }

    pub(super) fn actor(&self) -> Actor {
        Actor {
            kind: match self.realm {
                Realm::Admin => ActorKind::Admin,
                Realm::Portal => ActorKind::TenantUser,
            },
            id: self.user.email.clone(),
        }
    }

    /// The tenant a portal user is limited to; `None` for operators.
    pub(super) fn own_tenant(&self) -> Option<&TenantId> {
        match self.realm {
            Realm::Admin => None,
            Realm::Portal => self.user.tenant_id.as_ref(),
        }
    }

    pub(super) fn can_act(&self) -> bool {
        self.user.role.can_act()
    }
}

fn realm_of(path: &str) -> Realm {
    if path.starts_with("/portal") {
        Realm::Portal
    } else {
        Realm::Admin
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let realm = realm_of(parts.uri.path());
        let login = || Redirect::to(&format!("{}/login", prefix(realm))).into_response();
        let Some(value) = cookie(&parts.headers, cookie_name(realm)) else {
            return Err(login());
        };
        let Some(session) = Session::open(&value, &state.web.session_secret, time::now_ms() / 1000)
            .filter(|s| s.realm == realm)
        else {
            return Err(login());
        };
        // The user is read again: a removed user's cookie stops working at once.
        let user = match state.accounts.get_user(realm, &session.email).await {
            Ok(Some(u)) => u,
            Ok(None) => return Err(login()),
            Err(e) => return Err(unavailable(&e)),
        };
        if realm == Realm::Portal && user.tenant_id.is_none() {
            return Err(login());
        }
        // Signed out (everywhere) or the password changed since this session began.
        let issued = session.expires - SESSION_SECONDS;
        if user.sessions_after.is_some_and(|after| issued < after) {
            return Err(login());
        }
        Ok(Viewer {
            realm,
            user,
            session,
        })
    }
}

/// Refuses `/admin` to addresses outside the allowlist (when one is configured).
pub async fn admin_allowlist(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !admin_ip_allowed(&state, req.extensions()) {
        return page_error(StatusCode::FORBIDDEN, "Your address is not allowed here.");
    }
    next.run(req).await
}

fn forged() -> Response {
    page_error(
        StatusCode::FORBIDDEN,
        "This form is not valid any more (missing or wrong CSRF token). Reload the page and try again.",
    )
}

/// A form posted by a signed-in user, its CSRF token checked. Every POST handler of the
/// pages takes one, so none can skip the check.
pub struct Posted {
    pub viewer: Viewer,
    pub form: HashMap<String, String>,
}

impl FromRequest<AppState> for Posted {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, state).await?;
        let Form(form) =
            Form::<HashMap<String, String>>::from_request(Request::from_parts(parts, body), state)
                .await
                .map_err(|_| forged())?;
        match form.get("_csrf") {
            Some(t) if viewer.session.csrf_ok(&state.web.session_secret, t) => {
                Ok(Posted { viewer, form })
            }
            _ => Err(forged()),
        }
    }
}

pub(super) fn forbidden() -> Response {
    page_error(StatusCode::FORBIDDEN, "Your role does not allow this.")
}

// ------------------------------------------------------------------ sign-in

#[derive(Deserialize)]
struct LoginForm {
    email: String,
    password: String,
    #[serde(default)]
    _csrf: String,
}

fn login_page(state: &AppState, realm: Realm, pre: &str, error: Option<&str>) -> Response {
    let token = Session {
        realm,
        email: String::new(),
        expires: 0,
        nonce: pre.to_owned(),
    }
    .csrf(&state.web.session_secret);
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Sign in · Converger" } style { (PreEscaped(CSS)) } }
            body { main {
                h1 { "Sign in to Converger " (if realm == Realm::Admin { "admin" } else { "portal" }) }
                @if let Some(e) = error { p.error id="login-error" { (e) } }
                form method="post" action={ (prefix(realm)) "/login" } {
                    input type="hidden" name="_csrf" value=(token);
                    p { label { "Email " input type="email" name="email" required autofocus; } }
                    p { label { "Password " input type="password" name="password" required; } }
                    button type="submit" { "Sign in" }
                }
            } }
        }
    };
    let mut resp = axum::response::Html(body.into_string()).into_response();
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(state, realm, "cvg_pre", pre, 3600),
    );
    resp
}

pub(super) async fn login_form(State(state): State<AppState>, req: Request) -> Response {
    let realm = realm_of(req.uri().path());
    login_page(&state, realm, &new_token(), None)
}

/// How often one attempt tries to count itself against writes of parallel attempts before it
/// is refused (each round counts at least one of them).
const COUNT_TRIES: usize = 16;

/// Counts one sign-in attempt under `key` before its password is checked; `false` if the key
/// is locked (or the attempt lost every race to count itself: a flood of parallel guesses).
async fn count_attempt(
    state: &AppState,
    key: &str,
    limit: u32,
    now_s: i64,
) -> Result<bool, converger_ports::StoreError> {
    let store = &state.accounts;
    for _ in 0..COUNT_TRIES {
        let (count, rev) = store.sign_in_count(key).await?;
        let Some(next) = count.admit(now_s, limit) else {
            return Ok(false);
        };
        if store
            .put_sign_in_count(key, rev, &next, next.expires_s(now_s))
            .await?
        {
            if next.locked(now_s) {
                tracing::warn!(key, "sign-in locked after repeated attempts");
            }
            return Ok(true);
        }
    }
    Ok(false)
}

fn too_many_attempts() -> Response {
    page_error(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many sign-in attempts from your address; try again later.",
    )
}

pub(super) async fn login(State(state): State<AppState>, req: Request) -> Response {
    let realm = realm_of(req.uri().path());
    let pre = cookie(req.headers(), "cvg_pre").unwrap_or_default();
    let source =
        converger_core::net::client_source(req.extensions().get::<super::SourceIp>().map(|s| s.0));
    let Ok(Form(f)) = Form::<LoginForm>::from_request(req, &state).await else {
        return login_page(
            &state,
            realm,
            &new_token(),
            Some("Enter your email and password."),
        );
    };
    // Login CSRF: the form's token must match this browser's pre-session cookie.
    let pre_session = Session {
        realm,
        email: String::new(),
        expires: 0,
        nonce: pre.clone(),
    };
    if pre.is_empty() || !pre_session.csrf_ok(&state.web.session_secret, &f._csrf) {
        return forged();
    }
    let email = f.email.trim().to_ascii_lowercase();
    let now_s = time::now_ms() / 1000;
    // Every attempt is counted before its password is checked (parallel guesses count one
    // each): against its source at every account, then against the account from its source.
    // The same reads and writes for an unknown email as for a known one.
    match count_attempt(
        &state,
        &converger_ports::sign_in_source_key(&source),
        web::SIGN_IN_SOURCE_MAX,
        now_s,
    )
    .await
    {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(
                realm = realm.as_str(),
                "sign-in refused: too many from its source"
            );
            return too_many_attempts();
        }
        Err(e) => return unavailable(&e),
    }
    let user = match state.accounts.get_user(realm, &email).await {
        Ok(u) => u,
        Err(e) => return unavailable(&e),
    };
    let account_key = converger_ports::sign_in_account_key(realm, &email, &source);
    let admitted = match count_attempt(&state, &account_key, web::SIGN_IN_MAX_FAILURES, now_s).await
    {
        Ok(a) => a,
        Err(e) => return unavailable(&e),
    };
    let ok = match &user {
        Some(u) if admitted => verify_password(&f.password, &u.password_hash),
        // Unknown or locked: the same work and the same answer as a wrong password.
        _ => {
            let _ = verify_password(&f.password, DECOY_HASH);
            false
        }
    };
    let Some(user) = user.filter(|_| ok) else {
        tracing::info!(
            realm = realm.as_str(),
            locked = !admitted,
            "sign-in refused"
        );
        return login_page(
            &state,
            realm,
            &new_token(),
            Some("Wrong email or password."),
        );
    };
    // A success clears the account's count from this source (not the source's own count).
    if let Err(e) = state.accounts.clear_sign_in_count(&account_key).await {
        tracing::error!(error = %e, "sign-in count not cleared");
    }
    let session = Session {
        realm,
        email: user.email.clone(),
        expires: time::now_ms() / 1000 + SESSION_SECONDS,
        nonce: new_token(),
    };
    let home = match realm {
        Realm::Admin => "/admin".to_owned(),
        Realm::Portal => "/portal/deliveries".to_owned(),
    };
    let mut resp = Redirect::to(&home).into_response();
    let sealed = session.seal(&state.web.session_secret);
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, realm, cookie_name(realm), &sealed, SESSION_SECONDS),
    );
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, realm, "cvg_pre", "", 0),
    );
    resp
}

pub(super) async fn logout(
    State(state): State<AppState>,
    Posted { viewer: v, .. }: Posted,
) -> Response {
    // Every session of the user ends, not only this browser's cookie.
    let now_s = time::now_ms() / 1000;
    if let Err(e) = state
        .accounts
        .end_sessions(v.realm, &v.user.email, now_s)
        .await
    {
        tracing::error!(error = %e, "sessions not ended; this browser's cookie is cleared");
    }
    let mut resp = Redirect::to(&format!("{}/login", prefix(v.realm))).into_response();
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, v.realm, cookie_name(v.realm), "", 0),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_and_verify_and_the_decoy_is_a_real_hash() {
        let h = hash_password("correct horse battery").unwrap();
        assert!(verify_password("correct horse battery", &h));
        assert!(!verify_password("wrong", &h));
        // Unknown emails verify against the decoy, which must parse to cost the same.
        assert!(PasswordHash::new(DECOY_HASH).is_ok());
        assert!(!verify_password("anything", DECOY_HASH));
    }
}
