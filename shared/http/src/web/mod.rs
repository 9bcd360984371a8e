//! The web pages: the operators' admin (`/admin`) and the tenants' portal (`/portal`),
//! server-rendered (maud), with a few lines of JavaScript for the live Delivery column.
//!
//! Security: argon2 password hashes; signed HttpOnly SameSite=Strict session cookies, one per
//! realm and scoped to its path; a CSRF token bound to the session in every form, checked on
//! every POST; the admin IP allowlist (`ADMIN_IP_ALLOWLIST`, checked against API Gateway's
//! source IP); the portal is always limited to the user's tenant, whatever the URL says.
//! The rules (roles, sessions, redaction, CSV cells) are in `converger_core::web`.

mod audit;
mod channels;
mod chart;
mod conversations;
mod dashboard;
mod deliveries;
mod event_types;
mod export;
mod filters;
mod layout;
mod page;
mod scope;
mod session;
mod tenants;
mod usage;

pub use filters::Filters;
pub use session::{Posted, Viewer, admin_allowlist, hash_password};

use audit::audit;
use channels::{channel_states, channels, pause_or_resume};
use conversations::{conversation_page, conversation_states, find_conversation};
use dashboard::dashboard;
use deliveries::{deliveries, delivery_page, retry_all, retry_one};
use event_types::event_types;
use export::export;
use session::{login, login_form, logout};
use tenants::{create_tenant, rotate_key, tenants, update_tenant};
use usage::{channel_charts, usage_page};

use crate::AppState;
use axum::Router;
use axum::response::Redirect;
use axum::routing::{get, post};
use converger_core::TenantId;
use converger_core::net::Allowlist;
use converger_core::settings::{self, SettingError};
use converger_core::web::{Realm, Role};
use converger_ports::User;
use std::net::IpAddr;
use std::sync::Arc;

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
    /// Where the pages' scripts connect to the live stream (`wss://.../prod`, from
    /// `WEBSOCKET_MANAGEMENT_URL`); `None`: the pages poll only.
    pub stream_url: Option<String>,
}

/// The WebSocket URL clients connect to, from the management endpoint of the same stage
/// (`https://{api}.execute-api.../prod` -> `wss://...`; a plain-HTTP local gateway -> `ws://`).
pub fn stream_url_of(management_url: &str) -> Option<String> {
    if let Some(rest) = management_url.strip_prefix("https://") {
        Some(format!("wss://{rest}"))
    } else {
        management_url
            .strip_prefix("http://")
            .map(|rest| format!("ws://{rest}"))
    }
}

impl WebConfig {
    /// The pages' settings from this process's environment, with the session secret given
    /// (read from Secrets Manager and checked by `core::secret::session_secret`).
    pub fn from_env_with_secret(secret: Option<String>) -> Result<Self, SettingError> {
        Self::from_vars(secret, |k| std::env::var(k).ok())
    }

    /// The pages' settings from `var`, each read by its declaration in `core::settings`: an
    /// allowlist that does not parse, or a bad flag or number, stops the start naming it.
    pub fn from_vars(
        secret: Option<String>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingError> {
        let env = settings::Env::new(var);
        let secret = secret.map(String::into_bytes).unwrap_or_else(|| {
            tracing::warn!("SESSION_SECRET unset: sessions last only as long as this process");
            converger_core::secret::new_key()
        });
        Ok(Self {
            session_secret: secret,
            admin_allow: env.parsed(&settings::ADMIN_IP_ALLOWLIST, Allowlist::parse)?,
            secure_cookies: env.flag(&settings::COOKIE_SECURE)?.unwrap_or(true),
            export_limit: env.number(&settings::EXPORT_LIMIT)?.unwrap_or(10_000),
            stream_url: env
                .text(&settings::WEBSOCKET_MANAGEMENT_URL)
                .as_deref()
                .and_then(stream_url_of),
        })
    }

    /// For the local runner and tests: a random secret, plain-HTTP cookies, no allowlist.
    pub fn local() -> Self {
        Self {
            session_secret: converger_core::secret::new_key(),
            admin_allow: None,
            secure_cookies: false,
            export_limit: 10_000,
            stream_url: None,
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
            .route(&format!("{p}/conversations"), get(find_conversation))
            .route(&format!("{p}/conversations/{{id}}"), get(conversation_page))
            .route(
                &format!("{p}/conversations/{{id}}/states"),
                get(conversation_states),
            )
            .route(&format!("{p}/channels"), get(channels))
            .route(&format!("{p}/channels/states"), get(channel_states))
            .route(&format!("{p}/channels/{{id}}/charts"), get(channel_charts))
            .route(&format!("{p}/usage"), get(usage_page))
            .route(
                &format!("{p}/channels/{{id}}/{{action}}"),
                post(pause_or_resume),
            )
            .route(&format!("{p}/audit"), get(audit))
            .route(&format!("{p}/event-types"), get(event_types))
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
    let csp: Arc<str> = content_security_policy(state.web.stream_url.as_deref()).into();
    admin
        .merge(portal)
        .layer(axum::middleware::from_fn(move |req, next| {
            page_headers(csp.clone(), req, next)
        }))
        .with_state(state)
}

/// The pages' content security policy: nothing but this origin's forms and fetches (and the
/// live stream's WebSocket, where there is one), and the one stylesheet and the scripts the
/// pages carry inline, by hash.
pub fn content_security_policy(stream_url: Option<&str>) -> String {
    let stream = stream_url.map(|u| format!(" {u}")).unwrap_or_default();
    format!(
        "default-src 'none'; style-src '{}'; script-src '{}' '{}' '{}'; connect-src 'self'{stream}; \
         img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        source_hash(page::CSS),
        source_hash(channels::CHANNELS_SCRIPT),
        source_hash(conversations::CONVERSATION_SCRIPT),
        source_hash(dashboard::DASHBOARD_SCRIPT)
    )
}

/// A CSP hash source of an inline element's text.
pub fn source_hash(text: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(text.as_bytes()))
    )
}

/// Every page's answer (the sign-in page, exports and redirects included): the content
/// security policy, no framing, no content sniffing, no referrer beyond this origin, and no
/// copy kept by a browser or a proxy (pages show tenants' data).
async fn page_headers(
    csp: Arc<str>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
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
    Store(converger_ports::StoreError),
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
        .map_err(|e| NewUserError::Invalid(e.into()))?;
    let user = User {
        realm,
        email,
        role,
        tenant_id: tenant,
        password_hash: hash_password(password).map_err(|e| NewUserError::Invalid(e.to_string()))?,
        created_at: converger_core::Timestamp::now(),
        sessions_after: None,
    };
    match state.accounts.create_user(&user).await {
        Ok(()) => Ok(user),
        Err(converger_ports::StoreError::Conflict(_)) => Err(NewUserError::Exists),
        Err(e) => Err(NewUserError::Store(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_settings_are_read_strictly() {
        let c = WebConfig::from_vars(Some("s".repeat(32)), |_| None).unwrap();
        assert!(c.secure_cookies && c.admin_allow.is_none());
        assert_eq!(c.export_limit, 10_000);
        // The documented defaults are the ones used.
        assert_eq!(
            settings::COOKIE_SECURE.default,
            c.secure_cookies.to_string()
        );
        assert_eq!(settings::EXPORT_LIMIT.default, c.export_limit.to_string());
        assert_eq!(WebConfig::local().export_limit, c.export_limit);
        let c = WebConfig::from_vars(None, |k| match k {
            "ADMIN_IP_ALLOWLIST" => Some("10.0.0.0/8".into()),
            "COOKIE_SECURE" => Some("false".into()),
            "EXPORT_LIMIT" => Some("500".into()),
            _ => None,
        })
        .unwrap();
        assert!(!c.secure_cookies && c.admin_allow.is_some());
        assert_eq!(c.export_limit, 500);
        // An allowlist that does not parse stops the start (it used to refuse every address
        // while the function ran).
        for (name, value) in [
            ("ADMIN_IP_ALLOWLIST", "10.0.0.0/99"),
            ("COOKIE_SECURE", "nope"),
            ("EXPORT_LIMIT", "0"),
        ] {
            let err = WebConfig::from_vars(None, |k| (k == name).then(|| value.to_owned()))
                .err()
                .unwrap();
            assert_eq!(err.name, name);
        }
    }
}
