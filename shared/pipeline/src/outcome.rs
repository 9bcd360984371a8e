//! The types more than one use case speaks: what an attempt led to, why it failed, what the
//! flow gate decided, where a new delivery starts, what a bulk replay may replay. Use-case modules import these, never each
//! other's internals.

use converger_ports::{QueueError, StoreError};

/// What one message led to.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Sent,
    RetryScheduled {
        delay_ms: u64,
    },
    DeadLettered,
    /// Not due yet: the message was delayed again (a hop).
    Hopped {
        delay_s: u32,
    },
    /// Handed off to a client (websocket): pending until acknowledged, not retried.
    HandedOff,
    /// Nothing to do: duplicate message, settled delivery, lost lease.
    Skipped(&'static str),
    /// The channel's breaker is open or the channel paused: parked, no attempt.
    Parked,
    /// The channel's window is full: the delivery waits in its backlog.
    Backlogged,
    /// Another delivery holds its ordered lane: it waits for it.
    LaneWaiting,
    /// Over the channel's rate limit: the message comes back when the window resets.
    Snoozed {
        delay_s: u32,
    },
    /// Storage was unreachable: the message comes back in a few seconds (not after the
    /// queue's visibility timeout).
    Bounced {
        delay_s: u32,
    },
}

/// An attempt's unexpected failures: the message is left for SQS to redeliver.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{0}")]
    Missing(String),
}

/// A step of flow control, or of a use case built on it (a channel's deletion, a health run),
/// that could not be written or sent: nothing was lost, and the caller's message or request
/// is retried.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<FlowError> for AttemptError {
    fn from(e: FlowError) -> Self {
        match e {
            FlowError::Store(e) => Self::Store(e),
            FlowError::Queue(e) => Self::Queue(e),
        }
    }
}

/// Where a new delivery starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Enqueued now (holding a slot when the channel has a window).
    Live,
    /// Waiting in the backlog for a slot.
    Backlog,
    /// Written `paused`: the breaker is open or the channel paused.
    Parked,
    /// Waiting in its ordered lane: enqueued when it becomes the lane's head.
    Lane,
    /// Written `filtered`: its channel's filter did not want it. Never enqueued.
    Filtered,
}

/// What the gate decided for a claimed delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Admit {
    /// Attempt it. `probe`: it is the half-open probe; `slot`: the slot item of the window
    /// slot the gate took for it (a retry or a replay), if it took one.
    Go { probe: bool, slot: Option<u32> },
    /// Nothing to attempt now; the report says why.
    Done(Report),
}

/// What one bulk replay may replay.
#[derive(Debug, Clone, Default)]
pub struct BulkFilter {
    /// Inclusive bounds on `<updated_at>#<id>` (UTC days, see `core::query`).
    pub from_key: Option<String>,
    pub to_key: Option<String>,
    pub activity: Option<converger_core::ActivityId>,
    /// Asked-for cap; never above the configured `bulk_retry_limit`.
    pub limit: Option<usize>,
}
