//! The model and the ports: what the use cases store, send and publish, and the traits the
//! backends implement (`Store` with its flow, health, hand-off and account parts, `Queue`,
//! `Events`, `Sockets`, `Mailer`, `TenantAws`). No AWS SDK here: the AWS backend is `converger-store`, the
//! in-process one `converger-memory`, and both follow the rules defined with the model
//! (which sparse index a delivery belongs to, why a claim is refused).

pub mod accounts;
pub mod changes;
pub mod error;
pub mod event_types;
pub mod events;
pub mod flow;
pub mod fold;
pub mod handoff;
pub mod health;
pub mod idempotency;
pub mod keys;
pub mod lanes;
pub mod mail;
pub mod message;
pub mod model;
pub mod payloads;
pub mod ports;
pub mod row_moves;
pub mod spans;
pub mod stream;
pub mod tenant_aws;
pub mod usage;

pub use accounts::*;
pub use changes::*;
pub use event_types::*;
pub use flow::*;
pub use fold::*;
pub use handoff::*;
pub use health::*;
pub use idempotency::*;
pub use keys::*;
pub use lanes::*;
pub use mail::*;
pub use model::*;
pub use payloads::*;
pub use ports::*;
pub use row_moves::{RowGuard, RowMove, RowPlace, RowSet, moves};
pub use spans::*;
pub use stream::*;
pub use tenant_aws::*;
pub use usage::*;

/// Every store trait, for code that calls a backend's methods on its concrete type.
pub mod prelude {
    pub use crate::{
        AccountStore, ActivityStore, AuditStore, ChannelStore, DeliveryQueries, DeliveryStore,
        EventTypeStore, FlowStore, HandoffStore, HealthStore, IdempotencyStore, LaneStore,
        ReplayStore, Store, StreamCounters, StreamStore, TenantStore, UsageStore,
    };
}

/// The longest delay a queue message can be given (SQS's limit; longer waits are made of
/// hops, see `core::policy::hop_delay_s`).
pub const MAX_DELAY_S: u32 = 900;

/// The deliver function's timeout in seconds (the template's `Timeout`; the tier queues'
/// visibility timeouts must be at least six times it, which a test checks). Attempt leases are
/// short slices renewed while a call runs (`core::policy::LEASE_SLICE_MS`), not this.
pub const DELIVER_TIMEOUT_S: u32 = 60;
