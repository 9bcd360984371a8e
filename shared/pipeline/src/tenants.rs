//! Tenants and their API keys, for the admin API and the web pages alike.

use crate::health::AlertError;
use converger_core::ChannelType;
use converger_core::secret::{hash_api_key, new_api_key};
use converger_core::{TenantId, Tier};
use converger_ports::{Channel, ChannelPatch, StoreError, Tenant};
use serde_json::json;

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
    #[error("{0}")]
    InvalidSenders(String),
    #[error("{0}")]
    InvalidSesTenant(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an operator changes about a tenant: each `Some` field is set (`Some(None)` removes an
/// optional one; an empty sender list removes the senders).
#[derive(Debug, Clone, Copy, Default)]
pub struct TenantChange<'a> {
    /// Its new deliveries go to that tier's queue.
    pub tier: Option<Tier>,
    /// The alert webhook URL (a managed webhook channel receives the tenant's channel events).
    pub alert_webhook_url: Option<Option<&'a str>>,
    /// The API rate limit override (`"<n>/s"`, per API key).
    pub api_rate_limit: Option<Option<&'a str>>,
    /// The SES identities its email channels may send from.
    pub email_senders: Option<&'a [String]>,
    /// The SES tenant its email is sent on behalf of.
    pub ses_tenant: Option<Option<&'a str>>,
}

impl From<crate::health::AlertError> for TenantError {
    fn from(e: crate::health::AlertError) -> Self {
        match e {
            crate::health::AlertError::Invalid(m) => Self::InvalidAlertUrl(m),
            crate::health::AlertError::Store(e) => Self::Store(e),
        }
    }
}

/// Tenants: creation, their settings (tier, limits, alert webhook, email senders), API keys and listing shards.
#[derive(Clone, Copy)]
pub struct Tenants<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) accounts: &'p dyn converger_ports::AccountStore,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) health_store: &'p dyn converger_ports::HealthStore,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) audit_log: &'p dyn converger_ports::AuditStore,
    pub(crate) adapters: &'p converger_adapters::Adapters,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) streams: crate::stream::Streams<'p>,
}

impl Tenants<'_> {
    /// Sets (or with `None`, removes) a tenant's alert webhook URL: a managed webhook channel
    /// of the tenant, created on first use and updated afterwards, whose body is the event
    /// alone (`"body": "payload"`).
    pub async fn set_alert_webhook(
        &self,
        tenant: &Tenant,
        url: Option<&str>,
    ) -> Result<Tenant, AlertError> {
        let now = self.clock.now();
        let Some(url) = url else {
            if let Some(id) = &tenant.alert_channel_id {
                let off = ChannelPatch {
                    active: Some(false),
                    ..ChannelPatch::default()
                };
                self.channel_store
                    .update_channel(&tenant.id, id, &off, now)
                    .await?;
            }
            return self
                .health_store
                .set_tenant_alert(&tenant.id, None, None)
                .await?
                .ok_or_else(|| AlertError::Invalid("tenant not found".into()));
        };
        let config = json!({"url": url, "body": "payload"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let adapter = self
            .adapters
            .get(ChannelType::Webhook)
            .ok_or_else(|| AlertError::Invalid("no webhook adapter".into()))?;
        adapter
            .validate_config(&config)
            .map_err(|e| AlertError::Invalid(e.into()))?;
        let channel_id = match &tenant.alert_channel_id {
            Some(id) => {
                let patch = ChannelPatch {
                    config: Some(config),
                    active: Some(true),
                    ..ChannelPatch::default()
                };
                self.channel_store
                    .update_channel(&tenant.id, id, &patch, now)
                    .await?;
                self.cache.forget_channel(id);
                id.clone()
            }
            None => {
                let channel = {
                    let mut c = Channel::new(
                        tenant.id.clone(),
                        ChannelType::Webhook,
                        "alerts",
                        config,
                        now,
                    );
                    c.managed = true;
                    c
                };
                self.channel_store.create_channel(&channel).await?;
                channel.id
            }
        };
        self.health_store
            .set_tenant_alert(&tenant.id, Some(url), Some(&channel_id))
            .await?
            .ok_or_else(|| AlertError::Invalid("tenant not found".into()))
    }

    /// A new tenant in `tier`; returns it with its API key (shown to its owner once; only
    /// the key's hash is stored).
    pub async fn create_tenant(
        &self,
        name: &str,
        tier: Tier,
    ) -> Result<(Tenant, String), TenantError> {
        converger_core::channel::check_name(name).map_err(|e| TenantError::Invalid(e.into()))?;
        let tenant = Tenant {
            id: TenantId::generate(),
            name: name.to_owned(),
            tier,
            created_at: self.clock.now(),
            alert_webhook_url: None,
            alert_channel_id: None,
            api_rate_limit: None,
            // Fixed when the tenant is created (a later tier change must not shrink it: its
            // rows in the other shards would drop out of its listings); only an operator
            // grows it.
            delivery_shards: Some(converger_ports::default_delivery_shards(tier)),
            shard_grants: Default::default(),
            email_senders: Vec::new(),
            ses_tenant: None,
            aws_external_id: Some(converger_core::aws::new_external_id()),
            typed_events: false,
        };
        let key = new_api_key();
        self.tenants
            .create_tenant(&tenant, &hash_api_key(&key))
            .await?;
        Ok((tenant, key))
    }

    /// Applies an operator's changes to a tenant, each field that is `Some`; `None` if there
    /// is no such tenant.
    pub async fn update_tenant(
        &self,
        id: &TenantId,
        change: TenantChange<'_>,
    ) -> Result<Option<Tenant>, TenantError> {
        let Some(mut t) = self.tenants.get_tenant(id).await? else {
            return Ok(None);
        };
        // Everything is checked before anything is written.
        if let Some(Some(l)) = change.api_rate_limit {
            l.parse::<converger_core::RateLimit>()
                .map_err(|e| TenantError::InvalidRateLimit(e.into()))?;
        }
        let senders = change
            .email_senders
            .map(converger_core::email::sender_identities)
            .transpose()
            .map_err(|e| TenantError::InvalidSenders(e.into()))?;
        let ses_tenant = change
            .ses_tenant
            .map(|n| n.map(converger_core::email::ses_tenant_name).transpose())
            .transpose()
            .map_err(|e| TenantError::InvalidSesTenant(e.into()))?;
        if let Some(tier) = change.tier {
            match self.tenants.set_tenant_tier(id, tier).await? {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(limit) = change.api_rate_limit {
            match self.tenants.set_tenant_api_rate_limit(id, limit).await? {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(senders) = senders {
            match self.tenants.set_tenant_email_senders(id, &senders).await? {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(name) = ses_tenant {
            match self
                .tenants
                .set_tenant_ses_tenant(id, name.as_deref())
                .await?
            {
                Some(updated) => t = updated,
                None => return Ok(None),
            }
        }
        if let Some(url) = change.alert_webhook_url {
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
        let Some(t) = self.tenants.get_tenant(id).await? else {
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
        Ok(self.tenants.grow_tenant_delivery_shards(id, n).await?)
    }

    /// The external id a tenant's AWS roles require of the platform: made now if the tenant
    /// has none yet (a tenant created before AWS channel types). `None` if there is no such
    /// tenant.
    pub async fn aws_external_id(&self, tenant: &TenantId) -> Result<Option<String>, StoreError> {
        if let Some(t) = self.tenants.get_tenant(tenant).await?
            && let Some(id) = t.aws_external_id
        {
            return Ok(Some(id));
        }
        let candidate = converger_core::aws::new_external_id();
        Ok(self
            .tenants
            .ensure_tenant_external_id(tenant, &candidate)
            .await?
            .and_then(|t| t.aws_external_id))
    }

    /// Gives a tenant a new external id (its roles' trust policies must then name it;
    /// sends with the old one are refused by them). Audited (`rotate_external_id`). `None` if
    /// there is no such tenant.
    pub async fn rotate_external_id(
        &self,
        tenant: &TenantId,
        actor: &converger_core::query::Actor,
    ) -> Result<Option<String>, StoreError> {
        let id = converger_core::aws::new_external_id();
        let Some(t) = self.tenants.set_tenant_external_id(tenant, &id).await? else {
            return Ok(None);
        };
        self.cache.forget_external_id(tenant);
        let entry = converger_ports::AuditEntry::new(
            t.id.clone(),
            actor.clone(),
            "rotate_external_id",
            "tenant",
            t.id.as_str(),
            json!({}),
            self.clock.now(),
        );
        if let Err(e) = self.audit_log.add_audit(&entry).await {
            tracing::error!(tenant_id = %t.id, error = %e, "audit entry not written");
        }
        Ok(t.aws_external_id)
    }

    /// Gives a tenant a new API key and retires the old one; `None` if there is no such
    /// tenant. What the old key opened closes with it: the tenant's live stream connections
    /// (a failure to close them is logged; the key is rotated).
    pub async fn rotate_api_key(&self, tenant: &TenantId) -> Result<Option<String>, StoreError> {
        let key = new_api_key();
        if !self
            .accounts
            .rotate_api_key(tenant, &hash_api_key(&key))
            .await?
        {
            return Ok(None);
        }
        match self.streams.close_tenant(tenant).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(tenant_id = %tenant, closed = n, "stream connections of the old key closed")
            }
            Err(e) => {
                tracing::warn!(tenant_id = %tenant, error = %e, "stream connections not closed")
            }
        }
        Ok(Some(key))
    }
}
