//! The deliveries table's change stream, and the counters its consumer writes.
//!
//! Every write of a delivery row is a [`RowChange`] on the table's stream (DynamoDB Streams
//! with old and new images; the in-process backend keeps the same feed). What follows from a
//! change (its events, its live-stream frames, the health and usage counts) is derived from
//! the change by one consumer, never by the code that wrote the row: a process that dies
//! after its write loses nothing, since the record stays on the stream until it is consumed.
//!
//! The stream hands a record out at least once. Events carry the record's id, so a consumer
//! of the bus drops a repeat; counter writes carry a [`StreamMark`], so a repeat of a record
//! never adds to a counter twice.

use crate::error::StoreResult;
use crate::model::Delivery;
use crate::usage::UsageKey;
use async_trait::async_trait;
use converger_core::ChannelId;
use converger_core::usage::Counts;

/// One record of the deliveries table's stream: the row before and after one write.
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    /// The record's id on the stream (stable: a repeat of the record has the same).
    pub event_id: String,
    /// Its position in its shard (see [`seq_key`]).
    pub seq: String,
    /// `None` for a new row.
    pub old: Option<Delivery>,
    /// `None` for a row removed (its time to live passed).
    pub new: Option<Delivery>,
}

/// A sequence number as text that sorts as the number does: DynamoDB's are decimal strings
/// of 21 to 40 digits, compared here as 40-digit strings.
pub fn seq_key(seq: &str) -> String {
    format!("{seq:0>40}")
}

/// One counter write of a stream batch: the sums of the batch's records for one counter.
#[derive(Debug, Clone, PartialEq)]
pub enum CounterAdd {
    /// A usage counter's part ([`UsageKey::part_key`]).
    Usage {
        key: UsageKey,
        part: u32,
        counts: Counts,
    },
    /// A channel's health counters of a minute ([`crate::HealthStore::count_deliveries`]).
    Health {
        channel: ChannelId,
        minute: i64,
        created: i64,
        failed: i64,
    },
    /// A channel's dead letters of a day ([`crate::HealthStore::count_dead_letters`]).
    DeadLetters {
        channel: ChannelId,
        day: i64,
        delta: i64,
        expires_at: i64,
    },
}

impl CounterAdd {
    /// The counter it adds to, as the table's key names it (adds of one counter are summed).
    pub fn counter_key(&self) -> String {
        match self {
            Self::Usage { key, part, .. } => key.part_key(*part),
            Self::Health {
                channel, minute, ..
            } => crate::keys::health_counter_key(channel, *minute),
            Self::DeadLetters { channel, day, .. } => {
                format!("{channel}#{}", crate::keys::dead_letter_day_key(*day))
            }
        }
    }

    /// The same add, to the part of a usage counter that `shard`'s batches add to (other
    /// counters have one part).
    pub fn in_part_of(self, shard: &str) -> Self {
        match self {
            Self::Usage { key, counts, .. } => Self::Usage {
                key,
                part: converger_core::usage::part_of(shard),
                counts,
            },
            other => other,
        }
    }

    /// [`Self::counter_key`] of [`Self::in_part_of`]`(shard)`, without the copy.
    pub fn counter_key_of(&self, shard: &str) -> String {
        match self {
            Self::Usage { key, .. } => key.part_key(converger_core::usage::part_of(shard)),
            _ => self.counter_key(),
        }
    }

    /// Adds `other`'s counts (an add of the same counter).
    pub fn add(&mut self, other: &CounterAdd) {
        match (self, other) {
            (Self::Usage { counts, .. }, Self::Usage { counts: more, .. }) => counts.add(more),
            (
                Self::Health {
                    created, failed, ..
                },
                Self::Health {
                    created: c,
                    failed: f,
                    ..
                },
            ) => {
                *created += c;
                *failed += f;
            }
            (
                Self::DeadLetters {
                    delta, expires_at, ..
                },
                Self::DeadLetters {
                    delta: d,
                    expires_at: e,
                    ..
                },
            ) => {
                *delta += d;
                *expires_at = (*expires_at).max(*e);
            }
            _ => {}
        }
    }

    /// Adds nothing.
    pub fn is_zero(&self) -> bool {
        match self {
            Self::Usage { counts, .. } => counts.is_zero(),
            Self::Health {
                created, failed, ..
            } => *created == 0 && *failed == 0,
            Self::DeadLetters { delta, .. } => *delta == 0,
        }
    }
}

/// Which records of a shard a counter write adds up: those from `first` to `last` (as
/// [`seq_key`] gives them). The counter keeps, per shard, the last record it added; a write
/// whose `first` is not past it is refused and says how far the counter got, so a batch
/// handed out again adds only what the counter lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMark {
    pub shard: String,
    pub first: String,
    pub last: String,
}

impl StreamMark {
    /// The counter item's attribute that keeps this shard's last record.
    pub fn attribute(&self) -> String {
        let shard: String = self
            .shard
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("mk_{shard}")
    }
}

/// What a marked counter write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marked {
    /// Added; `created` is a usage counter's count of created deliveries after the add
    /// (when the add had some), which the changes function reads a tenant's rate from.
    Applied { created: Option<i64> },
    /// Refused: the counter already added this shard's records up to `to` (a repeat).
    Behind { to: String },
}

#[async_trait]
pub trait StreamCounters: Send + Sync + 'static {
    /// Adds `add` to its counter, once: applied only if the counter has added none of
    /// `mark`'s shard's records from `mark.first` on; it then keeps `mark.last`.
    async fn add_marked(&self, add: &CounterAdd, mark: &StreamMark) -> StoreResult<Marked>;
}
