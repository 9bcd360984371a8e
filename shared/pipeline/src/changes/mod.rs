//! What follows from a change of a delivery row, derived from the deliveries table's stream
//! (`converger_ports::changes`) by the `changes` function, never by the code that wrote the
//! row: the status events (every change, a failed attempt with retries left included), the
//! dead letters and replays on the bus, the live stream's frames, and the health and usage
//! counts, added up per stream batch and written once per counter and batch, or with the
//! usage log (`changes::log`, ADR 0089) logged once per batch and folded once a minute.
//!
//! A record is handed out at least once. Each event carries `event_id` (the record's id and
//! the event's place among the record's), so a reader drops a repeat; a counter write carries
//! its records' place in their shard ([`StreamMark`]), so a repeat never counts twice.

use converger_core::status::Transition;
use converger_core::usage::{Counts, Grain};
use converger_core::{DeliveryStatus, Timestamp};
use converger_ports::events;
use converger_ports::{
    CounterAdd, Delivery, EventType, Events, Marked, PlatformEvent, RowChange, StoreError,
    StreamCounters, StreamMark, UsageLog, UsageRow,
};
use std::collections::BTreeMap;

mod log;

/// What one record implies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    /// Its events, in order (every one, whether the bus gets it or not).
    pub events: Vec<PlatformEvent>,
    /// Its counts written per batch however usage is counted (a channel's dead letters of a
    /// day).
    pub counts: Vec<CounterAdd>,
    /// Its usage and health counts, as rows: each row's counters are written per batch
    /// ([`UsageRow::adds`]) or, with the usage log, logged and folded.
    pub rows: Vec<UsageRow>,
}

/// A count of a delivery at `at_ms`, as a row.
fn usage(d: &Delivery, at_ms: i64, counts: Counts) -> UsageRow {
    UsageRow::usage(
        d.tenant_id.clone(),
        d.channel_id.clone(),
        Grain::Minute.bucket(at_ms),
        counts,
    )
}

/// `delivery.status_changed` of a row as a write left it.
pub fn status_event(d: &Delivery, event_id: String) -> PlatformEvent {
    let retrying = d.status == DeliveryStatus::Pending && !d.handed_off && d.attempts > 0;
    let next = retrying.then(|| converger_core::Timestamp::from_ms(d.next_attempt_at).rfc3339());
    PlatformEvent::of(
        EventType::DeliveryStatusChanged,
        &events::DeliveryStatusChanged {
            event_id,
            delivery: events::DeliveryNamed::of(d),
            status: d.status.as_str().to_owned(),
            awaiting_ack: d.handed_off,
            next_attempt_at: next,
        },
    )
}

/// What a record implies; `retention_s` is how long deliveries are kept (a day's
/// dead-letter counter is kept as long, and a day more).
pub fn derive(c: &RowChange, retention_s: i64) -> Derived {
    let mut out = Derived::default();
    let Some(new) = &c.new else {
        // A row gone past its time to live: nothing happened to the delivery.
        return out;
    };
    let id = |k: usize| format!("{}:{k}", c.event_id);
    let at_ms = new.updated_at.ms();
    let created_ms = new.created_at.ms();
    let minute = new.created_minute();
    let day = minute.div_euclid(1440);
    let keep_s = retention_s + 86_400;
    let dead = |delta: i64| CounterAdd::DeadLetters {
        channel: new.channel_id.clone(),
        day,
        delta,
        expires_at: day * 86_400 + keep_s,
    };
    // The channel's health counter of the minute the delivery was created in.
    let health = |created: i64, failed: i64| UsageRow {
        health_created: created,
        health_failed: failed,
        ..UsageRow::usage(
            new.tenant_id.clone(),
            new.channel_id.clone(),
            minute,
            Counts::default(),
        )
    };
    let t = Transition::of(c.old.as_ref().map(Delivery::facts), new.facts());
    if t.created {
        // A filtered delivery never reaches its endpoint: its channel's health does not
        // count it (until a retry by hand sends it).
        if !t.filtered {
            out.rows.push(health(1, 0));
        }
        let created = Counts {
            created: 1,
            filtered: i64::from(t.filtered),
            ..Counts::default()
        };
        out.rows.push(usage(new, created_ms, created));
    }
    if t.unfiltered {
        out.rows.push(health(1, 0));
    }
    if t.announced {
        out.events.push(status_event(new, id(out.events.len())));
    }
    let mut at_counts = Counts::default();
    if t.tried > 0 {
        at_counts.attempts = i64::from(t.tried);
        at_counts.failed_attempts = new.failed_among_newest(t.tried);
    }
    if t.sent {
        let sent_ms = new.sent_at.map_or(at_ms, Timestamp::ms);
        at_counts.add(&Counts::sent_after(
            sent_ms.saturating_sub(created_ms).max(0),
        ));
    }
    if t.dead_lettered {
        at_counts.dead_letters = 1;
        out.rows.push(health(0, 1));
        out.counts.push(dead(1));
        out.events.push(PlatformEvent::of(
            EventType::DeliveryDeadLettered,
            &events::DeliveryDeadLettered {
                event_id: id(out.events.len()),
                delivery: events::DeliveryNamed::of(new),
            },
        ));
    }
    if t.revived {
        out.rows.push(health(0, -1));
        out.counts.push(dead(-1));
    }
    if t.replayed {
        out.events.push(PlatformEvent::of(
            EventType::DeliveryRetried,
            &events::DeliveryRetried {
                event_id: id(out.events.len()),
                count: 1,
                delivery_ids: vec![new.id.clone()],
                tenant_id: new.tenant_id.clone(),
                actor: new.retried_by.clone(),
            },
        ));
    }
    if !at_counts.is_zero() {
        out.rows.push(usage(new, at_ms, at_counts));
    }
    if new.wrote_due_entry(c.old.as_ref()) {
        out.rows.push(UsageRow::due_writes(
            new.tenant_id.clone(),
            new.channel_id.clone(),
            Grain::Minute.bucket(at_ms),
            1,
        ));
    }
    out
}

/// Why a batch stopped: the record (its position in the batch) from which it must be handed
/// out again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    pub from: usize,
    pub reason: String,
}

/// What a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub records: usize,
    pub events: usize,
    pub counter_writes: usize,
    /// Counter writes refused as repeats (a batch handed out again).
    pub repeats: usize,
    pub frames: usize,
    /// Listing shards granted to tenants whose rate called for them.
    pub grants: usize,
}

/// The change stream's consumer.
pub struct Changes<'p> {
    pub(crate) events: &'p dyn Events,
    pub(crate) counters: &'p dyn StreamCounters,
    pub(crate) streams: crate::stream::Streams<'p>,
    pub(crate) bus_status_events: bool,
    pub(crate) retention_s: i64,
    pub(crate) shards: crate::shards::ShardGrowth<'p>,
    /// The usage log, when usage that is not busy is folded (`USAGE_FOLD`).
    pub(crate) log: Option<&'p dyn UsageLog>,
    pub(crate) clock: &'p dyn converger_core::time::Clock,
}

impl<'p> Changes<'p> {
    /// One batch of one shard's records, in order: their events published (the bus's share),
    /// their frames pushed, their counts written once per counter. On `Err`, the records from
    /// `from` on must be handed out again (those before it are done); whatever of them was
    /// already done is done again harmlessly (events carry their ids, counters their marks).
    pub async fn apply(&self, shard: &str, batch: &[RowChange]) -> Result<Applied, Unfinished> {
        let mut out = Applied {
            records: batch.len(),
            ..Applied::default()
        };
        let derived: Vec<Derived> = batch.iter().map(|c| derive(c, self.retention_s)).collect();
        // The bus's events, each with the record it came from.
        let mut bus: Vec<(usize, PlatformEvent)> = Vec::new();
        for (i, d) in derived.iter().enumerate() {
            for e in &d.events {
                if self.bus_status_events || e.detail_type != EventType::DeliveryStatusChanged {
                    bus.push((i, e.clone()));
                }
            }
        }
        let done = match self
            .events
            .try_publish(bus.iter().map(|(_, e)| e.clone()).collect())
            .await
        {
            Ok(()) => batch.len(),
            Err(at) => bus.get(at).map_or(batch.len(), |(i, _)| *i),
        };
        out.events = bus.iter().filter(|(i, _)| *i < done).count();
        // The live stream's frames of what is done (a frame is not retried).
        if self.streams.enabled() {
            let events: Vec<(&str, &serde_json::Value)> = derived[..done]
                .iter()
                .flat_map(|d| &d.events)
                .map(|e| (e.detail_type.as_str(), &e.detail))
                .collect();
            match self.streams.fan_out_all(&events).await {
                Ok(f) => out.frames = f.sent,
                Err(e) => tracing::warn!(error = %e, "stream frames not pushed"),
            }
        }
        let mut minutes = Vec::new();
        let counted = self
            .count(
                shard,
                &batch[..done],
                &derived[..done],
                &mut out,
                &mut minutes,
            )
            .await;
        // The tenants' rates the counters said, whether every counter was written or not.
        out.grants = self.shards.follow(&minutes).await.len();
        if let Err(e) = counted {
            // Every record again: the counters' marks keep what was written from counting twice.
            return Err(Unfinished {
                from: 0,
                reason: e.to_string(),
            });
        }
        if done < batch.len() {
            return Err(Unfinished {
                from: done,
                reason: "the bus refused an event".into(),
            });
        }
        Ok(out)
    }

    /// The counts of `records`, one write per counter, each marked with the records it adds.
    async fn count(
        &self,
        shard: &str,
        records: &[RowChange],
        derived: &[Derived],
        out: &mut Applied,
        minutes: &mut Vec<crate::shards::MinuteCount>,
    ) -> Result<(), CountError> {
        use futures::StreamExt;
        // Each record's adds, in order. With the usage log, a batch's usage and health counts
        // are logged once and folded into the counters later; a tenant busy in the batch has
        // its rate counted now as well, for the listing shards' growth.
        let busy = match self.log {
            Some(_) => log::busy_tenants(derived),
            None => Default::default(),
        };
        let mut adds: Vec<(&str, CounterAdd)> = Vec::new();
        for (r, d) in records.iter().zip(derived) {
            let seq = r.seq.as_str();
            adds.extend(d.counts.iter().map(|a| (seq, a.clone())));
            match self.log {
                None => adds.extend(d.rows.iter().flat_map(UsageRow::adds).map(|a| (seq, a))),
                Some(_) => adds.extend(
                    d.rows
                        .iter()
                        .filter_map(|row| log::rate_of(row, &busy))
                        .map(|a| (seq, a)),
                ),
            }
        }
        // Per counter (a usage counter's part this shard adds to): its adds, in order.
        let mut per: BTreeMap<String, Vec<(&str, &CounterAdd)>> = BTreeMap::new();
        for (seq, a) in &adds {
            per.entry(a.counter_key_of(shard))
                .or_default()
                .push((seq, a));
        }
        if let Some(log) = self.log {
            let rows: Vec<(&str, &[UsageRow])> = records
                .iter()
                .zip(derived)
                .map(|(r, d)| (r.seq.as_str(), d.rows.as_slice()))
                .collect();
            let wrote = self.log_rows(log, shard, records, &rows).await?;
            out.counter_writes += wrote.writes;
            out.repeats += wrote.repeats;
        }
        // The counters are apart (each keeps its own mark), so they are written side by
        // side: a batch over many channels writes a counter or three per channel.
        let writes: Vec<_> = per
            .values()
            .map(|adds| Box::pin(self.count_one(shard, adds.as_slice())))
            .collect();
        let done: Vec<Result<Counted, CountError>> = futures::stream::iter(writes)
            .buffer_unordered(COUNTER_WRITES_AT_ONCE)
            .collect()
            .await;
        let mut failed = None;
        for c in done {
            match c {
                Ok(c) => {
                    out.counter_writes += c.writes;
                    out.repeats += c.repeats;
                    minutes.extend(c.minute);
                }
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// One counter's adds of the batch, written once (twice when a repeat's write says how
    /// far the counter got, and the second write adds the rest).
    async fn count_one(
        &self,
        shard: &str,
        adds: &[(&str, &CounterAdd)],
    ) -> Result<Counted, CountError> {
        let mut c = Counted::default();
        let mut from = 0;
        for _ in 0..2 {
            let rest = &adds[from..];
            let Some(((first, a0), (last, _))) = rest.first().zip(rest.last()) else {
                break;
            };
            let mut total = (*a0).clone().in_part_of(shard);
            for (_, a) in &rest[1..] {
                total.add(a);
            }
            if total.is_zero() {
                break;
            }
            let mark = StreamMark {
                shard: shard.to_owned(),
                first: (*first).to_owned(),
                last: (*last).to_owned(),
            };
            match self.counters.add_marked(&total, &mark).await {
                Ok(Marked::Applied { created }) => {
                    c.writes += 1;
                    c.minute = crate::shards::MinuteCount::of(&total, created);
                    break;
                }
                Ok(Marked::Behind { to }) => {
                    c.repeats += 1;
                    let next = adds.partition_point(|(seq, _)| *seq <= to.as_str());
                    if next <= from {
                        // A mark that is not past the batch's first record refused it:
                        // another consumer of this shard; leave it to the next batch.
                        return Err(CountError::Refused {
                            mark: to,
                            first: (*first).to_owned(),
                        });
                    }
                    from = next;
                }
                Err(e) => return Err(CountError::Store(e)),
            }
        }
        Ok(c)
    }
}

/// Counter writes of one batch in flight at once.
const COUNTER_WRITES_AT_ONCE: usize = 16;

/// What one counter's writes did.
#[derive(Default)]
pub(crate) struct Counted {
    pub(crate) writes: usize,
    pub(crate) repeats: usize,
    /// A tenant's minute counter's count of created deliveries after the add.
    minute: Option<crate::shards::MinuteCount>,
}

/// Why a batch's counts were not all written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CountError {
    #[error("counter not written: {0}")]
    Store(#[from] StoreError),
    #[error("counter mark {mark} refused records from {first}")]
    Refused { mark: String, first: String },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use converger_core::{ActivityId, ChannelId, DeliveryId, TenantId, Tier};

    fn row(status: DeliveryStatus, attempts: u32) -> Delivery {
        let tenant = TenantId::generate();
        let channel = ChannelId::generate();
        let activity = ActivityId::generate();
        Delivery {
            id: DeliveryId::generate(),
            tenant_id: tenant,
            channel_id: channel,
            activity_id: activity,
            conversation_id: "c-1".into(),
            event_type: None,
            tier: Tier::Default,
            status,
            attempts,
            last_error: None,
            next_attempt_at: 1_000,
            lease_until: None,
            lease_token: None,
            settled_by: None,
            sent_at: None,
            provider_message_id: None,
            response_status: None,
            retry_count: 0,
            retried_by: None,
            retried_at: None,
            created_at: Timestamp::parse("2026-12-05T10:00:00.000000Z").unwrap(),
            updated_at: Timestamp::parse("2026-12-05T10:00:01.000000Z").unwrap(),
            attempt_log: Vec::new(),
            in_backlog: false,
            slot: false,
            slot_item: 0,
            handed_off: false,
            expires_at: None,
            shard: 0,
            shard_lease: None,
            unlisted: false,
            watched: false,
            lane_seq: None,
        }
    }

    fn change(old: Option<Delivery>, new: Option<Delivery>) -> RowChange {
        RowChange {
            event_id: "e1".into(),
            seq: converger_ports::seq_key("1"),
            old,
            new,
        }
    }

    fn usage_total(d: &Derived) -> Counts {
        let mut c = Counts::default();
        for r in &d.rows {
            c.add(&r.counts);
        }
        c
    }

    /// The health counter's adds, `(created, failed)`.
    fn health(d: &Derived) -> Vec<(i64, i64)> {
        d.rows
            .iter()
            .filter(|r| r.health_created != 0 || r.health_failed != 0)
            .map(|r| (r.health_created, r.health_failed))
            .collect()
    }

    fn types(d: &Derived) -> Vec<&'static str> {
        d.events.iter().map(|e| e.detail_type.as_str()).collect()
    }

    #[test]
    fn a_new_row_counts_created_and_announces_nothing_unless_paused() {
        let d = derive(&change(None, Some(row(DeliveryStatus::Pending, 0))), 86_400);
        assert!(d.events.is_empty());
        assert_eq!(usage_total(&d).created, 1);
        assert_eq!(health(&d), [(1, 0)]);
        // Each row's counters: the five usage counters, and the health counter.
        let adds: Vec<CounterAdd> = d.rows.iter().flat_map(UsageRow::adds).collect();
        assert_eq!(adds.len(), 6, "{adds:?}");
        let d = derive(&change(None, Some(row(DeliveryStatus::Paused, 0))), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed"]);
    }

    #[test]
    fn a_filtered_row_is_announced_and_counted_but_not_in_health_until_retried() {
        let filtered = row(DeliveryStatus::Filtered, 0);
        let d = derive(&change(None, Some(filtered.clone())), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed"]);
        let counts = usage_total(&d);
        assert_eq!(
            (counts.created, counts.filtered, counts.attempts),
            (1, 1, 0)
        );
        assert!(health(&d).is_empty());
        let mut retried = row(DeliveryStatus::Pending, 0);
        retried.retry_count = 1;
        let d = derive(&change(Some(filtered), Some(retried)), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed", "delivery.retried"]);
        assert_eq!(health(&d), [(1, 0)]);
    }

    #[test]
    fn only_a_write_into_the_due_index_counts_for_the_due_shards() {
        let due = |old: &Delivery, new: Delivery| {
            let d = derive(&change(Some(old.clone()), Some(new)), 86_400);
            d.rows.iter().map(|r| r.due_writes).sum::<i64>()
        };
        let first = row(DeliveryStatus::Pending, 0);
        let mut in_flight = first.clone();
        in_flight.unlisted = true;
        // A retry past one hop moves its entry to its new due time.
        let mut past_hop = row(DeliveryStatus::Pending, 1);
        past_hop.next_attempt_at = 3_601_000;
        assert_eq!(due(&first, past_hop.clone()), 1);
        assert_eq!(
            due(&in_flight, past_hop),
            1,
            "and one out of flight enters it"
        );
        // One that rides its messages, an outcome that leaves pending: none.
        let mut riding = row(DeliveryStatus::Pending, 1);
        riding.next_attempt_at = 61_000;
        riding.watched = true;
        assert_eq!(due(&in_flight, riding), 0);
        assert_eq!(due(&first, row(DeliveryStatus::Sent, 1)), 0);
    }

    #[test]
    fn a_claim_or_a_lease_renewal_implies_nothing() {
        let old = row(DeliveryStatus::Pending, 0);
        let mut new = old.clone();
        new.lease_token = Some("t".into());
        new.lease_until = Some(5);
        assert_eq!(
            derive(&change(Some(old), Some(new)), 86_400),
            Derived::default()
        );
    }

    #[test]
    fn a_retried_attempt_is_announced_with_its_error_and_next_time() {
        let old = row(DeliveryStatus::Pending, 0);
        let mut new = row(DeliveryStatus::Pending, 1);
        new.last_error = Some("HTTP 503".into());
        new.next_attempt_at = 61_000;
        let d = derive(&change(Some(old), Some(new)), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed"]);
        let e = &d.events[0].detail;
        assert_eq!(e["status"], "pending");
        assert_eq!(e["attempts"], 1);
        assert_eq!(e["error"], "HTTP 503");
        assert_eq!(e["next_attempt_at"], "1970-01-01T00:01:01.000000Z");
        assert_eq!(e["event_id"], "e1:0");
        let u = usage_total(&d);
        assert_eq!((u.attempts, u.failed_attempts, u.sent), (1, 1, 0));
    }

    #[test]
    fn a_dead_letter_is_counted_and_announced_and_a_replay_takes_it_back() {
        let old = row(DeliveryStatus::Pending, 2);
        let mut dead = row(DeliveryStatus::Failed, 3);
        dead.last_error = Some("HTTP 400".into());
        let d = derive(&change(Some(old), Some(dead.clone())), 86_400);
        assert_eq!(
            types(&d),
            ["delivery.status_changed", "delivery.dead_lettered"]
        );
        assert_eq!(d.events[1].detail["event_id"], "e1:1");
        assert_eq!(usage_total(&d).dead_letters, 1);
        assert_eq!(health(&d), [(0, 1)]);
        assert!(
            d.counts
                .iter()
                .any(|a| matches!(a, CounterAdd::DeadLetters { delta: 1, .. }))
        );
        let mut again = dead.clone();
        again.status = DeliveryStatus::Pending;
        again.retry_count = 1;
        again.retried_by = Some("operator".into());
        let d = derive(&change(Some(dead), Some(again)), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed", "delivery.retried"]);
        assert_eq!(health(&d), [(0, -1)]);
        assert!(
            d.counts
                .iter()
                .any(|a| matches!(a, CounterAdd::DeadLetters { delta: -1, .. }))
        );
    }

    #[test]
    fn a_send_counts_its_latency_once_and_a_receipt_does_not_count_it_again() {
        let old = row(DeliveryStatus::Pending, 0);
        let mut sent = row(DeliveryStatus::Sent, 1);
        sent.sent_at = Timestamp::parse("2026-12-05T10:00:01.000000Z");
        let d = derive(&change(Some(old), Some(sent.clone())), 86_400);
        let u = usage_total(&d);
        assert_eq!((u.sent, u.attempts, u.failed_attempts), (1, 1, 0));
        assert_eq!(u.latency.iter().sum::<i64>(), 1);
        let mut read = sent.clone();
        read.status = DeliveryStatus::Read;
        let d = derive(&change(Some(sent), Some(read)), 86_400);
        assert_eq!(types(&d), ["delivery.status_changed"]);
        assert!(d.counts.is_empty() && d.rows.is_empty());
    }

    /// A bus that takes `take` events, then refuses.
    struct Refusing {
        take: usize,
        taken: std::sync::Mutex<Vec<PlatformEvent>>,
    }

    #[async_trait::async_trait]
    impl Events for Refusing {
        async fn publish(&self, _: Vec<PlatformEvent>) {}
        async fn try_publish(&self, events: Vec<PlatformEvent>) -> Result<(), usize> {
            let mut t = self.taken.lock().unwrap();
            let room = self.take.saturating_sub(t.len());
            t.extend(events.iter().take(room).cloned());
            if events.len() > room {
                Err(room)
            } else {
                Ok(())
            }
        }
    }

    /// A batch whose third record's event the bus refuses: the first two are done (their
    /// events and counts), and the batch goes on again from the third.
    #[tokio::test]
    async fn a_refused_event_hands_the_batch_back_from_its_record() {
        let store = converger_memory::MemStore::new();
        let bus = Refusing {
            take: 2,
            taken: Default::default(),
        };
        let (sockets, memo) = Default::default();
        let changes = changes_of(&store, &bus, &sockets, &memo, true);
        let records: Vec<RowChange> = (1..=4)
            .map(|i| {
                let mut failed = row(DeliveryStatus::Failed, 1);
                failed.last_error = Some("HTTP 400".into());
                RowChange {
                    event_id: format!("e{i}"),
                    seq: converger_ports::seq_key(&i.to_string()),
                    old: Some(row(DeliveryStatus::Pending, 0)),
                    new: Some(failed),
                }
            })
            .collect();
        // Each record has two events: the second record's first is refused.
        let e = changes.apply("s", &records).await.unwrap_err();
        assert_eq!(e.from, 1, "{e:?}");
        assert_eq!(bus.taken.lock().unwrap().len(), 2);
    }

    static LIVE: std::sync::LazyLock<crate::stream::LiveCache> =
        std::sync::LazyLock::new(crate::stream::LiveCache::default);

    /// The changes use case over `store` and `bus`.
    fn changes_of<'a>(
        store: &'a converger_memory::MemStore,
        bus: &'a dyn Events,
        sockets: &'a converger_memory::MemSockets,
        memo: &'a crate::shards::ShardMemo,
        bus_status_events: bool,
    ) -> Changes<'a> {
        let clock = &converger_core::time::SystemClock;
        Changes {
            events: bus,
            counters: store,
            streams: crate::stream::Streams {
                clock,
                tenants: store,
                streams: store,
                sockets,
                enabled: false,
                live: &LIVE,
            },
            bus_status_events,
            retention_s: 86_400,
            shards: crate::shards::ShardGrowth {
                tenants: store,
                usage: store,
                clock,
                memo,
                retention_ms: 86_400_000,
                per_shard: converger_core::shards::SHARD_RATE,
            },
            log: None,
            clock,
        }
    }

    /// `BusStatusEvents=disabled`: a status change sends nothing to the bus, a dead letter
    /// still sends its `delivery.dead_lettered` (and no status event beside it).
    #[tokio::test]
    async fn without_bus_status_events_only_the_dead_letter_reaches_the_bus() {
        let store = converger_memory::MemStore::new();
        let bus = Refusing {
            take: usize::MAX,
            taken: Default::default(),
        };
        let (sockets, memo) = Default::default();
        let changes = changes_of(&store, &bus, &sockets, &memo, false);
        let mut failed = row(DeliveryStatus::Failed, 1);
        failed.last_error = Some("HTTP 400".into());
        let records = [row(DeliveryStatus::Sent, 1), failed]
            .into_iter()
            .enumerate()
            .map(|(i, new)| RowChange {
                event_id: format!("e{i}"),
                seq: converger_ports::seq_key(&i.to_string()),
                old: Some(row(DeliveryStatus::Pending, 0)),
                new: Some(new),
            })
            .collect::<Vec<_>>();
        changes.apply("s", &records).await.unwrap();
        let taken = bus.taken.lock().unwrap();
        let sent: Vec<&str> = taken.iter().map(|e| e.detail_type.as_str()).collect();
        assert_eq!(sent, ["delivery.dead_lettered"]);
    }

    #[test]
    fn a_removed_row_implies_nothing() {
        let d = derive(&change(Some(row(DeliveryStatus::Sent, 1)), None), 86_400);
        assert_eq!(d, Derived::default());
    }
}
