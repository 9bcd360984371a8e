//! Tenants and their channels.

use super::*;
use converger_core::shards::Grant;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: TenantId,
    pub name: String,
    pub tier: Tier,
    pub created_at: Timestamp,
    /// Where the tenant's channel alerts go (set through the admin API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_webhook_url: Option<String>,
    /// The managed webhook channel that delivers those alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_channel_id: Option<ChannelId>,
    /// The operator's override of the tier's API rate limit (`"<n>/s"`, per API key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_rate_limit: Option<String>,
    /// How many partitions the tenant's delivery listings are spread over: its tier's default
    /// when it was created, grown by an operator (never shrunk). `None` only in rows written
    /// without it (the tier's default). See [`Tenant::delivery_shards`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_shards: Option<u32>,
    /// Listing shards granted beyond `delivery_shards` while its load calls for them
    /// (`converger_core::shards`), written by the changes function.
    #[serde(default, skip_serializing_if = "ShardGrants::is_none")]
    pub shard_grants: ShardGrants,
    /// The SES identities (addresses and domains) its email channels may send from, set by
    /// an operator; none, no email. See `converger_core::email::sender_allowed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub email_senders: Vec<String>,
    /// The SES tenant its email is sent on behalf of (set by an operator, who associates the
    /// tenant's identities and the stack's configuration set with it in SES); none, the
    /// account's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ses_tenant: Option<String>,
    /// The external id the tenant's AWS roles require of the platform (AWS channel types):
    /// made when first asked for (`GET /api/v1/aws-identity`), changed only by a rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_external_id: Option<String>,
    /// A type of its event-type catalog has had a payload schema: its activities' event types
    /// are looked up at ingest. Never cleared; a tenant without it pays no lookup.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub typed_events: bool,
}

/// The most listing shards a tenant may have.
pub const MAX_DELIVERY_SHARDS: u32 = converger_core::shards::MAX_SHARDS;

/// A tier's listing shards when the operator set none: each shard takes a few hundred
/// deliveries a second (docs/scaling.md), and a page of a listing reads every shard of each
/// status it lists, so a small tenant keeps few.
pub fn default_delivery_shards(tier: converger_core::Tier) -> u32 {
    match tier {
        converger_core::Tier::High | converger_core::Tier::Bulk => 8,
        converger_core::Tier::Default => 2,
    }
}

/// A tenant's grants of listing shards: the latest, and every one whose rows may still be
/// listed, merged into one span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardGrants {
    /// The latest grant (in force until its `until_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<Grant>,
    /// Every grant within the retention, merged: the shards a listing reads beyond the
    /// tenant's own, and over which times of change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Grant>,
    /// Raised by every write of the grants: the condition of the next.
    #[serde(default)]
    pub v: u64,
}

impl ShardGrants {
    pub fn is_none(&self) -> bool {
        self.latest.is_none() && self.span.is_none()
    }

    /// The grants after `next` is made at `now_ms`: the span keeps the grants whose rows may
    /// still be listed (a delivery is kept `retention_ms` after it is created).
    pub fn with(&self, next: Grant, now_ms: i64, retention_ms: i64) -> ShardGrants {
        let span = match self.span {
            Some(s) if s.until_ms.saturating_add(retention_ms) > now_ms => s.merged(&next),
            _ => next,
        };
        ShardGrants {
            latest: Some(next),
            span: Some(span),
            v: self.v + 1,
        }
    }
}

/// A delivery's hold on a granted listing shard (`converger_core::shards::Lease`).
pub use converger_core::shards::Lease as ShardLease;

impl Tenant {
    /// Where a delivery `id` created at `now_ms` is listed (`converger_core::shards::place`).
    pub fn placement(&self, id: &str, now_ms: i64) -> converger_core::shards::Place {
        converger_core::shards::place(
            stable_hash(id),
            self.delivery_shards(),
            self.shard_grants.latest.as_ref(),
            now_ms,
        )
    }

    /// The listing shards that may hold an entry whose sort key is within `lo..=hi`
    /// (`<updated_at>#<id>`, either end open; `converger_core::shards::read_shards`).
    pub fn listing_shards(&self, lo: Option<&str>, hi: Option<&str>) -> Vec<u32> {
        let at =
            |k: &str| converger_core::time::rfc3339_to_ms(k.split_once('#').map_or(k, |(t, _)| t));
        converger_core::shards::read_shards(
            self.delivery_shards(),
            self.shard_grants.span.as_ref(),
            lo.and_then(at),
            hi.and_then(at),
        )
    }

    /// The listing shard grant in force at `now_ms`, if any.
    pub fn shard_grant_at(&self, now_ms: i64) -> Option<&Grant> {
        Grant::in_force(
            self.shard_grants.latest.as_ref(),
            self.delivery_shards(),
            now_ms,
        )
    }

    /// The partitions its delivery listings are spread over: every delivery is written to one
    /// of them (a hash of its id, chosen when it is created), and a listing reads them all.
    pub fn delivery_shards(&self) -> u32 {
        self.delivery_shards
            .unwrap_or_else(|| default_delivery_shards(self.tier))
            .clamp(1, MAX_DELIVERY_SHARDS)
    }

    /// The rate limit of each of its API keys, given the tiers' `defaults`.
    pub fn api_limit(
        &self,
        defaults: &converger_core::api_limit::Defaults,
    ) -> converger_core::RateLimit {
        defaults.effective(self.api_rate_limit.as_deref(), self.tier)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    pub id: ChannelId,
    pub tenant_id: TenantId,
    #[serde(rename = "type")]
    pub kind: ChannelType,
    pub name: String,
    /// Adapter configuration (for a webhook: url, method, headers, receive_timeout).
    pub config: Map<String, Value>,
    /// `config` as the channel type's adapter parsed it, kept with this copy of the channel
    /// (a clone starts without it), so that its deliveries do not parse it again.
    #[serde(skip)]
    pub parsed_config: converger_core::cache::Parsed,
    pub active: bool,
    /// The channel's retry policy override (validated on write).
    #[serde(default)]
    pub retry_policy: converger_core::PolicyLayer,
    /// Standard Webhooks signing secret (`whsec_...`).
    pub signing_secret: String,
    /// Breaker and window overrides (`failure_threshold`, `cooldown_ms`, `park_seconds`,
    /// `max_in_flight`, `replay_dead_letters_on_close`, `replay_window_ms`).
    #[serde(default)]
    pub circuit_breaker: converger_core::BreakerOverrides,
    /// Outbound rate limit (`"80/s"`, `"/m"`, `"/h"`); the adapter's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<converger_core::RateLimit>,
    /// Auto-disable overrides (`failed_attempts`, `success_window_ms`).
    #[serde(
        default,
        skip_serializing_if = "converger_core::health::AutoDisableOverrides::is_empty"
    )]
    pub auto_disable: converger_core::health::AutoDisableOverrides,
    /// When and why the platform disabled the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Managed by the platform (a tenant's alert channel): its own events are not alerted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
    /// The event types it subscribes to (names, or `*` for all): an activity sent by event
    /// type, without `channel_ids`, reaches every active subscriber of its tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_types: Vec<String>,
    /// Which of the activities sent to it it wants (`core::filter`): one it does not is
    /// recorded `filtered` at ingest and never attempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<converger_core::filter::Filter>,
    /// Steps applied to each delivery's copy of the payload before the adapter
    /// (`core::middleware`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub middleware: Vec<converger_core::middleware::Step>,
    /// Secrets a rotation replaced that still sign until their grace ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retiring_secrets: Vec<converger_core::signing::RetiringSecret>,
    /// Ordered lanes (`core::lanes`): each conversation's deliveries one at a time, in
    /// `seq` order. Set when the channel is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<converger_core::lanes::Ordering>,
    /// When the tenant deleted it: it is gone from the tenant's reads and lists, takes no new
    /// activity, and its pending deliveries are dead-lettered; the row stays for the
    /// history of its deliveries until `expires_at` (DynamoDB TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Channel {
    /// A new active channel with a fresh id and signing secret and default settings.
    pub fn new(
        tenant_id: TenantId,
        kind: ChannelType,
        name: &str,
        config: Map<String, Value>,
        now: Timestamp,
    ) -> Self {
        Self {
            id: ChannelId::generate(),
            tenant_id,
            kind,
            name: name.to_owned(),
            config,
            parsed_config: Default::default(),
            active: true,
            retry_policy: Default::default(),
            signing_secret: converger_core::secret::new_signing_secret(),
            circuit_breaker: Default::default(),
            rate_limit: None,
            auto_disable: Default::default(),
            disabled_at: None,
            disabled_reason: None,
            managed: false,
            event_types: Vec::new(),
            filter: None,
            middleware: Vec::new(),
            retiring_secrets: Vec::new(),
            ordering: None,
            deleted_at: None,
            expires_at: None,
            created_at: now,
            updated_at: now,
        }
    }
}

/// The fields a PATCH may change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelPatch {
    pub name: Option<String>,
    pub config: Option<Map<String, Value>>,
    pub active: Option<bool>,
    pub retry_policy: Option<converger_core::PolicyLayer>,
    pub circuit_breaker: Option<converger_core::BreakerOverrides>,
    /// `Some(None)` removes the channel's own limit.
    pub rate_limit: Option<Option<converger_core::RateLimit>>,
    pub auto_disable: Option<converger_core::health::AutoDisableOverrides>,
    pub event_types: Option<Vec<String>>,
    /// `Some(None)` removes the filter.
    pub filter: Option<Option<converger_core::filter::Filter>>,
    pub middleware: Option<Vec<converger_core::middleware::Step>>,
}

impl Channel {
    /// The secrets that sign what it sends at `now`: the current one and those still
    /// retiring.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&str> {
        converger_core::signing::signing_secrets(
            &self.signing_secret,
            &self.retiring_secrets,
            now.ms(),
        )
    }

    /// Whether `scope` may read it: its tenant, while it is not deleted, or an operator.
    pub fn visible_to(&self, scope: converger_core::Scope<'_>) -> bool {
        scope.sees(&self.tenant_id)
            && (self.deleted_at.is_none() || scope == converger_core::Scope::Operator)
    }

    /// Whether it receives an activity of `event_type` (active, not deleted, subscribed).
    pub fn subscribes(&self, event_type: &str) -> bool {
        self.active
            && self.deleted_at.is_none()
            && converger_core::channel::subscribes(&self.event_types, event_type)
    }
}

/// A secret rotation: the new secret, and the retiring ones after it
/// (`core::signing::retire`), written only while the current secret is still `replaces`.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretRotation {
    pub replaces: String,
    pub secret: String,
    pub retiring: Vec<converger_core::signing::RetiringSecret>,
}

/// A page of a tenant's channels, by id, optionally of one type or active state. Deleted
/// channels are never listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelQuery {
    pub tenant: TenantId,
    pub kind: Option<ChannelType>,
    pub active: Option<bool>,
    pub limit: usize,
    /// The last id of the page before.
    pub after: Option<ChannelId>,
}

impl ChannelQuery {
    /// Whether `c` belongs on a page of this list (the position aside).
    pub fn matches(&self, c: &Channel) -> bool {
        c.tenant_id == self.tenant
            && c.deleted_at.is_none()
            && self.kind.is_none_or(|k| c.kind == k)
            && self.active.is_none_or(|a| c.active == a)
    }
}
