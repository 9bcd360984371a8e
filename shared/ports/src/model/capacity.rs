//! What a write costs in DynamoDB capacity units, and on which partitions: the key layout of
//! the deliveries and activities tables and their indexes, as a pure function of the rows
//! before and after a write. The in-process backend charges these to its per-partition
//! limits, so a scenario on it meets the throttles DynamoDB would answer with; the DynamoDB
//! backend writes the same entries through its attributes, with the same partition keys
//! (`tenant_listing_key`, `channel_listing_key`, `due_partition`, `provider_key`), and the
//! `keys` benchmark prices them from the deployed schemas.
//!
//! The rules (DynamoDB's billing): a write costs `ceil(size / 1 KB)` of the larger of the item
//! before and after it; an index entry that is added, removed, moved to another key or whose
//! projected attributes change costs one unit (entries here are small) on that index's
//! partition, a move one on each.

use super::*;
use crate::keys::{
    activity_key, channel_listing_key, conversation_key, due_key, due_partition, provider_key,
    tenant_listing_key,
};

/// One partition key value of a table or an index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Partition {
    pub table: &'static str,
    pub index: Option<&'static str>,
    /// The key family (`<tenant>#<status>#<shard>`): what the partition's key is made of.
    pub family: &'static str,
    pub key: String,
}

impl Partition {
    /// A table's partition (no index).
    pub fn of_table(table: &'static str, family: &'static str, key: impl Into<String>) -> Self {
        Self {
            table,
            index: None,
            family,
            key: key.into(),
        }
    }
}

/// Units charged to one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    pub at: Partition,
    pub units: f64,
}

/// Write units of an item of `bytes`.
pub fn write_units(bytes: usize) -> f64 {
    (bytes.div_ceil(1024)).max(1) as f64
}

/// Read units of an item of `bytes`: 4 KB a unit, half for an eventually consistent read.
pub fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = (bytes.div_ceil(4096)).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

/// An item's size, approximated by its JSON (attribute names and values, as DynamoDB counts).
pub fn item_size<T: Serialize>(item: &T) -> usize {
    serde_json::to_vec(item).map_or(0, |v| v.len())
}

/// One index entry of a row.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    index: &'static str,
    family: &'static str,
    pk: String,
    sk: String,
    /// The attributes the index projects beyond the keys, as one comparable value.
    projected: String,
}

/// The index entries a delivery row has, as the DynamoDB layout writes them.
fn delivery_entries(d: &Delivery, due_shards: u32) -> Vec<Entry> {
    let upd = d.sort_key();
    let mut v = Vec::new();
    if !d.unlisted {
        v.push(Entry {
            index: "by_tenant_status_s",
            family: "<tenant>#<status>#<n>",
            pk: tenant_listing_key(&d.tenant_id, d.status, d.listing_shard(d.updated_at)),
            sk: upd.clone(),
            projected: format!("{}|{:?}", d.channel_id, d.last_error),
        });
    }
    if in_channel_index(d.status, d.handed_off) {
        v.push(Entry {
            index: "by_channel_status_s",
            family: "<channel>#<status>#<n>",
            pk: channel_listing_key(&d.channel_id, d.status, channel_shard(&d.id)),
            sk: upd,
            projected: format!("{}|{:?}", d.tenant_id, d.last_error),
        });
    }
    match d.sparse_index() {
        SparseIndex::Due { due_ms } => v.push(Entry {
            index: "by_due",
            family: "due#<n>",
            pk: due_partition(due_shard_of(&d.id, due_shards)),
            sk: due_key(due_ms),
            projected: format!("{:?}|{}", d.tier, d.channel_id),
        }),
        SparseIndex::Backlog { due_ms } => v.push(Entry {
            index: "by_backlog",
            family: "<channel>",
            pk: d.channel_id.to_string(),
            sk: due_key(due_ms),
            projected: String::new(),
        }),
        SparseIndex::Parked | SparseIndex::None => {}
    }
    if let Some(id) = &d.provider_message_id {
        v.push(Entry {
            index: "by_provider_message",
            family: "<channel>#<message>",
            pk: provider_key(&d.channel_id, id),
            sk: String::new(),
            projected: String::new(),
        });
    }
    v
}

/// The charges of one index's entries before and after a write.
fn entry_charges(table: &'static str, before: &[Entry], after: &[Entry]) -> Vec<Charge> {
    let mut out = Vec::new();
    let charge = |e: &Entry| Charge {
        at: Partition {
            table,
            index: Some(e.index),
            family: e.family,
            key: e.pk.clone(),
        },
        units: 1.0,
    };
    for b in before {
        match after.iter().find(|a| a.index == b.index) {
            None => out.push(charge(b)),
            Some(a) if a.pk != b.pk || a.sk != b.sk => {
                out.push(charge(b));
                out.push(charge(a));
            }
            Some(a) if a.projected != b.projected => out.push(charge(a)),
            Some(_) => {}
        }
    }
    for a in after {
        if !before.iter().any(|b| b.index == a.index) {
            out.push(charge(a));
        }
    }
    out
}

/// What writing a delivery row costs: the row's units on its own key, and one unit per index
/// entry it adds, removes, moves or rewrites. `before` is `None` for an insert; `after` is
/// `None` for a delete; a write whose condition failed passes the row as both (its units are
/// charged, no index moves).
pub fn delivery_write(
    before: Option<&Delivery>,
    after: Option<&Delivery>,
    due_shards: u32,
) -> Vec<Charge> {
    let Some(row) = after.or(before) else {
        return Vec::new();
    };
    let size = before
        .map(item_size)
        .unwrap_or(0)
        .max(after.map(item_size).unwrap_or(0));
    let mut out = vec![item_write(
        "deliveries",
        "<delivery>",
        row.id.to_string(),
        size,
    )];
    let entries = |d: Option<&Delivery>| d.map(|d| delivery_entries(d, due_shards));
    out.extend(entry_charges(
        "deliveries",
        &entries(before).unwrap_or_default(),
        &entries(after).unwrap_or_default(),
    ));
    out
}

/// What inserting an activity costs: its row, and its entry in the conversation index.
pub fn activity_insert(a: &Activity) -> Vec<Charge> {
    vec![
        item_write(
            "activities",
            "act#<tenant>#<activity>",
            activity_key(&a.tenant_id, &a.id),
            item_size(&*a.row()),
        ),
        Charge {
            at: Partition {
                table: "activities",
                index: Some("by_conversation"),
                family: "<tenant>#<conversation>",
                key: conversation_key(&a.tenant_id, &a.conversation_id),
            },
            units: 1.0,
        },
    ]
}

/// A write of one item of `bytes` on a table without indexes (flow items, counters).
pub fn item_write(
    table: &'static str,
    family: &'static str,
    key: impl Into<String>,
    bytes: usize,
) -> Charge {
    Charge {
        at: Partition::of_table(table, family, key),
        units: write_units(bytes),
    }
}

/// A read of one item of `bytes` (eventually consistent unless `consistent`).
pub fn item_read(
    table: &'static str,
    family: &'static str,
    key: impl Into<String>,
    bytes: usize,
    consistent: bool,
) -> Charge {
    Charge {
        at: Partition::of_table(table, family, key),
        units: read_units(bytes, consistent),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row() -> Delivery {
        let tenant = TenantId::generate();
        let channel = Channel::new(
            tenant.clone(),
            ChannelType::Webhook,
            "c",
            Map::new(),
            Timestamp::from_ms(1_000),
        );
        let a = Activity {
            event_type: None,
            id: ActivityId::generate(),
            tenant_id: tenant,
            conversation_id: "conv".into(),
            seq: 1,
            payload_ref: None,
            payload: serde_json::json!({"text": "hi"}),
            channel_ids: vec![channel.id.clone()],
            created_at: converger_core::Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            expires_at: None,
            trace: None,
        };
        Delivery::new(&a, &channel, Tier::Default, Timestamp::from_ms(1_000)).in_shards(2)
    }

    fn on(charges: &[Charge], index: Option<&str>) -> f64 {
        charges
            .iter()
            .filter(|c| c.at.index == index)
            .map(|c| c.units)
            .sum()
    }

    #[test]
    fn a_first_try_costs_the_row_three_times_and_one_listing_entry() {
        let mut d = row();
        d.unlisted = true;
        let insert = delivery_write(None, Some(&d), DUE_SHARDS);
        assert_eq!(on(&insert, None), 1.0);
        // In flight, in no due index: its watch message covers it.
        assert_eq!(on(&insert, Some("by_due")), 0.0);
        assert_eq!(on(&insert, Some("by_tenant_status_s")), 0.0);
        // A claim writes the row only: the lease is projected nowhere.
        let mut claimed = d.clone();
        claimed.lease_token = Some("t".into());
        claimed.lease_until = Some(9_000);
        let claim = delivery_write(Some(&d), Some(&claimed), DUE_SHARDS);
        assert_eq!(claim.len(), 1);
        // Sent: into the listing.
        let mut sent = claimed.clone();
        sent.status = DeliveryStatus::Sent;
        sent.lease_token = None;
        sent.lease_until = None;
        sent.unlisted = false;
        sent.updated_at = converger_core::Timestamp::parse("2026-01-01T00:00:01Z").unwrap();
        let done = delivery_write(Some(&claimed), Some(&sent), DUE_SHARDS);
        assert_eq!(on(&done, Some("by_due")), 0.0);
        assert_eq!(on(&done, Some("by_tenant_status_s")), 1.0);
        assert_eq!(on(&done, Some("by_channel_status_s")), 0.0);
        let all: f64 = [insert, claim, done]
            .iter()
            .flatten()
            .map(|c| c.units)
            .sum();
        assert_eq!(all, 4.0);
    }

    #[test]
    fn a_move_costs_both_keys_a_rewrite_one_and_a_large_row_its_kilobytes() {
        let d = row();
        let mut failed = d.clone();
        failed.status = DeliveryStatus::Failed;
        failed.last_error = Some("HTTP 503".into());
        failed.updated_at = converger_core::Timestamp::parse("2026-01-01T00:00:02Z").unwrap();
        let c = delivery_write(Some(&d), Some(&failed), DUE_SHARDS);
        // Listing moved pending -> failed (2), channel index added (1), due index removed (1).
        assert_eq!(on(&c, Some("by_tenant_status_s")), 2.0);
        assert_eq!(on(&c, Some("by_channel_status_s")), 1.0);
        assert_eq!(on(&c, Some("by_due")), 1.0);
        let keys: Vec<&str> = c.iter().map(|c| c.at.key.as_str()).collect();
        assert!(
            keys.iter()
                .any(|k| k.ends_with("#pending#0") || k.ends_with("#pending#1"))
        );
        // Same keys, a projected attribute changed: a rewrite on the same partition.
        let mut again = failed.clone();
        again.last_error = Some("HTTP 500".into());
        let r = delivery_write(Some(&failed), Some(&again), DUE_SHARDS);
        assert_eq!(on(&r, Some("by_tenant_status_s")), 1.0);
        assert_eq!(on(&r, Some("by_channel_status_s")), 1.0);
        let mut big = d.clone();
        big.last_error = Some("x".repeat(3000));
        assert_eq!(on(&delivery_write(None, Some(&big), DUE_SHARDS), None), 4.0);
    }

    #[test]
    fn the_due_entry_goes_to_the_deployments_shard() {
        let d = row();
        let c = delivery_write(None, Some(&d), 256);
        let due = c.iter().find(|c| c.at.index == Some("by_due")).unwrap();
        assert_eq!(due.at.key, format!("due#{}", due_shard_of(&d.id, 256)));
        assert_eq!(read_units(5000, false), 1.0);
        assert_eq!(read_units(100, true), 1.0);
        assert_eq!(write_units(0), 1.0);
    }
}
