//! The pieces an attempt passes between its stages: the claimed delivery, the chain of backlog
//! rows one invocation runs, the prepared attempt, and what its log entry says.

use super::*;

/// A delivery whose lease this attempt holds.
pub(super) struct Claimed {
    pub(super) d: Delivery,
    pub(super) token: String,
}

/// The next backlog row of a channel, taken while an attempt's call ran and handed that
/// attempt's slot: claimed, with its message, for the same invocation to run next.
pub(super) struct HandOn {
    pub(super) msg: DeliveryMessage,
    pub(super) claimed: Claimed,
}

/// A new lease token.
pub(super) fn lease_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Where a stage of an attempt leaves it: go on to the next stage with `T`, or done with the
/// report (another attempt holds it, the gate parked it, nothing to do).
pub(super) enum Step<T> {
    Go(T),
    Done(Report),
}

/// A claimed delivery the gate let through, with what its attempt needs.
pub(crate) struct Prepared {
    pub(super) d: Delivery,
    pub(super) token: String,
    /// When this attempt's lease ends (renewed while the call runs).
    pub(super) lease_until: AtomicI64,
    pub(crate) channel: Arc<Channel>,
    pub(super) activity: Activity,
    /// Its payload's share of the process's budget, when it was read from the payload
    /// bucket: held until the attempt ends.
    pub(super) _payload_read: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The half-open probe of its channel.
    pub(crate) probe: bool,
    /// The activity rode in the queue message (so it rides in the next one too).
    pub(super) carried_in: bool,
    /// This attempt's number.
    pub(super) n: u32,
    pub(super) started: Instant,
    pub(super) started_at: Timestamp,
}

impl Prepared {
    /// `metrics` of this attempt, kept in `buffer` for its batch's line.
    pub(super) fn metrics(
        &self,
        buffer: &crate::metrics::Buffer,
        metrics: &[crate::metrics::Metric<'static>],
    ) {
        buffer.add(metrics, self.channel.kind, Some(self.d.tier));
    }
}

/// What the adapter call came to: `Err` when the delivery cannot be attempted at all
/// (inactive channel, no adapter), else the effective policy and the adapter's answer.
pub(super) type Called = Result<(RetryPolicy, Result<Delivered, DeliveryError>), CallError>;

/// Why no call outcome is recorded.
pub(super) enum CallError {
    /// The delivery cannot be attempted at all (inactive channel, no adapter): dead letter.
    Cannot(String),
    /// The channel's middleware stopped it (a halt, or a step that failed): dead letter,
    /// counted against neither the breaker nor auto-disable.
    Halted(String),
    /// The lease was lost while the call ran: the attempt that holds it now records.
    LeaseLost,
}

impl From<String> for CallError {
    fn from(reason: String) -> Self {
        Self::Cannot(reason)
    }
}

impl From<&str> for CallError {
    fn from(reason: &str) -> Self {
        Self::Cannot(reason.to_owned())
    }
}

/// What an attempt's log entry says of its call, and how the attempt ended.
pub(super) struct Answer {
    pub(super) status_code: Option<u16>,
    pub(super) snippet: Option<String>,
    pub(super) error: Option<String>,
    pub(super) outcome: AttemptOutcome,
}

impl Answer {
    /// The endpoint took it.
    pub(super) fn accepted(status_code: Option<u16>, snippet: Option<String>) -> Self {
        Self {
            status_code,
            snippet: converger_core::error::success_snippet(snippet),
            error: None,
            outcome: AttemptOutcome::Delivered,
        }
    }

    /// The call failed; a retry follows unless [`Self::dead`] says otherwise.
    pub(super) fn failed(err: &DeliveryError) -> Self {
        Self {
            status_code: err.status,
            snippet: err.response_snippet.clone(),
            error: Some(err.reason.clone()),
            outcome: AttemptOutcome::Failed,
        }
    }

    /// No call was made (or the middleware stopped it), for `reason`: a dead letter.
    pub(super) fn not_called(reason: &str) -> Self {
        Self {
            status_code: None,
            snippet: None,
            error: Some(reason.to_owned()),
            outcome: AttemptOutcome::Dead,
        }
    }

    /// The delivery is dead-lettered after it.
    pub(super) fn dead(self) -> Self {
        Self {
            outcome: AttemptOutcome::Dead,
            ..self
        }
    }

    /// Handed to a client that acknowledges it later.
    pub(super) fn handed_off(self) -> Self {
        Self {
            outcome: AttemptOutcome::Pending,
            ..self
        }
    }
}

impl Prepared {
    /// This attempt's entry for the attempt log at `now`, with when it is retried if it is.
    pub(super) fn log_entry(
        &self,
        now: Timestamp,
        retention: Duration,
        Answer {
            status_code,
            snippet,
            error,
            outcome,
        }: Answer,
        next_retry_at: Option<i64>,
    ) -> LogUpdate {
        let expires_at = now.secs() + i64::try_from(retention.as_secs()).unwrap_or(0);
        LogUpdate::append(
            &self.d.attempt_log,
            AttemptEntry {
                attempt: self.n,
                started_at: self.started_at,
                duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                status_code,
                response_snippet: snippet,
                error,
                next_retry_at: next_retry_at.map(Timestamp::from_ms),
                trigger: if self.probe { "probe" } else { "auto" }.into(),
                outcome: Some(outcome),
                expires_at: Some(expires_at),
            },
        )
    }
}

/// What a dead head does to its lane on `channel` (`hold` unless the channel says `skip`).
pub(super) fn on_dead_letter(
    channel: &converger_ports::Channel,
) -> converger_core::lanes::OnDeadLetter {
    channel
        .ordering
        .map(|o| o.on_dead_letter)
        .unwrap_or_default()
}

/// What an attempt's span says when it starts.
pub(super) fn span_start(p: &Prepared) -> converger_ports::AttemptStart<'_> {
    converger_ports::AttemptStart {
        channel_type: p.channel.kind.as_str(),
        channel_id: p.channel.id.as_str(),
        tenant_id: p.d.tenant_id.as_str(),
        delivery_id: p.d.id.as_str(),
        activity_id: p.activity.id.as_str(),
        attempt: p.n,
    }
}

/// How an attempt's call ended, for its span (`Err`: the adapter did not return in time).
pub(super) fn span_end<T, E>(
    res: &Result<Result<T, DeliveryError>, E>,
) -> converger_ports::AttemptEnd<'_> {
    match res {
        Ok(Ok(_)) => converger_ports::AttemptEnd {
            status: None,
            error: None,
        },
        Ok(Err(e)) => converger_ports::AttemptEnd {
            status: e.status,
            error: Some(&e.reason),
        },
        Err(_) => converger_ports::AttemptEnd {
            status: None,
            error: Some("the adapter did not return in time"),
        },
    }
}

/// Reads `activity`'s payload from the payload bucket when its row did not hold it. An
/// object that is gone leaves it unread, which [`payload_at_hand`] dead-letters; a bucket
/// that does not answer is a storage failure (the message comes back).
pub(super) async fn read_payload(
    payloads: &crate::payloads::Payloads,
    activity: &mut Activity,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, crate::outcome::AttemptError> {
    match payloads.read(activity).await {
        Ok(permit) => Ok(permit),
        Err(crate::payloads::ReadError::Gone(key)) => {
            tracing::warn!(%key, "the payload is gone from the payload bucket");
            Ok(None)
        }
        Err(crate::payloads::ReadError::Store(e)) => Err(e.into()),
    }
}

/// Refuses the call of an activity whose payload could not be read (it is gone).
pub(super) fn payload_at_hand(activity: &Activity) -> Result<(), CallError> {
    match &activity.payload_ref {
        Some(r) if activity.payload_unread() => Err(CallError::Cannot(format!(
            "payload {} is gone from the payload bucket",
            r.key
        ))),
        _ => Ok(()),
    }
}
