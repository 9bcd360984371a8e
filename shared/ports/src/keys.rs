//! Every composite key the tables and indexes are written under, built here and nowhere else,
//! so that the DynamoDB backend, the in-process one and the capacity model that charges them
//! cannot spell one differently. Each names its table (or index) and its parts.

use converger_core::web::Realm;
use converger_core::{ActivityId, ChannelId, DeliveryId, DeliveryStatus, TenantId, Timestamp};

// The deliveries table's indexes.

/// The tenant listing's partition of a delivery in `status` in listing shard `shard`.
pub fn tenant_listing_key(tenant: &TenantId, status: DeliveryStatus, shard: u32) -> String {
    format!("{tenant}#{status}#{shard}")
}

/// The channel index's partition of a delivery in `status` (failed or paused) in channel
/// shard `shard`.
pub fn channel_listing_key(channel: &ChannelId, status: DeliveryStatus, shard: u32) -> String {
    format!("{channel}#{status}#{shard}")
}

/// The due index's partition of shard `shard`.
pub fn due_partition(shard: u32) -> String {
    format!("due#{shard}")
}

/// The provider index's key of a delivery of `channel` known to its provider as `id`.
pub fn provider_key(channel: &ChannelId, id: &str) -> String {
    format!("{channel}#{id}")
}

/// The due index's sort key: milliseconds, zero-padded to 15 digits so it sorts as a number.
pub fn due_key(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

/// The listings' sort key (`upd_sk`, both listing indexes): the row's `updated_at`, then its id
/// (unique, so ties in time page exactly).
pub fn listing_sort_key(updated_at: Timestamp, id: &DeliveryId) -> String {
    format!("{updated_at}#{id}")
}

// The audit table.

/// The audit log's partition `shard` of `tenant`.
pub fn audit_partition_of(tenant: &TenantId, shard: u32) -> String {
    format!("{tenant}#audit#{shard}")
}

/// An audit entry's sort key: its time, then its id (unique, so ties in time page exactly).
pub fn audit_sort_key(at: Timestamp, id: &str) -> String {
    format!("{at}#{id}")
}

// The accounts (users) items.

/// The item key of a user.
pub fn user_key(realm: Realm, email: &str) -> String {
    format!("user#{}#{}", realm.as_str(), email.to_ascii_lowercase())
}

// The flow table.

/// The key of slot item `item` (1 or more) of a channel, in the flow table.
pub fn slot_item_key(channel: &ChannelId, item: u32) -> String {
    format!("{channel}#slots#{item}")
}

/// The key of a channel's rate schedule, in the flow table.
pub fn rate_key(channel: &ChannelId) -> String {
    format!("rate#{channel}")
}

/// The set of a tenant's busy channels (`core::flow::BusyEntry`), in the flow table.
pub fn tenant_busy_key(tenant: &TenantId) -> String {
    format!("busy#{tenant}")
}

/// The slot items of a channel share this prefix, in the flow table.
pub fn slot_items_prefix(channel: &ChannelId) -> String {
    format!("{channel}#slots#")
}

/// A channel's health counter of one minute, in the flow table.
pub fn health_counter_key(channel: &ChannelId, minute: i64) -> String {
    format!("hc#{channel}#{minute}")
}

// The usage table.

/// A channel's usage counter, in the usage table: `us#c#<channel>#<m|h|d>#<bucket>`.
pub fn channel_usage_key(
    channel: &ChannelId,
    grain: converger_core::usage::Grain,
    bucket: i64,
) -> String {
    format!("us#c#{channel}#{}#{bucket}", grain.code())
}

/// A tenant's usage counter, in the usage table: `us#t#<tenant>#<m|h|d>#<bucket>`.
pub fn tenant_usage_key(
    tenant: &TenantId,
    grain: converger_core::usage::Grain,
    bucket: i64,
) -> String {
    format!("us#t#{tenant}#{}#{bucket}", grain.code())
}

/// The queues' depths sampled for one bucket, in the usage table: `qd#<m|h>#<bucket>`.
pub fn depths_key(grain: converger_core::usage::Grain, bucket: i64) -> String {
    format!("qd#{}#{bucket}", grain.code())
}

// The activities table.

/// An activity's row key: activity ids are the producer's, so the key holds the tenant and
/// two tenants may use the same id. The plain id is kept in `activity_id`.
pub fn activity_key(tenant: &TenantId, id: &ActivityId) -> String {
    format!("act#{tenant}#{id}")
}

/// An activity's key in the conversation index (`by_conversation`, sorted by `seq`).
pub fn conversation_key(tenant: &TenantId, conversation_id: &str) -> String {
    format!("{tenant}#{conversation_id}")
}

/// The row of a conversation's sequence counter.
pub fn conversation_counter_key(tenant: &TenantId, conversation_id: &str) -> String {
    format!("conv#{tenant}#{conversation_id}")
}

// The tenants table.

/// An API key's item, by the SHA-256 of the key.
pub fn api_key_key(hash: &str) -> String {
    format!("key#{hash}")
}

// The idempotency table.

/// A tenant's idempotency key's item.
pub fn idempotency_key(tenant: &TenantId, key: &str) -> String {
    format!("{tenant}#{key}")
}

// The health table (`channel_id`, `checked_sk`).

/// The sort key of a channel's dead-letter counter of `day` (days since the epoch). A health
/// check's row is sorted by its time (`2026-...`), which sorts before every `dl#` key.
pub fn dead_letter_day_key(day: i64) -> String {
    format!("{DEAD_LETTER_DAYS}{:06}", day.max(0))
}

/// The prefix of the dead-letter counters' sort keys.
pub const DEAD_LETTER_DAYS: &str = "dl#";

// The lanes table (`pk`, `sk`).

/// The partition of the lane of `channel`'s deliveries in `conversation`: its head
/// (`sk` [`LANE_HEAD`]) and its waiting entries (`sk` `core::lanes::entry_key`).
pub fn lane_key(channel: &ChannelId, conversation: &str) -> String {
    format!("{channel}#{conversation}")
}

/// The sort key of a lane's head item (sorts after every entry's zero-padded key).
pub const LANE_HEAD: &str = "head";

// The stream table (the live stream's connections, subscriptions and tokens).

/// The item of a stream connection.
pub fn stream_connection_key(connection_id: &str) -> String {
    format!("conn#{connection_id}")
}

/// The partition of a topic's subscriptions: one item per connection following `topic` of
/// `tenant`. Written on subscribe and unsubscribe only, read once per event (or per batch of
/// events) of that topic.
pub fn subscription_key(tenant: &TenantId, topic: &str) -> String {
    format!("sub#{tenant}#{topic}")
}

/// The partition of a tenant's stream connections: one item per connection.
pub fn tenant_connections_key(tenant: &TenantId) -> String {
    format!("tconn#{tenant}")
}

/// The item of one UTC day's live tenants (`day`: days since the epoch): a map of tenant id
/// to when its last connection of the day expires.
pub fn live_tenants_key(day: i64) -> String {
    format!("live#{day}")
}

/// The item of a stream token, by the token's hash.
pub fn stream_token_key(hash: &str) -> String {
    format!("token#{hash}")
}
