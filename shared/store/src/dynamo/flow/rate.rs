//! Rate schedules (GCRA) in the flow table: a channel's outbound limit and an API key's.

use super::super::*;

impl DynamoStore {
    pub(super) async fn schedule_take(
        &self,
        key: &str,
        limit: &converger_core::RateLimit,
        count: u32,
        now_us: i64,
    ) -> StoreResult<Result<(), i64>> {
        let count = count.clamp(1, limit.count.max(1));
        // `count` requests advance the schedule by as many intervals, and fit while the last
        // of them is within the burst (`RateLimit::decide_n`).
        let (interval, tolerance) = (
            limit.interval_us() * i64::from(count),
            limit.tolerance_us() - limit.extra_us(count),
        );
        let key = key.to_owned();
        let expires = now_us / 1_000_000 + 3600;
        // A batch (`count` > 1) is asked for by a busy instance: the schedule most likely
        // runs ahead of now, so the busy write goes first (one write instead of two).
        let busy_first = count > 1;
        for round in 0..3 {
            if !(busy_first && round == 0) {
                // Idle: the schedule restarts from now.
                let idle = self
                    .client
                    .update_item()
                    .table_name(&self.res.flow)
                    .key("key", s(key.as_str()))
                    .update_expression("SET tat = :next, expires_at = :exp")
                    .condition_expression("attribute_not_exists(tat) OR tat <= :now")
                    .expression_attribute_values(":next", n(now_us + interval))
                    .expression_attribute_values(":now", n(now_us))
                    .expression_attribute_values(":exp", n(expires))
                    .send()
                    .await;
                match idle {
                    Ok(_) => return Ok(Ok(())),
                    Err(e) if is_update_conditional(&e) => {}
                    Err(e) => return Err(sdk_err(e)),
                }
            }
            // Busy: more intervals, if the schedule is within the burst tolerance.
            let busy = self
                .client
                .update_item()
                .table_name(&self.res.flow)
                .key("key", s(key.as_str()))
                .update_expression("SET tat = tat + :i, expires_at = :exp")
                .condition_expression("tat > :now AND tat <= :limit")
                .expression_attribute_values(":i", n(interval))
                .expression_attribute_values(":now", n(now_us))
                .expression_attribute_values(":limit", n(now_us + tolerance))
                .expression_attribute_values(":exp", n(expires));
            #[derive(serde::Deserialize)]
            struct Rate {
                tat: i64,
            }
            let reread = self.get::<Rate>(&self.res.flow, "key", &key);
            let tat = match self.update_or_old(busy, reread).await? {
                Conditional::Applied(_) => return Ok(Ok(())),
                Conditional::Refused(Some(r)) => r.tat,
                Conditional::Refused(None) => continue,
            };
            if tat > now_us {
                return Ok(Err(tat - tolerance));
            }
            // Idle (or it went idle between the two writes): the idle write next.
        }
        Ok(Err(now_us + interval))
    }

    /// Reserves `count` places in a channel's schedule (`RateLimit::reserve_n`): one
    /// conditional write, the busy one first when the instance asks for a batch; the start
    /// is read from the written arrival time.
    pub(super) async fn schedule_reserve(
        &self,
        key: &str,
        limit: &converger_core::RateLimit,
        count: u32,
        now_us: i64,
    ) -> StoreResult<Result<i64, i64>> {
        use converger_core::flow::RATE_RESERVE_HORIZON_US;
        let count = count.clamp(1, limit.count.max(1));
        let advance = limit.interval_us() * i64::from(count);
        // The first place lies within the horizon while tat - tolerance <= now + horizon.
        let furthest = now_us + limit.tolerance_us() + RATE_RESERVE_HORIZON_US;
        let key = key.to_owned();
        let expires = (now_us + RATE_RESERVE_HORIZON_US) / 1_000_000 + 3600;
        let busy_first = count > 1;
        for round in 0..3 {
            if !(busy_first && round == 0) {
                let idle = self
                    .client
                    .update_item()
                    .table_name(&self.res.flow)
                    .key("key", s(key.as_str()))
                    .update_expression("SET tat = :next, expires_at = :exp")
                    .condition_expression("attribute_not_exists(tat) OR tat <= :now")
                    .expression_attribute_values(":next", n(now_us + advance))
                    .expression_attribute_values(":now", n(now_us))
                    .expression_attribute_values(":exp", n(expires))
                    .send()
                    .await;
                match idle {
                    Ok(_) => return Ok(Ok(now_us)),
                    Err(e) if is_update_conditional(&e) => {}
                    Err(e) => return Err(sdk_err(e)),
                }
            }
            let busy = self
                .client
                .update_item()
                .table_name(&self.res.flow)
                .key("key", s(key.as_str()))
                .update_expression("SET tat = tat + :i, expires_at = :exp")
                .condition_expression("tat > :now AND tat <= :limit")
                .expression_attribute_values(":i", n(advance))
                .expression_attribute_values(":now", n(now_us))
                .expression_attribute_values(":limit", n(furthest))
                .expression_attribute_values(":exp", n(expires))
                .return_values(ReturnValue::UpdatedNew);
            #[derive(serde::Deserialize)]
            struct Rate {
                tat: i64,
            }
            let reread = self.get::<Rate>(&self.res.flow, "key", &key);
            let tat = match self.update_or_old(busy, reread).await? {
                Conditional::Applied(item) => {
                    let written = item
                        .as_ref()
                        .and_then(|i| i.get("tat"))
                        .and_then(|v| v.as_n().ok())
                        .and_then(|v| v.parse::<i64>().ok())
                        .ok_or_else(|| {
                            StoreError::Corrupt(format!("rate schedule {key} wrote no tat"))
                        })?;
                    return Ok(Ok(written - advance));
                }
                Conditional::Refused(Some(r)) => r.tat,
                Conditional::Refused(None) => continue,
            };
            if tat > now_us {
                return Ok(Err(tat - limit.tolerance_us() - RATE_RESERVE_HORIZON_US));
            }
        }
        Ok(Err(now_us + advance))
    }
}
