//! A channel's lifecycle: creating and changing it (this instance forgets what it cached of
//! it), rotating its signing secret with an overlap, and deleting it without losing what it
//! still had to deliver.

use crate::outcome::FlowError;
use converger_core::health::AutoDisableOverrides;
use converger_core::query::Actor;
use converger_core::{BreakerOverrides, ChannelId, ChannelType, PolicyLayer, RateLimit};
use converger_core::{middleware, signing};
use converger_ports::{Channel, ChannelPatch, SecretRotation, StoreError, StoreResult, Tenant};
use serde_json::{Map, Value};

/// How a rotation ended.
#[derive(Debug)]
pub enum Rotation {
    Done(Box<Channel>),
    /// Another rotation changed the secret first: nothing was changed.
    Raced,
    /// The channel is gone.
    Gone,
}

/// A channel's lifecycle: creation, changes, its signing secret, deletion.
#[derive(Clone, Copy)]
pub struct Channels<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) channel_store: &'p dyn converger_ports::ChannelStore,
    pub(crate) audit_log: &'p dyn converger_ports::AuditStore,
    pub(crate) config: &'p crate::PipelineConfig,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) lanes: crate::lanes::Lanes<'p>,
    pub(crate) adapters: &'p converger_adapters::Adapters,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) accounts: &'p dyn converger_ports::AccountStore,
}

/// A new channel as its writer asks for it (the tenant API's body): checked by
/// [`Channels::create`] before anything is stored.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    pub kind: ChannelType,
    pub name: String,
    pub config: Map<String, Value>,
    pub active: bool,
    pub retry_policy: Map<String, Value>,
    pub circuit_breaker: Map<String, Value>,
    pub rate_limit: Option<String>,
    pub auto_disable: Map<String, Value>,
    pub event_types: Vec<String>,
    /// The middleware steps, as written (`null`: none).
    pub middleware: Value,
    /// The filter, as written (`None` or `null`: none).
    pub filter: Option<Value>,
    /// Ordered lanes, as written (`None` or `null`: none). Set at creation only.
    pub ordering: Option<Value>,
}

/// The fields a change of a channel asks for (`None`: unchanged), as written: checked by
/// [`Channels::change`].
#[derive(Debug, Clone, Default)]
pub struct ChannelChange {
    pub name: Option<String>,
    pub config: Option<Map<String, Value>>,
    pub active: Option<bool>,
    pub retry_policy: Option<Map<String, Value>>,
    pub circuit_breaker: Option<Map<String, Value>>,
    /// `Some(None)`: the limit removed.
    pub rate_limit: Option<Option<String>>,
    pub auto_disable: Option<Map<String, Value>>,
    pub event_types: Option<Vec<String>>,
    pub middleware: Option<Value>,
    /// `Some(None)` (or `Some(Some(null))`): the filter removed.
    pub filter: Option<Option<Value>>,
}

/// Why a channel was not written as asked: each names the field, and says what does not fit.
#[derive(Debug, thiserror::Error)]
pub enum ChannelRefused {
    #[error("channel type `{0}` is not supported by this deployment")]
    UnsupportedType(ChannelType),
    #[error("{0}")]
    Name(String),
    #[error("{0}")]
    Config(String),
    /// An AWS channel's role in the platform's own account (the confused deputy).
    #[error("{0}")]
    RoleInPlatformAccount(String),
    /// An email channel's sender is not one of its tenant's granted identities.
    #[error("{0}")]
    EmailSender(String),
    #[error("{0}")]
    RetryPolicy(String),
    #[error("{0}")]
    CircuitBreaker(String),
    #[error("{0}")]
    RateLimit(String),
    #[error("{0}")]
    AutoDisable(String),
    #[error("{0}")]
    EventTypes(String),
    #[error("{0}")]
    Middleware(String),
    #[error("{0}")]
    Filter(String),
    #[error("{0}")]
    Ordering(String),
    /// The tenant has [`converger_core::policy::MAX_CHANNELS_PER_TENANT`] channels.
    #[error("{0}")]
    TooMany(String),
}

/// A channel's creation or change that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ChannelWriteError {
    #[error(transparent)]
    Refused(#[from] ChannelRefused),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn name_fits(name: &str) -> Result<(), ChannelRefused> {
    converger_core::channel::check_name(name).map_err(|m| ChannelRefused::Name(m.to_string()))
}

fn policy(raw: &Map<String, Value>) -> Result<PolicyLayer, ChannelRefused> {
    PolicyLayer::parse(raw).map_err(|e| ChannelRefused::RetryPolicy(e.to_string()))
}

fn breaker(raw: &Map<String, Value>) -> Result<BreakerOverrides, ChannelRefused> {
    BreakerOverrides::parse(raw).map_err(|m| ChannelRefused::CircuitBreaker(m.to_string()))
}

fn rate(raw: &str) -> Result<RateLimit, ChannelRefused> {
    raw.parse()
        .map_err(|m: converger_core::Invalid| ChannelRefused::RateLimit(m.to_string()))
}

fn auto_disable(raw: &Map<String, Value>) -> Result<AutoDisableOverrides, ChannelRefused> {
    AutoDisableOverrides::parse(raw).map_err(|m| ChannelRefused::AutoDisable(m.to_string()))
}

fn event_types(types: &[String]) -> Result<(), ChannelRefused> {
    converger_core::channel::check_event_types(types)
        .map_err(|m| ChannelRefused::EventTypes(m.to_string()))
}

/// A filter as written: `null` is none.
fn filter(raw: Option<&Value>) -> Result<Option<converger_core::filter::Filter>, ChannelRefused> {
    raw.filter(|v| !v.is_null())
        .map(|v| {
            converger_core::filter::Filter::parse(v)
                .map_err(|m| ChannelRefused::Filter(m.to_string()))
        })
        .transpose()
}

fn steps(raw: &Value) -> Result<Vec<middleware::Step>, ChannelRefused> {
    middleware::parse(raw).map_err(|m| ChannelRefused::Middleware(m.to_string()))
}

impl Channels<'_> {
    /// Creates a channel of `tenant` as `spec` asks, every field checked first: nothing is
    /// stored when one does not fit.
    pub async fn create(
        &self,
        tenant: &Tenant,
        spec: ChannelSpec,
    ) -> Result<Channel, ChannelWriteError> {
        name_fits(&spec.name)?;
        converger_core::mtls::check_sealed_origin(&spec.config, None)
            .map_err(|m| ChannelRefused::Config(m.to_string()))?;
        self.check_config(tenant, spec.kind, &spec.config).await?;
        let retry_policy = policy(&spec.retry_policy)?;
        let circuit_breaker = breaker(&spec.circuit_breaker)?;
        let rate_limit = spec.rate_limit.as_deref().map(rate).transpose()?;
        let auto_disable = auto_disable(&spec.auto_disable)?;
        event_types(&spec.event_types)?;
        let middleware = steps(&spec.middleware)?;
        let filter = filter(spec.filter.as_ref())?;
        let ordering = spec
            .ordering
            .as_ref()
            .filter(|v| !v.is_null())
            .map(|v| {
                converger_core::lanes::Ordering::parse(v)
                    .map_err(|m| ChannelRefused::Ordering(m.to_string()))
            })
            .transpose()?;
        let config = self.sealed(spec.kind, spec.config)?;
        // Counted last, once everything else fits (two creations at once may both pass).
        let most = converger_core::policy::MAX_CHANNELS_PER_TENANT;
        if self.accounts.list_channels(&tenant.id).await?.len() >= most {
            return Err(ChannelRefused::TooMany(format!(
                "a tenant has at most {most} channels: delete one first"
            ))
            .into());
        }
        let mut c = Channel::new(
            tenant.id.clone(),
            spec.kind,
            &spec.name,
            config,
            self.clock.now(),
        );
        c.active = spec.active;
        c.retry_policy = retry_policy;
        c.circuit_breaker = circuit_breaker;
        c.rate_limit = rate_limit;
        c.auto_disable = auto_disable;
        c.event_types = spec.event_types;
        c.middleware = middleware;
        c.filter = filter;
        c.ordering = ordering;
        self.create_channel(&c).await?;
        Ok(c)
    }

    /// Changes `current` (a channel of `tenant`) as `change` asks, every field checked
    /// first: nothing is changed when one does not fit. `None` if the channel is gone.
    pub async fn change(
        &self,
        tenant: &Tenant,
        current: &Channel,
        change: ChannelChange,
    ) -> Result<Option<Channel>, ChannelWriteError> {
        if let Some(n) = &change.name {
            name_fits(n)?;
        }
        // A config read through the API and sent back keeps the secrets it showed redacted.
        let config = change.config.map(|c| {
            match converger_core::web::keep_redacted(
                &Value::Object(c),
                &Value::Object(current.config.clone()),
            ) {
                Value::Object(m) => m,
                _ => Map::new(),
            }
        });
        if let Some(c) = &config {
            converger_core::mtls::check_sealed_origin(c, Some(&current.config))
                .map_err(|m| ChannelRefused::Config(m.to_string()))?;
            self.check_config(tenant, current.kind, c).await?;
        }
        let config = config.map(|c| self.sealed(current.kind, c)).transpose()?;
        if let Some(t) = &change.event_types {
            event_types(t)?;
        }
        let patch = ChannelPatch {
            retry_policy: change.retry_policy.as_ref().map(policy).transpose()?,
            circuit_breaker: change.circuit_breaker.as_ref().map(breaker).transpose()?,
            rate_limit: change
                .rate_limit
                .as_ref()
                .map(|r| r.as_deref().map(rate).transpose())
                .transpose()?,
            auto_disable: change.auto_disable.as_ref().map(auto_disable).transpose()?,
            middleware: change.middleware.as_ref().map(steps).transpose()?,
            filter: change
                .filter
                .as_ref()
                .map(|f| filter(f.as_ref()))
                .transpose()?,
            name: change.name,
            config,
            active: change.active,
            event_types: change.event_types,
        };
        Ok(self.update_channel(current, &patch).await?)
    }

    /// A channel type's settings: its adapter's own checks; for an AWS channel, a role
    /// outside the platform's account (checked again where the role is assumed); for an
    /// email channel, a sender among its tenant's granted identities (checked again at each
    /// send), read from the store so that a grant or a withdrawal applies at once.
    async fn check_config(
        &self,
        tenant: &Tenant,
        kind: ChannelType,
        config: &Map<String, Value>,
    ) -> Result<(), ChannelWriteError> {
        let adapter = self
            .adapters
            .get(kind)
            .ok_or(ChannelRefused::UnsupportedType(kind))?;
        adapter
            .validate_config(config)
            .map_err(|m| ChannelRefused::Config(m.to_string()))?;
        if let Some(service) = converger_core::aws::Service::of(kind) {
            let c = converger_core::aws::channel_config(service, config)
                .map_err(|m| ChannelRefused::Config(m.to_string()))?;
            converger_core::aws::check_role_account(
                &c.role,
                self.config.platform_account.as_deref(),
            )
            .map_err(|m| ChannelRefused::RoleInPlatformAccount(m.to_string()))?;
        }
        if kind == ChannelType::Email
            && let Ok(settings) = converger_core::email::settings(config)
        {
            let senders = self
                .tenants
                .get_tenant(&tenant.id)
                .await?
                .map(|t| t.email_senders)
                .unwrap_or_default();
            if !converger_core::email::sender_allowed(&settings.from, &senders) {
                return Err(
                    ChannelRefused::EmailSender(converger_core::email::sender_refused(
                        &settings.from,
                    ))
                    .into(),
                );
            }
        }
        Ok(())
    }

    /// A checked configuration as it is stored: its secrets sealed by its adapter.
    fn sealed(
        &self,
        kind: ChannelType,
        config: Map<String, Value>,
    ) -> Result<Map<String, Value>, ChannelWriteError> {
        let adapter = self
            .adapters
            .get(kind)
            .ok_or(ChannelRefused::UnsupportedType(kind))?;
        Ok(adapter
            .seal_config(config)
            .map_err(|m| ChannelRefused::Config(m.to_string()))?)
    }

    /// Stores a new channel built by its writer, unchecked (seeds, benchmarks and the
    /// platform's own channels; the API goes through [`Self::create`]).
    pub async fn create_channel(&self, channel: &Channel) -> StoreResult<()> {
        self.channel_store.create_channel(channel).await?;
        self.cache.forget_tenant_channels(&channel.tenant_id);
        Ok(())
    }

    /// Changes the given fields of a channel of `channel.tenant_id`; `None` if it is not
    /// there (or was deleted).
    pub async fn update_channel(
        &self,
        current: &Channel,
        patch: &ChannelPatch,
    ) -> StoreResult<Option<Channel>> {
        let id: &ChannelId = &current.id;
        let updated = self
            .channel_store
            .update_channel(&current.tenant_id, id, patch, self.clock.now())
            .await?;
        self.cache.forget_channel(id);
        self.cache.forget_tenant_channels(&current.tenant_id);
        Ok(updated)
    }

    /// Turns a disabled channel (by its tenant, or by auto-disable) on again: active, its
    /// `disabled_at` and `disabled_reason` cleared. Audited (`enable_channel`). `None` if it
    /// is gone.
    pub async fn enable(&self, channel: &Channel, actor: &Actor) -> StoreResult<Option<Channel>> {
        let patch = ChannelPatch {
            active: Some(true),
            ..ChannelPatch::default()
        };
        let Some(c) = self.update_channel(channel, &patch).await? else {
            return Ok(None);
        };
        self.audit_done(&c, actor, "enable_channel", self.clock.now())
            .await;
        Ok(Some(c))
    }

    /// Replaces a channel's signing secret with `secret` (a new random one when `None`). The
    /// old one keeps signing beside it for `grace_ms` (see `core::signing::retire`), so a
    /// receiver can roll over without refusing a message. Audited (`rotate_signing_secret`).
    pub async fn rotate_secret(
        &self,
        channel: &Channel,
        secret: Option<String>,
        grace_ms: i64,
        actor: &Actor,
    ) -> Result<Rotation, FlowError> {
        let now = self.clock.now();
        let rotation = SecretRotation {
            replaces: channel.signing_secret.clone(),
            secret: secret.unwrap_or_else(converger_core::secret::new_signing_secret),
            retiring: signing::retire(
                &channel.signing_secret,
                &channel.retiring_secrets,
                grace_ms,
                now.ms(),
            ),
        };
        let done = self
            .channel_store
            .rotate_secret(&channel.tenant_id, &channel.id, &rotation, now)
            .await?;
        self.cache.forget_channel(&channel.id);
        let Some(c) = done else {
            // Another rotation won (this one's grace was meant for the secret it replaced,
            // not for the winner's), or the channel was deleted.
            return Ok(match self.channel_store.get_channel(&channel.id).await? {
                Some(c) if c.visible_to(converger_core::Scope::Tenant(&channel.tenant_id)) => {
                    Rotation::Raced
                }
                _ => Rotation::Gone,
            });
        };
        self.audit_done(&c, actor, "rotate_signing_secret", now)
            .await;
        Ok(Rotation::Done(Box::new(c)))
    }

    /// Deletes a channel: it leaves the tenant's reads and lists at once and takes no new
    /// activity. Nothing it still had to deliver is dropped silently: its breaker is closed
    /// and its parked deliveries released, and each pending delivery is dead-lettered with
    /// `last_error` `channel deleted` when it next comes up (at once for those waiting for a
    /// slot or parked, at its retry time for one waiting to retry), without a request. Its
    /// deliveries and their attempts stay readable until the retention ends, and the
    /// channel's row with them. Audited (`delete_channel`). `false` if it was gone already.
    pub async fn delete_channel(
        &self,
        channel: &Channel,
        actor: &Actor,
    ) -> Result<bool, FlowError> {
        let now = self.clock.now();
        let expires_at =
            now.secs() + i64::try_from(self.config.retention.as_secs()).unwrap_or(i64::MAX / 2);
        let Some(deleted) = self
            .channel_store
            .delete_channel(&channel.tenant_id, &channel.id, now, expires_at)
            .await?
        else {
            return Ok(false);
        };
        self.cache.forget_channel(&channel.id);
        self.cache.forget_tenant_channels(&channel.tenant_id);
        // What it still holds back (a pause, an open breaker, parked rows) goes first; the
        // sweeper does the same for a deleted channel whenever it finds it held.
        if let Err(e) = self.flow.reconciler().let_go(&deleted).await {
            tracing::warn!(channel_id = %channel.id, error = %e, "deleted channel not let go; the sweeper will");
        }
        self.audit_done(&deleted, actor, "delete_channel", now)
            .await;
        Ok(true)
    }

    /// An audit entry for a change already made: a failure to write it is logged, not
    /// returned, so the caller's retry does not make the change twice.
    /// Releases `channel`'s lane for `conversation_id` past its dead head (audited
    /// `release_lane`, naming the conversation and the dead delivery): the next delivery of
    /// the lane goes; the dead one stays dead (a replay sends it again, now after the others
    /// of the lane that were waiting).
    pub async fn release_lane(
        &self,
        channel: &Channel,
        conversation_id: &str,
        actor: &Actor,
    ) -> converger_ports::StoreResult<crate::lanes::Released> {
        let on_dead = channel
            .ordering
            .map(|o| o.on_dead_letter)
            .unwrap_or_default();
        let lane = converger_ports::keys::lane_key(&channel.id, conversation_id);
        let released = self.lanes.release(&lane, on_dead).await?;
        if let crate::lanes::Released::Past(dead) = &released {
            let now = self.clock.now();
            let entry = converger_ports::AuditEntry::new(
                channel.tenant_id.clone(),
                actor.clone(),
                "release_lane",
                "channel",
                channel.id.as_str(),
                serde_json::json!({"channel_id": channel.id, "conversation_id": conversation_id, "dead_delivery_id": dead}),
                now,
            );
            if let Err(e) = self.audit_log.add_audit(&entry).await {
                tracing::error!(channel_id = %channel.id, error = %e, "audit entry not written");
            }
        }
        Ok(released)
    }

    async fn audit_done(
        &self,
        channel: &Channel,
        actor: &Actor,
        action: &str,
        now: converger_core::Timestamp,
    ) {
        if let Err(e) = self
            .flow
            .operator()
            .audit(channel, actor, action, now)
            .await
        {
            tracing::error!(channel_id = %channel.id, action, error = %e, "audit entry not written");
        }
    }
}
