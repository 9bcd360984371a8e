//! The composition root's wiring: each use case is built here from the ports and components
//! of one [`Pipeline`], borrowing only what it uses. No use case names the root, so each is
//! read (and tested) from its own fields alone.

use crate::{
    Pipeline, attempt, changes, channels, event_types, flow_jobs, fold, handoff, health, ingest,
    lanes, replay, shards, sources, stream, sweep, tenants, usage,
};

impl Pipeline {
    /// Activities in: one fanned out into its deliveries.
    pub fn intake(&self) -> ingest::Intake<'_> {
        ingest::Intake {
            clock: &*self.clock,
            activities: &*self.store,
            deliveries: &*self.store,
            adapters: &self.adapters,
            config: &self.config,
            flow: &self.flow,
            queue: &*self.queue,
            cache: &self.cache,
            lanes: self.lanes(),
            usage: &self.usage,
            payloads: &self.payloads,
        }
    }

    /// Delivery attempts, and their log.
    pub fn attempts(&self) -> attempt::Attempts<'_> {
        attempt::Attempts {
            clock: &*self.clock,
            activities: &*self.store,
            listings: &*self.store,
            deliveries: &*self.store,
            adapters: &self.adapters,
            config: &self.config,
            flow: &self.flow,
            queue: &*self.queue,
            spans: &*self.spans,
            metrics: &self.metrics,
            lanes: self.lanes(),
            cache: &self.cache,
            health: self.health(),
            handoff: self.handoff(),
            payloads: &self.payloads,
        }
    }

    /// The probe function's jobs.
    pub fn flow_jobs(&self) -> flow_jobs::FlowJobs<'_> {
        flow_jobs::FlowJobs {
            clock: &*self.clock,
            channel_store: &*self.store,
            flow: &self.flow,
            cache: &self.cache,
            attempts: self.attempts(),
            replays: self.replays(),
        }
    }

    /// Replays of failed deliveries: one, a channel's, a filter's, and bulk jobs.
    pub fn replays(&self) -> replay::Replays<'_> {
        replay::Replays {
            clock: &*self.clock,
            channel_store: &*self.store,
            listings: &*self.store,
            deliveries: &*self.store,
            replay_store: &*self.store,
            config: &self.config,
            queue: &*self.queue,
            cache: &self.cache,
            tenants: &*self.store,
            activities: &*self.store,
            payloads: &self.payloads,
        }
    }

    /// The retry scheduler: due deliveries enqueued, crashed attempts reclaimed.
    pub fn sweeper(&self) -> sweep::Sweeper<'_> {
        sweep::Sweeper {
            clock: &*self.clock,
            listings: &*self.store,
            deliveries: &*self.store,
            config: &self.config,
            flow: &self.flow,
            queue: &*self.queue,
            usage: &*self.store,
            fold: self.usage_fold(),
        }
    }

    /// Channel health: the checks, auto-disable and alerts.
    pub fn health(&self) -> health::Health<'_> {
        health::Health {
            clock: &*self.clock,
            health_store: &*self.store,
            tenants: &*self.store,
            events: &*self.events,
            flow: &self.flow,
            cache: &self.cache,
            retention: self.config.retention,
            intake: self.intake(),
        }
    }

    /// Hand-offs: receipts, websocket clients, email events.
    pub fn handoff(&self) -> handoff::Handoff<'_> {
        handoff::Handoff {
            clock: &*self.clock,
            activities: &*self.store,
            channel_store: &*self.store,
            listings: &*self.store,
            deliveries: &*self.store,
            handoffs: &*self.store,
            tenants: &*self.store,
            mailer: &*self.mailer,
            tenant_aws: &*self.tenant_aws,
            platform_account: self.config.platform_account.as_deref(),
            sockets: &*self.sockets,
            cache: &self.cache,
            intake: self.intake(),
        }
    }

    /// Ordered lanes: where a delivery stands in its lane.
    pub fn lanes(&self) -> lanes::Lanes<'_> {
        lanes::Lanes {
            clock: &*self.clock,
            lanes: &*self.store,
            deliveries: &*self.store,
            queue: &*self.queue,
            recheck_ms: i64::try_from(self.config.lane_recheck.as_millis()).unwrap_or(300_000),
        }
    }

    /// The usage log's fold (run by the retry scheduler when `USAGE_FOLD` is on).
    pub fn usage_fold(&self) -> fold::UsageFold<'_> {
        fold::UsageFold {
            log: &*self.store,
            counters: &*self.store,
            clock: &*self.clock,
            shards: self.shard_growth(),
            due: &*self.store,
        }
    }

    /// The deliveries table's stream consumer: what follows from each row change.
    pub fn changes(&self) -> changes::Changes<'_> {
        changes::Changes {
            events: &*self.events,
            counters: &*self.store,
            streams: self.streams(),
            bus_status_events: self.config.bus_status_events,
            retention_s: i64::try_from(self.config.retention.as_secs()).unwrap_or(i64::MAX / 4),
            shards: self.shard_growth(),
            log: self
                .config
                .usage_fold
                .then_some(&*self.store as &dyn converger_ports::UsageLog),
            clock: &*self.clock,
        }
    }

    /// The live stream: its clients, their subscriptions, the fan-out of the bus's events.
    pub fn streams(&self) -> stream::Streams<'_> {
        stream::Streams {
            clock: &*self.clock,
            tenants: &*self.store,
            streams: &*self.store,
            sockets: &*self.sockets,
            enabled: self.config.live_stream,
            live: &self.live,
        }
    }

    /// Tenants: creation, settings, keys.
    pub fn tenants(&self) -> tenants::Tenants<'_> {
        tenants::Tenants {
            clock: &*self.clock,
            accounts: &*self.store,
            channel_store: &*self.store,
            health_store: &*self.store,
            tenants: &*self.store,
            audit_log: &*self.store,
            adapters: &self.adapters,
            cache: &self.cache,
            streams: self.streams(),
        }
    }

    /// Channels: creation, changes, secrets, deletion.
    pub fn channels(&self) -> channels::Channels<'_> {
        channels::Channels {
            clock: &*self.clock,
            channel_store: &*self.store,
            audit_log: &*self.store,
            config: &self.config,
            flow: &self.flow,
            cache: &self.cache,
            lanes: self.lanes(),
            adapters: &self.adapters,
            tenants: &*self.store,
            accounts: &*self.store,
        }
    }

    /// The tenants' event-type catalogs.
    pub fn event_types(&self) -> event_types::EventTypes<'_> {
        event_types::EventTypes {
            clock: &*self.clock,
            store: &*self.store,
            tenants: &*self.store,
            cache: &self.cache,
        }
    }

    /// The charts' series, a tenant's usage and the top tenants by cost.
    pub fn usage(&self) -> usage::UsageReads<'_> {
        usage::UsageReads {
            store: &*self.store,
            accounts: &*self.store,
            health: &*self.store,
            model: converger_core::usage::CostModel {
                prices: self.config.usage_prices,
            },
            clock: &*self.clock,
        }
    }

    /// Listing shards that follow a tenant's load (the changes function and the fold).
    pub(crate) fn shard_growth(&self) -> shards::ShardGrowth<'_> {
        shards::ShardGrowth {
            tenants: &*self.store,
            usage: &*self.store,
            clock: &*self.clock,
            memo: &self.shard_memo,
            retention_ms: i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX / 4),
            per_shard: self.config.listing_shard_rate,
        }
    }

    /// The refusal throttle of the addresses whose requests keep being refused.
    pub fn sources(&self) -> sources::Sources<'_> {
        sources::Sources {
            gate: &self.sources,
            schedules: &*self.store,
            clock: &*self.clock,
        }
    }
}
