//! A tenant's share of its tier over all its channels (`core::flow::tenant_window_bound`):
//! the busy channels (those with a backlog) each write their window on one item per tenant,
//! and every counted window of the tenant is bounded by what the others leave of the share.
//! The item is read at most once per [`VIEW_TTL`] per tenant by an instance (an empty one
//! once per [`EMPTY_VIEW_TTL`]), and written when a busy channel's window moves or its entry
//! is due for renewal: a tenant whose channels keep up costs a read now and then, nothing
//! per delivery.

use super::*;
use converger_core::flow::{BusyEntry, tenant_window_bound_beside, tier_share};
use std::collections::BTreeMap;

/// How long an instance trusts its view of a tenant's busy channels.
const VIEW_TTL: Duration = Duration::from_secs(1);

/// How long an instance trusts a view that showed no busy channel (the cache's time to live).
const EMPTY_VIEW_TTL: Duration = Duration::from_secs(5);

/// Busy channels of a tenant, as this instance last read or wrote them.
type BusyView = BTreeMap<ChannelId, BusyEntry>;

/// What this instance remembers of tenants' shares, reached from this file only.
pub(super) struct ShareCaches {
    /// Tenants' busy channels (a view with some is trusted for less long).
    busy: TtlCache<TenantId, BusyView>,
}

impl ShareCaches {
    pub(super) fn new() -> Self {
        Self {
            busy: TtlCache::new(EMPTY_VIEW_TTL),
        }
    }
}

impl TenantShare<'_> {
    /// The most `channel` (of a tenant on `tier`) may hold in flight because of its tenant's
    /// other busy channels; `u32::MAX` when none is busy, or when the view cannot be read (the
    /// channel's own bound still holds).
    pub(crate) async fn bound(&self, channel: &Channel, tier: Tier) -> u32 {
        let view = self.view(&channel.tenant_id).await;
        tenant_window_bound_beside(
            tier_share(tier, self.config.tier_concurrency),
            &channel.id,
            &view,
            self.clock.now_ms(),
        )
        .unwrap_or(u32::MAX)
    }

    /// The window `channel`'s cap `cap` allows with its tenant's other busy channels.
    pub(crate) async fn most(&self, channel: &Channel, tier: Tier, cap: u32) -> u32 {
        cap.min(self.bound(channel, tier).await)
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

    /// The tenant's busy channels: this instance's view when fresh (a view with busy
    /// channels for [`VIEW_TTL`], an empty one for [`EMPTY_VIEW_TTL`]), else read.
    async fn view(&self, tenant: &TenantId) -> BusyView {
        if let Some(v) = self.caches.share.busy.get(tenant)
            && (v.is_empty()
                || self
                    .caches
                    .share
                    .busy
                    .get_within(tenant, VIEW_TTL)
                    .is_some())
        {
            return v;
        }
        match self.flows.busy_channels(tenant).await {
            Ok(v) => {
                self.caches.share.busy.insert(tenant.clone(), v.clone());
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
        // Only a fresh view's other entries are kept beside this one's.
        let mut v = self
            .caches
            .share
            .busy
            .get_within(tenant, VIEW_TTL)
            .unwrap_or_default();
        match entry {
            Some(e) => v.insert(channel.id.clone(), e),
            None => v.remove(&channel.id),
        };
        self.caches.share.busy.insert(tenant.clone(), v);
    }
}
