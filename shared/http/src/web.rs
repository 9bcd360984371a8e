//! The web pages: the operators' admin (`/admin`) and the tenants' portal (`/portal`),
//! server-rendered (maud), with a few lines of JavaScript for the live Delivery column.
//!
//! Security: argon2 password hashes; signed HttpOnly SameSite=Strict session cookies, one per
//! realm and scoped to its path; a CSRF token bound to the session in every form, checked on
//! every POST; the admin IP allowlist (`ADMIN_IP_ALLOWLIST`, checked against API Gateway's
//! source IP); the portal is always limited to the user's tenant, whatever the URL says.
//! The rules (roles, sessions, redaction, CSV cells) are in `converger_core::web`.

use crate::AppState;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::Router;
use axum::body::Body;
use axum::extract::{Form, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use converger_core::net::Allowlist;
use converger_core::query::{Actor, ActorKind, Search, day_end, day_start};
use converger_core::secret::new_token;
use converger_core::web::{
    EXPORT_COLUMNS, Realm, Role, SESSION_SECONDS, Session, csv_safe, redact,
};
use converger_core::{ChannelId, DeliveryId, DeliveryStatus, TenantId, Tier, time};
use converger_pipeline::replay::ReplayError;
use converger_pipeline::tenants::TenantError;
use converger_store::{Channel, Delivery, DeliveryQuery, Scope, User};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::IpAddr;

/// Settings of the web pages.
#[derive(Clone)]
pub struct WebConfig {
    /// Signs session cookies and CSRF tokens (`SESSION_SECRET`; random when unset, which
    /// only suits a single process).
    pub session_secret: Vec<u8>,
    /// Source addresses allowed into `/admin` (`ADMIN_IP_ALLOWLIST`); `None`: any.
    pub admin_allow: Option<Allowlist>,
    /// Cookies carry `Secure` (`COOKIE_SECURE`, default on; the local runner serves plain
    /// HTTP and turns it off).
    pub secure_cookies: bool,
    /// Most rows of one CSV export (`EXPORT_LIMIT`).
    pub export_limit: usize,
}

impl WebConfig {
    pub fn from_env() -> Self {
        Self::from_env_with_secret(std::env::var("SESSION_SECRET").ok())
    }

    /// [`Self::from_env`] with the session secret given (read from Secrets Manager).
    pub fn from_env_with_secret(secret: Option<String>) -> Self {
        let secret = secret
            .filter(|s| s.len() >= 32)
            .map(String::into_bytes)
            .unwrap_or_else(|| {
                tracing::warn!("SESSION_SECRET unset or shorter than 32 characters: sessions last only as long as this process");
                converger_core::secret::new_key()
            });
        let allow = std::env::var("ADMIN_IP_ALLOWLIST")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(|s| match Allowlist::parse(&s) {
                Ok(a) => a,
                Err(e) => {
                    // Refuse everyone rather than no one when the list cannot be read.
                    tracing::error!(error = %e, "ADMIN_IP_ALLOWLIST is invalid: the admin pages refuse every address");
                    Allowlist::default()
                }
            });
        Self {
            session_secret: secret,
            admin_allow: allow,
            secure_cookies: std::env::var("COOKIE_SECURE").map_or(true, |v| v != "false"),
            export_limit: std::env::var("EXPORT_LIMIT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(10_000),
        }
    }

    /// For the local runner and tests: a random secret, plain-HTTP cookies, no allowlist.
    pub fn local() -> Self {
        Self {
            session_secret: converger_core::secret::new_key(),
            admin_allow: None,
            secure_cookies: false,
            export_limit: 10_000,
        }
    }
}

/// The client's address as API Gateway saw it; the admin function sets it from the request
/// context, the local runner from the connection.
#[derive(Debug, Clone, Copy)]
pub struct SourceIp(pub IpAddr);

/// Whether the admin IP allowlist lets this request in: always when no list is configured;
/// otherwise only a request whose source address is known and listed.
pub fn admin_ip_allowed(state: &AppState, extensions: &axum::http::Extensions) -> bool {
    state.web.admin_allow.as_ref().is_none_or(|allow| {
        extensions
            .get::<SourceIp>()
            .is_some_and(|ip| allow.contains(ip.0))
    })
}

/// Hashes a password (argon2id, a random salt).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&converger_core::secret::new_key()[..16])
        .map_err(|e| e.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
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

fn prefix(realm: Realm) -> &'static str {
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
    fn csrf(&self, state: &AppState) -> String {
        self.session.csrf(&state.web.session_secret)
    }

    fn actor(&self) -> Actor {
        Actor {
            kind: match self.realm {
                Realm::Admin => ActorKind::Admin,
                Realm::Portal => ActorKind::TenantUser,
            },
            id: self.user.email.clone(),
        }
    }

    /// The tenant a portal user is limited to; `None` for operators.
    fn own_tenant(&self) -> Option<&TenantId> {
        match self.realm {
            Realm::Admin => None,
            Realm::Portal => self.user.tenant_id.as_ref(),
        }
    }

    fn can_act(&self) -> bool {
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
        let user = match state.pipeline.store.get_user(realm, &session.email).await {
            Ok(Some(u)) => u,
            Ok(None) => return Err(login()),
            Err(e) => return Err(page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())),
        };
        if realm == Realm::Portal && user.tenant_id.is_none() {
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

fn page_error(status: StatusCode, message: &str) -> Response {
    let body = html! {
        (DOCTYPE)
        html { head { title { "Converger" } style { (PreEscaped(CSS)) } }
            body { main { h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) } p.error id="page-error" { (message) } } } }
    };
    (status, axum::response::Html(body.into_string())).into_response()
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

fn forbidden() -> Response {
    page_error(StatusCode::FORBIDDEN, "Your role does not allow this.")
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2230}\
header{background:#1d2230;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}\
header a{color:#fff;text-decoration:none}header .who{margin-left:auto;opacity:.8}\
main{padding:16px}table{border-collapse:collapse;width:100%}\
th,td{border-bottom:1px solid #dde;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f3f4f8}.error{color:#a01818}.muted{color:#667}\
form.inline{display:inline}fieldset{border:1px solid #dde;margin:0 0 12px}\
pre{background:#f6f7fa;padding:6px;max-width:60em;overflow:auto;white-space:pre-wrap}\
.badge{padding:1px 6px;border-radius:8px;background:#eef}.failed{background:#fde2e2}\
.sent,.delivered,.read{background:#e0f5e6}\
table.fields{width:auto;margin-bottom:12px}.actions{margin:8px 0 12px;display:flex;gap:16px;align-items:center}\
td.changes .change{display:inline-block;margin-right:10px;word-break:break-all}table.fields th{width:11em}.flash{background:#fff7d6;padding:6px 10px}";

fn layout(state: &AppState, v: &Viewer, title: &str, content: Markup) -> Response {
    let p = prefix(v.realm);
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Converger" }
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    strong { "Converger " (if v.realm == Realm::Admin { "admin" } else { "portal" }) }
                    @if v.realm == Realm::Admin { a href="/admin" { "Dashboard" } }
                    a href={ (p) "/deliveries" } { "Deliveries" }
                    a href={ (p) "/channels" } { "Channels" }
                    @if v.realm == Realm::Admin { a href="/admin/tenants" { "Tenants" } }
                    a href={ (p) "/audit" } { "Audit log" }
                    span.who { (v.user.email) " (" (v.user.role) ")" }
                    form.inline method="post" action={ (p) "/logout" } {
                        input type="hidden" name="_csrf" value=(v.csrf(state));
                        button type="submit" { "Sign out" }
                    }
                }
                main { h1 { (title) } (content) }
            }
        }
    };
    axum::response::Html(body.into_string()).into_response()
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

async fn login_form(State(state): State<AppState>, req: Request) -> Response {
    let realm = realm_of(req.uri().path());
    login_page(&state, realm, &new_token(), None)
}

async fn login(State(state): State<AppState>, req: Request) -> Response {
    let realm = realm_of(req.uri().path());
    let pre = cookie(req.headers(), "cvg_pre").unwrap_or_default();
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
    let user = match state.pipeline.store.get_user(realm, &email).await {
        Ok(u) => u,
        Err(e) => return page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let ok = match &user {
        Some(u) => verify_password(&f.password, &u.password_hash),
        None => {
            let _ = verify_password(&f.password, DECOY_HASH);
            false
        }
    };
    let Some(user) = user.filter(|_| ok) else {
        tracing::info!(realm = realm.as_str(), "sign-in refused");
        return login_page(
            &state,
            realm,
            &new_token(),
            Some("Wrong email or password."),
        );
    };
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

async fn logout(State(state): State<AppState>, Posted { viewer: v, .. }: Posted) -> Response {
    let mut resp = Redirect::to(&format!("{}/login", prefix(v.realm))).into_response();
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, v.realm, cookie_name(v.realm), "", 0),
    );
    resp
}

// ------------------------------------------------------------------ deliveries

/// The deliveries page's filters, kept in the URL.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    /// Default `failed`; `any` for every status.
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    q: Option<String>,
    /// `newest` (default) or `oldest`.
    #[serde(default)]
    sort: Option<String>,
    /// The sort key to continue after (Load more).
    #[serde(default)]
    after: Option<String>,
}

fn nonempty(o: &Option<String>) -> Option<&str> {
    o.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl Filters {
    fn status(&self) -> Result<Option<DeliveryStatus>, String> {
        match nonempty(&self.status) {
            None => Ok(Some(DeliveryStatus::Failed)),
            Some("any") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e: converger_core::status::UnknownStatus| e.to_string()),
        }
    }

    /// The order (`queries` refuses a sort that is neither newest nor oldest).
    fn newest_first(&self) -> bool {
        converger_core::query::newest_first(self.sort.as_deref()).unwrap_or(true)
    }

    /// The query string of these filters (without `after` unless asked).
    fn query(&self, with_after: Option<&str>) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for (k, v) in [
            ("tenant", &self.tenant),
            ("channel", &self.channel),
            ("status", &self.status),
            ("from", &self.from),
            ("to", &self.to),
            ("q", &self.q),
            ("sort", &self.sort),
        ] {
            if let Some(v) = nonempty(v) {
                pairs.push((k, v));
            }
        }
        if let Some(a) = with_after {
            pairs.push(("after", a));
        }
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// The store queries these filters select, one per tenant in scope.
    async fn queries(
        &self,
        state: &AppState,
        v: &Viewer,
        limit: usize,
    ) -> Result<Vec<DeliveryQuery>, String> {
        converger_core::query::newest_first(self.sort.as_deref())?;
        let tenants = tenants_in_scope(state, v, nonempty(&self.tenant)).await?;
        let channel = nonempty(&self.channel)
            .map(ChannelId::parse)
            .transpose()
            .map_err(|e| e.to_string())?;
        let Search {
            activity,
            error_contains,
        } = Search::parse(self.q.as_deref());
        let mut from_key = nonempty(&self.from).map(day_start).transpose()?;
        let mut to_key = nonempty(&self.to).map(day_end).transpose()?;
        // Load more: the bound moves past the last row shown (keys are unique).
        if let Some(after) = nonempty(&self.after) {
            if self.newest_first() {
                to_key = Some(to_key.map_or(after.to_owned(), |t| t.min(after.to_owned())));
            } else {
                from_key = Some(from_key.map_or(after.to_owned(), |f| f.max(after.to_owned())));
            }
        }
        let status = self.status()?;
        Ok(tenants
            .into_iter()
            .map(|tenant| DeliveryQuery {
                tenant,
                status,
                channel: channel.clone(),
                from_key: from_key.clone(),
                to_key: to_key.clone(),
                error_contains: error_contains.clone(),
                activity: activity.clone(),
                newest_first: self.newest_first(),
                limit,
                after: None,
            })
            .collect())
    }

    /// One page (at most `limit` rows) over every tenant in scope, and the sort key the next
    /// page continues after (`None`: nothing follows). A tenant's query may stop early (its
    /// read budget spent on rows a filter dropped); rows past the point where the least-read
    /// tenant stopped wait for the next page, so no tenant's rows are skipped. A page can
    /// therefore be empty and still have a next one.
    async fn page(
        &self,
        state: &AppState,
        v: &Viewer,
        limit: usize,
    ) -> Result<(Vec<Delivery>, Option<String>), String> {
        let queries = self.queries(state, v, limit + 1).await?;
        let after = nonempty(&self.after).map(str::to_owned);
        let newest = self.newest_first();
        let pages = futures::future::join_all(
            queries
                .iter()
                .map(|q| state.pipeline.store.list_deliveries(q)),
        )
        .await;
        let mut rows = Vec::new();
        let mut bound: Option<String> = None;
        for p in pages {
            let p = p.map_err(|e| e.to_string())?;
            if let Some(c) = p.next {
                bound = Some(match bound {
                    None => c.sort_key,
                    Some(b) if newest => b.max(c.sort_key),
                    Some(b) => b.min(c.sort_key),
                });
            }
            rows.extend(p.items.into_iter().filter(|d| match &after {
                Some(a) if newest => d.sort_key() < *a,
                Some(a) => d.sort_key() > *a,
                None => true,
            }));
        }
        if let Some(b) = &bound {
            rows.retain(|d| {
                if newest {
                    d.sort_key() >= *b
                } else {
                    d.sort_key() <= *b
                }
            });
        }
        rows.sort_by_key(Delivery::sort_key);
        if newest {
            rows.reverse();
        }
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(Delivery::sort_key)
        } else {
            bound
        };
        Ok((rows, next))
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn channel_names(state: &AppState, rows: &[Delivery]) -> HashMap<ChannelId, String> {
    let mut names = HashMap::new();
    for d in rows {
        if !names.contains_key(&d.channel_id) {
            let name = match state.pipeline.channel(&d.channel_id).await {
                Ok(Some(c)) => c.name.clone(),
                _ => d.channel_id.to_string(),
            };
            names.insert(d.channel_id.clone(), name);
        }
    }
    names
}

const PAGE_ROWS: usize = 50;

async fn deliveries(
    State(state): State<AppState>,
    v: Viewer,
    Query(f): Query<Filters>,
) -> Response {
    let p = prefix(v.realm);
    let (rows, next) = match f.page(&state, &v, PAGE_ROWS).await {
        Ok(x) => x,
        Err(e) => {
            return page_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("Invalid filter: {e}"),
            );
        }
    };
    let names = channel_names(&state, &rows).await;
    let tenants = tenant_choices(&state, &v).await;
    let tenant_names: HashMap<&TenantId, &str> =
        tenants.iter().map(|t| (&t.id, t.name.as_str())).collect();
    // One tenant in scope (the portal's, or the one an operator chose): its channels by name.
    let channel_choices = if v.own_tenant().is_some() || nonempty(&f.tenant).is_some() {
        scoped_channels(&state, &v, nonempty(&f.tenant)).await.ok()
    } else {
        None
    };
    let status_value = nonempty(&f.status).unwrap_or("failed").to_owned();
    let csrf = v.csrf(&state);
    let back = f.query(None);
    let content = html! {
        form id="filters" method="get" action={ (p) "/deliveries" } {
            fieldset {
                @if v.realm == Realm::Admin {
                    label { "Tenant " select name="tenant" {
                        option value="" { "All tenants" }
                        @for t in tenants.iter() {
                            option value=(t.id) selected[nonempty(&f.tenant) == Some(t.id.as_str())] { (t.name) }
                        }
                    } } " "
                }
                @if let Some(choices) = &channel_choices {
                    label { "Channel " select name="channel" {
                        option value="" { "All channels" }
                        @for c in choices {
                            option value=(c.id) selected[nonempty(&f.channel) == Some(c.id.as_str())] { (c.name) }
                        }
                    } } " "
                } @else {
                    label { "Channel id " input name="channel" value=(nonempty(&f.channel).unwrap_or("")) size="36"; } " "
                }
                label { "Status " select name="status" {
                    @for s in ["failed", "pending", "paused", "sent", "delivered", "read", "any"] {
                        option value=(s) selected[status_value == s] { (s) }
                    }
                } } " "
                label { "From (UTC) " input type="date" name="from" value=(nonempty(&f.from).unwrap_or("")); } " "
                label { "To " input type="date" name="to" value=(nonempty(&f.to).unwrap_or("")); } " "
                label { "Search " input name="q" placeholder="activity id or error text" value=(nonempty(&f.q).unwrap_or("")); } " "
                label { "Sort " select name="sort" {
                    option value="newest" selected[f.newest_first()] { "newest first" }
                    option value="oldest" selected[!f.newest_first()] { "oldest first" }
                } } " "
                button type="submit" { "Apply" }
            }
        }
        div.actions {
            a id="export" href={ (p) "/deliveries/export?" (f.query(None)) } { "Export CSV" }
            @if v.can_act() && status_value == "failed" {
                " "
                form.inline method="post" action={ (p) "/deliveries/retry-all" } {
                    input type="hidden" name="_csrf" value=(csrf);
                    input type="hidden" name="back" value=(back);
                    @for (k, val) in [("tenant", &f.tenant), ("channel", &f.channel), ("from", &f.from), ("to", &f.to), ("q", &f.q)] {
                        @if let Some(val) = nonempty(val) { input type="hidden" name=(k) value=(val); }
                    }
                    button id="retry-all" type="submit" { "Retry all failed" }
                }
            }
        }
        table id="deliveries" {
            thead { tr {
                @if v.realm == Realm::Admin { th { "Tenant" } }
                th { "Channel" } th { "Activity" } th { "Status" } th { "Attempts" }
                th { "Retries" } th { "Last error" } th { "Changed (UTC)" } th { "" }
            } }
            tbody {
                @for d in &rows {
                    tr.delivery data-id=(d.id) data-status=(d.status) {
                        @if v.realm == Realm::Admin {
                            td title=(d.tenant_id) { (tenant_names.get(&d.tenant_id).copied().unwrap_or(d.tenant_id.as_str())) }
                        }
                        td { (names.get(&d.channel_id).cloned().unwrap_or_default()) }
                        td { a.open href={ (p) "/deliveries/" (d.id) "?" (back) } { code { (d.activity_id) } } }
                        td { span class={ "badge " (d.status) } { (d.status) } }
                        td { (d.attempts) }
                        td { (d.retry_count)
                            @if let Some(by) = &d.retried_by { br; span.muted { "by " (by) } }
                            @if let Some(at) = &d.retried_at { br; span.muted title=(at) { (short_time(at)) } } }
                        td.error { (d.last_error.clone().unwrap_or_default()) }
                        td { span.muted title=(d.updated_at) { (short_time(&d.updated_at)) } }
                        td {
                            @if v.can_act() && d.status == DeliveryStatus::Failed {
                                form.inline method="post" action={ (p) "/deliveries/" (d.id) "/retry" } {
                                    input type="hidden" name="_csrf" value=(csrf);
                                    input type="hidden" name="back" value=(back);
                                    button.retry type="submit" { "Retry" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @match (&next, rows.is_empty()) {
            (None, true) => { p.muted id="empty" { "No deliveries match." } }
            (Some(n), true) => {
                p.muted id="searched" { "No matches among the rows read so far." }
                p { a id="load-more" href={ (p) "/deliveries?" (f.query(Some(n))) } { "Search further" } }
            }
            (Some(n), false) => {
                p { a id="load-more" href={ (p) "/deliveries?" (f.query(Some(n))) } { "Load more" } }
            }
            (None, false) => {}
        }
    };
    layout(&state, &v, "Deliveries", content)
}

/// `2026-11-30T13:21:21.157153Z` as `2026-11-30 13:21:21`.
fn short_time(t: &str) -> String {
    t.get(..19).unwrap_or(t).replacen('T', " ", 1)
}

/// The attempts one delivery page shows (the API pages through all of them).
const PAGE_ATTEMPTS: usize = 100;

/// One delivery: its fields, its attempt log, a redacted preview of its activity's payload
/// and, for a failed one, the Retry button. The query string is the list's filters, kept for
/// the way back.
async fn delivery_page(
    State(state): State<AppState>,
    v: Viewer,
    Path(id): Path<String>,
    axum::extract::RawQuery(back): axum::extract::RawQuery,
) -> Response {
    let p = prefix(v.realm);
    let back = back.unwrap_or_default();
    let found = match DeliveryId::parse(&id) {
        Ok(id) => {
            state
                .pipeline
                .store
                .delivery_in(Scope::of(v.own_tenant()), &id)
                .await
        }
        Err(_) => Ok(None),
    };
    let d = match found {
        Ok(Some(d)) => d,
        Ok(_) => return page_error(StatusCode::NOT_FOUND, "No such delivery."),
        Err(e) => return page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let (attempts, more) = match state.pipeline.attempt_log(&d, None, PAGE_ATTEMPTS).await {
        Ok(x) => x,
        Err(e) => return page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let channel = state.pipeline.channel(&d.channel_id).await.ok().flatten();
    let payload = match state.pipeline.store.get_activity(&d.activity_id).await {
        Ok(Some(a)) => serde_json::to_string_pretty(&redact(&a.payload)).unwrap_or_default(),
        Ok(None) => "(the activity is no longer stored)".to_owned(),
        Err(e) => format!("(the activity could not be read: {e})"),
    };
    let tenant_name = match v.realm {
        Realm::Admin => state
            .pipeline
            .store
            .get_tenant(&d.tenant_id)
            .await
            .ok()
            .flatten()
            .map(|t| t.name),
        Realm::Portal => None,
    };
    let csrf = v.csrf(&state);
    let content = html! {
        p { a id="back" href={ (p) "/deliveries?" (back) } { "← Back to the list" } }
        table.fields id="delivery" data-id=(d.id) {
            tr { th { "Delivery" } td { code { (d.id) } } }
            tr { th { "Status" } td { span id="status" class={ "badge " (d.status) } { (d.status) }
                @if d.handed_off { " " span.muted { "(handed off, waiting for the client's acknowledgement)" } } } }
            @if v.realm == Realm::Admin {
                tr { th { "Tenant" } td { (tenant_name.unwrap_or_default()) " " code.muted { (d.tenant_id) } } }
            }
            tr { th { "Channel" } td {
                (channel.as_ref().map(|c| c.name.as_str()).unwrap_or("(deleted)")) " "
                code.muted { (d.channel_id) }
                @if let Some(c) = &channel { " " span.muted { (c.kind) } }
            } }
            tr { th { "Activity" } td { code { (d.activity_id) } " in conversation " code { (d.conversation_id) } } }
            tr { th { "Attempts" } td id="attempt-count" { (d.attempts) } }
            tr { th { "Retries" } td { (d.retry_count)
                @if let Some(by) = &d.retried_by { ", last by " (by) }
                @if let Some(at) = &d.retried_at { " at " (short_time(at)) } } }
            tr { th { "Last error" } td.error id="last-error" { (d.last_error.clone().unwrap_or_default()) } }
            @if let Some(m) = &d.provider_message_id {
                tr { th { "Provider message id" } td { code { (m) } } }
            }
            @if d.status == DeliveryStatus::Pending && !d.handed_off {
                tr { th { "Next attempt" } td { (short_time(&time::ms_to_rfc3339(d.next_attempt_at))) } }
            }
            tr { th { "Created" } td { (short_time(&d.created_at)) } }
            tr { th { "Last change" } td { (short_time(&d.updated_at)) } }
        }
        @if v.can_act() && d.status == DeliveryStatus::Failed {
            form method="post" action={ (p) "/deliveries/" (d.id) "/retry" } {
                input type="hidden" name="_csrf" value=(csrf);
                input type="hidden" name="back" value=(back);
                button.retry type="submit" { "Retry" }
            }
        }
        h2 { "Attempts" }
        table id="attempts" {
            thead { tr { th { "#" } th { "Started (UTC)" } th { "Duration" } th { "HTTP status" }
                         th { "Error" } th { "Response" } th { "Trigger" } th { "Next retry" } } }
            tbody { @for e in &attempts {
                tr.attempt {
                    td { (e.attempt) } td { (short_time(&e.started_at)) } td { (e.duration_ms) " ms" }
                    td { (e.status_code.map(|s| s.to_string()).unwrap_or_default()) }
                    td.error { (e.error.clone().unwrap_or_default()) }
                    td { @if let Some(r) = &e.response_snippet { code { (r) } } }
                    td { (e.trigger) }
                    td { (e.next_retry_at.as_deref().map(short_time).unwrap_or_default()) }
                }
            } }
        }
        @if attempts.is_empty() { p.muted { "No attempts yet." } }
        @if more { p.muted { "Older attempts: GET /api/v1/deliveries/" (d.id) "/attempts." } }
        h2 { "Payload preview" }
        p.muted { "Keys that look secret are shown as [REDACTED]." }
        pre.payload id="payload" { (payload) }
    };
    layout(&state, &v, "Delivery", content)
}

async fn retry_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let Ok(id) = DeliveryId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such delivery.");
    };
    if let Err(e) = state
        .pipeline
        .replay_one(v.own_tenant(), &id, &v.actor())
        .await
    {
        return replay_failure(e);
    }
    let back = form.get("back").cloned().unwrap_or_default();
    Redirect::to(&format!("{}/deliveries?{back}", prefix(v.realm))).into_response()
}

fn replay_failure(e: ReplayError) -> Response {
    match e {
        ReplayError::NotFound => page_error(StatusCode::NOT_FOUND, "No such delivery or channel."),
        ReplayError::ChannelInactive => page_error(
            StatusCode::BAD_REQUEST,
            "Channel is inactive: enable it before retrying its deliveries.",
        ),
        e @ ReplayError::NotFailed(_) => page_error(StatusCode::CONFLICT, &e.to_string()),
        ReplayError::Store(e) => page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn retry_all(State(state): State<AppState>, Posted { viewer: v, form }: Posted) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let f = Filters {
        tenant: form.get("tenant").cloned(),
        channel: form.get("channel").cloned(),
        status: Some("failed".into()),
        from: form.get("from").cloned(),
        to: form.get("to").cloned(),
        q: form.get("q").cloned(),
        sort: Some("oldest".into()),
        after: None,
    };
    let queries = match f.queries(&state, &v, 500).await {
        Ok(q) => q,
        Err(e) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, &e),
    };
    let mut retried = 0;
    for q in queries {
        match state.pipeline.replay_matching(q, &v.actor()).await {
            Ok(r) => retried += r.retried,
            // A channel filter over every tenant: the tenants that do not own it.
            Err(ReplayError::NotFound) => {}
            Err(e) => return replay_failure(e),
        }
    }
    tracing::info!(retried, actor = %v.actor(), "retry all failed");
    let back = form.get("back").cloned().unwrap_or_default();
    Redirect::to(&format!("{}/deliveries?{back}", prefix(v.realm))).into_response()
}

/// Rows one export step reads (the store's largest page).
const EXPORT_PAGE: usize = 1000;

/// Records as CSV text (quoted where needed, CRLF line ends), each cell first made safe to
/// open in a spreadsheet (`csv_safe`).
fn csv_text(records: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    for r in records {
        if let Err(e) = w.write_record(r.iter().map(|c| csv_safe(c))) {
            tracing::warn!(error = %e, "CSV record not written");
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// The CSV export: the rows the filters select (newest first by default), at most
/// `export_limit`, streamed page by page; no payloads.
async fn export(State(state): State<AppState>, v: Viewer, Query(f): Query<Filters>) -> Response {
    if let Err(e) = f.queries(&state, &v, 1).await {
        return page_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Invalid filter: {e}"),
        );
    }
    let limit = state.web.export_limit;
    let header_line = csv_text([EXPORT_COLUMNS.map(str::to_owned).to_vec()]);
    let stream = futures::stream::unfold((Some(f), 0usize, false), move |(f, sent, done)| {
        let state = state.clone();
        let v_realm = v.realm;
        let user = v.user.clone();
        let session = v.session.clone();
        async move {
            let f = f?;
            if done || sent >= limit {
                return None;
            }
            let v = Viewer {
                realm: v_realm,
                user,
                session,
            };
            let (rows, next) = match f.page(&state, &v, EXPORT_PAGE.min(limit - sent)).await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "export stopped");
                    return None;
                }
            };
            let names = channel_names(&state, &rows).await;
            let chunk = csv_text(rows.iter().map(|d| {
                vec![
                    d.id.to_string(),
                    d.tenant_id.to_string(),
                    d.channel_id.to_string(),
                    names.get(&d.channel_id).cloned().unwrap_or_default(),
                    d.activity_id.to_string(),
                    d.status.to_string(),
                    d.attempts.to_string(),
                    d.last_error.clone().unwrap_or_default(),
                    d.retry_count.to_string(),
                    d.retried_by.clone().unwrap_or_default(),
                    d.retried_at.clone().unwrap_or_default(),
                    d.created_at.clone(),
                    d.updated_at.clone(),
                ]
            }));
            let n = rows.len();
            let last = next.is_none();
            let next_f = next.map(|after| Filters {
                after: Some(after),
                ..f
            });
            Some((Ok::<_, std::io::Error>(chunk), (next_f, sent + n, last)))
        }
    });
    let body =
        futures::stream::once(async move { Ok::<_, std::io::Error>(header_line) }).chain(stream);
    use futures::StreamExt;
    Response::builder()
        .header(header::CONTENT_TYPE, "text/csv; charset=utf-8")
        .header(
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"deliveries.csv\"",
        )
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| page_error(StatusCode::INTERNAL_SERVER_ERROR, "export failed"))
}

// ------------------------------------------------------------------ channels

/// The tenants an operator's tenant selector offers (none in the portal).
async fn tenant_choices(
    state: &AppState,
    v: &Viewer,
) -> std::sync::Arc<Vec<converger_store::Tenant>> {
    match v.realm {
        Realm::Admin => state.tenants().await.unwrap_or_default(),
        Realm::Portal => Default::default(),
    }
}

/// The tenants a page shows: a portal user's own, whatever the URL says; for operators the
/// one the URL names, else every tenant.
async fn tenants_in_scope(
    state: &AppState,
    v: &Viewer,
    asked: Option<&str>,
) -> Result<Vec<TenantId>, String> {
    if let Some(t) = v.own_tenant() {
        return Ok(vec![t.clone()]);
    }
    match asked.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => Ok(vec![TenantId::parse(t).map_err(|e| e.to_string())?]),
        None => Ok(state
            .tenants()
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .map(|t| t.id.clone())
            .collect()),
    }
}

async fn scoped_channels(
    state: &AppState,
    v: &Viewer,
    tenant: Option<&str>,
) -> Result<Vec<Channel>, String> {
    let mut out = Vec::new();
    for t in tenants_in_scope(state, v, tenant).await? {
        out.extend(
            state
                .pipeline
                .store
                .list_channels(&t)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(out)
}

/// A channel's Delivery column: its flow item's breaker state is all it takes.
async fn delivery_label(state: &AppState, c: &Channel) -> String {
    match state.pipeline.store.get_flow(&c.id).await {
        Ok(f) => f.circuit_state.delivery_column().to_owned(),
        Err(_) => "unknown".to_owned(),
    }
}

#[derive(Deserialize, Default)]
struct TenantQuery {
    #[serde(default)]
    tenant: Option<String>,
}

async fn channels(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let p = prefix(v.realm);
    let list = match scoped_channels(&state, &v, q.tenant.as_deref()).await {
        Ok(l) => l,
        Err(e) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, &e),
    };
    let labels = futures::future::join_all(list.iter().map(|c| delivery_label(&state, c))).await;
    let health =
        futures::future::join_all(list.iter().map(|c| state.pipeline.channel_health(c, 1))).await;
    let csrf = v.csrf(&state);
    let content = html! {
        table id="channels" {
            thead { tr { th { "Name" } th { "Type" } @if v.realm == Realm::Admin { th { "Tenant" } } th { "Active" } th { "Health" } th { "Delivery" } th { "" } } }
            tbody { @for ((c, label), h) in list.iter().zip(&labels).zip(&health) {
                tr.channel data-id=(c.id) {
                    td { (c.name) br; code.muted { (c.id) } }
                    td { (c.kind) }
                    @if v.realm == Realm::Admin { td { (c.tenant_id) } }
                    td { (if c.active { "yes" } else { "no" }) }
                    td { (h.as_ref().ok().and_then(|h| h.get("status")).and_then(Value::as_str).unwrap_or("unknown")) }
                    td.delivery-state data-channel=(c.id) { (label) }
                    td { @if v.can_act() {
                        @let paused = label == "Paused";
                        form.inline.toggle method="post" action={ (p) "/channels/" (c.id) (if paused { "/resume" } else { "/pause" }) } {
                            input type="hidden" name="_csrf" value=(csrf);
                            @if let Some(t) = q.tenant.as_deref().filter(|t| !t.is_empty()) { input type="hidden" name="tenant" value=(t); }
                            button.toggle type="submit" { (if paused { "Resume deliveries" } else { "Pause deliveries" }) }
                        }
                    } }
                }
            } }
        }
        @if list.is_empty() { p.muted { "No channels." } }
        script { (PreEscaped(CHANNELS_SCRIPT.replace("STATES_URL", &format!(
            "{p}/channels/states{}",
            q.tenant.as_deref().filter(|t| !t.is_empty()).map(|t| format!("?tenant={}", urlencode(t))).unwrap_or_default()
        )))) }
    };
    layout(&state, &v, "Channels", content)
}

/// The channels page's live refresh: every 2 s it reads the Delivery column's values and
/// updates each row's cell and its Pause/Resume button.
const CHANNELS_SCRIPT: &str = r#"setInterval(async () => {
  try {
    const r = await fetch('STATES_URL');
    if (!r.ok) return;
    const states = await r.json();
    for (const row of document.querySelectorAll('tr.channel')) {
      const v = states[row.dataset.id];
      if (!v) continue;
      row.querySelector('td.delivery-state').textContent = v;
      const form = row.querySelector('form.toggle');
      if (!form) continue;
      const paused = v === 'Paused';
      form.action = form.action.replace(/\/(pause|resume)$/, paused ? '/resume' : '/pause');
      form.querySelector('button').textContent = paused ? 'Resume deliveries' : 'Pause deliveries';
    }
  } catch (e) {}
}, 2000);"#;

/// The Delivery column's values, polled by the channels page.
async fn channel_states(
    State(state): State<AppState>,
    v: Viewer,
    Query(q): Query<TenantQuery>,
) -> Response {
    let list = match scoped_channels(&state, &v, q.tenant.as_deref()).await {
        Ok(l) => l,
        Err(e) => {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                axum::Json(json!({"error": e})),
            )
                .into_response();
        }
    };
    let labels = futures::future::join_all(list.iter().map(|c| delivery_label(&state, c))).await;
    let map: serde_json::Map<String, Value> = list
        .iter()
        .zip(labels)
        .map(|(c, l)| (c.id.to_string(), Value::String(l)))
        .collect();
    axum::Json(Value::Object(map)).into_response()
}

async fn pause_or_resume(
    State(state): State<AppState>,
    Path((id, action)): Path<(String, String)>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.can_act() {
        return forbidden();
    }
    let channel = match ChannelId::parse(&id) {
        Ok(id) => state
            .pipeline
            .store
            .channel_in(Scope::of(v.own_tenant()), &id)
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    let Some(channel) = channel else {
        return page_error(StatusCode::NOT_FOUND, "No such channel.");
    };
    let r = match action.as_str() {
        "pause" => state.pipeline.pause(&channel, &v.actor()).await,
        "resume" => state.pipeline.resume(&channel, &v.actor()).await,
        _ => return page_error(StatusCode::NOT_FOUND, "No such action."),
    };
    if let Err(e) = r {
        return page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
    }
    // Back to the list the button was on (an admin's tenant filter kept).
    let back = match form.get("tenant").filter(|t| !t.is_empty()) {
        Some(t) if v.realm == Realm::Admin => format!("?tenant={}", urlencode(t)),
        _ => String::new(),
    };
    Redirect::to(&format!("{}/channels{back}", prefix(v.realm))).into_response()
}

// ------------------------------------------------------------------ dashboard

/// Counts one status's deliveries of one tenant, up to `cap`.
/// How far the dashboard counts each tenant's deliveries of one status.
const COUNT_CAP: u64 = 10_000;

async fn dashboard(State(state): State<AppState>, v: Viewer) -> Response {
    if v.realm != Realm::Admin {
        return Redirect::to("/portal/deliveries").into_response();
    }
    let tenants = state.tenants().await.unwrap_or_default();
    // Every tenant's count of every status, 32 queries at a time, in order.
    let pairs: Vec<(TenantId, DeliveryStatus)> = DeliveryStatus::ALL
        .iter()
        .flat_map(|st| tenants.iter().map(move |t| (t.id.clone(), *st)))
        .collect();
    let counts: Vec<_> = {
        use futures::StreamExt;
        let store = state.pipeline.store.clone();
        futures::stream::iter(pairs)
            .map(move |(t, st)| {
                let store = store.clone();
                async move { store.count_by_status(&t, st, COUNT_CAP).await }
            })
            .buffered(32)
            .collect()
            .await
    };
    let per_status = tenants.len().max(1);
    let by_status: Vec<(DeliveryStatus, u64, bool)> = DeliveryStatus::ALL
        .iter()
        .zip(counts.chunks(per_status).chain(std::iter::repeat(&[][..])))
        .map(|(st, counts)| {
            let counts: Vec<u64> = counts.iter().map(|c| *c.as_ref().unwrap_or(&0)).collect();
            // A tenant counted to the cap has more: the total is shown as "at least".
            let capped = counts.iter().any(|c| *c >= COUNT_CAP);
            (*st, counts.iter().sum(), capped)
        })
        .collect();
    // A failed read is shown, not hidden behind an empty table.
    let (depths, depth_error) = match state.pipeline.queue.depths().await {
        Ok(d) => (d, None),
        Err(e) => {
            tracing::warn!(error = %e, "queue depths unavailable");
            (Vec::new(), Some(e.to_string()))
        }
    };
    let mut channels = Vec::new();
    for t in tenants.iter() {
        channels.extend(
            state
                .pipeline
                .store
                .list_channels(&t.id)
                .await
                .unwrap_or_default(),
        );
    }
    let labels =
        futures::future::join_all(channels.iter().map(|c| delivery_label(&state, c))).await;
    let health =
        futures::future::join_all(channels.iter().map(|c| state.pipeline.channel_health(c, 1)))
            .await;
    let mut by_health: std::collections::BTreeMap<String, usize> = Default::default();
    for h in &health {
        let s = h
            .as_ref()
            .ok()
            .and_then(|h| h.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        *by_health.entry(s.to_owned()).or_default() += 1;
    }
    let open: Vec<(&Channel, &String)> = channels
        .iter()
        .zip(&labels)
        .filter(|(_, l)| l.as_str() != "Flowing")
        .collect();
    let failed = by_status
        .iter()
        .find(|(s, _, _)| *s == DeliveryStatus::Failed)
        .map_or(0, |(_, n, _)| *n);
    let content = html! {
        p { "Failed deliveries: " strong id="failed-count" { (failed) } " · "
            a href="/admin/deliveries?status=failed" { "see them" } }
        h2 { "Deliveries by status" }
        table id="by-status" { tr { @for (s, _, _) in &by_status { th { (s) } } }
                          tr { @for (_, n, capped) in &by_status { td { (n) @if *capped { "+" } } } } }
        h2 { "Queues" }
        @if let Some(e) = &depth_error { p.error id="queues-error" { "Queue depths unavailable: " (e) } }
        table id="queues" { tr { th { "Queue" } th { "Visible" } th { "Delayed" } th { "In flight" } }
            @for d in &depths { tr { td { (d.queue) } td { (d.visible) } td { (d.delayed) } td { (d.in_flight) } } } }
        h2 { "Channels not flowing" }
        @if open.is_empty() { p.muted { "Every channel is flowing." } }
        ul id="not-flowing" { @for (c, l) in &open { li { (c.name) " (" (c.tenant_id) "): " (l) } } }
        h2 { "Channels by health" }
        table id="by-health" { @for (s, n) in &by_health { tr { th { (s) } td { (n) } } } }
    };
    layout(&state, &v, "Dashboard", content)
}

// ------------------------------------------------------------------ tenants

async fn tenants(State(state): State<AppState>, v: Viewer) -> Response {
    tenants_page(&state, &v, None).await
}

async fn tenants_page(state: &AppState, v: &Viewer, flash: Option<Markup>) -> Response {
    if v.realm != Realm::Admin {
        return forbidden();
    }
    let list = state
        .pipeline
        .store
        .list_tenants()
        .await
        .unwrap_or_default();
    let manage = v.user.role.can_manage_tenants(v.realm);
    let csrf = v.csrf(state);
    let content = html! {
        @if let Some(f) = flash { p.flash id="flash" { (f) } }
        @if manage {
            form id="new-tenant" method="post" action="/admin/tenants" {
                input type="hidden" name="_csrf" value=(csrf);
                fieldset { legend { "New tenant" }
                    label { "Name " input name="name" required; } " "
                    label { "Tier " select name="tier" { @for t in Tier::ALL { option value=(t.as_str()) selected[t == Tier::Default] { (t.as_str()) } } } } " "
                    button type="submit" { "Create" }
                }
            }
        }
        table id="tenants" {
            thead { tr { th { "Name" } th { "Id" } th { "Tier" } th { "Alert webhook" } th { "" } } }
            tbody { @for t in &list { tr.tenant data-id=(t.id) {
                td { (t.name) } td { code { (t.id) } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) } {
                        input type="hidden" name="_csrf" value=(csrf);
                        select name="tier" { @for tier in Tier::ALL { option value=(tier.as_str()) selected[tier == t.tier] { (tier.as_str()) } } }
                        button type="submit" { "Set tier" }
                    }
                } @else { (t.tier.as_str()) } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) } {
                        input type="hidden" name="_csrf" value=(csrf);
                        input name="alert_webhook_url" value=(t.alert_webhook_url.clone().unwrap_or_default()) placeholder="https://..." size="30";
                        button type="submit" { "Save" }
                    }
                } @else { (t.alert_webhook_url.clone().unwrap_or_default()) } }
                td { @if manage {
                    form.inline method="post" action={ "/admin/tenants/" (t.id) "/rotate-key" } {
                        input type="hidden" name="_csrf" value=(csrf);
                        button type="submit" { "Rotate API key" }
                    }
                } }
            } } }
        }
    };
    layout(state, v, "Tenants", content)
}

fn tenant_failure(e: TenantError) -> Response {
    match e {
        TenantError::Invalid(m) | TenantError::InvalidAlertUrl(m) => {
            page_error(StatusCode::UNPROCESSABLE_ENTITY, &m)
        }
        TenantError::Store(e) => page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn create_tenant(
    State(state): State<AppState>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let name = form.get("name").map(|s| s.trim()).unwrap_or_default();
    let tier: Tier = form
        .get("tier")
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    match state.pipeline.create_tenant(name, tier).await {
        Ok((tenant, key)) => {
            state.forget_tenants();
            tenants_page(&state, &v, Some(html! {
                "Tenant " strong { (tenant.name) } " created. Its API key (shown only now): " code id="api-key" { (key) }
            }))
            .await
        }
        Err(e) => tenant_failure(e),
    }
}

async fn update_tenant(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, form }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let Ok(id) = TenantId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such tenant.");
    };
    let tier = match form.get("tier").map(|t| t.parse::<Tier>()).transpose() {
        Ok(t) => t,
        Err(m) => return page_error(StatusCode::UNPROCESSABLE_ENTITY, &m),
    };
    // An empty URL field removes the alert webhook.
    let url = form
        .get("alert_webhook_url")
        .map(|u| Some(u.trim()).filter(|u| !u.is_empty()));
    state.forget_tenants();
    match state.pipeline.update_tenant(&id, tier, url).await {
        Ok(Some(_)) => Redirect::to("/admin/tenants").into_response(),
        Ok(None) => page_error(StatusCode::NOT_FOUND, "No such tenant."),
        Err(e) => tenant_failure(e),
    }
}

async fn rotate_key(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { viewer: v, .. }: Posted,
) -> Response {
    if !v.user.role.can_manage_tenants(v.realm) {
        return forbidden();
    }
    let Ok(id) = TenantId::parse(&id) else {
        return page_error(StatusCode::NOT_FOUND, "No such tenant.");
    };
    match state.pipeline.rotate_api_key(&id).await {
        Ok(Some(key)) => {
            tracing::info!(tenant_id = %id, actor = %v.actor(), "API key rotated");
            tenants_page(&state, &v, Some(html! {
                "New API key for " code { (id) } " (shown only now; the old one stops working): " code id="api-key" { (key) }
            }))
            .await
        }
        Ok(None) => page_error(StatusCode::NOT_FOUND, "No such tenant."),
        Err(e) => page_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

// ------------------------------------------------------------------ audit log

async fn audit(State(state): State<AppState>, v: Viewer, Query(q): Query<TenantQuery>) -> Response {
    let tenants = tenant_choices(&state, &v).await;
    let tenant: Option<TenantId> = match v.own_tenant() {
        Some(t) => Some(t.clone()),
        None => q
            .tenant
            .as_deref()
            .and_then(|t| TenantId::parse(t).ok())
            .or_else(|| tenants.first().map(|t| t.id.clone())),
    };
    let entries = match &tenant {
        Some(t) => state
            .pipeline
            .store
            .list_audit(t, 200, None)
            .await
            .map(|l| l.items)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let content = html! {
        @if v.realm == Realm::Admin {
            form method="get" action="/admin/audit" {
                label { "Tenant " select name="tenant" {
                    @for t in tenants.iter() { option value=(t.id) selected[tenant.as_ref() == Some(&t.id)] { (t.name) } }
                } } " " button type="submit" { "Show" }
            }
        }
        table id="audit" {
            thead { tr { th { "When (UTC)" } th { "Actor" } th { "Action" } th { "Resource" } th { "Changes" } } }
            tbody { @for e in &entries { tr.entry {
                td title=(e.at) { (short_time(&e.at)) } td { (e.actor.to_string()) } td { (e.action) }
                td { (e.resource_type) " "
                    @if e.resource_type == "delivery" {
                        a href={ (prefix(v.realm)) "/deliveries/" (e.resource_id) } { code { (e.resource_id) } }
                    } @else { code { (e.resource_id) } } }
                td.changes { @match e.changes.as_object() {
                    Some(fields) => { @for (k, val) in fields {
                        span.change { span.muted { (k) ": " } (match val { Value::String(s) => s.clone(), other => other.to_string() }) } " "
                    } }
                    None => { code { (e.changes.to_string()) } }
                } }
            } } }
        }
        @if entries.is_empty() { p.muted { "No entries." } }
    };
    layout(&state, &v, "Audit log", content)
}

// ------------------------------------------------------------------ router

/// The pages of both realms.
pub fn router(state: AppState) -> Router {
    let realm_routes = |p: &str| {
        Router::new()
            .route(&format!("{p}/login"), get(login_form).post(login))
            .route(&format!("{p}/logout"), post(logout))
            .route(&format!("{p}/deliveries"), get(deliveries))
            .route(&format!("{p}/deliveries/export"), get(export))
            .route(&format!("{p}/deliveries/retry-all"), post(retry_all))
            .route(&format!("{p}/deliveries/{{id}}"), get(delivery_page))
            .route(&format!("{p}/deliveries/{{id}}/retry"), post(retry_one))
            .route(&format!("{p}/channels"), get(channels))
            .route(&format!("{p}/channels/states"), get(channel_states))
            .route(
                &format!("{p}/channels/{{id}}/{{action}}"),
                post(pause_or_resume),
            )
            .route(&format!("{p}/audit"), get(audit))
    };
    let admin = realm_routes("/admin")
        .route("/admin", get(dashboard))
        .route("/admin/tenants", get(tenants).post(create_tenant))
        .route("/admin/tenants/{id}", post(update_tenant))
        .route("/admin/tenants/{id}/rotate-key", post(rotate_key))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            admin_allowlist,
        ));
    let portal = realm_routes("/portal").route(
        "/portal",
        get(|| async { Redirect::to("/portal/deliveries") }),
    );
    admin.merge(portal).with_state(state)
}

/// Creates a user (the admin API and the local runner use it).
/// Why a user was not created.
#[derive(Debug, thiserror::Error)]
pub enum NewUserError {
    #[error("{0}")]
    Invalid(String),
    #[error("a user with this email exists")]
    Exists,
    #[error(transparent)]
    Store(converger_store::StoreError),
}

pub async fn create_user(
    state: &AppState,
    realm: Realm,
    email: &str,
    password: &str,
    role: Role,
    tenant: Option<TenantId>,
) -> Result<User, NewUserError> {
    let email = converger_core::web::check_new_user(realm, email, password, role, tenant.is_some())
        .map_err(NewUserError::Invalid)?;
    let user = User {
        realm,
        email,
        role,
        tenant_id: tenant,
        password_hash: hash_password(password).map_err(NewUserError::Invalid)?,
        created_at: time::now_rfc3339(),
    };
    match state.pipeline.store.create_user(&user).await {
        Ok(()) => Ok(user),
        Err(converger_store::StoreError::Conflict(_)) => Err(NewUserError::Exists),
        Err(e) => Err(NewUserError::Store(e)),
    }
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

    #[test]
    fn csv_cells_are_quoted_and_made_safe() {
        let text = csv_text([
            vec!["id".into(), "name".into()],
            vec!["=HYPERLINK(\"x\")".into(), "a,b".into()],
            vec!["@sum".into(), "plain".into()],
        ]);
        assert_eq!(
            text,
            "id,name\r\n\"'=HYPERLINK(\"\"x\"\")\",\"a,b\"\r\n'@sum,plain\r\n"
        );
    }

    #[test]
    fn filters_round_trip_through_the_url() {
        let f = Filters {
            q: Some("a b&c=d".into()),
            status: Some("any".into()),
            ..Filters::default()
        };
        assert_eq!(f.query(Some("k#1")), "status=any&q=a+b%26c%3Dd&after=k%231");
    }
}
