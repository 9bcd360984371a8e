//! One delivery attempt, as a staged pipeline, each stage a method of its own:
//! [`claim`](Attempts::claim) (a lease on the row) -> [`prepare`](Attempts::prepare) (the
//! channel, the flow gate, the activity) -> [`call`](Attempts::call) (the adapter, under the
//! policy's timeout) -> [`settle`](Attempts::settle) (sent, retry later, or dead letter) ->
//! [`after_attempt`](Attempts::after_attempt) (flow control told, in `after`).
//!
//! The delivery row decides everything; the queue message only says "look at delivery X".
//! A duplicate message finds the lease taken or the delivery settled and does nothing; a
//! message that comes before the delivery is due is delayed again without an attempt.

use crate::flow::CallEnd;
use crate::metrics;
use crate::outcome::Admit;
pub use crate::outcome::{AttemptError, Report};
use converger_adapters::{Accepted, Delivered, Envelope, Target};
use converger_core::policy::{self, Next, hop_delay_s, watch_again_s};
use converger_core::{DeliveryError, RetryPolicy, Timestamp, Verdict};
use converger_ports::{
    Activity, AttemptEntry, AttemptOutcome, Channel, Claim, Delivery, DeliveryMessage, LogUpdate,
    Outcome, RetryAt, SentInfo, StoreResult,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};
use tracing::Instrument;

mod after;
mod log;
mod parts;

pub(crate) use parts::Prepared;
use parts::{Answer, CallError, Called, Claimed, HandOn, Step, lease_token};

/// The span of one attempt: the delivery, with its tenant, activity, channel and attempt number
/// recorded once it is claimed. `chained`: run on the slot of the attempt before it.
fn attempt_span(delivery: &converger_core::DeliveryId, chained: bool) -> tracing::Span {
    tracing::info_span!(
        "attempt",
        delivery_id = %delivery,
        chained,
        tenant_id = tracing::field::Empty,
        activity_id = tracing::field::Empty,
        channel_id = tracing::field::Empty,
        attempt = tracing::field::Empty,
    )
}

/// Delivery attempts: claim, prepare, call, settle; the breaker's step after each; the attempt log.
#[derive(Clone, Copy)]
pub struct Attempts<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) activities: &'p dyn converger_ports::ActivityStore,
    pub(crate) listings: &'p dyn converger_ports::DeliveryQueries,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) adapters: &'p converger_adapters::Adapters,
    pub(crate) config: &'p crate::PipelineConfig,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) queue: &'p dyn converger_ports::Queue,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) health: crate::health::Health<'p>,
    pub(crate) handoff: crate::handoff::Handoff<'p>,
    pub(crate) lanes: crate::lanes::Lanes<'p>,
    /// Where each attempt's span goes (nowhere unless the deployment exports them).
    pub(crate) spans: &'p dyn converger_ports::Spans,
    /// Where each attempt's metrics go until its batch ends.
    pub(crate) metrics: &'p metrics::Buffer,
    pub(crate) payloads: &'p crate::payloads::Payloads,
}

impl Attempts<'_> {
    /// Runs the attempt a queue message asks for. When storage is unreachable, the message
    /// is sent again with a short, growing delay ([`policy::bounce_delay_s`]) instead of being
    /// left to the queue's visibility timeout (minutes), so deliveries resume seconds after
    /// storage does; after [`policy::MAX_BOUNCES`] the error goes to the queue as any other.
    pub async fn deliver(&self, msg: DeliveryMessage) -> Result<Report, AttemptError> {
        let until = Instant::now() + Duration::from_millis(policy::CHAIN_BUDGET_MS);
        let (report, mut next) = self.deliver_one(msg, until).await;
        // The backlog rows this message's attempts handed their slot to, one after the
        // other, while the budget lasts. A chained attempt that fails unexpectedly leaves its
        // row leased: the reclaim pass takes it back when the lease ends.
        while let Some(h) = next.take() {
            let span = attempt_span(&h.msg.delivery_id, true);
            let (r, after) = self
                .attempt_claimed(h.claimed, h.msg, Some(until))
                .instrument(span)
                .await;
            match r {
                Ok(r) => tracing::debug!(report = ?r, "chained attempt"),
                Err(e) => tracing::warn!(error = %e, "chained attempt failed; its lease runs out"),
            }
            next = after;
        }
        report
    }

    /// [`Self::deliver`] for one message, and the backlog row its attempt handed its slot on
    /// to (claimed), if it did, for the same invocation to run before `until`.
    async fn deliver_one(
        &self,
        msg: DeliveryMessage,
        until: Instant,
    ) -> (Result<Report, AttemptError>, Option<HandOn>) {
        let mut again = msg.clone_without_activity();
        again.bounces = again.bounces.saturating_add(1);
        let (result, next) = self.attempt_until(msg, Some(until)).await;
        let result = match result {
            Err(AttemptError::Store(e))
                if e.is_unavailable() && again.bounces <= policy::MAX_BOUNCES =>
            {
                let delay_s = policy::bounce_delay_s(again.bounces - 1);
                tracing::warn!(delivery_id = %again.delivery_id, error = %e, delay_s, bounces = again.bounces, "storage unavailable; the message comes back shortly");
                match self.queue.send(&again, delay_s).await {
                    Ok(()) => Ok(Report::Bounced { delay_s }),
                    Err(e) => Err(e.into()),
                }
            }
            other => other,
        };
        (result, next)
    }

    /// Runs the attempt a queue message asks for, in a span that names the delivery (and,
    /// once it is claimed, its tenant, channel and attempt number) for every line under it.
    pub async fn attempt(&self, msg: DeliveryMessage) -> Result<Report, AttemptError> {
        self.attempt_until(msg, None).await.0
    }

    /// [`Self::attempt`], taking the channel's next backlog row to run next while its call
    /// runs when `chain_until` has not passed.
    async fn attempt_until(
        &self,
        msg: DeliveryMessage,
        chain_until: Option<Instant>,
    ) -> (Result<Report, AttemptError>, Option<HandOn>) {
        let span = attempt_span(&msg.delivery_id, false);
        async {
            match self.claim(&msg).await {
                Ok(Step::Go(c)) => self.attempt_claimed(c, msg, chain_until).await,
                Ok(Step::Done(report)) => (Ok(report), None),
                Err(e) => (Err(e), None),
            }
        }
        .instrument(span)
        .await
    }

    /// The attempt of a delivery this task has claimed already, and the backlog row it
    /// handed its slot on to (claimed, whatever the attempt's result), if it took one.
    async fn attempt_claimed(
        &self,
        claimed: Claimed,
        msg: DeliveryMessage,
        chain_until: Option<Instant>,
    ) -> (Result<Report, AttemptError>, Option<HandOn>) {
        let span = tracing::Span::current();
        span.record("tenant_id", tracing::field::display(&claimed.d.tenant_id));
        span.record(
            "activity_id",
            tracing::field::display(&claimed.d.activity_id),
        );
        span.record("channel_id", tracing::field::display(&claimed.d.channel_id));
        span.record("attempt", claimed.d.attempts + 1);
        let prepared = match self.prepare(claimed, msg).await {
            Ok(Step::Go(p)) => p,
            Ok(Step::Done(report)) => return (Ok(report), None),
            Err(e) => return (Err(e), None),
        };
        // While the call runs, the next row of a backlogged channel is made ready to run
        // here as soon as it ends, with the slot this attempt hands it.
        let next = async {
            if prepared.probe || chain_until.is_none_or(|u| Instant::now() >= u) {
                return None;
            }
            let token = lease_token();
            let flow = self.flow.backlog();
            match flow
                .take_next_ahead(&prepared.channel, &prepared.d, &token)
                .await
            {
                Ok(Some((msg, d))) => Some(HandOn {
                    msg,
                    claimed: Claimed { d, token },
                }),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "next backlog row not taken");
                    None
                }
            }
        };
        let (called, next) = tokio::join!(self.call(&prepared), next);
        let hand_on = next.as_ref().map(|h| h.claimed.d.id.clone());
        (self.after_call(prepared, called, hand_on).await, next)
    }

    /// The lease renewed if due, the outcome settled, and an ordered channel's lane moved.
    async fn after_call(
        &self,
        prepared: Prepared,
        called: Called,
        hand_on: Option<converger_core::DeliveryId>,
    ) -> Result<Report, AttemptError> {
        // A long call leaves the lease in its second half: renewed before the outcome write,
        // so that a slow write is not overtaken by the reclaim pass (best effort: the write
        // itself is what proves the lease).
        if let Err(e) = self
            .renew_if_due(&prepared.d, &prepared.token, &prepared.lease_until)
            .await
        {
            tracing::warn!(error = %e, "lease not renewed before the outcome");
        }
        // An ordered channel's delivery moves its lane when its attempt ends it.
        let laned = prepared
            .d
            .lane_seq
            .map(|_| (prepared.d.clone(), parts::on_dead_letter(&prepared.channel)));
        let report = self.settle(prepared, called, hand_on.as_ref()).await?;
        if let Some((d, on_dead)) = laned
            && matches!(
                report,
                Report::Sent | Report::HandedOff | Report::DeadLettered
            )
        {
            self.lanes
                .after_outcome(&d, on_dead, report == Report::DeadLettered)
                .await;
        }
        Ok(report)
    }

    /// Takes the lease on the message's delivery; a report instead when there is nothing to
    /// attempt now (not due: the message is delayed again; leased, settled or missing).
    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim(&self, msg: &DeliveryMessage) -> Result<Step<Claimed>, AttemptError> {
        let token = lease_token();
        let now = self.clock.now();
        let lease_ms = self.flow.lease_slice_ms();
        // A watch copy goes on to the claim only while the attempt it watches is due and
        // carried by its messages (that attempt died, or is still running: then the claim
        // finds it busy). One whose delivery now waits for a later retry leaves it to that
        // retry's own messages, without a write.
        if msg.watch
            && !self
                .deliveries
                .get_delivery(&msg.delivery_id)
                .await?
                .is_some_and(|d| d.carried_by_messages() && d.next_attempt_at <= now.ms())
        {
            return Ok(Step::Done(Report::Skipped("the watched attempt ended")));
        }
        // The channel the message names is read (or found cached) beside the claim, not after.
        let claimed = self
            .deliveries
            .claim(&msg.delivery_id, &token, now, lease_ms);
        let mut claimed = match &msg.channel_id {
            Some(c) => tokio::join!(claimed, self.cache.channel(c)).0?,
            None => claimed.await?,
        };
        // A message sent beside its row's write may come first: it looks for the row again
        // shortly (a strongly consistent read, one request a look), and claims once it is
        // there; then it comes back in a second, until `row_by`.
        let mut looks = 0;
        while claimed == Claim::Missing && msg.row_by.is_some_and(|by| self.clock.now_ms() < by) {
            let Some(pause_ms) = policy::row_wait(looks) else {
                self.queue.send(msg, 1).await?;
                return Ok(Step::Done(Report::Hopped { delay_s: 1 }));
            };
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            looks += 1;
            if self
                .deliveries
                .get_delivery(&msg.delivery_id)
                .await?
                .is_some()
            {
                claimed = self
                    .deliveries
                    .claim(&msg.delivery_id, &token, self.clock.now(), lease_ms)
                    .await?;
            }
        }
        let report = match claimed {
            Claim::Claimed(d) => return Ok(Step::Go(Claimed { d, token })),
            // A watch copy whose attempt failed meanwhile and waits for its retry: that
            // retry's own messages (or the due index) have the row from then on. One whose
            // attempt is running looks again after a lease slice: by then the lease was
            // renewed, or it ended with its attempt.
            Claim::NotDue(_) if msg.watch => Report::Skipped("the watched attempt ended"),
            Claim::Busy if msg.watch => {
                let delay_s = watch_again_s(lease_ms);
                self.queue.send(msg, delay_s).await?;
                Report::Hopped { delay_s }
            }
            Claim::NotDue(d) => {
                let delay_s = hop_delay_s(d.next_attempt_at, now.ms(), self.config.hop_ceiling_s);
                tracing::info!(
                    early_ms = d.next_attempt_at - now.ms(),
                    delay_s,
                    "message came early; delayed again"
                );
                // A retry that rides its messages gets its watch copy again (the message that
                // scheduled it may have died before sending them).
                let watched = d.watched && d.carried_by_messages();
                self.send_for(msg.clone(), delay_s, watched).await?;
                Report::Hopped { delay_s }
            }
            Claim::Busy => Report::Skipped("another attempt holds the lease"),
            Claim::Settled(d) => {
                // A settled delivery holds no slot; one that does was left by an attempt that
                // died (or lost storage) between its outcome and handing the slot on.
                if d.status != converger_core::DeliveryStatus::Pending {
                    self.flow.reconciler().free_settled_slot(&d).await?;
                }
                Report::Skipped("delivery is settled")
            }
            Claim::Missing => {
                tracing::warn!("message for a delivery that does not exist; dropped");
                Report::Skipped("no such delivery")
            }
        };
        Ok(Step::Done(report))
    }

    /// The channel, the flow-control gate (before the activity is loaded or the adapter
    /// called), then the activity. A missing channel or activity is an unexpected failure:
    /// the lease is given back and the message is left to SQS, which redelivers it until its
    /// dead-letter queue takes it.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn prepare(
        &self,
        Claimed { mut d, token }: Claimed,
        mut msg: DeliveryMessage,
    ) -> Result<Step<Prepared>, AttemptError> {
        let carried_in = msg.activity.is_some();
        let gated = async {
            let channel = self.cache.channel(&d.channel_id).await?.ok_or_else(|| {
                AttemptError::Missing(format!("channel {} not found", d.channel_id))
            })?;
            // An ordered channel's delivery goes only as its lane's head (a deleted channel's
            // are dead-lettered whatever their place).
            if d.lane_seq.is_some() && channel.deleted_at.is_none() {
                match self
                    .lanes
                    .admit(&d, parts::on_dead_letter(&channel))
                    .await?
                {
                    crate::lanes::LaneGate::Go => {}
                    crate::lanes::LaneGate::Wait => {
                        if !self.lanes.wait(&d, &token).await? {
                            return Ok(Step::Done(Report::Skipped(
                                "lease lost before waiting in the lane",
                            )));
                        }
                        return Ok(Step::Done(Report::LaneWaiting));
                    }
                }
            }
            match self
                .flow
                .gate()
                .admit_attempt(&d, &token, &msg, &channel)
                .await?
            {
                Admit::Go { probe, slot } => {
                    let mut activity = self.activity(&d, msg.activity.take()).await?;
                    let read = parts::read_payload(self.payloads, &mut activity).await?;
                    Ok::<_, AttemptError>(Step::Go((channel, (activity, read), probe, slot)))
                }
                Admit::Done(report) => Ok(Step::Done(report)),
            }
        };
        let gated = async {
            let (channel, activity, probe, slot) = match gated.await? {
                Step::Go(x) => x,
                Step::Done(report) => return Ok(Step::Done(report)),
            };
            // A start slowed down by storage may have eaten into the lease: renewed before the
            // call, or the call is not made (another attempt may hold the delivery by now).
            let until = AtomicI64::new(d.lease_until.unwrap_or(i64::MIN));
            if !self.renew_if_due(&d, &token, &until).await? {
                tracing::warn!("lease lost before the call");
                return Ok(Step::Done(Report::Skipped("lease lost before the call")));
            }
            Ok(Step::Go((channel, activity, probe, until, slot)))
        };
        match gated.await {
            Ok(Step::Go((channel, (activity, payload_read), probe, lease_until, slot))) => {
                // The slot the gate took for it (a retry's, a replay's) is given back after
                // the attempt from the item it is in.
                if let Some(item) = slot {
                    d.slot = true;
                    d.slot_item = item;
                }
                Ok(Step::Go(Prepared {
                    lease_until,
                    n: d.attempts + 1,
                    d,
                    token,
                    channel,
                    activity,
                    _payload_read: payload_read,
                    probe,
                    carried_in,
                    started: Instant::now(),
                    started_at: self.clock.now(),
                }))
            }
            Ok(Step::Done(report)) => Ok(Step::Done(report)),
            Err(e) => {
                if let Err(re) = self.deliveries.release(&d, &token).await {
                    tracing::warn!(error = %re, "lease not released; it expires on its own");
                }
                Err(e)
            }
        }
    }

    /// Records what the call came to and tells the breaker; a success hands the window slot
    /// on to `hand_on` (the backlog row this task runs next).
    #[tracing::instrument(level = "debug", skip_all)]
    async fn settle(
        &self,
        p: Prepared,
        called: Called,
        hand_on: Option<&converger_core::DeliveryId>,
    ) -> Result<Report, AttemptError> {
        match called {
            Ok((_, Ok(delivered))) => self.on_delivered(&p, delivered, hand_on).await,
            Ok((policy, Err(err))) => self.on_failure(&p, &policy, err).await,
            Err(CallError::LeaseLost) => Ok(Report::Skipped("lease lost during the call")),
            // The delivery cannot be attempted at all (inactive channel, no adapter), or its
            // channel's middleware stopped it: no request was made.
            Err(CallError::Cannot(reason)) => self.unattempted(&p, &reason, Outcome::Neutral).await,
            Err(CallError::Halted(reason)) => self.unattempted(&p, &reason, Outcome::Halted).await,
        }
    }

    /// A dead letter for a delivery no request was made for.
    async fn unattempted(
        &self,
        p: &Prepared,
        reason: &str,
        outcome: Outcome,
    ) -> Result<Report, AttemptError> {
        let now = self.clock.now();
        let e = p.log_entry(
            now,
            self.config.attempt_retention,
            Answer::not_called(reason),
            None,
        );
        let report = self.dead_letter(p, reason, &e, now).await?;
        self.after_attempt(&p.d, p, CallEnd::new(outcome)).await?;
        Ok(report)
    }

    /// Sent (or handed off to a client that acknowledges it later).
    async fn on_delivered(
        &self,
        p: &Prepared,
        delivered: Delivered,
        hand_on: Option<&converger_core::DeliveryId>,
    ) -> Result<Report, AttemptError> {
        let d = &p.d;
        let (accepted, handed_off): (Accepted, bool) = match delivered {
            Delivered::Sent(a) => (a, false),
            Delivered::HandedOff(a) => (a, true),
        };
        let now = self.clock.now();
        let answer = Answer::accepted(accepted.status_code, accepted.response_snippet.clone());
        let answer = if handed_off {
            answer.handed_off()
        } else {
            answer
        };
        let e = p.log_entry(now, self.config.attempt_retention, answer, None);
        let info = SentInfo {
            provider_message_id: accepted.provider_message_id,
            response_status: accepted.status_code,
            handed_off,
        };
        if !self
            .deliveries
            .mark_sent(d, &p.token, &info, &e, now)
            .await?
        {
            return Ok(Report::Skipped("lease lost before recording success"));
        }
        if handed_off {
            tracing::info!("delivery handed off; waiting for an acknowledgement");
            p.metrics(self.metrics, &[(metrics::HANDED_OFF, "Count", 1.0)]);
            self.after_attempt(d, p, CallEnd::new(Outcome::HandedOff))
                .await?;
            return Ok(Report::HandedOff);
        }
        let duration_ms = u64::try_from(p.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(duration_ms, "delivery sent");
        let mut m = vec![
            (metrics::SENT, "Count", 1.0),
            metrics::ms(metrics::ATTEMPT_DURATION_MS, duration_ms),
        ];
        let waited = u64::try_from(now.ms() - d.created_at.ms()).unwrap_or(0);
        m.push(metrics::ms(metrics::INGEST_TO_SENT_MS, waited));
        p.metrics(self.metrics, &m);
        self.after_attempt(d, p, CallEnd::of(Verdict::Success).handing_on(hand_on))
            .await?;
        // Its status event and counts follow from the row's change (`crate::changes`).
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
        // The call's one classification: the policy, the window and the breaker read it.
        let failure = err.failure();
        let duration_ms = u64::try_from(p.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        p.metrics(
            self.metrics,
            &[
                (metrics::ATTEMPT_FAILED, "Count", 1.0),
                metrics::ms(metrics::ATTEMPT_DURATION_MS, duration_ms),
            ],
        );
        let now = self.clock.now();
        let delay_ms = match policy.next_after_failure(p.n, &failure, rand::random::<f64>()) {
            Next::RetryIn(delay_ms) => delay_ms,
            Next::Dead => {
                let e = p.log_entry(
                    now,
                    self.config.attempt_retention,
                    Answer::failed(&err).dead(),
                    None,
                );
                let report = self.dead_letter(p, &err.reason, &e, now).await?;
                self.after_attempt(d, p, CallEnd::of(Verdict::Failed(failure)))
                    .await?;
                return Ok(report);
            }
        };
        let next_at = now
            .ms()
            .saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX));
        let e = p.log_entry(
            now,
            self.config.attempt_retention,
            Answer::failed(&err),
            Some(next_at),
        );
        // The retry holds no window slot while it waits: it takes one again when it is due.
        // One that its message and watch copy reach in one hop is in no due index (ADR 0094).
        let watched = policy::retry_rides_messages(
            hop_delay_s(next_at, now.ms(), u32::MAX),
            self.config.watch_delay_s,
            self.config.hop_ceiling_s,
        );
        let retry_at = if watched {
            RetryAt::watched(next_at)
        } else {
            RetryAt::at(next_at)
        };
        if !self
            .deliveries
            .mark_attempt_failed(d, &p.token, &err.reason, retry_at, &e, now)
            .await?
        {
            return Ok(Report::Skipped("lease lost before recording failure"));
        }
        let closed = self
            .after_attempt(d, p, CallEnd::of(Verdict::Failed(failure)))
            .await?;
        if !closed {
            // The breaker opened (or the probe failed): park the retry instead of enqueueing
            // it; the release after the close runs it.
            self.flow.gate().park_waiting(d, &p.channel).await?;
            return Ok(Report::Parked);
        }
        tracing::info!(delay_ms, error = %err.reason, "attempt failed; retry scheduled");
        let delay_s = hop_delay_s(next_at, self.clock.now_ms(), self.config.hop_ceiling_s);
        // An activity that came in the message fits in the next one.
        let carried = if p.carried_in {
            Some(&p.activity)
        } else {
            p.activity.if_inline()
        };
        let next = DeliveryMessage::new(d.id.clone(), d.tier, carried).of(d);
        // If this send fails, the message is redelivered and finds the row pending with its
        // due time (and sends it again, its watch copy with it): nothing is lost.
        self.send_for(next, delay_s, watched).await?;
        Ok(Report::RetryScheduled { delay_ms })
    }

    /// `msg` sent `delay_s` ahead, with its watch copy `WATCH_DELAY_SECONDS` after it when
    /// its delivery rides its messages: one batch.
    async fn send_for(
        &self,
        mut msg: DeliveryMessage,
        delay_s: u32,
        watched: bool,
    ) -> Result<(), AttemptError> {
        msg.send_delay_s = delay_s;
        let msgs = msg.with_watch(watched, self.config.watch_delay_s);
        self.queue.send_many(&msgs).await?;
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
                .activities
                .get_activity(&d.tenant_id, &d.activity_id)
                .await?
                .ok_or_else(|| {
                    AttemptError::Missing(format!("activity {} not found", d.activity_id))
                })?,
        };
        Ok(activity)
    }

    /// Calls the channel's adapter, under the effective policy's timeout.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn call(&self, p: &Prepared) -> Called {
        let (d, activity, channel, n) = (&p.d, &p.activity, &p.channel, p.n);
        if channel.deleted_at.is_some() {
            return Err("channel deleted".into());
        }
        if !channel.active {
            return Err("channel is inactive".into());
        }
        parts::payload_at_hand(activity)?;
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
        // The channel's middleware and the call, one after the other, with the lease renewed
        // while either runs or waits (a middleware turn included); a lease lost meanwhile (a
        // storage stall long enough for another attempt to take the delivery) ends them
        // unrecorded.
        let work = async {
            // The middleware works on this delivery's copy; the stored activity (and every
            // replay) keeps the original. A halt, or a step that fails, makes no request.
            let transformed = crate::middleware::transform(channel, activity, n)
                .await
                .map_err(|h| CallError::Halted(h.to_string()))?;
            let payload = transformed.as_ref().unwrap_or(&activity.payload);
            // Each attempt is a span of the activity's trace, child of the producer's: the
            // exported one's id when spans are exported, so the receiver's join it.
            let trace = activity.trace();
            let span = self.spans.attempt(&trace, parts::span_start(p));
            let traceparent = match span.span_id() {
                Some(id) => trace.child_of(&id),
                None => trace.child(),
            };
            let env = Envelope {
                delivery_id: d.id.as_str(),
                tenant_id: d.tenant_id.as_str(),
                activity_id: activity.id.as_str(),
                conversation_id: &activity.conversation_id,
                seq: activity.seq,
                event_type: activity.event_type.as_deref(),
                created_at: &activity.created_at.rfc3339(),
                payload,
                channel_ids: &activity.channel_ids,
                attempt: n,
                replays: d.retry_count,
                traceparent: Some(&traceparent),
                tracestate: trace.tracestate.as_deref(),
                services: &self.handoff,
            };
            let secrets = channel.signing_secrets(self.clock.now());
            let target = Target {
                channel_id: channel.id.as_str(),
                config: &channel.config,
                parsed: &channel.parsed_config,
                signing_secrets: &secrets,
                timeout,
            };
            // The adapter enforces its own timeout; this bound only guards against a stuck one.
            let res = tokio::time::timeout(
                timeout + Duration::from_millis(policy::CALL_GRACE_MS),
                adapter.deliver(env, target),
            )
            .await;
            span.end(parts::span_end(&res));
            Ok::<_, CallError>(res)
        };
        let res = tokio::select! {
            r = work => r?,
            () = self.keep_lease(p) => return Err(CallError::LeaseLost),
        };
        let res = match res {
            Ok(r) => r,
            Err(_) => Err(DeliveryError::timeout(
                u128::from(policy.timeout_ms),
                channel.kind.as_str(),
            )),
        };
        Ok((policy, res))
    }

    /// Renews the lease `token` holds on `d` if it is in the second half of its slice
    /// (`core::policy::lease_renewal_due`), keeping the new end in `until`. `false` when the
    /// lease was lost.
    async fn renew_if_due(
        &self,
        d: &Delivery,
        token: &str,
        until: &AtomicI64,
    ) -> StoreResult<bool> {
        let slice = self.flow.lease_slice_ms();
        let now = self.clock.now_ms();
        if !policy::lease_renewal_due(until.load(Ordering::Relaxed), now, slice) {
            return Ok(true);
        }
        let next = now.saturating_add(slice);
        let kept = self.deliveries.extend_lease(d, token, next).await?;
        if kept {
            until.store(next, Ordering::Relaxed);
        }
        Ok(kept)
    }

    /// Renews `p`'s lease halfway through each slice, for as long as it is polled; returns
    /// when the lease is lost, or has ended without a renewal (storage too slow to answer
    /// within it): past its end another attempt may hold the delivery, so the call must stop.
    /// The reclaim pass allows [`crate::sweep::RECLAIM_GRACE_MS`] past the end besides.
    async fn keep_lease(&self, p: &Prepared) {
        let slice = self.flow.lease_slice_ms();
        loop {
            let until = p.lease_until.load(Ordering::Relaxed);
            let wait = policy::lease_renewal_at(until, slice).saturating_sub(self.clock.now_ms());
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
            }
            let left = until.saturating_sub(self.clock.now_ms());
            if left <= 0 {
                tracing::warn!("lease ended without a renewal; the call is abandoned");
                return;
            }
            let renewal = tokio::time::timeout(
                Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                self.renew_if_due(&p.d, &p.token, &p.lease_until),
            );
            match renewal.await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    tracing::warn!("lease lost during the call; the call is abandoned");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "lease not renewed; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(_) => {} // the lease ended while the renewal was on its way: checked above
            }
        }
    }

    async fn dead_letter(
        &self,
        p: &Prepared,
        reason: &str,
        log: &LogUpdate,
        now: Timestamp,
    ) -> Result<Report, AttemptError> {
        let d = &p.d;
        if !self
            .deliveries
            .mark_dead(d, &p.token, reason, log, now)
            .await?
        {
            return Ok(Report::Skipped("lease lost before dead-lettering"));
        }
        tracing::warn!(attempts = p.n, error = %reason, "delivery dead-lettered");
        // Its events and counts follow from the row's change (`crate::changes`).
        p.metrics(self.metrics, &[(metrics::DEAD_LETTERED, "Count", 1.0)]);
        Ok(Report::DeadLettered)
    }
}
