//! DynamoDB capacity units, counted the way DynamoDB bills them, per partition key value, on
//! every table and global secondary index: the measuring half of `bench keys` (the proxy in
//! [`proxy`] feeds it the item before and after each write, and each read's answer).
//!
//! The rules (DynamoDB developer guide, "Read/write capacity mode" and "Global secondary
//! indexes: provisioned throughput considerations"):
//! - a write costs `ceil(size / 1 KB)` units of the larger of the item before and after it, at
//!   least 1; a transaction's writes cost twice that; a write whose condition failed still
//!   costs the units of the item it was checked against (at least 1);
//! - an index entry that is added or removed costs `ceil(entry / 1 KB)` on the index's
//!   partition; one whose key changed costs a removal on the old key's partition and an
//!   addition on the new one's; one whose projected attributes changed costs one write; an
//!   entry that did not change costs nothing;
//! - a read costs `ceil(size / 4 KB)` units (half for an eventually consistent one); a Query
//!   adds up what it read before rounding.
//!
//! Sizes follow "Item sizes and formats": attribute names count, strings and binaries are their
//! bytes, numbers a byte per two significant digits plus one, booleans and nulls one byte,
//! lists and maps three bytes plus a byte per element.

pub mod proxy;

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// An index's (or the table's) key attributes and what it projects.
#[derive(Debug, Clone, PartialEq)]
pub struct KeySchema {
    pub hash: String,
    pub range: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    All,
    KeysOnly,
    Include(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gsi {
    pub name: String,
    pub key: KeySchema,
    pub projection: Projection,
}

/// A table as `DescribeTable` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    /// The logical name (`deliveries`), as the reports print it.
    pub name: String,
    pub key: KeySchema,
    pub gsis: Vec<Gsi>,
}

impl TableSchema {
    /// From a `DescribeTable` answer's `Table`.
    pub fn from_description(name: &str, table: &Value) -> Self {
        let key = |schema: &Value| {
            let list = schema.as_array().cloned().unwrap_or_default();
            let of = |kind: &str| {
                list.iter()
                    .find(|k| k["KeyType"] == kind)
                    .and_then(|k| k["AttributeName"].as_str())
                    .map(str::to_owned)
            };
            KeySchema {
                hash: of("HASH").unwrap_or_default(),
                range: of("RANGE"),
            }
        };
        let gsis = table["GlobalSecondaryIndexes"]
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|g| Gsi {
                        name: g["IndexName"].as_str().unwrap_or_default().to_owned(),
                        key: key(&g["KeySchema"]),
                        projection: match g["Projection"]["ProjectionType"].as_str() {
                            Some("KEYS_ONLY") => Projection::KeysOnly,
                            Some("INCLUDE") => Projection::Include(
                                g["Projection"]["NonKeyAttributes"]
                                    .as_array()
                                    .map(|a| {
                                        a.iter()
                                            .filter_map(|s| s.as_str().map(str::to_owned))
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            ),
                            _ => Projection::All,
                        },
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            name: name.to_owned(),
            key: key(&table["KeySchema"]),
            gsis,
        }
    }

    fn index(&self, name: &str) -> Option<&Gsi> {
        self.gsis.iter().find(|g| g.name == name)
    }
}

/// An item in DynamoDB's JSON wire format (`{"attr": {"S": "..."}}`).
pub type Item = Map<String, Value>;

/// The size of one attribute value, in bytes.
pub fn value_size(v: &Value) -> usize {
    let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "N" => number_size(inner.as_str().unwrap_or("0")),
        "B" => base64_len(inner.as_str().unwrap_or_default()),
        "BOOL" | "NULL" => 1,
        "SS" => inner.as_array().map_or(0, |l| {
            l.iter().map(|s| s.as_str().map_or(0, str::len)).sum()
        }),
        "NS" => inner.as_array().map_or(0, |l| {
            l.iter()
                .map(|s| number_size(s.as_str().unwrap_or("0")))
                .sum()
        }),
        "BS" => inner.as_array().map_or(0, |l| {
            l.iter()
                .map(|s| base64_len(s.as_str().unwrap_or_default()))
                .sum()
        }),
        "L" => {
            3 + inner
                .as_array()
                .map_or(0, |l| l.iter().map(|e| 1 + value_size(e)).sum())
        }
        "M" => {
            3 + inner.as_object().map_or(0, |m| {
                m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum()
            })
        }
        _ => 0,
    }
}

fn number_size(n: &str) -> usize {
    let digits: String = n.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    significant.max(1).div_ceil(2) + 1
}

fn base64_len(s: &str) -> usize {
    let pad = s.bytes().rev().take_while(|b| *b == b'=').count();
    (s.len() / 4 * 3).saturating_sub(pad)
}

/// The size of an item (or of the attributes of one that are given), in bytes.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Write units of an item of `bytes` (at least 1).
pub fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// Read units of `bytes` read together (at least one 4 KB unit), half when eventually
/// consistent.
pub fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

/// Where units were spent: a table (`index` `None`) or one of its indexes, and the partition
/// key value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    pub table: String,
    pub index: Option<String>,
    pub key: String,
}

/// Units spent on one partition by one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    pub at: Partition,
    pub units: f64,
}

/// The text of a key attribute's value (strings, numbers and binaries as written).
fn key_text(v: &Value) -> Option<String> {
    let (_, inner) = v.as_object()?.iter().next()?;
    inner.as_str().map(str::to_owned)
}

/// An item's entry in an index: its key values and the attributes the entry holds, or `None`
/// when the item lacks the index's key attributes (a sparse index leaves it out).
fn index_entry(table: &TableSchema, gsi: &Gsi, item: &Item) -> Option<(String, Item)> {
    let hash = key_text(item.get(&gsi.key.hash)?)?;
    if let Some(r) = &gsi.key.range {
        item.get(r)?;
    }
    let mut keys: Vec<&str> = vec![&table.key.hash, &gsi.key.hash];
    keys.extend(table.key.range.as_deref());
    keys.extend(gsi.key.range.as_deref());
    let entry: Item = item
        .iter()
        .filter(|(k, _)| {
            keys.contains(&k.as_str())
                || match &gsi.projection {
                    Projection::All => true,
                    Projection::KeysOnly => false,
                    Projection::Include(attrs) => attrs.contains(k),
                }
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some((hash, entry))
}

/// What one write of the item with primary key `key` costs, from the item before and after
/// it. `failed`: its
/// condition failed (nothing changed, the item checked is `before`); `transaction`: it was part
/// of a `TransactWriteItems` (twice the table's units).
pub fn write_charges(
    table: &TableSchema,
    key: &Item,
    before: Option<&Item>,
    after: Option<&Item>,
    failed: bool,
    transaction: bool,
) -> Vec<Charge> {
    let item_key = key
        .get(&table.key.hash)
        .and_then(key_text)
        .unwrap_or_default();
    let size = |i: Option<&Item>| i.map_or(0, item_size);
    let mut units = write_units(size(before).max(if failed { 0 } else { size(after) }));
    if transaction {
        units *= 2.0;
    }
    let mut out = vec![Charge {
        at: Partition {
            table: table.name.clone(),
            index: None,
            key: item_key,
        },
        units,
    }];
    if failed {
        return out;
    }
    for gsi in &table.gsis {
        let old = before.and_then(|i| index_entry(table, gsi, i));
        let new = after.and_then(|i| index_entry(table, gsi, i));
        let at = |key: &str| Partition {
            table: table.name.clone(),
            index: Some(gsi.name.clone()),
            key: key.to_owned(),
        };
        let range = |e: &Item| {
            gsi.key
                .range
                .as_ref()
                .and_then(|r| e.get(r))
                .cloned()
                .unwrap_or(Value::Null)
        };
        match (old, new) {
            (None, None) => {}
            (Some((k, e)), None) | (None, Some((k, e))) => out.push(Charge {
                at: at(&k),
                units: write_units(item_size(&e)),
            }),
            (Some((k0, e0)), Some((k1, e1))) => {
                if k0 != k1 || range(&e0) != range(&e1) {
                    out.push(Charge {
                        at: at(&k0),
                        units: write_units(item_size(&e0)),
                    });
                    out.push(Charge {
                        at: at(&k1),
                        units: write_units(item_size(&e1)),
                    });
                } else if e0 != e1 {
                    out.push(Charge {
                        at: at(&k1),
                        units: write_units(item_size(&e1)),
                    });
                }
            }
        }
    }
    out
}

/// What a read of `items` (on the table, or an index when `index` is given) under partition
/// key `key` costs: the items' sizes added up, then rounded.
pub fn read_charge(
    table: &TableSchema,
    index: Option<&str>,
    key: &str,
    items: &[Item],
    consistent: bool,
) -> Charge {
    let bytes = items
        .iter()
        .map(|i| match index.and_then(|n| table.index(n)) {
            Some(g) => index_entry(table, g, i).map_or(0, |(_, e)| item_size(&e)),
            None => item_size(i),
        })
        .sum();
    Charge {
        at: Partition {
            table: table.name.clone(),
            index: index.map(str::to_owned),
            key: key.to_owned(),
        },
        units: read_units(bytes, consistent),
    }
}

/// Who shares a partition key: every delivery of a tenant, of a channel, or of the whole
/// deployment; or one item's own (an id of its own in the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Item,
    Channel,
    Tenant,
    Deployment,
}

/// A partition key value with its ids, times and shard numbers replaced by placeholders
/// (`ten_...#pending` -> `<tenant>#pending`), and who shares such a key. Keys whose text
/// holds a time (`<time>`) follow one another; keys that differ only in a shard number
/// (`<n>`) are written side by side.
pub fn family(key: &str) -> (String, Scope) {
    let segments: Vec<String> = key
        .split('#')
        .enumerate()
        .map(|(i, seg)| normalise_segment(seg, i, key))
        .collect();
    let text = segments.join("#");
    let scope = if ["<delivery>", "<activity>", "<id>", "<conversation>"]
        .iter()
        .any(|p| text.contains(p))
    {
        Scope::Item
    } else if text.contains("<channel>") {
        Scope::Channel
    } else if text.contains("<tenant>") {
        Scope::Tenant
    } else {
        Scope::Deployment
    };
    (text, scope)
}

fn normalise_segment(seg: &str, index: usize, whole: &str) -> String {
    const IDS: [(&str, &str); 4] = [
        ("ten_", "<tenant>"),
        ("ch_", "<channel>"),
        ("dlv_", "<delivery>"),
        ("act_", "<activity>"),
    ];
    for (prefix, name) in IDS {
        if let Some(rest) = seg.strip_prefix(prefix)
            && rest.len() >= 16
        {
            // `dlv_re_...` (a replay's) and the like stay one family.
            return name.to_owned();
        }
    }
    // A producer's activity id (`act#<tenant>#<id>`) and a conversation
    // (`conv#<tenant>#<conversation>`, `<tenant>#<conversation>`).
    if index == 2 && (whole.starts_with("act#") || whole.starts_with("conv#")) {
        return if whole.starts_with("act#") {
            "<activity>".into()
        } else {
            "<conversation>".into()
        };
    }
    if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
        return if seg.len() >= 6 {
            "<time>".into()
        } else {
            "<n>".into()
        };
    }
    if seg.len() >= 40 && seg.bytes().all(|b| b.is_ascii_hexdigit()) {
        return "<hash>".into();
    }
    if seg.starts_with("conv-") || seg.starts_with("conv_") {
        return "<conversation>".into();
    }
    if seg.len() >= 12
        && seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'=' || b == b'-' || b == b'_')
        && seg.bytes().any(|b| b.is_ascii_digit())
    {
        return "<id>".into();
    }
    seg.to_owned()
}

/// Units counted so far, per partition key value, for reads and writes apart.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    inner: Arc<Mutex<Tallies>>,
}

#[derive(Debug, Clone, Default)]
pub struct Tallies {
    pub writes: BTreeMap<Partition, f64>,
    pub reads: BTreeMap<Partition, f64>,
}

impl Meter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write(&self, charges: Vec<Charge>) {
        if let Ok(mut t) = self.inner.lock() {
            for c in charges {
                *t.writes.entry(c.at).or_default() += c.units;
            }
        }
    }

    pub fn read(&self, charge: Charge) {
        if let Ok(mut t) = self.inner.lock() {
            *t.reads.entry(charge.at).or_default() += charge.units;
        }
    }

    /// The tallies so far, and zero again.
    pub fn take(&self) -> Tallies {
        self.inner
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }
}

/// One key family's units over a case: in all, and on its hottest key at once.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FamilyUnits {
    pub table: String,
    pub index: Option<String>,
    pub family: String,
    pub scope: Scope,
    /// Distinct key values seen.
    pub keys: usize,
    /// Units per delivery over all its keys.
    pub per_delivery: f64,
    /// Units per delivery on one key: the family's keys that differ only in a shard number are
    /// written side by side, so the units spread over them; keys that hold a time follow one
    /// another, so one of them takes all.
    pub per_delivery_one_key: f64,
}

impl FamilyUnits {
    /// Deliveries per second of the family's scope before one of its keys reaches `limit`
    /// units per second.
    pub fn ceiling(&self, limit: f64) -> Option<f64> {
        (self.scope != Scope::Item && self.per_delivery_one_key > 0.0)
            .then(|| limit / self.per_delivery_one_key)
    }
}

/// Groups `units` by key family, per delivery.
pub fn families(units: &BTreeMap<Partition, f64>, deliveries: usize) -> Vec<FamilyUnits> {
    let n = deliveries.max(1) as f64;
    /// Table, index, family -> scope, the keys seen, units.
    type Families = BTreeMap<(String, Option<String>, String), (Scope, BTreeSet<String>, f64)>;
    let mut by: Families = BTreeMap::new();
    for (p, u) in units {
        let (fam, scope) = family(&p.key);
        let e = by
            .entry((p.table.clone(), p.index.clone(), fam))
            .or_insert((scope, BTreeSet::new(), 0.0));
        e.1.insert(p.key.clone());
        e.2 += u;
    }
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut out: Vec<FamilyUnits> = by
        .into_iter()
        .map(|((table, index, family), (scope, keys, total))| {
            let side_by_side = if family.contains("<time>") {
                1
            } else {
                keys.len().max(1)
            };
            FamilyUnits {
                table,
                index,
                scope,
                keys: keys.len(),
                per_delivery: round(total / n),
                per_delivery_one_key: round(total / n / side_by_side as f64),
                family,
            }
        })
        .collect();
    out.sort_by(|a, b| b.per_delivery.total_cmp(&a.per_delivery));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn item(v: Value) -> Item {
        v.as_object().unwrap().clone()
    }

    fn deliveries() -> TableSchema {
        TableSchema {
            name: "deliveries".into(),
            key: KeySchema {
                hash: "id".into(),
                range: None,
            },
            gsis: vec![
                Gsi {
                    name: "by_status".into(),
                    key: KeySchema {
                        hash: "ts_pk".into(),
                        range: Some("upd_sk".into()),
                    },
                    projection: Projection::KeysOnly,
                },
                Gsi {
                    name: "all".into(),
                    key: KeySchema {
                        hash: "tenant_id".into(),
                        range: None,
                    },
                    projection: Projection::All,
                },
            ],
        }
    }

    #[test]
    fn sizes_follow_the_documented_rules() {
        assert_eq!(item_size(&item(json!({"ab": {"S": "xyz"}}))), 5);
        // 12345 has five significant digits: three bytes, plus one.
        assert_eq!(item_size(&item(json!({"n": {"N": "12345"}}))), 1 + 4);
        assert_eq!(item_size(&item(json!({"b": {"BOOL": true}}))), 2);
        // A map: 3 bytes, plus per entry a byte, its name and its value.
        assert_eq!(
            item_size(&item(json!({"m": {"M": {"k": {"S": "v"}}}}))),
            1 + 3 + 1 + 1 + 1
        );
        assert_eq!(
            item_size(&item(json!({"l": {"L": [{"S": "ab"}, {"NULL": true}]}}))),
            1 + 3 + (1 + 2) + (1 + 1)
        );
        assert_eq!(write_units(0), 1.0);
        assert_eq!(write_units(1024), 1.0);
        assert_eq!(write_units(1025), 2.0);
        assert_eq!(read_units(4097, true), 2.0);
        assert_eq!(read_units(10, false), 0.5);
    }

    #[test]
    fn an_index_entry_costs_when_added_moved_rewritten_or_removed() {
        let t = deliveries();
        let row = |status: &str, upd: &str, extra: &str| {
            item(json!({"id": {"S": "dlv_1"}, "tenant_id": {"S": "ten_1"},
                        "ts_pk": {"S": format!("ten_1#{status}")}, "upd_sk": {"S": upd},
                        "note": {"S": extra}}))
        };
        let key = item(json!({"id": {"S": "dlv_1"}}));
        let sum = |c: &[Charge], index: Option<&str>| -> f64 {
            c.iter()
                .filter(|c| c.at.index.as_deref() == index)
                .map(|c| c.units)
                .sum()
        };
        // Created: the table and both indexes.
        let c = write_charges(&t, &key, None, Some(&row("pending", "1", "")), false, false);
        assert_eq!(
            (
                sum(&c, None),
                sum(&c, Some("by_status")),
                sum(&c, Some("all"))
            ),
            (1.0, 1.0, 1.0)
        );
        // A non-key attribute: only the index projecting it.
        let c = write_charges(
            &t,
            &key,
            Some(&row("pending", "1", "")),
            Some(&row("pending", "1", "x")),
            false,
            false,
        );
        assert_eq!(
            (sum(&c, Some("by_status")), sum(&c, Some("all"))),
            (0.0, 1.0)
        );
        // The status moves: a removal and an addition, on two partitions.
        let c = write_charges(
            &t,
            &key,
            Some(&row("pending", "1", "")),
            Some(&row("sent", "2", "")),
            false,
            false,
        );
        let moved: Vec<&str> = c
            .iter()
            .filter(|c| c.at.index.as_deref() == Some("by_status"))
            .map(|c| c.at.key.as_str())
            .collect();
        assert_eq!(moved, ["ten_1#pending", "ten_1#sent"]);
        // A failed condition: the table's units only, twice in a transaction.
        let c = write_charges(&t, &key, Some(&row("sent", "2", "")), None, true, true);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].units, 2.0);
        // A large item costs a unit per KB.
        let big = row("sent", "2", &"x".repeat(3000));
        let c = write_charges(&t, &key, Some(&big), Some(&big), false, false);
        assert_eq!(sum(&c, None), 3.0);
        assert_eq!(sum(&c, Some("all")), 0.0);
    }

    #[test]
    fn keys_fall_into_families_and_scopes() {
        let tenant = format!("ten_{}", "a".repeat(32));
        let channel = format!("ch_{}", "b".repeat(32));
        let delivery = format!("dlv_{}", "c".repeat(32));
        assert_eq!(
            family(&format!("{tenant}#pending")),
            ("<tenant>#pending".into(), Scope::Tenant)
        );
        assert_eq!(
            family(&format!("{channel}#failed#3")),
            ("<channel>#failed#<n>".into(), Scope::Channel)
        );
        assert_eq!(family("lease#12"), ("lease#<n>".into(), Scope::Deployment));
        assert_eq!(
            family(&format!("hc#{channel}#29384756")),
            ("hc#<channel>#<time>".into(), Scope::Channel)
        );
        assert_eq!(family(&delivery), ("<delivery>".into(), Scope::Item));
        assert_eq!(
            family(&format!("act#{tenant}#my-order-17")),
            ("act#<tenant>#<activity>".into(), Scope::Item)
        );
        let mut units = BTreeMap::new();
        for shard in 0..4 {
            units.insert(
                Partition {
                    table: "d".into(),
                    index: Some("i".into()),
                    key: format!("due#{shard}"),
                },
                10.0,
            );
        }
        for minute in 0..2 {
            units.insert(
                Partition {
                    table: "h".into(),
                    index: None,
                    key: format!("hc#{channel}#2938475{minute}"),
                },
                10.0,
            );
        }
        let f = families(&units, 10);
        let due = f.iter().find(|f| f.family == "due#<n>").unwrap();
        assert_eq!(
            (due.keys, due.per_delivery, due.per_delivery_one_key),
            (4, 4.0, 1.0)
        );
        assert_eq!(due.ceiling(1000.0), Some(1000.0));
        let hc = f
            .iter()
            .find(|f| f.family == "hc#<channel>#<time>")
            .unwrap();
        assert_eq!((hc.per_delivery, hc.per_delivery_one_key), (2.0, 2.0));
    }
}
