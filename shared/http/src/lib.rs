//! The HTTP surfaces as axum Routers: the tenant API and the admin API. Lambda serves them
//! through lambda_http; the local runner serves them with axum directly.

pub mod admin;
pub mod api;
pub mod app;
pub mod auth;
pub mod codes;
pub mod error;
pub mod idempotency;
pub mod limits;
pub mod openapi;
pub mod receipts;
pub mod schemas;
pub mod views;
pub mod web;

use converger_core::cache::TtlCache;
use converger_pipeline::Pipeline;
use converger_ports::Tenant;
use std::sync::Arc;
use std::time::Duration;

/// How long an API key's resolution (key hash -> tenant) is trusted: a rotated or revoked key
/// is refused within this on every instance.
const KEY_RESOLVE_TTL: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct AppState {
    /// The use cases, and the read side of the store ([`Pipeline::reads`]).
    pub pipeline: Arc<Pipeline>,
    /// The pages' users and sign-in counts.
    pub accounts: Arc<dyn converger_ports::AccountStore>,
    /// The API's idempotency keys ([`idempotency`]).
    pub idempotency_keys: Arc<dyn converger_ports::IdempotencyStore>,
    /// The operators' token for the admin API; `None` disables the admin API.
    pub admin_token: Option<Arc<str>>,
    /// The web pages' settings.
    pub web: Arc<web::WebConfig>,
    /// The tenants API keys named (by tenant id), for `tenant_cache_ttl`
    /// (`TENANT_CACHE_TTL_MS`): their tier, limits and shards.
    keys: Arc<TtlCache<converger_core::TenantId, Tenant>>,
    /// Resolved API keys (key hash -> tenant), for [`KEY_RESOLVE_TTL`].
    resolved: Arc<TtlCache<String, converger_core::TenantId>>,
    /// Every tenant, for [`TENANT_LIST_TTL`].
    tenant_list: Arc<TtlCache<(), Arc<Vec<Tenant>>>>,
    /// What this instance holds of each API key's rate schedule (`limits`), behind a lock
    /// that makes its concurrent calls wait for one taker.
    api_leases: Arc<TtlCache<String, Arc<tokio::sync::Mutex<converger_core::api_limit::Lease>>>>,
}

/// How long the web pages reuse the list of tenants (their selectors, an operator's lists over
/// every tenant, the dashboard, each step of an export) before scanning for it again.
const TENANT_LIST_TTL: Duration = Duration::from_secs(5);

impl AppState {
    pub fn new(pipeline: Arc<Pipeline>, admin_token: Option<String>) -> Self {
        let tenant_ttl = pipeline.config().tenant_cache_ttl;
        Self {
            accounts: pipeline.accounts(),
            idempotency_keys: pipeline.idempotency_keys(),
            pipeline,
            admin_token: admin_token.map(Into::into),
            // Only the admin function serves the pages; it reads their settings from the
            // environment with `with_web(WebConfig::from_env_with_secret(..)?)`.
            web: Arc::new(web::WebConfig::local()),
            keys: Arc::new(TtlCache::new(tenant_ttl)),
            resolved: Arc::new(TtlCache::bounded(KEY_RESOLVE_TTL, 10_000)),
            tenant_list: Arc::new(TtlCache::new(TENANT_LIST_TTL)),
            api_leases: Arc::new(TtlCache::bounded(
                Duration::from_millis(converger_core::api_limit::LEASE_MS.unsigned_abs()),
                10_000,
            )),
        }
    }

    /// Every tenant, read at most once per [`TENANT_LIST_TTL`] by this instance.
    pub async fn tenants(&self) -> converger_ports::StoreResult<Arc<Vec<Tenant>>> {
        if let Some(list) = self.tenant_list.get(&()) {
            return Ok(list);
        }
        let list = Arc::new(self.pipeline.reads().tenants().await?);
        self.tenant_list.insert((), list.clone());
        Ok(list)
    }

    /// Forgets the cached tenant list (after this instance created or changed a tenant).
    pub fn forget_tenants(&self) {
        self.tenant_list.clear();
    }

    /// With other web page settings.
    pub fn with_web(mut self, web: web::WebConfig) -> Self {
        self.web = Arc::new(web);
        self
    }

    /// Forgets a cached tenant (after this instance changed what its requests read of it).
    pub fn forget_tenant(&self, id: &converger_core::TenantId) {
        self.keys.remove(id);
    }

    fn cached_tenant(&self, id: &converger_core::TenantId) -> Option<Tenant> {
        self.keys.get(id)
    }

    fn cache_tenant(&self, id: converger_core::TenantId, t: Tenant) {
        self.keys.insert(id, t);
    }

    fn resolved_key(&self, hash: &str) -> Option<converger_core::TenantId> {
        self.resolved.get(&hash.to_owned())
    }

    fn resolve_key(&self, hash: String, id: converger_core::TenantId) {
        self.resolved.insert(hash, id);
    }
}
