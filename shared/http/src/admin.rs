//! The operators' admin API (`/admin/api`), authenticated with the admin token.

use crate::AppState;
use crate::error::ErrorCode;
use crate::error::{ApiError, Body, no_route, wrong_method};
use crate::web::NewUserError;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use converger_core::secret::constant_time_eq;
use converger_core::{TenantId, Tier};
use converger_pipeline::tenants::{TenantChange, TenantError};
use serde::Deserialize;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/admin/api/tenants", post(create_tenant))
        .route("/admin/api/users", post(create_user))
        .route(
            "/admin/api/tenants/{id}",
            get(get_tenant).patch(patch_tenant),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            allowlist,
        ))
        // Outside the allowlist: monitors call it from anywhere, and it says nothing.
        .route("/admin/api/health", get(health))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn(crate::error::api_headers))
        .with_state(state)
}

/// The admin IP allowlist (`ADMIN_IP_ALLOWLIST`) guards this API as it guards the pages.
async fn allowlist(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if crate::web::admin_ip_allowed(&state, req.extensions()) {
        next.run(req).await
    } else {
        ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::IpNotAllowed,
            "this address is not in the admin IP allowlist",
        )
        .into_response()
    }
}

/// `GET /admin/api/health`: the admin API answers (no token, any address).
#[utoipa::path(get, path = "/admin/api/health", tag = "operations", security(()),
    responses((status = 200, description = "The admin API answers", body = crate::schemas::Status)))]
pub(crate) async fn health() -> Json<crate::schemas::Status> {
    Json(crate::schemas::Status {
        status: "ok".into(),
    })
}

/// A tenant just created, with its API key (shown once).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CreatedTenant {
    #[serde(flatten)]
    pub tenant: crate::views::TenantView,
    pub api_key: String,
}

/// A tenant after a change; with the alert channel's signing secret when the change set its
/// alert webhook.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PatchedTenant {
    #[serde(flatten)]
    pub tenant: crate::views::TenantView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert_signing_secret: Option<String>,
}

/// A user of the web pages.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct UserView {
    /// `admin` or `portal`.
    pub realm: String,
    pub email: String,
    pub role: String,
    pub tenant_id: Option<String>,
    pub created_at: String,
}

/// An operator holding the admin token.
pub struct Operator;

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(expected) = state.admin_token.as_deref() else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::AdminDisabled,
                "the admin API has no token configured",
            ));
        };
        let given = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or_else(|| {
                ApiError::unauthorized("missing `Authorization: Bearer <admin token>`")
            })?;
        if constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) {
            Ok(Operator)
        } else {
            Err(ApiError::unauthorized("invalid admin token"))
        }
    }
}

fn tenant_error(e: TenantError) -> ApiError {
    match e {
        TenantError::Invalid(m) => ApiError::invalid(ErrorCode::InvalidName, m),
        TenantError::InvalidAlertUrl(m) => ApiError::invalid(ErrorCode::InvalidAlertWebhookUrl, m),
        TenantError::InvalidRateLimit(m) => ApiError::invalid(ErrorCode::InvalidApiRateLimit, m),
        TenantError::InvalidShards(m) => ApiError::invalid(ErrorCode::InvalidDeliveryShards, m),
        TenantError::InvalidSenders(m) => ApiError::invalid(ErrorCode::InvalidEmailSenders, m),
        TenantError::InvalidSesTenant(m) => ApiError::invalid(ErrorCode::InvalidSesTenant, m),
        TenantError::Store(e) => e.into(),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewTenant {
    name: String,
    #[serde(default)]
    tier: Option<String>,
}

#[utoipa::path(
    post,
    path = "/admin/api/tenants",
    tag = "admin",
    summary = "Create a tenant",
    security(("admin_token" = [])),
    request_body = NewTenant,
    responses((status = 201, description = "Created, with its API key (shown once)", body = CreatedTenant))
)]
pub(crate) async fn create_tenant(
    State(state): State<AppState>,
    _op: Operator,
    Body(req): Body<NewTenant>,
) -> Result<impl IntoResponse, ApiError> {
    let tier: Tier = match req.tier.as_deref() {
        None => Tier::Default,
        Some(t) => t
            .parse()
            .map_err(|m: converger_core::Invalid| ApiError::invalid(ErrorCode::InvalidTier, m))?,
    };
    let (tenant, key) = state
        .pipeline
        .tenants()
        .create_tenant(&req.name, tier)
        .await
        .map_err(tenant_error)?;
    state.forget_tenants();
    Ok((
        StatusCode::CREATED,
        Json(CreatedTenant {
            tenant: crate::views::tenant(&tenant, &state.pipeline.config().api_limits),
            api_key: key,
        }),
    ))
}

#[utoipa::path(
    get,
    path = "/admin/api/tenants/{id}",
    tag = "admin",
    summary = "Read a tenant",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "A tenant id")),
    responses((status = 200, body = crate::views::TenantView))
)]
pub(crate) async fn get_tenant(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let id = TenantId::parse(&id).map_err(|_| ApiError::not_found("tenant"))?;
    let t = state
        .pipeline
        .reads()
        .tenant(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("tenant"))?;
    Ok(Json(crate::views::tenant(
        &t,
        &state.pipeline.config().api_limits,
    )))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchTenant {
    tier: Option<String>,
    /// A URL sets the tenant's alert webhook; `null` removes it.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    alert_webhook_url: Option<Option<String>>,
    /// Each of its API keys' rate limit (`"<n>/s"`, `/m`, `/h`), overriding the tier's;
    /// `null` goes back to the tier's.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    api_rate_limit: Option<Option<String>>,
    /// How many partitions its delivery listings are spread over from now on (1 to 256; only
    /// grows). Each takes a few hundred deliveries a second (see docs/scaling.md).
    delivery_shards: Option<u32>,
    /// The SES identities (addresses like `news@acme.com`, domains like `acme.com`) the
    /// tenant's email channels may send from, replacing those it has (`[]` removes them; at
    /// most 20). A domain covers its addresses, not its subdomains.
    email_senders: Option<Vec<String>>,
    /// The SES tenant its email is sent on behalf of (`TenantName`; 1 to 64 letters, digits,
    /// `-`, `_`): SES then sends only from identities associated with that SES tenant and
    /// keeps its reputation apart. `null` sends as the account.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    ses_tenant: Option<Option<String>>,
}

/// Sets a tenant's tier (its new deliveries go to that tier's queue; the API's cached view of
/// the tenant follows within 30 s) and its alert webhook URL (a managed webhook channel that
/// receives the tenant's channel events).
#[utoipa::path(
    patch,
    path = "/admin/api/tenants/{id}",
    tag = "admin",
    summary = "Change a tenant",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "A tenant id")),
    request_body = PatchTenant,
    responses((status = 200, body = PatchedTenant))
)]
pub(crate) async fn patch_tenant(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
    Body(req): Body<PatchTenant>,
) -> Result<impl IntoResponse, ApiError> {
    let id = TenantId::parse(&id).map_err(|_| ApiError::not_found("tenant"))?;
    let tier: Option<Tier> = req
        .tier
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|m: converger_core::Invalid| ApiError::invalid(ErrorCode::InvalidTier, m))?;
    let t = state
        .pipeline
        .tenants()
        .update_tenant(
            &id,
            TenantChange {
                tier,
                alert_webhook_url: req.alert_webhook_url.as_ref().map(Option::as_deref),
                api_rate_limit: req.api_rate_limit.as_ref().map(Option::as_deref),
                email_senders: req.email_senders.as_deref(),
                ses_tenant: req.ses_tenant.as_ref().map(Option::as_deref),
            },
        )
        .await
        .map_err(tenant_error)?
        .ok_or_else(|| ApiError::not_found("tenant"))?;
    let t = match req.delivery_shards {
        Some(n) => state
            .pipeline
            .tenants()
            .set_delivery_shards(&id, n)
            .await
            .map_err(tenant_error)?
            .ok_or_else(|| ApiError::not_found("tenant"))?,
        None => t,
    };
    state.forget_tenants();
    // The alert channel's signing secret, so the receiver can verify what it gets.
    let mut alert_signing_secret = None;
    if req.alert_webhook_url.is_some()
        && let Some(id) = &t.alert_channel_id
        && let Some(c) = state.pipeline.reads().channel(id).await?
    {
        alert_signing_secret = Some(c.signing_secret);
    }
    Ok(Json(PatchedTenant {
        tenant: crate::views::tenant(&t, &state.pipeline.config().api_limits),
        alert_signing_secret,
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewUser {
    /// `admin` (operators) or `portal` (a tenant's users).
    #[schema(value_type = String, example = "admin")]
    realm: converger_core::web::Realm,
    email: String,
    password: String,
    role: String,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    tenant_id: Option<TenantId>,
}

/// Creates a user of the web pages: an operator (`super_admin`, `admin`, `viewer`) or a
/// tenant user (`owner`, `admin`, `member`, `viewer`) of an existing tenant.
#[utoipa::path(
    post,
    path = "/admin/api/users",
    tag = "admin",
    summary = "Create a web user",
    security(("admin_token" = [])),
    request_body = NewUser,
    responses((status = 201, body = UserView))
)]
pub(crate) async fn create_user(
    State(state): State<AppState>,
    _op: Operator,
    Body(req): Body<NewUser>,
) -> Result<impl IntoResponse, ApiError> {
    let role: converger_core::web::Role = req
        .role
        .parse()
        .map_err(|m: converger_core::Invalid| ApiError::invalid(ErrorCode::InvalidRole, m))?;
    if let Some(t) = &req.tenant_id
        && state.pipeline.reads().tenant(t).await?.is_none()
    {
        return Err(ApiError::invalid(
            ErrorCode::UnknownTenant,
            format!("tenant {t} does not exist"),
        ));
    }
    let user = crate::web::create_user(
        &state,
        req.realm,
        &req.email,
        &req.password,
        role,
        req.tenant_id,
    )
    .await
    .map_err(|e| match e {
        NewUserError::Exists => {
            ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, e.to_string())
        }
        NewUserError::Invalid(m) => ApiError::invalid(ErrorCode::InvalidUser, m),
        NewUserError::Store(e) => e.into(),
    })?;
    Ok((
        StatusCode::CREATED,
        Json(UserView {
            realm: user.realm.as_str().to_owned(),
            email: user.email,
            role: user.role.as_str().to_owned(),
            tenant_id: user.tenant_id.map(|t| t.to_string()),
            created_at: user.created_at.rfc3339(),
        }),
    ))
}
