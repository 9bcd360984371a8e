//! Converger's domain rules. Nothing in this crate performs I/O: every rule the
//! pipeline, the store and the HTTP surfaces apply is defined here and tested here.

pub mod amqp;
pub mod api_limit;
pub mod aws;
pub mod cache;
pub mod channel;
pub mod email;
pub mod error;
pub mod filter;
pub mod flow;
pub mod health;
pub mod idempotency;
pub mod ids;
pub mod invalid;
pub mod lanes;
pub mod middleware;
pub mod mtls;
pub mod net;
pub mod oauth2;
pub mod payload;
pub mod policy;
pub mod providers;
pub mod query;
pub mod schema;
pub mod scope;
pub mod secret;
pub mod settings;
pub mod shards;
pub mod signing;
pub mod slack;
pub mod status;
pub mod stream;
pub mod time;
pub mod trace;
pub mod usage;
pub mod web;
pub mod websocket;

pub use channel::{ChannelType, Tier, TierConcurrency};
pub use error::{DeliveryError, Failure, Verdict};
pub use flow::{BreakerConfig, BreakerOverrides, CircuitState, MaxInFlight, RateLimit};
pub use ids::{ActivityId, ChannelId, DeliveryId, TenantId};
pub use invalid::Invalid;
pub use policy::{Backoff, PolicyError, PolicyErrors, PolicyLayer, RetryPolicy};
pub use scope::Scope;
pub use status::DeliveryStatus;
pub use time::Timestamp;
