//! Ingest: store an activity and one delivery per target channel, then enqueue the deliveries
//! on the tenant's tier queue. Ingesting the same activity id again writes nothing new.

use crate::outcome::Admission;
use converger_core::trace::TraceContext;
use converger_core::{ActivityId, ChannelId, DeliveryId};
use converger_ports::{
    Activity, Created, Delivery, DeliveryMessage, QueueError, StoreError, Tenant,
};
use serde::Deserialize;
use serde_json::Value;

/// Most channels one activity may target (one transactional write holds them all).
pub const MAX_TARGETS: usize = 50;
/// Largest activity payload (serialized) a deployment without a payload bucket takes; with
/// one, `core::payload::MAX_BYTES` ([`crate::payloads::Payloads::max_bytes`]).
pub const MAX_PAYLOAD_BYTES: usize = converger_core::payload::ROW_MAX_BYTES;

/// An activity as producers submit it.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "Submitted")]
pub struct NewActivity {
    /// Optional producer-chosen id: submitting the same id twice creates nothing new.
    pub id: Option<ActivityId>,
    pub conversation_id: String,
    /// Optional position in the conversation; assigned when absent.
    pub seq: Option<u64>,
    /// The channels it goes to. Optional with an `event_type`: it then goes to every active
    /// channel of the tenant subscribed to that type.
    pub channel_ids: Vec<ChannelId>,
    /// What kind of event it is (`message.created`): kept with it, and its route when
    /// `channel_ids` is empty.
    pub event_type: Option<String>,
    /// The payload (any JSON, `null` included). Required unless `payload_upload` names
    /// an upload.
    pub payload: Option<Value>,
    /// An upload (`POST /api/v1/payloads`) that is the payload: for a payload larger than
    /// an API request may carry (up to `core::payload::MAX_BYTES`).
    pub payload_upload: Option<String>,
    /// The producer's W3C trace context (`POST /api/v1/activities` takes it from its
    /// headers; a batch item as fields): kept with the activity and carried to every
    /// attempt. Without one, or with one that does not parse, a new trace starts.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

/// [`NewActivity`] as it is read: one of `payload` and `payload_upload` must be there (a
/// body without either does not fit, as a missing field does not).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Submitted {
    #[serde(default)]
    id: Option<ActivityId>,
    conversation_id: String,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    channel_ids: Vec<ChannelId>,
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default, deserialize_with = "present")]
    payload: Option<Value>,
    #[serde(default)]
    payload_upload: Option<String>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    tracestate: Option<String>,
}

impl TryFrom<Submitted> for NewActivity {
    type Error = &'static str;
    fn try_from(s: Submitted) -> Result<Self, Self::Error> {
        if s.payload.is_none() && s.payload_upload.is_none() {
            return Err("missing field `payload` (or `payload_upload`, naming an upload)");
        }
        Ok(Self {
            id: s.id,
            conversation_id: s.conversation_id,
            seq: s.seq,
            channel_ids: s.channel_ids,
            event_type: s.event_type,
            payload: s.payload,
            payload_upload: s.payload_upload,
            traceparent: s.traceparent,
            tracestate: s.tracestate,
        })
    }
}

/// A field that is there, whatever its value (`null` too): `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Invalid(String),
    /// A payload over the deployment's limit.
    #[error("{0}")]
    TooLarge(String),
    /// A payload the store cannot keep (too deeply nested, a number out of range).
    #[error("{0}")]
    Payload(String),
    #[error("channel {0} does not exist")]
    UnknownChannel(ChannelId),
    #[error("channel {0} is inactive")]
    InactiveChannel(ChannelId),
    #[error("channel {0} has unsupported type {1}")]
    UnsupportedChannel(ChannelId, String),
    /// The tenant's alert channel: only the platform posts to it.
    #[error("channel {0} is the tenant's alert channel, which only the platform posts to")]
    ManagedChannel(ChannelId),
    #[error("activity {0} exists with different content")]
    Conflict(ActivityId),
    /// The payload does not fit its event type's schema: where and why (a few problems).
    #[error("the payload does not fit the schema of event type `{event_type}`: {}", problems.join("; "))]
    Schema {
        event_type: String,
        problems: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

#[derive(Debug, Clone)]
pub struct Ingested {
    pub activity: Activity,
    pub deliveries: Vec<Delivery>,
    /// `false` when the activity id had been ingested before.
    pub created: bool,
}

/// Most activities in one batch.
pub const MAX_BATCH: usize = 100;
/// Items of a batch checked, admitted or written at once.
const BATCH_CONCURRENCY: usize = 16;

/// An activity whose own checks passed, with its target channels and its payload
/// serialized (`new.payload` is set).
struct Checked {
    new: NewActivity,
    resolved: Vec<std::sync::Arc<converger_ports::Channel>>,
    serialized: Vec<u8>,
    /// An upload's share of the process's payload budget, until its rows are written.
    held: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// An activity ready to be written: its deliveries and what flow control made of each.
struct Prepared {
    activity: Activity,
    deliveries: Vec<Delivery>,
    admissions: Vec<Admission>,
    resolved: Vec<std::sync::Arc<converger_ports::Channel>>,
    fresh: bool,
    _held: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Who posts an activity: what it may target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The tenant (its API): any of its channels but its alert channel.
    Tenant,
    /// A bot's reply: may target no channel at all (the activity is then only stored in its
    /// conversation).
    Bot,
    /// The platform itself (a tenant's alerts): its alert channel too.
    Platform,
}

/// Activities in: each fanned out into one delivery per target channel, admitted and enqueued.
#[derive(Clone, Copy)]
pub struct Intake<'p> {
    /// The usage counters a breaker opening adds to (per instance: it is no row change).
    pub(crate) usage: &'p crate::usage::UsageCounts,
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) activities: &'p dyn converger_ports::ActivityStore,
    pub(crate) deliveries: &'p dyn converger_ports::DeliveryStore,
    pub(crate) adapters: &'p converger_adapters::Adapters,
    pub(crate) config: &'p crate::PipelineConfig,
    pub(crate) flow: &'p crate::flow::FlowControl,
    pub(crate) queue: &'p dyn converger_ports::Queue,
    pub(crate) cache: &'p crate::cache::ChannelCache,
    pub(crate) lanes: crate::lanes::Lanes<'p>,
    pub(crate) payloads: &'p crate::payloads::Payloads,
}

impl Intake<'_> {
    pub async fn ingest(&self, tenant: &Tenant, new: NewActivity) -> Result<Ingested, IngestError> {
        self.ingest_with(tenant, new, Origin::Tenant).await
    }

    /// Ingest as `origin`. Validate -> resolve the targets -> admit each delivery (flow
    /// control) -> write the rows, then enqueue the live ones.
    pub(crate) async fn ingest_with(
        &self,
        tenant: &Tenant,
        new: NewActivity,
        origin: Origin,
    ) -> Result<Ingested, IngestError> {
        let checked = self.check(tenant, new, origin).await?;
        let seq = match checked.new.seq {
            Some(s) => s,
            None => {
                self.activities
                    .next_seq(&tenant.id, &checked.new.conversation_id)
                    .await?
            }
        };
        let p = self.admit(tenant, checked, seq).await?;
        if !self.record(&p).await? {
            self.payloads.forget(&p.activity).await;
            return self.existing(tenant, p.activity).await;
        }
        Ok(self.finish(tenant, p).await)
    }

    /// Several activities in one call (`POST /api/v1/activities/batch`), each taken as
    /// [`Self::ingest`] takes one, answered in order; an item's refusal is its own. The
    /// sequence numbers of a conversation's items without `seq` are taken in one write, in
    /// the items' order; the rows of the items with generated ids go out in shared batch
    /// writes and their messages in shared batch sends, beside each other.
    pub async fn ingest_batch(
        &self,
        tenant: &Tenant,
        items: Vec<Result<NewActivity, IngestError>>,
    ) -> Vec<Result<Ingested, IngestError>> {
        use futures::StreamExt;
        let checked: Vec<Result<Checked, IngestError>> = futures::stream::iter(
            items.into_iter().map(|item| async move {
                let item = item?;
                // A batch's payloads are all held until its rows are written: an upload (up
                // to 10 MiB each) is taken one activity a request.
                if item.payload_upload.is_some() {
                    return Err(IngestError::Invalid(
                        "payload_upload is taken by POST /api/v1/activities, one activity a request; a batch carries its payloads inline".into(),
                    ));
                }
                self.check(tenant, item, Origin::Tenant).await
            }),
        )
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
        let seqs = self.batch_seqs(tenant, &checked).await;
        let prepared: Vec<Result<Prepared, IngestError>> = futures::stream::iter(
            checked
                .into_iter()
                .zip(seqs)
                .map(|(c, seq)| async move { self.admit(tenant, c?, seq?).await }),
        )
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
        // The items with generated ids: rows and messages together, as `record` sends one.
        let fresh: Vec<&Prepared> = prepared
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .filter(|p| p.fresh)
            .collect();
        let fresh_written = if fresh.is_empty() {
            Ok(())
        } else {
            self.record_fresh(&fresh).await
        };
        futures::stream::iter(prepared.into_iter().map(|p| {
            let fresh_written = fresh_written.as_ref();
            async move {
                let p = p?;
                if p.fresh {
                    if let Err(e) = fresh_written {
                        return Err(IngestError::Store(StoreError::Unavailable(e.to_string())));
                    }
                } else if !self.record(&p).await? {
                    self.payloads.forget(&p.activity).await;
                    return self.existing(tenant, p.activity).await;
                }
                Ok(self.finish(tenant, p).await)
            }
        }))
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await
    }

    /// The sequence number of each checked item: its own, or one of its conversation's
    /// taken for the batch in one write (in the items' order).
    async fn batch_seqs(
        &self,
        tenant: &Tenant,
        checked: &[Result<Checked, IngestError>],
    ) -> Vec<Result<u64, IngestError>> {
        use std::collections::BTreeMap;
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for c in checked.iter().flatten().filter(|c| c.new.seq.is_none()) {
            *counts.entry(c.new.conversation_id.as_str()).or_default() += 1;
        }
        let firsts = futures::future::join_all(
            counts
                .iter()
                .map(|(conv, n)| self.activities.reserve_seqs(&tenant.id, conv, *n)),
        )
        .await;
        // Each conversation's next number, or why none was taken.
        let mut next: BTreeMap<&str, Result<u64, std::sync::Arc<StoreError>>> = counts
            .keys()
            .copied()
            .zip(firsts.into_iter().map(|r| r.map_err(std::sync::Arc::new)))
            .collect();
        let mut take = |conv: &str| match next.get_mut(conv) {
            Some(Ok(n)) => {
                *n += 1;
                Ok(*n - 1)
            }
            Some(Err(e)) => Err(IngestError::Store(StoreError::Unavailable(e.to_string()))),
            None => Err(IngestError::Store(StoreError::Unavailable(
                "no sequence number taken".into(),
            ))),
        };
        checked
            .iter()
            .map(|c| match c {
                // Refused already: its own error is kept.
                Err(_) => Ok(0),
                Ok(c) => c.new.seq.map_or_else(|| take(&c.new.conversation_id), Ok),
            })
            .collect()
    }

    /// The request's own checks and its targets, resolved.
    async fn check(
        &self,
        tenant: &Tenant,
        mut new: NewActivity,
        origin: Origin,
    ) -> Result<Checked, IngestError> {
        let targets = validate(&new, origin == Origin::Bot)?;
        let taken = self.payload_of(&tenant.id, &mut new).await?;
        converger_core::payload::check(&taken.value).map_err(|e| IngestError::Payload(e.into()))?;
        let (payload, serialized, held) =
            (new.payload.insert(taken.value), taken.bytes, taken.held);
        // A tenant's activity of a type with a payload schema must fit it (looked up only for
        // a tenant that has had one).
        if origin == Origin::Tenant
            && tenant.typed_events
            && let Some(event_type) = &new.event_type
            && let Some(schema) = self.cache.payload_schema(&tenant.id, event_type).await?
            && let Err(problems) = schema.check(payload)
        {
            return Err(IngestError::Schema {
                event_type: event_type.clone(),
                problems,
            });
        }
        let resolved = match (&new.event_type, targets.is_empty()) {
            (Some(event_type), true) => self.subscribers(tenant, event_type).await?,
            _ => self.resolve_targets(tenant, &targets, origin).await?,
        };
        Ok(Checked {
            new,
            resolved,
            serialized,
            held,
        })
    }

    /// The payload `new` carries, or the upload it names, serialized and within the
    /// deployment's limit.
    async fn payload_of(
        &self,
        tenant: &converger_core::TenantId,
        new: &mut NewActivity,
    ) -> Result<crate::payloads::Taken, IngestError> {
        use crate::payloads::TakeError;
        let taken = match (new.payload.take(), new.payload_upload.take()) {
            (Some(v), None) => self.payloads.measured(v),
            (None, Some(id)) => self.payloads.take_upload(tenant, &id).await,
            (Some(_), Some(_)) => Err(TakeError::Invalid(
                "give payload or payload_upload, not both".into(),
            )),
            (None, None) => Err(TakeError::Invalid(
                "payload is required (or payload_upload, naming an upload)".into(),
            )),
        };
        taken.map_err(|e| match e {
            TakeError::TooLarge(m) => IngestError::TooLarge(m),
            TakeError::Invalid(m) => IngestError::Invalid(m),
            TakeError::Store(e) => IngestError::Store(e),
        })
    }

    /// The activity at `seq` and its deliveries, each admitted by flow control.
    async fn admit(
        &self,
        tenant: &Tenant,
        checked: Checked,
        seq: u64,
    ) -> Result<Prepared, IngestError> {
        let Checked {
            new,
            resolved,
            serialized,
            held,
        } = checked;
        let targets: Vec<ChannelId> = resolved.iter().map(|c| c.id.clone()).collect();
        let now = self.clock.now();
        // An id the producer chose may have been ingested before (a retried POST): its
        // rows are written only if it is new. One generated here is new by construction.
        let fresh = new.id.is_none();
        let mut activity = Activity {
            id: new.id.unwrap_or_else(ActivityId::generate),
            tenant_id: tenant.id.clone(),
            conversation_id: new.conversation_id,
            seq,
            event_type: new.event_type,
            payload_ref: None,
            payload: new.payload.unwrap_or_default(),
            channel_ids: targets,
            created_at: now,
            // Kept for the retention period, with its deliveries (DynamoDB TTL).
            expires_at: Some(
                now.secs() + i64::try_from(self.config.retention.as_secs()).unwrap_or(i64::MAX / 2),
            ),
            // The producer's trace; without one, `Activity::trace` derives it from the id.
            trace: new
                .traceparent
                .as_deref()
                .and_then(|t| TraceContext::parse(t, new.tracestate.as_deref())),
        };
        // Flow control first: each delivery takes a slot of its channel's window (enqueued
        // now), waits in the backlog (window full) or is written parked (breaker open or
        // channel paused).
        let admitted = futures::future::try_join_all(resolved.iter().map(|ch| async {
            let mut d = Delivery::new(&activity, ch, tenant.tier, now).placed(tenant, now.ms());
            // A delivery its channel's filter does not want is written settled: no message,
            // no slot, no lane, no attempt; listed as it is written.
            if ch
                .filter
                .as_ref()
                .is_some_and(|f| !f.matches(activity.event_type.as_deref(), &activity.payload))
            {
                d.status = converger_core::DeliveryStatus::Filtered;
                d.lane_seq = None;
                return Ok((d, Admission::Filtered));
            }
            // An ordered channel's delivery waits in its lane; flow control applies to its
            // lane's head, when it is attempted.
            let admission = if d.lane_seq.is_some() {
                d.next_attempt_at = self.lanes.first_look(now);
                Admission::Lane
            } else {
                self.flow.window().admit_new(ch, &mut d).await?
            };
            // On its way to the queue: listed when its first attempt ends (a backlogged or
            // parked delivery is listed as it is written).
            d.unlisted = admission == Admission::Live;
            Ok::<_, converger_ports::StoreError>((d, admission))
        }))
        .await?;
        let (deliveries, admissions): (Vec<Delivery>, Vec<Admission>) =
            admitted.into_iter().unzip();
        // A large payload goes to the payload bucket before any row names it.
        self.payloads.keep(&mut activity, serialized).await?;
        Ok(Prepared {
            activity,
            deliveries,
            admissions,
            resolved,
            fresh,
            _held: held,
        })
    }

    /// After the rows are written: ordered deliveries join their lanes, and flow control
    /// hears of the deliveries it held back.
    async fn finish(&self, tenant: &Tenant, p: Prepared) -> Ingested {
        let laned: Vec<_> = p
            .resolved
            .iter()
            .zip(&p.deliveries)
            .filter_map(|(ch, d)| ch.ordering.map(|o| (d, o.on_dead_letter)))
            .filter(|(d, _)| d.lane_seq.is_some())
            .collect();
        if !laned.is_empty() {
            self.lanes.joined(&laned).await;
        }
        for (ch, a) in p.resolved.iter().zip(&p.admissions) {
            if !matches!(*a, Admission::Live | Admission::Lane | Admission::Filtered) {
                self.flow
                    .window()
                    .after_admission_or_feed_later(ch, tenant.tier, *a)
                    .await;
            }
        }
        Ingested {
            activity: p.activity,
            deliveries: p.deliveries,
            created: true,
        }
    }

    /// The tenant's active channels subscribed to `event_type` (ordered by id), from the
    /// instance's subscriber cache: one read of the tenant's channels per
    /// `channel_cache_ttl`.
    async fn subscribers(
        &self,
        tenant: &Tenant,
        event_type: &str,
    ) -> Result<Vec<std::sync::Arc<converger_ports::Channel>>, IngestError> {
        let all = self.cache.tenant_channels(&tenant.id).await?;
        let mut subscribed: Vec<_> = all
            .iter()
            .filter(|c| c.subscribes(event_type) && self.adapters.get(c.kind).is_some())
            // The alert channel takes the platform's alerts only.
            .filter(|c| tenant.alert_channel_id.as_ref() != Some(&c.id))
            .cloned()
            .collect();
        subscribed.sort_by(|a, b| a.id.cmp(&b.id));
        if subscribed.len() > MAX_TARGETS {
            return Err(IngestError::Invalid(format!(
                "{} channels subscribe to `{event_type}`; an activity reaches at most {MAX_TARGETS}",
                subscribed.len()
            )));
        }
        Ok(subscribed)
    }

    /// The target channels, read through the tenant's scope: another tenant's channel is
    /// reported exactly like a missing one; inactive ones and types without an adapter are
    /// refused.
    async fn resolve_targets(
        &self,
        tenant: &Tenant,
        targets: &[ChannelId],
        origin: Origin,
    ) -> Result<Vec<std::sync::Arc<converger_ports::Channel>>, IngestError> {
        if origin != Origin::Platform
            && let Some(alert) = targets
                .iter()
                .find(|id| tenant.alert_channel_id.as_ref() == Some(*id))
        {
            return Err(IngestError::ManagedChannel(alert.clone()));
        }
        let scope = converger_ports::Scope::Tenant(&tenant.id);
        let channels = futures::future::try_join_all(
            targets.iter().map(|id| self.cache.channel_in(scope, id)),
        )
        .await?;
        let mut resolved = Vec::with_capacity(channels.len());
        for (id, ch) in targets.iter().zip(channels) {
            let Some(ch) = ch else {
                return Err(IngestError::UnknownChannel(id.clone()));
            };
            if !ch.active {
                return Err(IngestError::InactiveChannel(id.clone()));
            }
            if self.adapters.get(ch.kind).is_none() {
                return Err(IngestError::UnsupportedChannel(
                    id.clone(),
                    ch.kind.to_string(),
                ));
            }
            resolved.push(ch);
        }
        Ok(resolved)
    }

    /// Writes the activity with its deliveries and enqueues the live ones; `false` when a
    /// producer-chosen id was ingested before (nothing written). A generated id is new, so
    /// its rows and its messages go out together ([`Self::record_fresh`]). A producer's id may
    /// name an activity ingested before with another payload: its rows go first, in one
    /// transaction, and only a new activity is enqueued; a crash between the two leaves rows
    /// whose messages the producer's retry sends (`existing`).
    async fn record(&self, p: &Prepared) -> Result<bool, IngestError> {
        if p.fresh {
            self.record_fresh(&[p]).await?;
            return Ok(true);
        }
        if self
            .activities
            .create_activity(&p.activity, &p.deliveries)
            .await?
            == Created::Duplicate
        {
            return Ok(false);
        }
        // What follows from the new rows (their counts, a parked one's event) comes from the
        // table's stream (`crate::changes`).
        let msgs = self.live_messages(&p.activity, &p.deliveries, &p.admissions, false);
        if !msgs.is_empty() {
            self.queue.send_many(&msgs).await?;
        }
        Ok(true)
    }

    /// The messages of an activity's live deliveries, each with its watch copy; those of a
    /// generated id go out beside their rows, so they say until when a missing row may still
    /// come.
    fn live_messages(
        &self,
        activity: &Activity,
        deliveries: &[Delivery],
        admissions: &[Admission],
        fresh: bool,
    ) -> Vec<DeliveryMessage> {
        let carried = activity.if_inline();
        let by = self
            .clock
            .now_ms()
            .saturating_add(converger_core::policy::ROW_WAIT_MS);
        deliveries
            .iter()
            .zip(admissions)
            .filter(|(_, a)| **a == Admission::Live)
            .flat_map(|(d, _)| {
                let m = DeliveryMessage::new(d.id.clone(), d.tier, carried).of(d);
                self.with_watch(d, if fresh { m.beside_row(by) } else { m })
            })
            .collect()
    }

    /// `m`, the message of `d`, and its watch copy when `d` is a first try in flight (in no due
    /// index: the copy attempts it if the attempt that took it dies, ADR 0076).
    fn with_watch(&self, d: &Delivery, m: DeliveryMessage) -> Vec<DeliveryMessage> {
        m.with_watch(d.carried_by_messages(), self.config.watch_delay_s)
    }

    /// Writes activities with generated ids (one, or a batch's): every row in shared batch
    /// writes and every message in shared batch sends, the two beside each other. A message
    /// that comes before its row waits for it (`core::policy::ROW_WAIT_MS`). A failed write or
    /// send is reported so that the producer sends again: a first try is in no due index, so
    /// no sweep would send a row whose message was lost, and a message without its row finds
    /// none and is dropped.
    async fn record_fresh(&self, fresh: &[&Prepared]) -> Result<(), IngestError> {
        let rows: Vec<(&Activity, &[Delivery])> = fresh
            .iter()
            .map(|p| (&p.activity, p.deliveries.as_slice()))
            .collect();
        let msgs: Vec<DeliveryMessage> = fresh
            .iter()
            .flat_map(|p| self.live_messages(&p.activity, &p.deliveries, &p.admissions, true))
            .collect();
        let write = async {
            self.activities
                .create_fresh_activities(&rows)
                .await
                .map_err(IngestError::from)
        };
        let send = async {
            if !msgs.is_empty() {
                self.queue.send_many(&msgs).await?;
            }
            Ok::<_, IngestError>(())
        };
        tokio::try_join!(write, send)?;
        Ok(())
    }

    /// The activity was ingested before: answer with what was stored, and make sure its
    /// waiting deliveries have a message (the first ingest may have died before enqueueing).
    async fn existing(
        &self,
        tenant: &Tenant,
        submitted: Activity,
    ) -> Result<Ingested, IngestError> {
        let Some(stored) = self
            .activities
            .get_activity(&tenant.id, &submitted.id)
            .await?
        else {
            return Err(IngestError::Conflict(submitted.id));
        };
        let ids: Vec<DeliveryId> = stored.delivery_ids().collect();
        let deliveries = self.deliveries.get_deliveries(&ids).await?;
        let now = self.clock.now();
        let carried = stored.if_inline();
        let msgs: Vec<DeliveryMessage> = deliveries
            .iter()
            .filter(|d| {
                d.status == converger_core::DeliveryStatus::Pending
                    && !d.in_backlog
                    && d.next_attempt_at <= now.ms()
            })
            .flat_map(|d| {
                self.with_watch(d, DeliveryMessage::new(d.id.clone(), d.tier, carried).of(d))
            })
            .collect();
        if !msgs.is_empty() {
            self.queue.send_many(&msgs).await?;
        }
        Ok(Ingested {
            activity: stored,
            deliveries,
            created: false,
        })
    }
}

/// The request's own checks: a conversation id of 1 to 256 characters, 1 to
/// [`MAX_TARGETS`] distinct channels (none for an internal activity, or one sent by event
/// type), a valid event type (the payload is checked by `Intake::payload_of`). Returns the targets without duplicates, in the order given.
fn validate(new: &NewActivity, internal: bool) -> Result<Vec<ChannelId>, IngestError> {
    if new.conversation_id.trim().is_empty() || new.conversation_id.len() > 256 {
        return Err(IngestError::Invalid(
            "conversation_id must be 1 to 256 characters".into(),
        ));
    }
    let mut targets: Vec<ChannelId> = Vec::with_capacity(new.channel_ids.len());
    for c in &new.channel_ids {
        if !targets.contains(c) {
            targets.push(c.clone());
        }
    }
    if let Some(t) = &new.event_type {
        converger_core::channel::check_event_type(t).map_err(|e| IngestError::Invalid(e.into()))?;
    }
    let routed = new.event_type.is_some() || internal;
    if (targets.is_empty() && !routed) || targets.len() > MAX_TARGETS {
        return Err(IngestError::Invalid(format!(
            "channel_ids must name 1 to {MAX_TARGETS} channels, or event_type route the activity to its subscribers"
        )));
    }
    Ok(targets)
}
