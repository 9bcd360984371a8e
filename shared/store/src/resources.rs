//! Names of every AWS resource, the single source of truth shared by the functions, the local
//! stack's provisioning and (through a test) `infra/template.yaml`.

use converger_core::Tier;

/// Logical resources. `name` is the physical name under a stack prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDef {
    /// CloudFormation logical id in the template.
    pub logical_id: &'static str,
    pub name: &'static str,
    /// Environment variable that carries the physical name into a function.
    pub env: &'static str,
    pub hash_key: &'static str,
    pub range_key: Option<&'static str>,
    pub gsis: &'static [GsiDef],
    pub ttl_attribute: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GsiDef {
    pub name: &'static str,
    pub hash_key: &'static str,
    pub range_key: &'static str,
    /// Non-key attributes projected into the index; empty means all attributes.
    pub include: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDef {
    pub logical_id: &'static str,
    pub name: &'static str,
    /// Environment variable that carries the queue URL into a function.
    pub env: &'static str,
    /// Visibility timeout in seconds (at least 6x the consuming function's timeout).
    pub visibility_timeout_s: u32,
}

pub const TENANTS: TableDef = TableDef {
    logical_id: "TenantsTable",
    name: "tenants",
    env: "TENANTS_TABLE",
    hash_key: "pk",
    range_key: None,
    gsis: &[],
    ttl_attribute: None,
};

pub const CHANNELS: TableDef = TableDef {
    logical_id: "ChannelsTable",
    name: "channels",
    env: "CHANNELS_TABLE",
    hash_key: "id",
    range_key: None,
    // A tenant's channels, for the web pages' channel list.
    gsis: &[GsiDef {
        name: "by_tenant",
        hash_key: "tenant_id",
        range_key: "id",
        include: &[],
    }],
    ttl_attribute: None,
};

pub const ACTIVITIES: TableDef = TableDef {
    logical_id: "ActivitiesTable",
    name: "activities",
    env: "ACTIVITIES_TABLE",
    hash_key: "id",
    range_key: None,
    gsis: &[],
    ttl_attribute: None,
};

pub const DELIVERIES: TableDef = TableDef {
    logical_id: "DeliveriesTable",
    name: "deliveries",
    env: "DELIVERIES_TABLE",
    hash_key: "id",
    range_key: None,
    gsis: &[
        GsiDef {
            name: "by_tenant_status",
            hash_key: "ts_pk",
            range_key: "upd_sk",
            include: &[],
        },
        GsiDef {
            name: "by_channel_status",
            hash_key: "cs_pk",
            range_key: "upd_sk",
            include: &[],
        },
        GsiDef {
            name: "by_tenant",
            hash_key: "tenant_id",
            range_key: "upd_sk",
            include: &[],
        },
        // Sparse: only pending deliveries carry `due_shard`/`due_at`, so the sweeper's cost
        // does not grow with settled deliveries.
        GsiDef {
            name: "by_due",
            hash_key: "due_shard",
            range_key: "due_at",
            include: &["tier", "lease_until"],
        },
        // Sparse: only deliveries waiting for a slot of their channel's window carry
        // `bl_pk` (the channel) and `bl_sk` (due time and id), oldest due first.
        GsiDef {
            name: "by_backlog",
            hash_key: "bl_pk",
            range_key: "bl_sk",
            include: &["tier"],
        },
        // Sparse: deliveries a provider accepted carry `pm_key` (`<channel>#<provider
        // message id>`), so a receipt finds its delivery.
        GsiDef {
            name: "by_provider_message",
            hash_key: "pm_key",
            range_key: "id",
            include: &[],
        },
    ],
    ttl_attribute: None,
};

pub const ATTEMPTS: TableDef = TableDef {
    logical_id: "AttemptsTable",
    name: "attempts",
    env: "ATTEMPTS_TABLE",
    hash_key: "delivery_id",
    range_key: Some("attempt_sk"),
    gsis: &[],
    ttl_attribute: Some("expires_at"),
};

pub const AUDIT: TableDef = TableDef {
    logical_id: "AuditTable",
    name: "audit",
    env: "AUDIT_TABLE",
    hash_key: "tenant_id",
    range_key: Some("audit_sk"),
    gsis: &[],
    ttl_attribute: None,
};

pub const REPLAYS: TableDef = TableDef {
    logical_id: "ReplaysTable",
    name: "replays",
    env: "REPLAYS_TABLE",
    hash_key: "id",
    range_key: None,
    gsis: &[],
    ttl_attribute: Some("expires_at"),
};

/// Flow control state: one item per channel (breaker, window slots, backlog and parking
/// marks; key = the channel id) and rate-limit counters (key `rate#<channel>#<window>`, TTL).
pub const FLOW: TableDef = TableDef {
    logical_id: "FlowTable",
    name: "flow",
    env: "FLOW_TABLE",
    hash_key: "key",
    range_key: None,
    gsis: &[],
    ttl_attribute: Some("expires_at"),
};

/// Health checks: a row per check of a channel, newest last (TTL: 7 days).
pub const HEALTH: TableDef = TableDef {
    logical_id: "HealthTable",
    name: "health",
    env: "HEALTH_TABLE",
    hash_key: "channel_id",
    range_key: Some("checked_sk"),
    gsis: &[],
    ttl_attribute: Some("expires_at"),
};

/// Websocket connections: one item per connection (TTL), found by channel through a GSI.
pub const CONNECTIONS: TableDef = TableDef {
    logical_id: "ConnectionsTable",
    name: "connections",
    env: "CONNECTIONS_TABLE",
    hash_key: "connection_id",
    range_key: None,
    gsis: &[GsiDef {
        name: "by_channel",
        hash_key: "channel_id",
        range_key: "connection_id",
        include: &[],
    }],
    ttl_attribute: Some("expires_at"),
};

pub const TABLES: [TableDef; 10] = [
    TENANTS,
    CHANNELS,
    ACTIVITIES,
    DELIVERIES,
    ATTEMPTS,
    AUDIT,
    REPLAYS,
    FLOW,
    HEALTH,
    CONNECTIONS,
];

/// Shards of the sparse due index (`due_shard` = `due#<n>`).
pub use crate::model::DUE_SHARDS;

/// The deliver function's timeout in seconds (the template's `Timeout`).
pub const DELIVER_TIMEOUT_S: u32 = 60;

pub const ACTIVITIES_QUEUE: QueueDef = QueueDef {
    logical_id: "ActivitiesQueue",
    name: "activities",
    env: "ACTIVITIES_QUEUE_URL",
    visibility_timeout_s: 6 * 30,
};

pub const fn tier_queue(tier: Tier) -> QueueDef {
    match tier {
        Tier::High => QueueDef {
            logical_id: "DeliveriesHighQueue",
            name: "deliveries-high",
            env: "DELIVERIES_HIGH_QUEUE_URL",
            visibility_timeout_s: 6 * DELIVER_TIMEOUT_S,
        },
        Tier::Default => QueueDef {
            logical_id: "DeliveriesQueue",
            name: "deliveries",
            env: "DELIVERIES_QUEUE_URL",
            visibility_timeout_s: 6 * DELIVER_TIMEOUT_S,
        },
        Tier::Bulk => QueueDef {
            logical_id: "DeliveriesBulkQueue",
            name: "deliveries-bulk",
            env: "DELIVERIES_BULK_QUEUE_URL",
            visibility_timeout_s: 6 * DELIVER_TIMEOUT_S,
        },
    }
}

/// The replay function's timeout in seconds (the template's `Timeout`).
pub const REPLAY_TIMEOUT_S: u32 = 120;

pub const REPLAY_QUEUE: QueueDef = QueueDef {
    logical_id: "ReplayQueue",
    name: "replay",
    env: "REPLAY_QUEUE_URL",
    visibility_timeout_s: 6 * REPLAY_TIMEOUT_S,
};

/// The probe function's timeout in seconds (the template's `Timeout`).
pub const PROBE_TIMEOUT_S: u32 = 120;

/// Flow jobs of one channel: probes after the cooldown, and releases of parked deliveries.
pub const PROBE_QUEUE: QueueDef = QueueDef {
    logical_id: "ProbeQueue",
    name: "probe",
    env: "PROBE_QUEUE_URL",
    visibility_timeout_s: 6 * PROBE_TIMEOUT_S,
};

pub const QUEUES: [QueueDef; 6] = [
    ACTIVITIES_QUEUE,
    REPLAY_QUEUE,
    PROBE_QUEUE,
    tier_queue(Tier::High),
    tier_queue(Tier::Default),
    tier_queue(Tier::Bulk),
];

/// Every queue has a dead-letter queue named `<queue>-dlq`, receiving a message after this
/// many receives: a cap for poison messages, never the retry policy.
pub const MAX_RECEIVE_COUNT: u32 = 100;

pub const BUS: &str = "converger";
pub const BUS_ENV: &str = "EVENT_BUS_NAME";
/// `source` of every platform event.
pub const EVENT_SOURCE: &str = "converger";

/// Physical names, resolved once per process.
#[derive(Debug, Clone)]
pub struct Resources {
    pub prefix: String,
    pub tenants: String,
    pub channels: String,
    pub activities: String,
    pub deliveries: String,
    pub attempts: String,
    pub audit: String,
    pub replays: String,
    pub flow: String,
    pub health: String,
    pub connections: String,
    pub bus: String,
    /// Queue URLs given by the environment, by queue name; others are looked up by name.
    pub queue_urls: std::collections::HashMap<&'static str, String>,
}

impl Resources {
    /// Names under a prefix (`converger-` in production, a unique one per test).
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            tenants: format!("{prefix}{}", TENANTS.name),
            channels: format!("{prefix}{}", CHANNELS.name),
            activities: format!("{prefix}{}", ACTIVITIES.name),
            deliveries: format!("{prefix}{}", DELIVERIES.name),
            attempts: format!("{prefix}{}", ATTEMPTS.name),
            audit: format!("{prefix}{}", AUDIT.name),
            replays: format!("{prefix}{}", REPLAYS.name),
            flow: format!("{prefix}{}", FLOW.name),
            health: format!("{prefix}{}", HEALTH.name),
            connections: format!("{prefix}{}", CONNECTIONS.name),
            bus: format!("{prefix}{BUS}"),
            queue_urls: Default::default(),
        }
    }

    /// Names from the environment the template sets, falling back to `CONVERGER_PREFIX`
    /// (default `converger-`).
    pub fn from_env() -> Self {
        let prefix = std::env::var("CONVERGER_PREFIX").unwrap_or_else(|_| "converger-".into());
        let base = Self::with_prefix(&prefix);
        let var = |k: &str, d: String| std::env::var(k).unwrap_or(d);
        Self {
            tenants: var(TENANTS.env, base.tenants.clone()),
            channels: var(CHANNELS.env, base.channels.clone()),
            activities: var(ACTIVITIES.env, base.activities.clone()),
            deliveries: var(DELIVERIES.env, base.deliveries.clone()),
            attempts: var(ATTEMPTS.env, base.attempts.clone()),
            audit: var(AUDIT.env, base.audit.clone()),
            replays: var(REPLAYS.env, base.replays.clone()),
            flow: var(FLOW.env, base.flow.clone()),
            health: var(HEALTH.env, base.health.clone()),
            connections: var(CONNECTIONS.env, base.connections.clone()),
            bus: var(BUS_ENV, base.bus.clone()),
            queue_urls: QUEUES
                .iter()
                .filter_map(|q| std::env::var(q.env).ok().map(|u| (q.name, u)))
                .collect(),
            prefix,
        }
    }

    pub fn table(&self, def: &TableDef) -> String {
        format!("{}{}", self.prefix, def.name)
    }

    pub fn queue_name(&self, def: &QueueDef) -> String {
        format!("{}{}", self.prefix, def.name)
    }
}
