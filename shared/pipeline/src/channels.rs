//! A channel's lifecycle beyond create and update: rotating its signing secret with an
//! overlap, and deleting it without losing what it still had to deliver.

use crate::Pipeline;
use crate::outcome::AttemptError;
use converger_core::query::Actor;
use converger_core::signing;
use converger_core::{CircuitState, time};
use converger_ports::{Channel, FlowJobKind, SecretRotation, Transition};

impl Pipeline {
    /// Replaces a channel's signing secret with `secret` (a new random one when `None`). The
    /// old one keeps signing beside it for `grace_ms` (see `core::signing::retire`), so a
    /// receiver can roll over without refusing a message. Audited (`rotate_signing_secret`).
    /// `None` when the channel is gone (deleted meanwhile).
    pub async fn rotate_secret(
        &self,
        channel: &Channel,
        secret: Option<String>,
        grace_ms: i64,
        actor: &Actor,
    ) -> Result<Option<Channel>, AttemptError> {
        let secret = secret.unwrap_or_else(converger_core::secret::new_signing_secret);
        let mut current = channel.clone();
        // A concurrent rotation changes the secret this one replaces: read again and retire
        // the secret that is current then.
        for _ in 0..3 {
            let now = time::now_ms();
            let rotation = SecretRotation {
                replaces: current.signing_secret.clone(),
                secret: secret.clone(),
                retiring: signing::retire(
                    &current.signing_secret,
                    &current.retiring_secrets,
                    grace_ms,
                    now,
                ),
            };
            let done = self
                .store
                .rotate_secret(
                    &channel.tenant_id,
                    &channel.id,
                    &rotation,
                    &time::ms_to_rfc3339(now),
                )
                .await?;
            self.forget_channel(&channel.id);
            if let Some(c) = done {
                self.audit(&c, actor, "rotate_signing_secret", now).await?;
                return Ok(Some(c));
            }
            match self.store.get_channel(&channel.id).await? {
                Some(c) if c.deleted_at.is_none() && c.tenant_id == channel.tenant_id => {
                    current = c;
                }
                _ => return Ok(None),
            }
        }
        Err(AttemptError::Store(converger_ports::StoreError::Conflict(
            "the signing secret kept changing; try again".into(),
        )))
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
    ) -> Result<bool, AttemptError> {
        let now = time::now_ms();
        let expires_at =
            now / 1000 + i64::try_from(self.config.retention.as_secs()).unwrap_or(i64::MAX / 2);
        let Some(deleted) = self
            .store
            .delete_channel(
                &channel.tenant_id,
                &channel.id,
                &time::ms_to_rfc3339(now),
                expires_at,
            )
            .await?
        else {
            return Ok(false);
        };
        self.forget_channel(&channel.id);
        self.forget_tenant_channels(&channel.tenant_id);
        self.audit(&deleted, actor, "delete_channel", now).await?;
        use CircuitState::*;
        let t = Transition::new(&[Open, HalfOpen, Paused], Closed, now).reset();
        if let Some(f) = self.store.transition(&channel.id, &t).await? {
            self.remember_flow(&f);
        }
        self.send_flow_job(&channel.id, FlowJobKind::Release, 0)
            .await?;
        Ok(true)
    }
}
