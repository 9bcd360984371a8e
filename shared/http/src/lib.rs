//! The HTTP surfaces as axum Routers: the tenant API and the admin API. Lambda serves them
//! through lambda_http; the local runner serves them with axum directly.

pub mod admin;
pub mod api;
pub mod auth;
pub mod error;
pub mod receipts;
pub mod views;
pub mod web;

use converger_pipeline::Pipeline;
use converger_ports::Tenant;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a resolved API key is trusted before the store is asked again.
const KEY_CACHE_TTL: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct AppState {
    pub pipeline: Arc<Pipeline>,
    /// The operators' token for the admin API; `None` disables the admin API.
    pub admin_token: Option<Arc<str>>,
    /// The web pages' settings.
    pub web: Arc<web::WebConfig>,
    keys: Arc<Mutex<HashMap<String, (Instant, Tenant)>>>,
    tenant_list: Arc<Mutex<Option<CachedTenants>>>,
}

/// The tenant list and when it was read.
type CachedTenants = (Instant, Arc<Vec<Tenant>>);

/// How long the web pages reuse the list of tenants (their selectors, an operator's lists over
/// every tenant, the dashboard, each step of an export) before scanning for it again.
const TENANT_LIST_TTL: Duration = Duration::from_secs(5);

impl AppState {
    pub fn new(pipeline: Arc<Pipeline>, admin_token: Option<String>) -> Self {
        Self {
            pipeline,
            admin_token: admin_token.map(Into::into),
            // Only the admin function serves the pages; it reads their settings from the
            // environment with `with_web(WebConfig::from_env())`.
            web: Arc::new(web::WebConfig::local()),
            keys: Arc::new(Mutex::new(HashMap::new())),
            tenant_list: Arc::new(Mutex::new(None)),
        }
    }

    /// Every tenant, read at most once per [`TENANT_LIST_TTL`] by this instance.
    pub async fn tenants(&self) -> converger_ports::StoreResult<Arc<Vec<Tenant>>> {
        if let Ok(cached) = self.tenant_list.lock()
            && let Some((at, list)) = cached.as_ref()
            && at.elapsed() < TENANT_LIST_TTL
        {
            return Ok(list.clone());
        }
        let list = Arc::new(self.pipeline.store.list_tenants().await?);
        if let Ok(mut cached) = self.tenant_list.lock() {
            *cached = Some((Instant::now(), list.clone()));
        }
        Ok(list)
    }

    /// Forgets the cached tenant list (after this instance created or changed a tenant).
    pub fn forget_tenants(&self) {
        if let Ok(mut cached) = self.tenant_list.lock() {
            *cached = None;
        }
    }

    /// With other web page settings.
    pub fn with_web(mut self, web: web::WebConfig) -> Self {
        self.web = Arc::new(web);
        self
    }

    fn cached_tenant(&self, hash: &str) -> Option<Tenant> {
        let cache = self.keys.lock().ok()?;
        let (at, t) = cache.get(hash)?;
        (at.elapsed() < KEY_CACHE_TTL).then(|| t.clone())
    }

    fn cache_tenant(&self, hash: String, t: Tenant) {
        if let Ok(mut cache) = self.keys.lock() {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(hash, (Instant::now(), t));
        }
    }
}
