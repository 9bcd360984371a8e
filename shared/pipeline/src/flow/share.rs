//! A tenant's share of its tier over all its channels (`core::flow::tenant_window_bound`):
//! the busy channels (those with a backlog) each write their window on one item per tenant,
//! and every counted window of the tenant is bounded by what the others leave of the share.
//! The item is read at most once per [`VIEW_TTL`] per tenant by an instance (an empty one
//! once per [`EMPTY_VIEW_TTL`]), and written when a busy channel's window moves or its entry
//! is due for renewal: a tenant whose channels keep up costs a read now and then, nothing
//! per delivery.

use super::*;
use converger_core::flow::{BusyEntry, tenant_window_bound, tier_share};
use std::collections::BTreeMap;

/// How long an instance trusts its view of a tenant's busy channels.
pub(super) const VIEW_TTL: Duration = Duration::from_secs(1);

/// How long an instance trusts a view that showed no busy channel.
pub(super) const EMPTY_VIEW_TTL: Duration = Duration::from_secs(5);

/// Busy channels of a tenant, as this instance last read or wrote them.
pub(super) type BusyView = BTreeMap<ChannelId, BusyEntry>;

impl TenantShare<'_> {
    /// The most `channel` (of a tenant on `tier`) may hold in flight because of its tenant's
    /// other busy channels; `u32::MAX` when none is busy, or when the view cannot be read (the
    /// channel's own bound still holds).
    pub(crate) async fn bound(&self, channel: &Channel, tier: Tier) -> u32 {
        let view = self.view(&channel.tenant_id).await;
        let now = self.clock.now_ms();
        let others = view
            .iter()
            .filter(|(c, e)| **c != channel.id && e.live(now))
            .map(|(_, e)| e.window);
        tenant_window_bound(tier_share(tier, self.config.tier_concurrency), others)
            .unwrap_or(u32::MAX)
    }

    /// Records that `channel` is busy with the window `window`, unless its entry already
    /// says so (and is not due for renewal).
    pub(crate) async fn busy(&self, channel: &Channel, window: u32) {
        let now = self.clock.now_ms();
        let view = self.view(&channel.tenant_id).await;
        if view
            .get(&channel.id)
            .is_some_and(|e| !e.stale_for(window, now))
        {
            return;
        }
        let entry = BusyEntry { at: now, window };
        if let Err(e) = self
            .flows
            .set_busy(&channel.tenant_id, &channel.id, Some(entry))
            .await
        {
            tracing::warn!(channel_id = %channel.id, error = %e, "busy entry not written: the tenant's share counts without it");
            return;
        }
        self.remember(channel, Some(entry));
    }

    /// Takes `channel` out of its tenant's busy set (its backlog is empty).
    pub(crate) async fn idle(&self, channel: &Channel) {
        if let Err(e) = self
            .flows
            .set_busy(&channel.tenant_id, &channel.id, None)
            .await
        {
            tracing::warn!(channel_id = %channel.id, error = %e, "busy entry not removed: it expires");
            return;
        }
        self.remember(channel, None);
    }

    async fn view(&self, tenant: &TenantId) -> BusyView {
        if let Some(v) = self.caches.busy.get(tenant) {
            return v;
        }
        if self.caches.busy_empty.get(tenant).is_some() {
            return BusyView::new();
        }
        match self.flows.busy_channels(tenant).await {
            Ok(v) => {
                self.keep(tenant, v.clone());
                v
            }
            Err(e) => {
                tracing::warn!(tenant_id = %tenant, error = %e, "busy channels not read: no tenant bound for now");
                BusyView::new()
            }
        }
    }

    fn remember(&self, channel: &Channel, entry: Option<BusyEntry>) {
        let tenant = &channel.tenant_id;
        let mut v = self.caches.busy.get(tenant).unwrap_or_default();
        match entry {
            Some(e) => v.insert(channel.id.clone(), e),
            None => v.remove(&channel.id),
        };
        self.keep(tenant, v);
    }

    fn keep(&self, tenant: &TenantId, v: BusyView) {
        if v.is_empty() {
            self.caches.busy.remove(tenant);
            self.caches.busy_empty.insert(tenant.clone(), ());
        } else {
            self.caches.busy_empty.remove(tenant);
            self.caches.busy.insert(tenant.clone(), v);
        }
    }
}
