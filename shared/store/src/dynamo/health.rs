//! The DynamoDB backend of [`HealthStore`]: created deliveries and dead letters as per-minute
//! counters in the flow table (`hc#<channel>#<minute>`: `created`, `failed`; each instance
//! writes the sums it added up, see `converger_core::health::Tally`), health rows in the
//! health table.

use super::*;
use converger_core::Timestamp;
use converger_core::health::CHECKED_TYPES;

/// How long per-minute counters are kept (the window is 60 minutes).
pub(super) const COUNTER_TTL_S: i64 = 2 * 3600;

#[async_trait]
impl HealthStore for DynamoStore {
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
        self.add_counter(&CounterAdd::Health {
            channel: channel.clone(),
            minute,
            created,
            failed,
        })
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
        self.add_counter(&CounterAdd::DeadLetters {
            channel: channel.clone(),
            day,
            delta,
            expires_at,
        })
        .await
    }

    async fn stored_dead_letters(
        &self,
        channel: &ChannelId,
        from_day: i64,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let mut total = 0i64;
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.res.health)
                .key_condition_expression("channel_id = :ch AND checked_sk BETWEEN :from AND :to")
                .expression_attribute_values(":ch", s(channel.as_str()))
                .expression_attribute_values(":from", s(keys::dead_letter_day_key(from_day)))
                .expression_attribute_values(":to", s(format!("{}~", keys::DEAD_LETTER_DAYS)))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                // TTL deletion lags: an expired counter counts nothing.
                if num(&item, "expires_at") > now.secs() {
                    total += num(&item, "dead_letters");
                }
            }
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(u64::try_from(total).unwrap_or(0))
    }

    async fn health_inputs(
        &self,
        channel: &ChannelId,
        from_minute: i64,
        to_minute: i64,
    ) -> StoreResult<HealthInputs> {
        let mut keys: Vec<Item> = (from_minute..=to_minute)
            .map(|m| HashMap::from([("key".to_owned(), s(health_counter_key(channel, m)))]))
            .collect();
        keys.push(HashMap::from([("key".to_owned(), s(channel.as_str()))]));
        let mut inputs = HealthInputs {
            requests: keys.len().div_ceil(100),
            ..HealthInputs::default()
        };
        for item in self.batch_get(&self.res.flow, keys, false).await? {
            if item.contains_key("channel_id") {
                let flow: converger_ports::Flow = from_item(item)?;
                inputs.previous = flow.health_status;
            } else {
                inputs.created += u64::try_from(num(&item, "created")).unwrap_or(0);
                inputs.failed += u64::try_from(num(&item, "failed")).unwrap_or(0);
            }
        }
        Ok(inputs)
    }

    async fn record_health(&self, checks: &[HealthCheck]) -> StoreResult<usize> {
        let items = checks
            .iter()
            .map(|c| {
                let mut item = to_item(c)?;
                item.insert("checked_sk".into(), s(c.checked_at.rfc3339()));
                Ok(item)
            })
            .collect::<StoreResult<Vec<Item>>>()?;
        self.batch_put(&self.res.health, items).await?;
        Ok(checks.len().div_ceil(25))
    }

    async fn set_health_status(
        &self,
        channel: &ChannelId,
        status: converger_core::health::HealthStatus,
    ) -> StoreResult<()> {
        super::flow::whole(
            Update::new().set("health_status", s(status.as_str())),
            channel,
        )
        .apply(self.flow_update(channel))
        .send()
        .await
        .map_err(sdk_err)?;
        Ok(())
    }

    async fn health_history(
        &self,
        channel: &ChannelId,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<HealthCheck>> {
        // Pages of up to 500 until `limit` (a week of checks is about 2,000).
        let limit = limit.clamp(1, converger_ports::MAX_HEALTH_HISTORY);
        let mut rows = Vec::new();
        let mut from = None;
        loop {
            let page = (limit - rows.len()).min(500);
            let out = self
                .client
                .query()
                .table_name(&self.res.health)
                // The checks only, not the dead-letter counters sorted after them.
                .key_condition_expression("channel_id = :ch AND checked_sk < :counters")
                .expression_attribute_values(":ch", s(channel.as_str()))
                .expression_attribute_values(":counters", s(keys::DEAD_LETTER_DAYS))
                .scan_index_forward(false)
                .limit(i32::try_from(page).unwrap_or(500))
                .set_exclusive_start_key(from)
                .send()
                .await
                .map_err(sdk_err)?;
            for item in out.items.unwrap_or_default() {
                rows.push(from_item::<HealthCheck>(item)?);
            }
            from = out.last_evaluated_key;
            if from.is_none() || rows.len() >= limit {
                break;
            }
        }
        // DynamoDB deletes expired rows up to two days late: they are not shown.
        Ok(rows
            .into_iter()
            .filter(|r| r.expires_at > now.secs())
            .collect())
    }

    async fn checked_channels(
        &self,
        limit: usize,
        from: Option<String>,
    ) -> StoreResult<Page<Channel>> {
        let mut req = self
            .client
            .scan()
            .table_name(&self.res.channels)
            .filter_expression("active = :yes AND #type IN (:t0, :t1, :t2, :t3, :t4)")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .set_exclusive_start_key(from.map(|k| HashMap::from([("id".to_owned(), s(k))])));
        for (i, t) in CHECKED_TYPES.iter().enumerate() {
            req = req.expression_attribute_values(format!(":t{i}"), s(*t));
        }
        let out = req.send().await.map_err(sdk_err)?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_item)
            .collect::<StoreResult<Vec<Channel>>>()?;
        let next = out
            .last_evaluated_key
            .and_then(|k| k.get("id").and_then(|v| v.as_s().ok()).cloned());
        Ok(Page { items, next })
    }

    async fn disable_channel(
        &self,
        id: &ChannelId,
        at: Timestamp,
        reason: &str,
    ) -> StoreResult<Option<Channel>> {
        let r = Update::new()
            .set("active", AttributeValue::Bool(false))
            .set("disabled_at", s(at.rfc3339()))
            .set("disabled_reason", s(reason))
            .set("updated_at", s(at.rfc3339()))
            .when_eq("active", AttributeValue::Bool(true))
            .apply(self.channel_update(id))
            .send()
            .await;
        match r {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn set_tenant_alert(
        &self,
        id: &TenantId,
        url: Option<&str>,
        channel: Option<&ChannelId>,
    ) -> StoreResult<Option<Tenant>> {
        let u = match (url, channel) {
            (Some(u), Some(c)) => Update::new()
                .set("alert_webhook_url", s(u))
                .set("alert_channel_id", s(c.as_str())),
            _ => Update::new().remove_each(["alert_webhook_url", "alert_channel_id"]),
        };
        let req = u.when_exists("pk").apply(self.tenant_update(id));
        match req.send().await {
            Ok(out) => out.attributes.map(from_item).transpose(),
            Err(e) if is_update_conditional(&e) => Ok(None),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
