//! A channel's lifecycle: creating and changing it (this instance forgets what it cached of
//! it), rotating its signing secret with an overlap, and deleting it without losing what it
//! still had to deliver.

use crate::outcome::FlowError;
use converger_core::ChannelId;
use converger_core::query::Actor;
use converger_core::signing;
use converger_ports::{Channel, ChannelPatch, SecretRotation, StoreResult};

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
}

impl<'p> Channels<'p> {
    pub(crate) fn of(p: &'p crate::Pipeline) -> Self {
        Self {
            clock: &*p.clock,
            channel_store: &*p.store,
            audit_log: &*p.store,
            config: &p.config,
            flow: &p.flow,
            cache: &p.cache,
            lanes: crate::lanes::Lanes::of(p),
        }
    }
}

impl Channels<'_> {
    /// Stores a new channel (already validated by its writer).
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
        if let Err(e) = self.flow.let_go(&deleted).await {
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
                &now.rfc3339(),
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
        if let Err(e) = self.flow.audit(channel, actor, action, now).await {
            tracing::error!(channel_id = %channel.id, action, error = %e, "audit entry not written");
        }
    }
}
