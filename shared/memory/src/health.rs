//! The in-process backend of [`HealthStore`].

use super::*;
use converger_core::Timestamp;
use converger_core::health::CHECKED_TYPES;

#[async_trait]
impl HealthStore for MemStore {
    async fn count_deliveries(
        &self,
        channel: &ChannelId,
        minute: i64,
        created: i64,
        failed: i64,
    ) -> StoreResult<()> {
        if created == 0 && failed == 0 {
            return Ok(());
        }
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "flow",
                        "hc#<channel>#<time>",
                        health_counter_key(channel, minute),
                        96,
                    )]
                })?;
                let c = s
                    .counters
                    .entry((channel.clone(), minute))
                    .or_insert((0, 0));
                c.0 += created;
                c.1 += failed;
                Ok(())
            },
        )
        .await
    }

    async fn count_dead_letters(
        &self,
        channel: &ChannelId,
        day: i64,
        delta: i64,
        expires_at: i64,
    ) -> StoreResult<()> {
        if delta == 0 {
            return Ok(());
        }
        self.charged(
            |m| m.write,
            |s, meter| {
                meter.write(|| {
                    vec![converger_ports::capacity::item_write(
                        "health",
                        "<channel>#dl#<day>",
                        format!("{channel}#{}", keys::dead_letter_day_key(day)),
                        80,
                    )]
                })?;
                let c = s
                    .dead_letter_days
                    .entry((channel.clone(), day))
                    .or_insert((0, 0));
                c.0 += delta;
                c.1 = expires_at;
                Ok(())
            },
        )
        .await
    }

    async fn stored_dead_letters(
        &self,
        channel: &ChannelId,
        from_day: i64,
        now: Timestamp,
    ) -> StoreResult<u64> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let n: i64 = s
                .dead_letter_days
                .range((channel.clone(), from_day)..=(channel.clone(), i64::MAX))
                .filter(|(_, (_, expires))| *expires > now.secs())
                .map(|(_, (n, _))| *n)
                .sum();
            u64::try_from(n).unwrap_or(0)
        })
    }

    async fn health_inputs(
        &self,
        channel: &ChannelId,
        from_minute: i64,
        to_minute: i64,
    ) -> StoreResult<HealthInputs> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| {
            let mut inputs = HealthInputs {
                previous: s.flows.get(channel).and_then(|f| f.health_status),
                // As on DynamoDB: one batch read of the window's counters.
                requests: 1,
                ..HealthInputs::default()
            };
            for m in from_minute..=to_minute {
                if let Some((c, f)) = s.counters.get(&(channel.clone(), m)) {
                    inputs.created += u64::try_from(*c).unwrap_or(0);
                    inputs.failed += u64::try_from(*f).unwrap_or(0);
                }
            }
            inputs
        })
    }

    async fn record_health(&self, checks: &[HealthCheck]) -> StoreResult<usize> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            for c in checks {
                s.health
                    .entry(c.channel_id.clone())
                    .or_default()
                    .push(c.clone());
            }
            checks.len().div_ceil(25)
        })
    }

    async fn set_health_status(
        &self,
        channel: &ChannelId,
        status: converger_core::health::HealthStatus,
    ) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.flows
                .entry(channel.clone())
                .or_insert_with(|| converger_ports::Flow::new(channel.clone()))
                .health_status = Some(status);
        })
    }

    async fn health_history(
        &self,
        channel: &ChannelId,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<HealthCheck>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let mut rows: Vec<HealthCheck> = s.health.get(channel).cloned().unwrap_or_default();
            rows.sort_by_key(|r| std::cmp::Reverse(r.checked_at));
            rows.into_iter()
                .take(limit.clamp(1, converger_ports::MAX_HEALTH_HISTORY))
                .filter(|r| r.expires_at > now.secs())
                .collect()
        })
    }

    async fn checked_channels(
        &self,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Channel>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let mut all: Vec<&Channel> = s
                .channels
                .values()
                .filter(|c| c.active && CHECKED_TYPES.contains(&c.kind.as_str()))
                .filter(|c| from.as_deref().is_none_or(|k| c.id.as_str() > k))
                .collect();
            all.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
            let limit = limit.max(1);
            let next = (all.len() > limit).then(|| all[limit - 1].id.to_string());
            Page {
                items: all.into_iter().take(limit).cloned().collect(),
                next,
            }
        })
    }

    async fn disable_channel(
        &self,
        id: &ChannelId,
        at: Timestamp,
        reason: &str,
    ) -> StoreResult<Option<Channel>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let c = s.channels.get_mut(id).filter(|c| c.active)?;
            c.active = false;
            c.disabled_at = Some(at);
            c.disabled_reason = Some(reason.to_owned());
            c.updated_at = at;
            Some(c.clone())
        })
    }

    async fn set_tenant_alert(
        &self,
        id: &TenantId,
        url: Option<&str>,
        channel: Option<&ChannelId>,
    ) -> StoreResult<Option<Tenant>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let t = s.tenants.get_mut(id)?;
            match (url, channel) {
                (Some(u), Some(c)) => {
                    t.alert_webhook_url = Some(u.to_owned());
                    t.alert_channel_id = Some(c.clone());
                }
                _ => {
                    t.alert_webhook_url = None;
                    t.alert_channel_id = None;
                }
            }
            Some(t.clone())
        })
    }
}
