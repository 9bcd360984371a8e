//! Rate schedules (GCRA) in the flow table: a channel's outbound limit and an API key's.

use super::super::*;

/// What one advance of a schedule found.
enum Advance {
    /// Advanced: the places start here (the schedule's arrival time before the advance, at
    /// least now).
    Done(i64),
    /// The schedule runs beyond the bound asked for: its arrival time.
    Beyond(i64),
    /// Other writers kept changing it.
    Contended,
}

impl DynamoStore {
    /// Advances the schedule `key` by `advance` µs with one conditional write (two at most): an
    /// idle schedule (`tat <= now`) restarts from now, a busy one moves on if its arrival time
    /// is at most `furthest`. The busy write goes first when `busy_first` (an instance asking
    /// for a batch finds the schedule busy most often). The one place both forms of the
    /// schedule (refusing and reserving) write it.
    async fn schedule_advance(
        &self,
        key: &str,
        advance: i64,
        furthest: i64,
        now_us: i64,
        expires: i64,
        busy_first: bool,
    ) -> StoreResult<Advance> {
        #[derive(serde::Deserialize)]
        struct Rate {
            tat: i64,
        }
        for round in 0..3 {
            if !(busy_first && round == 0) {
                let idle = Update::new()
                    .set("tat", n(now_us + advance))
                    .set("expires_at", n(expires))
                    .when_cmp("tat", Cmp::Le, n(now_us), true)
                    .apply(
                        self.client
                            .update_item()
                            .table_name(&self.res.flow)
                            .key("key", s(key)),
                    )
                    .send()
                    .await;
                match idle {
                    Ok(_) => return Ok(Advance::Done(now_us)),
                    Err(e) if is_update_conditional(&e) => {}
                    Err(e) => return Err(sdk_err(e)),
                }
            }
            // `tat` exists wherever the condition holds, so the increment adds to it.
            let busy = Update::new()
                .increment("tat", advance)
                .set("expires_at", n(expires))
                .when_cmp("tat", Cmp::Gt, n(now_us), false)
                .when_cmp("tat", Cmp::Le, n(furthest), false)
                .apply(
                    self.client
                        .update_item()
                        .table_name(&self.res.flow)
                        .key("key", s(key)),
                )
                .return_values(ReturnValue::UpdatedNew);
            let reread = self.get::<Rate>(&self.res.flow, "key", key);
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
                    return Ok(Advance::Done(written - advance));
                }
                Conditional::Refused(Some(r)) => r.tat,
                Conditional::Refused(None) => continue,
            };
            if tat > now_us {
                return Ok(Advance::Beyond(tat));
            }
            // Idle (or it went idle between the two writes): the idle write next.
        }
        Ok(Advance::Contended)
    }

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
        let expires = now_us / 1_000_000 + 3600;
        Ok(
            match self
                .schedule_advance(
                    key,
                    interval,
                    now_us + tolerance,
                    now_us,
                    expires,
                    count > 1,
                )
                .await?
            {
                Advance::Done(_) => Ok(()),
                Advance::Beyond(tat) => Err(tat - tolerance),
                Advance::Contended => Err(now_us + interval),
            },
        )
    }

    /// Reserves `count` places in a channel's schedule (`RateLimit::reserve_n`): the places
    /// start where the schedule stood, read from the written arrival time.
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
        let ahead = limit.tolerance_us() + RATE_RESERVE_HORIZON_US;
        let expires = (now_us + RATE_RESERVE_HORIZON_US) / 1_000_000 + 3600;
        Ok(
            match self
                .schedule_advance(key, advance, now_us + ahead, now_us, expires, count > 1)
                .await?
            {
                Advance::Done(start) => Ok(start),
                Advance::Beyond(tat) => Err(tat - ahead),
                Advance::Contended => Err(now_us + advance),
            },
        )
    }
}
