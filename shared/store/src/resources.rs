//! The names of the AWS resources a function uses, as the template hands them over: every
//! table, queue and bus arrives in the function's environment (`infra/template.yaml` sets it
//! from what CloudFormation created). Nothing here derives a name from a naming rule; the
//! template is the only place resources are declared.

use converger_core::Tier;
use converger_core::settings as set;

/// A queue a function may use: its short name (for reports), and the environment variables
/// carrying its URL and, where a function reads it, its dead-letter queue's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDef {
    pub name: &'static str,
    /// Environment variable that carries the queue URL into a function.
    pub env: &'static str,
    /// Environment variable that carries its dead-letter queue's URL (only the functions
    /// that report queue depths are given it).
    pub dlq_env: Option<&'static str>,
}

pub const ACTIVITIES_QUEUE: QueueDef = QueueDef {
    name: "activities",
    env: set::ACTIVITIES_QUEUE_URL.name,
    dlq_env: None,
};

pub const fn tier_queue(tier: Tier) -> QueueDef {
    match tier {
        Tier::High => QueueDef {
            name: "deliveries-high",
            env: set::DELIVERIES_HIGH_QUEUE_URL.name,
            dlq_env: Some(set::DELIVERIES_HIGH_DLQ_URL.name),
        },
        Tier::Default => QueueDef {
            name: "deliveries",
            env: set::DELIVERIES_QUEUE_URL.name,
            dlq_env: Some(set::DELIVERIES_DLQ_URL.name),
        },
        Tier::Bulk => QueueDef {
            name: "deliveries-bulk",
            env: set::DELIVERIES_BULK_QUEUE_URL.name,
            dlq_env: Some(set::DELIVERIES_BULK_DLQ_URL.name),
        },
    }
}

pub const REPLAY_QUEUE: QueueDef = QueueDef {
    name: "replay",
    env: set::REPLAY_QUEUE_URL.name,
    dlq_env: None,
};

/// Flow jobs of one channel: probes after the cooldown, and releases of parked deliveries.
pub const PROBE_QUEUE: QueueDef = QueueDef {
    name: "probe",
    env: set::PROBE_QUEUE_URL.name,
    dlq_env: None,
};

pub const QUEUES: [QueueDef; 6] = [
    ACTIVITIES_QUEUE,
    REPLAY_QUEUE,
    PROBE_QUEUE,
    tier_queue(Tier::High),
    tier_queue(Tier::Default),
    tier_queue(Tier::Bulk),
];

/// Environment variables naming the tables, in [`Resources`]' field order.
pub const TABLE_ENVS: [&str; 15] = [
    set::TENANTS_TABLE.name,
    set::CHANNELS_TABLE.name,
    set::ACTIVITIES_TABLE.name,
    set::DELIVERIES_TABLE.name,
    set::ATTEMPTS_TABLE.name,
    set::AUDIT_TABLE.name,
    set::REPLAYS_TABLE.name,
    set::FLOW_TABLE.name,
    set::HEALTH_TABLE.name,
    set::CONNECTIONS_TABLE.name,
    set::IDEMPOTENCY_TABLE.name,
    set::STREAM_TABLE.name,
    set::LANES_TABLE.name,
    set::USAGE_TABLE.name,
    set::EVENT_TYPES_TABLE.name,
];

/// Shards of the sparse due index (`due_shard` = `due#<n>`).
pub use converger_ports::DUE_SHARDS;

pub use converger_ports::DELIVER_TIMEOUT_S;

pub const BUS_ENV: &str = set::EVENT_BUS_NAME.name;

/// Environment variable with the WebSocket API's management endpoint
/// (`https://{api-id}.execute-api.{region}.amazonaws.com/{stage}`).
pub const MANAGEMENT_URL_ENV: &str = set::WEBSOCKET_MANAGEMENT_URL.name;

/// The SES configuration set email is sent with (its event destination publishes bounces,
/// complaints and deliveries to EventBridge).
pub const EMAIL_CONFIGURATION_SET_ENV: &str = set::EMAIL_CONFIGURATION_SET.name;
/// `source` of every platform event.
pub const EVENT_SOURCE: &str = "converger";

/// What the environment gives wrong: a resource name it does not give, or a layout setting
/// that does not parse.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResourceError {
    #[error("{0} is not set: the template passes every resource name to the functions")]
    Missing(&'static str),
    #[error("{var} = `{value}`: {rule}")]
    Invalid {
        var: &'static str,
        value: String,
        rule: String,
    },
}

impl ResourceError {
    /// The environment variable at fault.
    pub fn var(&self) -> &'static str {
        match self {
            Self::Missing(v) | Self::Invalid { var: v, .. } => v,
        }
    }
}

/// The environment variable with the due index's shard count (the template's `DueShards`).
pub const DUE_SHARDS_ENV: &str = set::DUE_SHARDS.name;

/// Physical names, resolved once per process from the function's environment.
#[derive(Debug, Clone)]
pub struct Resources {
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
    pub idempotency: String,
    /// The live stream's table.
    pub stream: String,
    /// The ordered lanes' table.
    pub lanes: String,
    /// The usage counters' and depth samples' table.
    pub usage: String,
    /// The tenants' event-type catalogs.
    pub event_types: String,
    pub bus: String,
    /// Queue URLs, by queue name ([`QueueDef::name`]).
    pub queue_urls: std::collections::HashMap<&'static str, String>,
    /// Dead-letter queue URLs, by their queue's name, where the environment gives them.
    pub dlq_urls: std::collections::HashMap<&'static str, String>,
    /// Partitions of the deliveries table's due index (`due#0` to `due#<n-1>`): raised with
    /// the deployment's rate, never lowered (an entry stays in the shard it was written to).
    pub due_shards: u32,
}

impl Resources {
    /// Names from `var` (a function's environment as deployed): every table, queue and the
    /// bus must be there.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ResourceError> {
        let need = |k: &'static str| {
            var(k)
                .filter(|v| !v.is_empty())
                .ok_or(ResourceError::Missing(k))
        };
        let env = set::Env::new(&var);
        let due_shards = env
            .number::<u32>(&set::DUE_SHARDS)
            .map_err(|e| ResourceError::Invalid {
                var: e.name,
                value: e.value,
                rule: e.rule,
            })?
            .unwrap_or(DUE_SHARDS);
        let mut queue_urls = std::collections::HashMap::new();
        let mut dlq_urls = std::collections::HashMap::new();
        for q in QUEUES {
            queue_urls.insert(q.name, need(q.env)?);
            if let Some(url) = q.dlq_env.and_then(&var).filter(|v| !v.is_empty()) {
                dlq_urls.insert(q.name, url);
            }
        }
        Ok(Self {
            tenants: need(TABLE_ENVS[0])?,
            channels: need(TABLE_ENVS[1])?,
            activities: need(TABLE_ENVS[2])?,
            deliveries: need(TABLE_ENVS[3])?,
            attempts: need(TABLE_ENVS[4])?,
            audit: need(TABLE_ENVS[5])?,
            replays: need(TABLE_ENVS[6])?,
            flow: need(TABLE_ENVS[7])?,
            health: need(TABLE_ENVS[8])?,
            connections: need(TABLE_ENVS[9])?,
            idempotency: need(TABLE_ENVS[10])?,
            stream: need(TABLE_ENVS[11])?,
            lanes: need(TABLE_ENVS[12])?,
            usage: need(TABLE_ENVS[13])?,
            event_types: need(TABLE_ENVS[14])?,
            bus: need(BUS_ENV)?,
            queue_urls,
            dlq_urls,
            due_shards,
        })
    }

    /// Names from this process's environment (a Lambda function's, set by the template).
    pub fn from_env() -> Result<Self, ResourceError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// A queue's URL.
    pub fn queue_url(&self, def: &QueueDef) -> Result<&str, ResourceError> {
        self.queue_urls
            .get(def.name)
            .map(String::as_str)
            .ok_or(ResourceError::Missing(def.env))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn full() -> HashMap<String, String> {
        let mut m: HashMap<String, String> = TABLE_ENVS
            .iter()
            .map(|k| ((*k).to_owned(), format!("t-{k}")))
            .collect();
        for q in QUEUES {
            m.insert(q.env.into(), format!("https://q/{}", q.name));
        }
        m.insert(BUS_ENV.into(), "bus".into());
        m
    }

    #[test]
    fn every_name_comes_from_the_environment() {
        let env = full();
        let r = Resources::from_vars(|k| env.get(k).cloned()).unwrap();
        assert_eq!(r.deliveries, "t-DELIVERIES_TABLE");
        assert_eq!(
            r.queue_url(&tier_queue(Tier::Bulk)).unwrap(),
            "https://q/deliveries-bulk"
        );
        assert!(r.dlq_urls.is_empty());
    }

    #[test]
    fn a_missing_name_is_an_error_that_names_the_variable() {
        for key in full().keys() {
            let mut env = full();
            env.remove(key);
            let err = Resources::from_vars(|k| env.get(k).cloned()).unwrap_err();
            assert_eq!(err.var(), key.as_str());
        }
    }

    #[test]
    fn the_due_shards_default_to_sixteen_and_a_bad_count_is_refused() {
        let mut env = full();
        let r = Resources::from_vars(|k| env.get(k).cloned()).unwrap();
        assert_eq!(r.due_shards, DUE_SHARDS);
        assert_eq!(
            set::DUE_SHARDS.kind,
            set::Kind::Number {
                min: 1,
                max: u64::from(converger_ports::MAX_DUE_SHARDS)
            }
        );
        env.insert(DUE_SHARDS_ENV.into(), "256".into());
        let r = Resources::from_vars(|k| env.get(k).cloned()).unwrap();
        assert_eq!(r.due_shards, 256);
        for bad in ["0", "-1", "many", "100000"] {
            env.insert(DUE_SHARDS_ENV.into(), bad.into());
            let err = Resources::from_vars(|k| env.get(k).cloned()).unwrap_err();
            assert_eq!(err.var(), DUE_SHARDS_ENV);
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
