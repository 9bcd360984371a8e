//! A channel's filter: which of the activities it is sent it wants. Decided once, when an
//! activity fans out to its channels; a delivery it does not want is recorded `filtered` and
//! never attempted (`docs/channels/filters.md`).
//!
//! A filter is a JSON object whose every key must hold:
//! - `"payload": {"<path>": <test>, ...}`: each dot path of the payload passes its test;
//! - `"event_type": <test>`: the activity's event type passes it (an activity without one has
//!   none: only `{"$exists": false}`, `$ne` and `$nin` pass);
//! - `"all": [<filter>, ...]`, `"any": [<filter>, ...]`, `"not": <filter>`.
//!
//! A test is a value the field must equal (numbers by value: `1` equals `1.0`; objects and
//! arrays as a whole), or an object of operators that must all hold: `$eq`, `$ne`, `$in`,
//! `$nin`, `$exists`, `$gt`, `$gte`, `$lt`, `$lte` (numbers with numbers, strings with
//! strings), `$prefix`, `$suffix` (strings) and `$contains` (an array holding the value, or a
//! string holding the text). A missing field passes `$ne`, `$nin` and `{"$exists": false}`
//! only.
//!
//! A path is keys joined by dots (`customer.tier`); a segment of digits indexes an array
//! (`items.0.sku`). A key that itself holds a dot cannot be named.

use crate::Invalid;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// Largest filter, as JSON.
pub const MAX_FILTER_BYTES: usize = 4096;
/// Most tests one filter holds (each path's, the event type's).
pub const MAX_TESTS: usize = 64;
/// Deepest nesting of `all`, `any` and `not`.
pub const MAX_DEPTH: usize = 6;
/// Most segments of one path.
pub const MAX_PATH_SEGMENTS: usize = 16;
/// Most values of one `$in` or `$nin`.
pub const MAX_LIST: usize = 100;

/// A channel's filter: the JSON its writer gave (what is stored and read back) and what it
/// was compiled to.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    source: Value,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Not(Box<Node>),
    Payload { path: Vec<String>, test: Vec<Op> },
    EventType(Vec<Op>),
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    Nin(Vec<Value>),
    Exists(bool),
    /// The field compared with the value falls in one of the orderings.
    Cmp(&'static [Ordering], Value),
    Prefix(String),
    Suffix(String),
    Contains(Value),
}

impl Filter {
    /// `raw` checked and compiled; the error names where it does not fit.
    pub fn parse(raw: &Value) -> Result<Self, Invalid> {
        let size = serde_json::to_vec(raw)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_FILTER_BYTES {
            return Err(Invalid::new(format!(
                "`filter` is {size} bytes as JSON; at most {MAX_FILTER_BYTES}"
            )));
        }
        let mut tests = 0;
        let node = compile(raw, "filter", 0, &mut tests)?;
        Ok(Self {
            source: raw.clone(),
            node,
        })
    }

    /// The filter as its writer gave it.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Whether an activity of `event_type` with `payload` passes.
    pub fn matches(&self, event_type: Option<&str>, payload: &Value) -> bool {
        self.node.matches(event_type, payload)
    }
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.source.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        Self::parse(&raw).map_err(|e| serde::de::Error::custom(e.message().to_owned()))
    }
}

fn compile(raw: &Value, at: &str, depth: usize, tests: &mut usize) -> Result<Node, Invalid> {
    if depth > MAX_DEPTH {
        return Err(Invalid::new(format!(
            "`{at}` nests `all`, `any` and `not` more than {MAX_DEPTH} deep"
        )));
    }
    let Value::Object(m) = raw else {
        return Err(Invalid::new(format!("`{at}` must be an object")));
    };
    let mut all = Vec::with_capacity(m.len());
    for (k, v) in m {
        let here = format!("{at}.{k}");
        match k.as_str() {
            "payload" => {
                let Value::Object(paths) = v else {
                    return Err(Invalid::new(format!(
                        "`{here}` must be an object of dot paths and their tests"
                    )));
                };
                for (path, test) in paths {
                    let segments = parse_path(path, &here)?;
                    let test = compile_test(test, &format!("{here}.{path}"))?;
                    count(tests)?;
                    all.push(Node::Payload {
                        path: segments,
                        test,
                    });
                }
            }
            "event_type" => {
                count(tests)?;
                all.push(Node::EventType(compile_test(v, &here)?));
            }
            "all" | "any" => {
                let Value::Array(items) = v else {
                    return Err(Invalid::new(format!(
                        "`{here}` must be an array of filters"
                    )));
                };
                if items.is_empty() {
                    return Err(Invalid::new(format!("`{here}` is empty")));
                }
                let nodes = items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| compile(f, &format!("{here}[{i}]"), depth + 1, tests))
                    .collect::<Result<Vec<_>, _>>()?;
                all.push(if k == "all" {
                    Node::All(nodes)
                } else {
                    Node::Any(nodes)
                });
            }
            "not" => all.push(Node::Not(Box::new(compile(v, &here, depth + 1, tests)?))),
            other => {
                return Err(Invalid::new(format!(
                    "`{at}` has `{other}`; a filter takes `payload`, `event_type`, `all`, `any` and `not`"
                )));
            }
        }
    }
    Ok(Node::All(all))
}

fn count(tests: &mut usize) -> Result<(), Invalid> {
    *tests += 1;
    if *tests > MAX_TESTS {
        return Err(Invalid::new(format!(
            "`filter` holds more than {MAX_TESTS} tests"
        )));
    }
    Ok(())
}

fn parse_path(path: &str, at: &str) -> Result<Vec<String>, Invalid> {
    let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
    if segments.iter().any(String::is_empty) {
        return Err(Invalid::new(format!(
            "`{at}` has the path `{path}`; a path is keys joined by single dots"
        )));
    }
    if segments.len() > MAX_PATH_SEGMENTS {
        return Err(Invalid::new(format!(
            "`{at}` has the path `{path}`, of more than {MAX_PATH_SEGMENTS} segments"
        )));
    }
    Ok(segments)
}

fn compile_test(raw: &Value, at: &str) -> Result<Vec<Op>, Invalid> {
    let Value::Object(m) = raw else {
        return Ok(vec![Op::Eq(raw.clone())]);
    };
    let operators = m.keys().filter(|k| k.starts_with('$')).count();
    if operators == 0 {
        return Ok(vec![Op::Eq(raw.clone())]);
    }
    if operators != m.len() {
        return Err(Invalid::new(format!(
            "`{at}` mixes operators (`$...`) with other keys; to compare with an object, give it as `{{\"$eq\": {{...}}}}`"
        )));
    }
    m.iter().map(|(op, v)| operator(op, v, at)).collect()
}

fn operator(op: &str, v: &Value, at: &str) -> Result<Op, Invalid> {
    let list = |v: &Value| match v {
        Value::Array(items) if items.len() <= MAX_LIST => Ok(items.clone()),
        _ => Err(Invalid::new(format!(
            "`{at}.{op}` takes an array of at most {MAX_LIST} values"
        ))),
    };
    let text = |v: &Value| match v {
        Value::String(t) => Ok(t.clone()),
        _ => Err(Invalid::new(format!("`{at}.{op}` takes a string"))),
    };
    let ordered = |v: &Value| match v {
        Value::Number(_) | Value::String(_) => Ok(v.clone()),
        _ => Err(Invalid::new(format!(
            "`{at}.{op}` takes a number or a string"
        ))),
    };
    Ok(match op {
        "$eq" => Op::Eq(v.clone()),
        "$ne" => Op::Ne(v.clone()),
        "$in" => Op::In(list(v)?),
        "$nin" => Op::Nin(list(v)?),
        "$exists" => match v {
            Value::Bool(b) => Op::Exists(*b),
            _ => return Err(Invalid::new(format!("`{at}.$exists` takes true or false"))),
        },
        "$gt" => Op::Cmp(&[Ordering::Greater], ordered(v)?),
        "$gte" => Op::Cmp(&[Ordering::Greater, Ordering::Equal], ordered(v)?),
        "$lt" => Op::Cmp(&[Ordering::Less], ordered(v)?),
        "$lte" => Op::Cmp(&[Ordering::Less, Ordering::Equal], ordered(v)?),
        "$prefix" => Op::Prefix(text(v)?),
        "$suffix" => Op::Suffix(text(v)?),
        "$contains" => Op::Contains(v.clone()),
        other => {
            return Err(Invalid::new(format!(
                "`{at}` has the operator `{other}`; the operators are $eq, $ne, $in, $nin, $exists, $gt, $gte, $lt, $lte, $prefix, $suffix and $contains"
            )));
        }
    })
}

impl Node {
    fn matches(&self, event_type: Option<&str>, payload: &Value) -> bool {
        match self {
            Self::All(nodes) => nodes.iter().all(|n| n.matches(event_type, payload)),
            Self::Any(nodes) => nodes.iter().any(|n| n.matches(event_type, payload)),
            Self::Not(n) => !n.matches(event_type, payload),
            Self::Payload { path, test } => {
                let field = lookup(payload, path);
                test.iter().all(|op| op.holds(field))
            }
            Self::EventType(test) => {
                let field = event_type.map(|t| Value::String(t.to_owned()));
                test.iter().all(|op| op.holds(field.as_ref()))
            }
        }
    }
}

/// The value at `path` in `v`, if there is one.
fn lookup<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |at, key| match at {
        Value::Object(m) => m.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

impl Op {
    fn holds(&self, field: Option<&Value>) -> bool {
        match self {
            Self::Exists(want) => field.is_some() == *want,
            Self::Ne(v) => field.is_none_or(|f| !same(f, v)),
            Self::Nin(vs) => field.is_none_or(|f| !vs.iter().any(|v| same(f, v))),
            _ => {
                let Some(f) = field else {
                    return false;
                };
                match self {
                    Self::Eq(v) => same(f, v),
                    Self::In(vs) => vs.iter().any(|v| same(f, v)),
                    Self::Cmp(want, v) => order(f, v).is_some_and(|o| want.contains(&o)),
                    Self::Prefix(p) => f.as_str().is_some_and(|s| s.starts_with(p.as_str())),
                    Self::Suffix(p) => f.as_str().is_some_and(|s| s.ends_with(p.as_str())),
                    Self::Contains(v) => match (f, v) {
                        (Value::Array(items), _) => items.iter().any(|i| same(i, v)),
                        (Value::String(s), Value::String(t)) => s.contains(t.as_str()),
                        _ => false,
                    },
                    Self::Exists(_) | Self::Ne(_) | Self::Nin(_) => false,
                }
            }
        }
    }
}

/// JSON equality with numbers compared by value (`1` and `1.0` are the same).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => order(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => same_map(x, y),
        _ => a == b,
    }
}

fn same_map(x: &Map<String, Value>, y: &Map<String, Value>) -> bool {
    x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
}

/// How `a` compares with `b`: numbers with numbers, strings with strings; `None` otherwise.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return Some(x.cmp(&y));
            }
            if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                return Some(x.cmp(&y));
            }
            x.as_f64()?.partial_cmp(&y.as_f64()?)
        }
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn f(v: Value) -> Filter {
        Filter::parse(&v).unwrap()
    }

    fn refused(v: Value) -> String {
        Filter::parse(&v).unwrap_err().message().to_owned()
    }

    #[test]
    fn the_subset_form_matches_when_every_named_field_equals_its_value() {
        let filter = f(json!({"payload": {"kind": "order", "customer.tier": "gold"}}));
        let order = json!({"kind": "order", "customer": {"tier": "gold", "id": 7}});
        assert!(filter.matches(None, &order));
        assert!(!filter.matches(
            None,
            &json!({"kind": "order", "customer": {"tier": "silver"}})
        ));
        assert!(!filter.matches(None, &json!({"kind": "order"})));
        assert!(!filter.matches(None, &json!({"customer": {"tier": "gold"}})));
        assert!(!filter.matches(None, &json!("order")));
    }

    #[test]
    fn numbers_compare_by_value_and_containers_as_a_whole() {
        assert!(f(json!({"payload": {"n": 1}})).matches(None, &json!({"n": 1.0})));
        assert!(!f(json!({"payload": {"n": 1}})).matches(None, &json!({"n": "1"})));
        let tags = f(json!({"payload": {"tags": ["a", "b"]}}));
        assert!(tags.matches(None, &json!({"tags": ["a", "b"]})));
        assert!(!tags.matches(None, &json!({"tags": ["b", "a"]})));
        let obj = f(json!({"payload": {"o": {"$eq": {"x": 1}}}}));
        assert!(obj.matches(None, &json!({"o": {"x": 1.0}})));
        assert!(!obj.matches(None, &json!({"o": {"x": 1, "y": 2}})));
        // An object without operators is a value to equal.
        assert!(f(json!({"payload": {"o": {"x": 1}}})).matches(None, &json!({"o": {"x": 1}})));
    }

    #[test]
    fn operators_hold_together_and_a_missing_field_passes_only_the_negative_ones() {
        let p =
            json!({"total": 120, "tier": "gold", "items": [{"sku": "a-1"}], "note": "rush order"});
        let yes = |v: Value| assert!(f(v.clone()).matches(None, &p), "{v}");
        let no = |v: Value| assert!(!f(v.clone()).matches(None, &p), "{v}");
        yes(json!({"payload": {"total": {"$gte": 100, "$lt": 200}}}));
        no(json!({"payload": {"total": {"$gt": 120}}}));
        yes(json!({"payload": {"total": {"$lte": 120.0}}}));
        yes(json!({"payload": {"tier": {"$in": ["gold", "platinum"]}}}));
        no(json!({"payload": {"tier": {"$nin": ["gold"]}}}));
        yes(json!({"payload": {"tier": {"$gt": "bronze"}}}));
        no(json!({"payload": {"tier": {"$gt": 3}}}));
        yes(json!({"payload": {"items.0.sku": {"$prefix": "a-"}}}));
        no(json!({"payload": {"items.1.sku": {"$exists": true}}}));
        yes(json!({"payload": {"items.1.sku": {"$exists": false}}}));
        yes(json!({"payload": {"missing": {"$ne": 1}, "gone": {"$nin": [1]}}}));
        no(json!({"payload": {"missing": {"$in": [null]}}}));
        yes(json!({"payload": {"note": {"$contains": "rush", "$suffix": "order"}}}));
        yes(json!({"payload": {"items": {"$contains": {"sku": "a-1"}}}}));
        no(json!({"payload": {"total": {"$contains": 1}}}));
    }

    #[test]
    fn event_types_and_combinators() {
        let filter = f(json!({
            "event_type": {"$prefix": "order."},
            "any": [{"payload": {"tier": "gold"}}, {"payload": {"total": {"$gte": 1000}}}],
            "not": {"payload": {"test": true}}
        }));
        let gold = json!({"tier": "gold", "total": 5});
        assert!(filter.matches(Some("order.created"), &gold));
        assert!(!filter.matches(Some("user.created"), &gold));
        assert!(!filter.matches(None, &gold));
        assert!(filter.matches(Some("order.paid"), &json!({"total": 1000})));
        assert!(!filter.matches(Some("order.paid"), &json!({"total": 999})));
        assert!(!filter.matches(Some("order.paid"), &json!({"tier": "gold", "test": true})));
        let untyped = f(json!({"event_type": {"$exists": false}}));
        assert!(untyped.matches(None, &gold));
        assert!(!untyped.matches(Some("x"), &gold));
        // The empty filter passes everything.
        assert!(f(json!({})).matches(None, &json!(null)));
    }

    #[test]
    fn a_filter_that_does_not_fit_is_refused_with_where() {
        assert!(refused(json!([])).contains("`filter` must be an object"));
        assert!(refused(json!({"payloads": {}})).contains("`payloads`"));
        assert!(refused(json!({"payload": []})).contains("`filter.payload`"));
        assert!(refused(json!({"payload": {"a..b": 1}})).contains("`a..b`"));
        assert!(refused(json!({"payload": {"a": {"$regex": "x"}}})).contains("`$regex`"));
        assert!(refused(json!({"payload": {"a": {"$in": 1}}})).contains("`filter.payload.a.$in`"));
        assert!(refused(json!({"payload": {"a": {"$gt": true}}})).contains("number or a string"));
        assert!(refused(json!({"payload": {"a": {"$exists": 1}}})).contains("true or false"));
        assert!(refused(json!({"payload": {"a": {"$eq": 1, "b": 2}}})).contains("mixes"));
        assert!(refused(json!({"any": []})).contains("`filter.any` is empty"));
        assert!(refused(json!({"all": [{"not": 1}]})).contains("`filter.all[0].not`"));
        let mut deep = json!({"payload": {"a": 1}});
        for _ in 0..=MAX_DEPTH {
            deep = json!({"not": deep});
        }
        assert!(refused(deep).contains("deep"));
        let many: Map<String, Value> = (0..=MAX_TESTS)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        assert!(refused(json!({"payload": many})).contains("tests"));
        let big = "x".repeat(MAX_FILTER_BYTES);
        assert!(refused(json!({"payload": {"a": big}})).contains("bytes"));
    }

    #[test]
    fn it_round_trips_as_written() {
        let raw = json!({"payload": {"kind": "order"}, "not": {"event_type": "x"}});
        let filter: Filter = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&filter).unwrap(), raw);
        assert!(serde_json::from_value::<Filter>(json!({"nope": 1})).is_err());
    }
}
