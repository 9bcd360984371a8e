//! One delivery attempt, as a staged pipeline, each stage a method of its own:
//! [`claim`](Pipeline::claim) (a lease on the row) -> [`prepare`](Pipeline::prepare) (the
//! channel, the flow gate, the activity) -> [`call`](Pipeline::call) (the adapter, under the
//! policy's timeout) -> [`settle`](Pipeline::settle) (sent, retry later, or dead letter, and
//! the breaker told).
//!
//! The delivery row decides everything; the queue message only says "look at delivery X".
//! A duplicate message finds the lease taken or the delivery settled and does nothing; a
//! message that comes before the delivery is due is delayed again without an attempt.

use crate::Pipeline;
use crate::metrics;
use crate::outcome::{Admit, status_event};
pub use crate::outcome::{AttemptError, Report};
use converger_adapters::{Accepted, Delivered, Envelope, Target};
use converger_core::policy::{self, Next, hop_delay_s};
use converger_core::{DeliveryError, RetryPolicy, time};
use converger_ports::{
    Activity, AttemptEntry, Channel, Claim, Delivery, DeliveryMessage, LogUpdate, Outcome,
    PlatformEvent, RetryAt, SentInfo, StoreResult,
};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A delivery whose lease this attempt holds.
struct Claimed {
    d: Delivery,
    token: String,
}

/// A claimed delivery the gate let through, with what its attempt needs.
struct Prepared {
    d: Delivery,
    token: String,
    channel: Arc<Channel>,
    activity: Activity,
    /// The half-open probe of its channel.
    probe: bool,
    /// The activity rode in the queue message (so it rides in the next one too).
    carried_in: bool,
    /// This attempt's number.
    n: u32,
    started: Instant,
    started_at: String,
}

/// What the adapter call came to: `Err` when the delivery cannot be attempted at all
/// (inactive channel, no adapter), else the effective policy and the adapter's answer.
type Called = Result<(RetryPolicy, Result<Delivered, DeliveryError>), String>;

impl Prepared {
    /// This attempt's entry for the attempt log.
    fn log_entry(
        &self,
        retention: Duration,
        status_code: Option<u16>,
        snippet: Option<String>,
        error: Option<String>,
        next_retry_at: Option<i64>,
    ) -> LogUpdate {
        let expires_at = time::now_ms() / 1000 + i64::try_from(retention.as_secs()).unwrap_or(0);
        LogUpdate::append(
            &self.d.attempt_log,
            AttemptEntry {
                attempt: self.n,
                started_at: self.started_at.clone(),
                duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                status_code,
                response_snippet: snippet,
                error,
                next_retry_at: next_retry_at.map(time::ms_to_rfc3339),
                trigger: if self.probe { "probe" } else { "auto" }.into(),
                expires_at: Some(expires_at),
            },
        )
    }
}

impl Pipeline {
    /// Runs the attempt a queue message asks for.
    pub async fn attempt(&self, msg: DeliveryMessage) -> Result<Report, AttemptError> {
        let claimed = match self.claim(&msg).await? {
            Ok(c) => c,
            Err(report) => return Ok(report),
        };
        let prepared = match self.prepare(claimed, msg).await? {
            Ok(p) => p,
            Err(report) => return Ok(report),
        };
        let called = self.call(&prepared).await;
        self.settle(prepared, called).await
    }

    /// Takes the lease on the message's delivery; a report instead when there is nothing to
    /// attempt now (not due: the message is delayed again; leased, settled or missing).
    async fn claim(&self, msg: &DeliveryMessage) -> Result<Result<Claimed, Report>, AttemptError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        // The lease fits the channel's timeout (the channel read is cached); a message that
        // does not name its channel gets the longest.
        let timeout = match &msg.channel_id {
            Some(c) => self
                .channel(c)
                .await?
                .and_then(|ch| self.policy_of(&ch))
                .map(|p| p.timeout_ms),
            None => None,
        };
        let margin = u64::try_from(self.config.lease_margin.as_millis()).unwrap_or(u64::MAX);
        let lease_ms = policy::lease_ms(timeout, margin);
        let now_ms = time::now_ms();
        let report = match self
            .store
            .claim(&msg.delivery_id, &token, now_ms, lease_ms)
            .await?
        {
            Claim::Claimed(d) => return Ok(Ok(Claimed { d, token })),
            Claim::NotDue(d) => {
                let delay_s = hop_delay_s(d.next_attempt_at, now_ms, self.config.hop_ceiling_s);
                tracing::info!(delivery_id = %d.id, early_ms = d.next_attempt_at - now_ms, delay_s, "message came early; delayed again");
                self.queue.send(msg, delay_s).await?;
                Report::Hopped { delay_s }
            }
            Claim::Busy => Report::Skipped("another attempt holds the lease"),
            Claim::Settled(_) => Report::Skipped("delivery is settled"),
            Claim::Missing => {
                tracing::warn!(delivery_id = %msg.delivery_id, "message for a delivery that does not exist; dropped");
                Report::Skipped("no such delivery")
            }
        };
        Ok(Err(report))
    }

    /// The channel, the flow-control gate (before the activity is loaded or the adapter
    /// called), then the activity. A missing channel or activity is an unexpected failure:
    /// the lease is given back and the message is left to SQS, which redelivers it until its
    /// dead-letter queue takes it.
    async fn prepare(
        &self,
        Claimed { d, token }: Claimed,
        mut msg: DeliveryMessage,
    ) -> Result<Result<Prepared, Report>, AttemptError> {
        let carried_in = msg.activity.is_some();
        let gated = async {
            let channel = self.channel(&d.channel_id).await?.ok_or_else(|| {
                AttemptError::Missing(format!("channel {} not found", d.channel_id))
            })?;
            match self.admit_attempt(&d, &token, &msg, &channel).await? {
                Admit::Go { probe } => {
                    let activity = self.activity(&d, msg.activity.take()).await?;
                    Ok::<_, AttemptError>(Ok((channel, activity, probe)))
                }
                Admit::Done(report) => Ok(Err(report)),
            }
        };
        let gated = async {
            let (channel, activity, probe) = match gated.await? {
                Ok(x) => x,
                Err(report) => return Ok(Err(report)),
            };
            // A start slowed down by storage may have eaten into the lease: the call must end
            // before the lease does, or a second attempt could be calling at the same time.
            let timeout = self.policy_of(&channel).map_or(0, |p| p.timeout_ms);
            let until = d.lease_until.unwrap_or(i64::MIN);
            if !policy::lease_covers_call(until, time::now_ms(), timeout) {
                tracing::warn!(delivery_id = %d.id, "attempt started too late in its lease; given back");
                self.store.release(&d, &token).await?;
                let again = DeliveryMessage::new(d.id.clone(), d.tier, activity.if_inline())
                    .on(&channel.id);
                self.queue.send(&again, 0).await?;
                return Ok(Err(Report::Skipped("lease too short after a slow start")));
            }
            Ok(Ok((channel, activity, probe)))
        };
        match gated.await {
            Ok(Ok((channel, activity, probe))) => Ok(Ok(Prepared {
                n: d.attempts + 1,
                d,
                token,
                channel,
                activity,
                probe,
                carried_in,
                started: Instant::now(),
                started_at: time::now_rfc3339(),
            })),
            Ok(Err(report)) => Ok(Err(report)),
            Err(e) => {
                if let Err(re) = self.store.release(&d, &token).await {
                    tracing::warn!(delivery_id = %d.id, error = %re, "lease not released; it expires on its own");
                }
                Err(e)
            }
        }
    }

    /// Records what the call came to and tells the breaker.
    async fn settle(&self, p: Prepared, called: Called) -> Result<Report, AttemptError> {
        match called {
            Ok((_, Ok(delivered))) => self.on_delivered(&p, delivered).await,
            Ok((policy, Err(err))) => self.on_failure(&p, &policy, err).await,
            Err(reason) => {
                // The delivery cannot be attempted at all (inactive channel, no adapter).
                let e = p.log_entry(
                    self.config.attempt_retention,
                    None,
                    None,
                    Some(reason.clone()),
                    None,
                );
                let report = self.dead_letter(&p, &reason, &e).await?;
                self.after_attempt(&p.d, &p.channel, Outcome::Neutral, false, p.probe)
                    .await?;
                Ok(report)
            }
        }
    }

    /// Sent (or handed off to a client that acknowledges it later).
    async fn on_delivered(
        &self,
        p: &Prepared,
        delivered: Delivered,
    ) -> Result<Report, AttemptError> {
        let (d, n, kind) = (&p.d, p.n, p.channel.kind.as_str());
        let (accepted, handed_off): (Accepted, bool) = match delivered {
            Delivered::Sent(a) => (a, false),
            Delivered::HandedOff(a) => (a, true),
        };
        let e = p.log_entry(
            self.config.attempt_retention,
            accepted.status_code,
            accepted.response_snippet.clone(),
            None,
            None,
        );
        let info = SentInfo {
            provider_message_id: accepted.provider_message_id,
            response_status: accepted.status_code,
            handed_off,
        };
        if !self
            .store
            .mark_sent(d, &p.token, &info, &e, &time::now_rfc3339())
            .await?
        {
            return Ok(Report::Skipped("lease lost before recording success"));
        }
        if handed_off {
            tracing::info!(delivery_id = %d.id, channel_id = %d.channel_id, attempt = n, "delivery handed off; waiting for an acknowledgement");
            metrics::count("handed_off", kind, 1);
            self.after_attempt(d, &p.channel, Outcome::HandedOff, false, p.probe)
                .await?;
            return Ok(Report::HandedOff);
        }
        let duration_ms = u64::try_from(p.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(delivery_id = %d.id, activity_id = %d.activity_id, channel_id = %d.channel_id, attempt = n, duration_ms, "delivery sent");
        metrics::count("sent", kind, 1);
        self.after_attempt(d, &p.channel, Outcome::Success, false, p.probe)
            .await?;
        self.events
            .publish(vec![status_event(d, "sent", n, None)])
            .await;
        Ok(Report::Sent)
    }

    /// A failed call: a retry after the policy's backoff, or a dead letter when the policy
    /// says so (attempts exhausted, or a permanent error).
    async fn on_failure(
        &self,
        p: &Prepared,
        policy: &RetryPolicy,
        err: DeliveryError,
    ) -> Result<Report, AttemptError> {
        let d = &p.d;
        let outcome = if err.retryable {
            Outcome::Transient
        } else {
            Outcome::Neutral
        };
        let delay_ms = match policy.next_after_failure(p.n, &err, rand::random::<f64>()) {
            Next::RetryIn(delay_ms) => delay_ms,
            Next::Dead => {
                let e = p.log_entry(
                    self.config.attempt_retention,
                    err.status,
                    err.response_snippet.clone(),
                    Some(err.reason.clone()),
                    None,
                );
                let report = self.dead_letter(p, &err.reason, &e).await?;
                self.after_attempt(d, &p.channel, outcome, false, p.probe)
                    .await?;
                return Ok(report);
            }
        };
        let next_at = time::now_ms().saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX));
        let e = p.log_entry(
            self.config.attempt_retention,
            err.status,
            err.response_snippet.clone(),
            Some(err.reason.clone()),
            Some(next_at),
        );
        // A short backoff keeps the window slot; a long one gives it back and takes one
        // again when due.
        let cap = self.limits(&p.channel, d.tier).cap;
        let keep_slot =
            cap.is_some() && !p.probe && u128::from(delay_ms) <= self.config.slot_hold.as_millis();
        let retry_at = RetryAt {
            at_ms: next_at,
            keep_slot,
        };
        if !self
            .store
            .mark_attempt_failed(d, &p.token, &err.reason, retry_at, &e, &time::now_rfc3339())
            .await?
        {
            return Ok(Report::Skipped("lease lost before recording failure"));
        }
        let closed = self
            .after_attempt(d, &p.channel, outcome, keep_slot, p.probe)
            .await?;
        if !closed {
            // The breaker opened (or the probe failed): park the retry instead of enqueueing
            // it; the release after the close runs it.
            self.park_waiting(d, &p.channel).await?;
            return Ok(Report::Parked);
        }
        tracing::info!(delivery_id = %d.id, attempt = p.n, delay_ms, error = %err.reason, "attempt failed; retry scheduled");
        let delay_s = hop_delay_s(next_at, time::now_ms(), self.config.hop_ceiling_s);
        // An activity that came in the message fits in the next one.
        let carried = if p.carried_in {
            Some(&p.activity)
        } else {
            p.activity.if_inline()
        };
        let next = DeliveryMessage::new(d.id.clone(), d.tier, carried).on(&d.channel_id);
        // If this send fails, the message is redelivered and finds the row pending with its
        // due time: nothing is lost.
        self.queue.send(&next, delay_s).await?;
        Ok(Report::RetryScheduled { delay_ms })
    }

    /// Parks a delivery no attempt holds (a retry of a channel whose breaker just opened).
    async fn park_waiting(&self, d: &Delivery, channel: &Channel) -> Result<(), AttemptError> {
        if self.store.park(d, None, &time::now_rfc3339()).await? {
            self.park_marks(channel, d).await?;
        }
        Ok(())
    }

    /// The activity (from the message when it rode along).
    async fn activity(
        &self,
        d: &Delivery,
        carried: Option<Activity>,
    ) -> Result<Activity, AttemptError> {
        let activity = match carried.filter(|a| a.id == d.activity_id) {
            Some(a) => a,
            None => self
                .store
                .get_activity(&d.tenant_id, &d.activity_id)
                .await?
                .ok_or_else(|| {
                    AttemptError::Missing(format!("activity {} not found", d.activity_id))
                })?,
        };
        Ok(activity)
    }

    /// Calls the channel's adapter, under the effective policy's timeout.
    async fn call(&self, p: &Prepared) -> Called {
        let (d, activity, channel, n) = (&p.d, &p.activity, &p.channel, p.n);
        if !channel.active {
            return Err("channel is inactive".into());
        }
        let adapter = self
            .adapters
            .get(channel.kind)
            .ok_or_else(|| format!("no adapter for channel type {}", channel.kind))?;
        let policy = RetryPolicy::effective(
            &self.config.retry_policy,
            &adapter.default_policy(),
            &channel.retry_policy,
        );
        let timeout = Duration::from_millis(policy.timeout_ms.min(policy::ADAPTER_TIMEOUT_MAX_MS));
        let env = Envelope {
            delivery_id: d.id.as_str(),
            tenant_id: d.tenant_id.as_str(),
            activity_id: activity.id.as_str(),
            conversation_id: &activity.conversation_id,
            seq: activity.seq,
            payload: &activity.payload,
            channel_ids: &activity.channel_ids,
            attempt: n,
            services: self,
        };
        let target = Target {
            channel_id: channel.id.as_str(),
            config: &channel.config,
            signing_secret: &channel.signing_secret,
            timeout,
        };
        // The adapter enforces its own timeout; this bound only guards against a stuck one.
        let res = match tokio::time::timeout(
            timeout + Duration::from_millis(policy::CALL_GRACE_MS),
            adapter.deliver(env, target),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(DeliveryError::from_transport(
                format!("timed out after {} ms", policy.timeout_ms),
                channel.kind.as_str(),
            )),
        };
        Ok((policy, res))
    }

    /// The retry policy that applies to `channel` (`None`: no adapter for its type).
    fn policy_of(&self, channel: &Channel) -> Option<RetryPolicy> {
        let adapter = self.adapters.get(channel.kind)?;
        Some(RetryPolicy::effective(
            &self.config.retry_policy,
            &adapter.default_policy(),
            &channel.retry_policy,
        ))
    }

    async fn dead_letter(
        &self,
        p: &Prepared,
        reason: &str,
        log: &LogUpdate,
    ) -> Result<Report, AttemptError> {
        let (d, n, kind) = (&p.d, p.n, p.channel.kind.as_str());
        if !self
            .store
            .mark_dead(d, &p.token, reason, log, &time::now_rfc3339())
            .await?
        {
            return Ok(Report::Skipped("lease lost before dead-lettering"));
        }
        tracing::warn!(delivery_id = %d.id, activity_id = %d.activity_id, channel_id = %d.channel_id, attempts = n, error = %reason, "delivery dead-lettered");
        self.count_failed(d, 1).await;
        metrics::count("dead_lettered", kind, 1);
        self.events
            .publish(vec![
                status_event(d, "failed", n, Some(reason)),
                PlatformEvent {
                    detail_type: "delivery.dead_lettered",
                    detail: json!({
                        "delivery_id": d.id, "activity_id": d.activity_id, "channel_id": d.channel_id,
                        "tenant_id": d.tenant_id, "attempts": n, "error": reason,
                    }),
                },
            ])
            .await;
        Ok(Report::DeadLettered)
    }
}

impl Pipeline {
    /// A delivery's attempt log, newest first: the attempts numbered below `before` (all when
    /// `None`), at most `limit`, and whether more follow. The newest attempts live in the
    /// delivery item and older ones in the attempts table; entries past their retention are
    /// left out.
    pub async fn attempt_log(
        &self,
        d: &Delivery,
        before: Option<u32>,
        limit: usize,
    ) -> StoreResult<(Vec<AttemptEntry>, bool)> {
        let below = |a: u32| before.is_none_or(|b| a < b);
        let mut entries: Vec<AttemptEntry> = d
            .attempt_log
            .iter()
            .rev()
            .filter(|e| below(e.attempt))
            .cloned()
            .collect();
        let oldest_kept = d.attempt_log.first().map_or(u32::MAX, |e| e.attempt);
        if entries.len() <= limit && oldest_kept > 1 && !d.attempt_log.is_empty() {
            let from = before.map_or(oldest_kept, |b| b.min(oldest_kept));
            let older = self
                .store
                .older_attempts(&d.id, Some(from), limit + 1 - entries.len())
                .await?;
            entries.extend(older);
        }
        let now_s = converger_core::time::now_ms() / 1000;
        entries.retain(|e| e.expires_at.is_none_or(|x| x > now_s));
        entries.dedup_by_key(|e| e.attempt);
        let more = entries.len() > limit;
        entries.truncate(limit);
        Ok((entries, more))
    }
}
