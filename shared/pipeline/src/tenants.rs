//! Tenants and their API keys, for the admin API and the web pages alike.

use crate::Pipeline;
use converger_core::secret::{hash_api_key, new_api_key};
use converger_core::{TenantId, Tier, time};
use converger_ports::{StoreError, Tenant};

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    InvalidAlertUrl(String),
    #[error("{0}")]
    InvalidRateLimit(String),
    #[error("{0}")]
    InvalidShards(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::health::AlertError> for TenantError {
    fn from(e: crate::health::AlertError) -> Self {
        match e {
            crate::health::AlertError::Invalid(m) => Self::InvalidAlertUrl(m),
            crate::health::AlertError::Store(e) => Self::Store(e),
        }
    }
}

impl Pipeline {
    /// A new tenant in `tier`; returns it with its API key (shown to its owner once; only
    /// the key's hash is stored).
    pub async fn create_tenant(
        &self,
        name: &str,
        tier: Tier,
    ) -> Result<(Tenant, String), TenantError> {
        converger_core::channel::check_name(name).map_err(TenantError::Invalid)?;
        let tenant = Tenant {
            id: TenantId::generate(),
            name: name.to_owned(),
            tier,
            created_at: time::now_rfc3339(),
            alert_webhook_url: None,
            alert_channel_id: None,
            api_rate_limit: None,
            // Fixed when the tenant is created (a later tier change must not shrink it: its
            // rows in the other shards would drop out of its listings); only an operator
            // grows it.
            delivery_shards: Some(converger_ports::default_delivery_shards(tier)),
        };
        let key = new_api_key();
        self.store
            .create_tenant(&tenant, &hash_api_key(&key))
            .await?;
        Ok((tenant, key))
    }

    /// Sets a tenant's tier (its new deliveries go to that tier's queue) and its alert
    /// webhook URL (`Some(None)` removes it); `None` if there is no such tenant.
    pub async fn update_tenant(
        &self,
        id: &TenantId,
        tier: Option<Tier>,
        alert_webhook_url: Option<Option<&str>>,
        api_rate_limit: Option<Option<&str>>,
    ) -> Result<Option<Tenant>, TenantError> {
        let Some(mut t) = self.store.get_tenant(id).await? else {
            return Ok(None);
        };
        if let Some(tier) = tier {
            match self.store.set_tenant_tier(id, tier).await? {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(limit) = api_rate_limit {
            if let Some(l) = limit {
                l.parse::<converger_core::RateLimit>()
                    .map_err(TenantError::InvalidRateLimit)?;
            }
            match self.store.set_tenant_api_rate_limit(id, limit).await? {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(url) = alert_webhook_url {
            t = self.set_alert_webhook(&t, url).await?;
        }
        Ok(Some(t))
    }

    /// Spreads a tenant's delivery listings over `n` shards from now on (new deliveries only;
    /// listings read them all). Shards only grow: fewer than it has is refused, as is more
    /// than [`converger_ports::MAX_DELIVERY_SHARDS`]. `None` if there is no such tenant.
    pub async fn set_delivery_shards(
        &self,
        id: &TenantId,
        n: u32,
    ) -> Result<Option<Tenant>, TenantError> {
        let Some(t) = self.store.get_tenant(id).await? else {
            return Ok(None);
        };
        let max = converger_ports::MAX_DELIVERY_SHARDS;
        if !(1..=max).contains(&n) {
            return Err(TenantError::InvalidShards(format!(
                "delivery_shards must be between 1 and {max}, not {n}"
            )));
        }
        if n < t.delivery_shards() {
            return Err(TenantError::InvalidShards(format!(
                "delivery_shards only grow: the tenant has {}, not fewer",
                t.delivery_shards()
            )));
        }
        Ok(self.store.grow_tenant_delivery_shards(id, n).await?)
    }

    /// Gives a tenant a new API key and retires the old one; `None` if there is no such
    /// tenant.
    pub async fn rotate_api_key(&self, tenant: &TenantId) -> Result<Option<String>, StoreError> {
        let key = new_api_key();
        Ok(self
            .store
            .rotate_api_key(tenant, &hash_api_key(&key))
            .await?
            .then_some(key))
    }
}
