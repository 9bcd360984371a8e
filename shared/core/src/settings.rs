//! Every setting a function reads from its environment, declared once: its name, what it
//! means, its default and the values it accepts. The loaders (the pipeline's, the web pages',
//! the resource names') read through [`Env`], so a value out of its range or unreadable stops
//! the function at start with an error naming the variable, and `docs/configuration.md` is
//! generated from [`ALL`] (a test keeps the page and the template in step with it).

use std::fmt::Write as _;
use std::str::FromStr;

/// What a setting holds, and so how it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number from `min` to `max` (both included).
    Number { min: u64, max: u64 },
    /// `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Flag,
    /// Text whose own parser (named in the meaning) checks it.
    Text,
    /// A resource's name or address as CloudFormation created it: required where read.
    Resource,
    /// A Secrets Manager secret's ARN, read once at start.
    Secret,
}

/// Which functions read a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBy {
    /// Every function (the pipeline's settings and resource names).
    All,
    /// The `admin` function (the admin API and the web pages).
    Admin,
    /// The functions that send email and into tenants' accounts (`deliver`, `probe`).
    Senders,
    /// The functions that read the queues' depths (`admin`, `retry-scheduler`).
    Depths,
    /// The functions that seal or open channels' client certificates (`api`, `deliver`,
    /// `probe`).
    KeyHolders,
}

impl ReadBy {
    fn label(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Admin => "admin",
            Self::Senders => "deliver, probe",
            Self::Depths => "admin, retry-scheduler",
            Self::KeyHolders => "api, deliver, probe",
        }
    }
}

/// One environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub kind: Kind,
    /// The default as the documentation shows it ("none" when there is none).
    pub default: &'static str,
    pub read_by: ReadBy,
    pub meaning: &'static str,
}

const fn number(
    name: &'static str,
    min: u64,
    max: u64,
    default: &'static str,
    meaning: &'static str,
) -> Setting {
    Setting {
        name,
        kind: Kind::Number { min, max },
        default,
        read_by: ReadBy::All,
        meaning,
    }
}

const fn text(name: &'static str, default: &'static str, meaning: &'static str) -> Setting {
    Setting {
        name,
        kind: Kind::Text,
        default,
        read_by: ReadBy::All,
        meaning,
    }
}

const fn resource(name: &'static str, meaning: &'static str) -> Setting {
    Setting {
        name,
        kind: Kind::Resource,
        default: "none (required)",
        read_by: ReadBy::All,
        meaning,
    }
}

const fn admin(setting: Setting) -> Setting {
    Setting {
        read_by: ReadBy::Admin,
        ..setting
    }
}

// ------------------------------------------------------------------ delivery and limits
pub const API_RATE_LIMITS: Setting = text(
    "API_RATE_LIMITS",
    "`high=500/s,default=100/s,bulk=50/s`",
    "each tier's tenant API rate limit per API key (`<tier>=<count>/s`, `/m` or `/h`, comma-separated); an operator's `api_rate_limit` overrides it per tenant",
);
pub const TIER_CONCURRENCY: Setting = text(
    "TIER_CONCURRENCY",
    "`high=10,default=20,bulk=5`",
    "concurrent batches of 10 each tier's deliver mapping runs at most (`<tier>=<count>`, 2 to 1,000, comma-separated; the template sets it from its `DeliverConcurrency*` parameters): a channel's `auto` window is half its tier's, and one without a cap of its own holds at most half its tier's records",
);
pub const RECEIPT_RATE_LIMIT: Setting = text(
    "RECEIPT_RATE_LIMIT",
    "`3000/s`",
    "verified provider receipts one channel takes, every API instance together (`<count>/s`, `/m` or `/h`)",
);
pub const RETRY_POLICY: Setting = text(
    "RETRY_POLICY",
    "`{}`",
    "the global layer of the retry policy, a JSON object (see [Delivery](delivery.md))",
);
pub const WEBHOOK_ALLOW_CIDRS: Setting = text(
    "WEBHOOK_ALLOW_CIDRS",
    "none (the local runner: loopback)",
    "comma-separated CIDRs that webhooks may reach although they are private or special-purpose",
);
pub const CHANNEL_CACHE_TTL_MS: Setting = number(
    "CHANNEL_CACHE_TTL_MS",
    0,
    3_600_000,
    "5000",
    "how long an instance caches a channel's configuration, in ms",
);
pub const TENANT_CACHE_TTL_MS: Setting = number(
    "TENANT_CACHE_TTL_MS",
    0,
    3_600_000,
    "30000",
    "how long an API instance keeps the tenant an API key names (its tier, limits and listing shards), in ms: an operator's change of them reaches every instance within this",
);
pub const LANE_RECHECK_MS: Setting = number(
    "LANE_RECHECK_MS",
    100,
    3_600_000,
    "300000",
    "how long a delivery waiting in its ordered lane sleeps before it first looks at its lane again, in ms (a safety net: the head's end wakes the next at once; the sleep doubles with the wait, up to an hour)",
);
pub const HOP_CEILING_SECONDS: Setting = number(
    "HOP_CEILING_SECONDS",
    1,
    900,
    "900",
    "the longest single queue delay; longer waits are made of hops",
);
pub const BATCH_CONCURRENCY: Setting = number(
    "BATCH_CONCURRENCY",
    1,
    1000,
    "10",
    "records of one SQS batch processed at once",
);
pub const RETENTION_DAYS: Setting = number(
    "RETENTION_DAYS",
    1,
    3650,
    "30",
    "how long deliveries, their activities and attempt log entries are kept (TTL on `expires_at`; reads ignore expired rows)",
);
pub const ATTEMPT_LOG_RETENTION_DAYS: Setting = number(
    "ATTEMPT_LOG_RETENTION_DAYS",
    1,
    3650,
    "`RETENTION_DAYS`",
    "keeps attempt log entries for less than `RETENTION_DAYS`",
);
pub const SWEEP_GRACE_SECONDS: Setting = number(
    "SWEEP_GRACE_SECONDS",
    0,
    86_400,
    "300",
    "how long past its due time a pending delivery waits before the retry scheduler enqueues it again",
);
pub const SWEEP_LIMIT: Setting = number(
    "SWEEP_LIMIT",
    1,
    1_000_000,
    "10000",
    "most deliveries one sweep enqueues",
);
pub const BULK_RETRY_LIMIT: Setting = number(
    "BULK_RETRY_LIMIT",
    1,
    1_000_000,
    "10000",
    "most dead letters one bulk replay call replays (a call may ask for fewer, never more)",
);
pub const BULK_REPLAY_CONCURRENCY: Setting = number(
    "BULK_REPLAY_CONCURRENCY",
    1,
    256,
    "16",
    "replay transactions (of up to 50 deliveries) one bulk call runs at once",
);
pub const FLOW_CACHE_TTL_MS: Setting = number(
    "FLOW_CACHE_TTL_MS",
    0,
    60_000,
    "1000",
    "how long an instance trusts its view of a channel's breaker and window, in ms (parking and probing always read it again)",
);
pub const LEASE_SECONDS: Setting = number(
    "LEASE_SECONDS",
    2,
    900,
    "8",
    "one slice of an attempt's lease, renewed while its call runs: a crashed attempt's delivery is free again within it",
);
pub const WATCH_DELAY_SECONDS: Setting = number(
    "WATCH_DELAY_SECONDS",
    1,
    900,
    "15",
    "how long after a first try's message (or a retry's within one hop) its watch copy comes: such an attempt is in no due index, and the watch copy attempts it if the attempt that took it died (within this and a lease slice)",
);
pub const USAGE_FLUSH_MS: Setting = number(
    "USAGE_FLUSH_MS",
    0,
    3_600_000,
    "0",
    "how long an instance may hold the breaker openings it added up before writing them to the usage counters (every other count comes from the deliveries table's stream, written once per counter and batch), in ms; 0, the default, writes each opening as it happens (a held count is lost with its instance)",
);
pub const USAGE_PRICES: Setting = text(
    "USAGE_PRICES",
    "`{}`",
    "the prices the usage estimate uses (list prices, US East, unless given), in dollars per million units, a JSON object overriding any of `dynamodb_write_unit`, `dynamodb_read_unit`, `sqs_request`, `eventbridge_event`, `api_request`, `lambda_request`, `lambda_gb_second`, `logs_gb` (see [Usage and cost](usage.md))",
);
pub const RECLAIM_INTERVAL_SECONDS: Setting = number(
    "RECLAIM_INTERVAL_SECONDS",
    0,
    60,
    "3",
    "how often the retry scheduler looks for crashed attempts between its minute sweeps (0: only at each sweep)",
);
pub const SLOT_GRACE_SECONDS: Setting = number(
    "SLOT_GRACE_SECONDS",
    1,
    86_400,
    "120",
    "how long a window slot may be held before the retry scheduler checks that its delivery still holds it",
);
pub const DYNAMODB_SERIAL_TRANSACTIONS: Setting = Setting {
    name: "DYNAMODB_SERIAL_TRANSACTIONS",
    kind: Kind::Flag,
    default: "false",
    read_by: ReadBy::All,
    meaning: "run this process's DynamoDB transactions and breaker transitions one at a time: only for an emulator whose conditional writes are not serializable (the local runner sets it)",
};

pub const CHANNEL_KEY_SECRET_ARN: Setting = Setting {
    name: "CHANNEL_KEY_SECRET_ARN",
    kind: Kind::Secret,
    default: "none",
    read_by: ReadBy::KeyHolders,
    meaning: "the secret whose text (at least 32 characters) seals webhook channels' client certificate keys (`auth` of type mtls); none refuses such channels. Changing it makes the sealed keys unreadable: their channels must be written again",
};
pub const CHANNEL_KEY: Setting = Setting {
    name: "CHANNEL_KEY",
    kind: Kind::Text,
    default: "none",
    read_by: ReadBy::KeyHolders,
    meaning: "the channel key's text itself, read only when `CHANNEL_KEY_SECRET_ARN` is unset (a process run by hand)",
};

// ------------------------------------------------------------------ the admin function
pub const ADMIN_TOKEN_SECRET_ARN: Setting = Setting {
    name: "ADMIN_TOKEN_SECRET_ARN",
    kind: Kind::Secret,
    default: "none",
    read_by: ReadBy::Admin,
    meaning: "the secret holding the admin API's bearer token, at least 16 characters. A shorter token stops the start with an error naming it; none disables the admin API (403 `admin_disabled`)",
};
pub const ADMIN_TOKEN: Setting = admin(text(
    "ADMIN_TOKEN",
    "none",
    "the admin token itself, read only when `ADMIN_TOKEN_SECRET_ARN` is unset (a process run by hand; the local runner writes it into the stack's secret)",
));
pub const SESSION_SECRET_ARN: Setting = Setting {
    name: "SESSION_SECRET_ARN",
    kind: Kind::Secret,
    default: "a random key per process (sessions end with it)",
    read_by: ReadBy::Admin,
    meaning: "the secret that signs the web pages' session cookies and CSRF tokens, at least 32 characters: a shorter one stops the start with an error naming it",
};
pub const SESSION_SECRET: Setting = admin(text(
    "SESSION_SECRET",
    "none",
    "the session key itself, read only when `SESSION_SECRET_ARN` is unset",
));
pub const ADMIN_IP_ALLOWLIST: Setting = admin(text(
    "ADMIN_IP_ALLOWLIST",
    "any address",
    "comma-separated CIDRs allowed into the admin web pages and the admin API (API Gateway's source IP); an unreadable list stops the start",
));
pub const LIVE_STREAM: Setting = Setting {
    name: "LIVE_STREAM",
    kind: Kind::Flag,
    default: "false",
    read_by: ReadBy::All,
    meaning: "`true` where the stack has the live stream (the template's `LiveStream`): stream clients may connect and tokens are given; otherwise both are refused with `stream_disabled`",
};
pub const BUS_STATUS_EVENTS: Setting = Setting {
    name: "BUS_STATUS_EVENTS",
    kind: Kind::Flag,
    default: "true",
    read_by: ReadBy::All,
    meaning: "`false` keeps `delivery.status_changed` off the bus (the template's `BusStatusEvents`): dead letters, replays and channel events go either way, and the live stream and the pages do not need it",
};
pub const USAGE_FOLD: Setting = Setting {
    name: "USAGE_FOLD",
    kind: Kind::Flag,
    default: "false",
    read_by: ReadBy::All,
    meaning: "`true` logs the usage of tenants that are not busy once per stream batch and folds it into the usage counters once a minute, two to four minutes late (the template's `UsageFold`, on by default); `false` writes every counter at once",
};
pub const PLATFORM_ACCOUNT_ID: Setting = text(
    "PLATFORM_ACCOUNT_ID",
    "none",
    "the stack's own AWS account (the template sets it): tenants' roles for the AWS channel types trust it, and a role in it is refused; a value that is not 12 digits stops the start",
);
pub const COOKIE_SECURE: Setting = Setting {
    name: "COOKIE_SECURE",
    kind: Kind::Flag,
    default: "true",
    read_by: ReadBy::Admin,
    meaning: "`false` drops `Secure` from the session cookies (plain-HTTP local use only)",
};
pub const EXPORT_LIMIT: Setting = admin(number(
    "EXPORT_LIMIT",
    1,
    1_000_000,
    "10000",
    "most rows of one CSV export",
));

// ------------------------------------------------------------------ resources
pub const TENANTS_TABLE: Setting = resource("TENANTS_TABLE", "the tenants table");
pub const CHANNELS_TABLE: Setting = resource("CHANNELS_TABLE", "the channels table");
pub const ACTIVITIES_TABLE: Setting = resource("ACTIVITIES_TABLE", "the activities table");
pub const DELIVERIES_TABLE: Setting = resource("DELIVERIES_TABLE", "the deliveries table");
pub const ATTEMPTS_TABLE: Setting = resource("ATTEMPTS_TABLE", "the attempt log table");
pub const AUDIT_TABLE: Setting = resource("AUDIT_TABLE", "the audit log table");
pub const REPLAYS_TABLE: Setting = resource("REPLAYS_TABLE", "the replay jobs table");
pub const FLOW_TABLE: Setting = resource("FLOW_TABLE", "the flow control table");
pub const HEALTH_TABLE: Setting = resource("HEALTH_TABLE", "the health counters table");
pub const CONNECTIONS_TABLE: Setting =
    resource("CONNECTIONS_TABLE", "the websocket connections table");
pub const IDEMPOTENCY_TABLE: Setting = resource("IDEMPOTENCY_TABLE", "the idempotency keys table");
pub const LANES_TABLE: Setting = resource("LANES_TABLE", "the ordered lanes' heads and entries");
pub const EVENT_TYPES_TABLE: Setting =
    resource("EVENT_TYPES_TABLE", "the tenants' event-type catalogs");
pub const USAGE_TABLE: Setting = resource(
    "USAGE_TABLE",
    "the usage counters and the queues' depth samples (the charts and the usage pages)",
);
pub const STREAM_TABLE: Setting = resource(
    "STREAM_TABLE",
    "the live stream's connections, subscriptions and tokens",
);
pub const ACTIVITIES_QUEUE_URL: Setting =
    resource("ACTIVITIES_QUEUE_URL", "the ingest function's queue");
pub const DELIVERIES_HIGH_QUEUE_URL: Setting = resource(
    "DELIVERIES_HIGH_QUEUE_URL",
    "the `high` tier's delivery queue",
);
pub const DELIVERIES_QUEUE_URL: Setting = resource(
    "DELIVERIES_QUEUE_URL",
    "the `default` tier's delivery queue",
);
pub const DELIVERIES_BULK_QUEUE_URL: Setting = resource(
    "DELIVERIES_BULK_QUEUE_URL",
    "the `bulk` tier's delivery queue",
);
pub const REPLAY_QUEUE_URL: Setting = resource("REPLAY_QUEUE_URL", "the replay jobs' queue");
pub const PROBE_QUEUE_URL: Setting = resource(
    "PROBE_QUEUE_URL",
    "the queue of breaker probes, releases and health checks",
);
pub const EVENT_BUS_NAME: Setting = resource("EVENT_BUS_NAME", "the platform events' bus");
pub const DELIVERIES_HIGH_DLQ_URL: Setting = Setting {
    read_by: ReadBy::Depths,
    default: "none",
    ..resource(
        "DELIVERIES_HIGH_DLQ_URL",
        "the `high` tier queue's dead-letter queue (the dashboard's queue depths and their samples)",
    )
};
pub const DELIVERIES_DLQ_URL: Setting = Setting {
    read_by: ReadBy::Depths,
    default: "none",
    ..resource(
        "DELIVERIES_DLQ_URL",
        "the `default` tier queue's dead-letter queue (the dashboard's queue depths and their samples)",
    )
};
pub const DELIVERIES_BULK_DLQ_URL: Setting = Setting {
    read_by: ReadBy::Depths,
    default: "none",
    ..resource(
        "DELIVERIES_BULK_DLQ_URL",
        "the `bulk` tier queue's dead-letter queue (the dashboard's queue depths and their samples)",
    )
};
pub const DUE_SHARDS: Setting = number(
    "DUE_SHARDS",
    1,
    1024,
    "16",
    "the due index's own shards (the sweeper reads them in parallel; more are granted while retries call for them, ADR 0093); a template parameter, since a deployed stack's readers and writers must agree",
);
pub const WEBSOCKET_MANAGEMENT_URL: Setting = Setting {
    name: "WEBSOCKET_MANAGEMENT_URL",
    kind: Kind::Resource,
    default: "none: websocket pushes fail and are retried",
    read_by: ReadBy::All,
    meaning: "the WebSocket API's management endpoint (`https://{api}.execute-api.{region}.amazonaws.com/prod`), where websocket pushes go",
};
pub const ROLE_EXTERNAL_ID_CHECK: Setting = Setting {
    name: "ROLE_EXTERNAL_ID_CHECK",
    kind: Kind::Flag,
    default: "true",
    read_by: ReadBy::Senders,
    meaning: "`false` skips trying a tenant's role with a wrong external id before each new session (a role that admits one is refused with `ExternalIdNotRequired`): only for an emulator that does not evaluate trust policies",
};
pub const PAYLOADS_BUCKET: Setting = Setting {
    name: "PAYLOADS_BUCKET",
    kind: Kind::Resource,
    default: "none: payloads are kept in their rows, at most 256 KiB",
    read_by: ReadBy::All,
    meaning: "the S3 bucket that keeps payloads over 16 KiB (up to 10 MiB) and producers' uploads",
};
pub const EMAIL_CONFIGURATION_SET: Setting = Setting {
    name: "EMAIL_CONFIGURATION_SET",
    kind: Kind::Resource,
    default: "none: email is sent without one (no bounce or complaint events)",
    read_by: ReadBy::Senders,
    meaning: "the SES configuration set email is sent with, whose events reach the `email-events` function",
};
pub const SPAN_EXPORT_ENDPOINT: Setting = Setting {
    name: "SPAN_EXPORT_ENDPOINT",
    kind: Kind::Text,
    default: "none: attempts' spans are not exported",
    read_by: ReadBy::Senders,
    meaning: "the base URL of an OpenTelemetry collector (OTLP over HTTP, `/v1/traces` added) each attempt's span is exported to, child of the producer's span (`SpanExportEndpoint`; the ADOT collector layer's is `http://localhost:4318`)",
};

// ------------------------------------------------------------------ logging
pub const RUST_LOG: Setting = text(
    "RUST_LOG",
    "Lambda's log level (`AWS_LAMBDA_LOG_LEVEL`), else `info`",
    "the log filter: a default level and levels per target, e.g. `info,converger_store=debug`",
);

/// Every setting, in the order the documentation lists them.
pub const ALL: &[Setting] = &[
    API_RATE_LIMITS,
    TIER_CONCURRENCY,
    RECEIPT_RATE_LIMIT,
    RETRY_POLICY,
    WEBHOOK_ALLOW_CIDRS,
    CHANNEL_CACHE_TTL_MS,
    TENANT_CACHE_TTL_MS,
    LANE_RECHECK_MS,
    LIVE_STREAM,
    BUS_STATUS_EVENTS,
    USAGE_FOLD,
    PLATFORM_ACCOUNT_ID,
    HOP_CEILING_SECONDS,
    BATCH_CONCURRENCY,
    RETENTION_DAYS,
    ATTEMPT_LOG_RETENTION_DAYS,
    SWEEP_GRACE_SECONDS,
    SWEEP_LIMIT,
    BULK_RETRY_LIMIT,
    BULK_REPLAY_CONCURRENCY,
    FLOW_CACHE_TTL_MS,
    LEASE_SECONDS,
    WATCH_DELAY_SECONDS,
    USAGE_FLUSH_MS,
    USAGE_PRICES,
    RECLAIM_INTERVAL_SECONDS,
    SLOT_GRACE_SECONDS,
    DYNAMODB_SERIAL_TRANSACTIONS,
    CHANNEL_KEY_SECRET_ARN,
    CHANNEL_KEY,
    ADMIN_TOKEN_SECRET_ARN,
    ADMIN_TOKEN,
    SESSION_SECRET_ARN,
    SESSION_SECRET,
    ADMIN_IP_ALLOWLIST,
    COOKIE_SECURE,
    EXPORT_LIMIT,
    TENANTS_TABLE,
    CHANNELS_TABLE,
    ACTIVITIES_TABLE,
    DELIVERIES_TABLE,
    ATTEMPTS_TABLE,
    AUDIT_TABLE,
    REPLAYS_TABLE,
    FLOW_TABLE,
    HEALTH_TABLE,
    CONNECTIONS_TABLE,
    IDEMPOTENCY_TABLE,
    STREAM_TABLE,
    LANES_TABLE,
    USAGE_TABLE,
    EVENT_TYPES_TABLE,
    ACTIVITIES_QUEUE_URL,
    DELIVERIES_HIGH_QUEUE_URL,
    DELIVERIES_QUEUE_URL,
    DELIVERIES_BULK_QUEUE_URL,
    REPLAY_QUEUE_URL,
    PROBE_QUEUE_URL,
    EVENT_BUS_NAME,
    DELIVERIES_HIGH_DLQ_URL,
    DELIVERIES_DLQ_URL,
    DELIVERIES_BULK_DLQ_URL,
    DUE_SHARDS,
    WEBSOCKET_MANAGEMENT_URL,
    PAYLOADS_BUCKET,
    EMAIL_CONFIGURATION_SET,
    ROLE_EXTERNAL_ID_CHECK,
    SPAN_EXPORT_ENDPOINT,
    RUST_LOG,
];

/// The setting named `name`, if it is one.
pub fn find(name: &str) -> Option<&'static Setting> {
    ALL.iter().find(|s| s.name == name)
}

/// A value a setting does not accept: the function does not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: `{value}` is not {rule}")]
pub struct SettingError {
    pub name: &'static str,
    pub value: String,
    pub rule: String,
}

impl SettingError {
    pub fn new(setting: &Setting, value: &str, rule: impl Into<String>) -> Self {
        Self {
            name: setting.name,
            value: value.to_owned(),
            rule: rule.into(),
        }
    }
}

/// Where [`Env`] finds a variable's value.
type Lookup<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// An environment to read settings from: the process's own, or a map in tests.
pub struct Env<'a> {
    lookup: Lookup<'a>,
}

impl<'a> Env<'a> {
    pub fn new(lookup: impl Fn(&str) -> Option<String> + 'a) -> Self {
        Self {
            lookup: Box::new(lookup),
        }
    }

    /// The setting's value, trimmed; `None` when unset or blank.
    pub fn text(&self, s: &Setting) -> Option<String> {
        (self.lookup)(s.name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// A required resource name: unset is an error naming it.
    pub fn required(&self, s: &Setting) -> Result<String, SettingError> {
        self.text(s)
            .ok_or_else(|| SettingError::new(s, "", "set (the template sets it)"))
    }

    /// A [`Kind::Number`] setting, checked against its range.
    pub fn number<T>(&self, s: &Setting) -> Result<Option<T>, SettingError>
    where
        T: FromStr + TryFrom<u64>,
    {
        let Some(v) = self.text(s) else {
            return Ok(None);
        };
        let (min, max) = match s.kind {
            Kind::Number { min, max } => (min, max),
            _ => (0, u64::MAX),
        };
        let rule = || format!("a whole number from {min} to {max}");
        let n: u64 = v.parse().map_err(|_| SettingError::new(s, &v, rule()))?;
        if !(min..=max).contains(&n) {
            return Err(SettingError::new(s, &v, rule()));
        }
        T::try_from(n)
            .map(Some)
            .map_err(|_| SettingError::new(s, &v, rule()))
    }

    /// A [`Kind::Flag`] setting.
    pub fn flag(&self, s: &Setting) -> Result<Option<bool>, SettingError> {
        let Some(v) = self.text(s) else {
            return Ok(None);
        };
        match v.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Some(true)),
            "0" | "false" | "no" | "off" => Ok(Some(false)),
            _ => Err(SettingError::new(s, &v, "true or false")),
        }
    }

    /// A [`Kind::Text`] setting read by its own parser, whose error becomes the rule.
    pub fn parsed<T, E: std::fmt::Display>(
        &self,
        s: &Setting,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, SettingError> {
        self.text(s)
            .map(|v| parse(&v).map_err(|e| SettingError::new(s, &v, e.to_string())))
            .transpose()
    }
}

/// The generated part of `docs/configuration.md`: one table of every setting.
pub fn markdown() -> String {
    let mut out = String::from(
        "| variable | read by | values | default | meaning |\n|---|---|---|---|---|\n",
    );
    for s in ALL {
        let values = match s.kind {
            Kind::Number { min, max } => format!("{min} to {max}"),
            Kind::Flag => "`true`, `false`".to_owned(),
            Kind::Text => "text".to_owned(),
            Kind::Resource => "a name or URL".to_owned(),
            Kind::Secret => "a secret's ARN".to_owned(),
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            s.name,
            s.read_by.label(),
            values,
            s.default,
            s.meaning
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn names_are_unique_and_defaults_of_numbers_are_in_range() {
        let mut names: Vec<_> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for s in ALL {
            if let Kind::Number { min, max } = s.kind
                && let Ok(d) = s.default.parse::<u64>()
            {
                assert!((min..=max).contains(&d), "{}", s.name);
            }
        }
        assert_eq!(find("LEASE_SECONDS"), Some(&LEASE_SECONDS));
        assert_eq!(find("NOT_A_SETTING"), None);
    }

    #[test]
    fn a_number_out_of_its_range_or_unreadable_is_an_error_naming_the_variable() {
        let vars = env(&[
            ("LEASE_SECONDS", "1"),
            ("HOP_CEILING_SECONDS", "ninety"),
            ("BATCH_CONCURRENCY", " 25 "),
            ("SWEEP_LIMIT", ""),
        ]);
        let e = Env::new(|k| vars.get(k).cloned());
        let err = e.number::<u64>(&LEASE_SECONDS).unwrap_err();
        assert_eq!(err.name, "LEASE_SECONDS");
        assert_eq!(
            err.to_string(),
            "LEASE_SECONDS: `1` is not a whole number from 2 to 900"
        );
        assert_eq!(
            e.number::<u32>(&HOP_CEILING_SECONDS).unwrap_err().name,
            "HOP_CEILING_SECONDS"
        );
        assert_eq!(e.number::<usize>(&BATCH_CONCURRENCY).unwrap(), Some(25));
        assert_eq!(e.number::<usize>(&SWEEP_LIMIT).unwrap(), None);
        assert_eq!(e.number::<usize>(&EXPORT_LIMIT).unwrap(), None);
    }

    #[test]
    fn flags_text_and_required_names() {
        let vars = env(&[
            ("COOKIE_SECURE", "FALSE"),
            ("DYNAMODB_SERIAL_TRANSACTIONS", "maybe"),
            ("API_RATE_LIMITS", "x"),
        ]);
        let e = Env::new(|k| vars.get(k).cloned());
        assert_eq!(e.flag(&COOKIE_SECURE).unwrap(), Some(false));
        let err = e.flag(&DYNAMODB_SERIAL_TRANSACTIONS).unwrap_err();
        assert_eq!(err.rule, "true or false");
        let err = e
            .parsed(&API_RATE_LIMITS, |_| {
                Err::<(), _>(crate::Invalid::new("a list of limits"))
            })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "API_RATE_LIMITS: `x` is not a list of limits"
        );
        assert_eq!(
            e.required(&TENANTS_TABLE).unwrap_err().name,
            "TENANTS_TABLE"
        );
    }

    #[test]
    fn the_page_lists_every_setting_once() {
        let page = markdown();
        for s in ALL {
            assert_eq!(page.matches(&format!("\n| `{}` |", s.name)).count(), 1);
        }
    }
}
