//! One small builder for DynamoDB update and condition expressions: each attribute is named
//! through a placeholder (`#n0`, so reserved words such as `window` need no care) and each value
//! bound to one (`:v0`), in the order they are added, so no expression spells a name or binds
//! a value by hand.

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

/// A comparison in a condition.
#[derive(Debug, Clone, Copy)]
pub(super) enum Cmp {
    Lt,
    Le,
    Gt,
}

impl Cmp {
    fn as_str(self) -> &'static str {
        match self {
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
        }
    }
}

/// An update: `SET`, `REMOVE`, `ADD` and `DELETE` clauses, and a condition of clauses joined
/// by `AND`.
#[derive(Debug, Default)]
pub(super) struct Update {
    sets: Vec<String>,
    removes: Vec<String>,
    adds: Vec<String>,
    deletes: Vec<String>,
    conditions: Vec<String>,
    names: Vec<(String, String)>,
    values: Vec<(String, AttributeValue)>,
}

impl Update {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// The placeholder path of `attr`, a name or a path of names joined by `.` (`slots.<id>`,
    /// a key of the map `slots`): one placeholder per name however often it is used.
    fn name(&mut self, attr: &str) -> String {
        attr.split('.')
            .map(|part| {
                if let Some((k, _)) = self.names.iter().find(|(_, a)| a == part) {
                    return k.clone();
                }
                let k = format!("#n{}", self.names.len());
                self.names.push((k.clone(), part.to_owned()));
                k
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The condition expression (clauses joined by `AND`), if there is one.
    fn condition_expression(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// Whether it changes nothing yet.
    pub(super) fn is_empty(&self) -> bool {
        self.sets.is_empty()
            && self.removes.is_empty()
            && self.adds.is_empty()
            && self.deletes.is_empty()
    }

    /// A new placeholder bound to `v`.
    fn value(&mut self, v: AttributeValue) -> String {
        let k = format!(":v{}", self.values.len());
        self.values.push((k.clone(), v));
        k
    }

    /// `SET attr = v`.
    pub(super) fn set(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.sets.push(format!("{n} = {v}"));
        self
    }

    /// `SET attr = if_not_exists(attr, v)`: `v` only where the item has none yet.
    pub(super) fn set_if_absent(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.sets.push(format!("{n} = if_not_exists({n}, {v})"));
        self
    }

    /// `SET attr = v` for each pair.
    pub(super) fn set_each<'a>(
        self,
        pairs: impl IntoIterator<Item = (&'a str, AttributeValue)>,
    ) -> Self {
        pairs.into_iter().fold(self, |u, (a, v)| u.set(a, v))
    }

    /// `SET attr = attr + by` (an item without `attr` counts from 0).
    pub(super) fn increment(mut self, attr: &str, by: i64) -> Self {
        let n = self.name(attr);
        let zero = self.value(AttributeValue::N("0".into()));
        let by = self.value(AttributeValue::N(by.to_string()));
        self.sets
            .push(format!("{n} = if_not_exists({n}, {zero}) + {by}"));
        self
    }

    /// `REMOVE attr` for each.
    pub(super) fn remove_each<'a>(self, attrs: impl IntoIterator<Item = &'a str>) -> Self {
        attrs.into_iter().fold(self, |u, a| u.remove(a))
    }

    /// `REMOVE attr`.
    pub(super) fn remove(mut self, attr: &str) -> Self {
        let n = self.name(attr);
        self.removes.push(n);
        self
    }

    /// `ADD attr v` (a number added, or created as `v`).
    pub(super) fn add(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.adds.push(format!("{n} {v}"));
        self
    }

    /// `DELETE attr v`: the members of the set `v` taken out of the set `attr`.
    pub(super) fn delete(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.deletes.push(format!("{n} {v}"));
        self
    }

    /// Only if `attr` (a map, a list, a set or text) holds fewer than `v` members.
    pub(super) fn when_size_lt(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.conditions.push(format!("size({n}) < {v}"));
        self
    }

    /// Only if the set or list `attr` holds `v` (or the text `attr` contains it).
    pub(super) fn when_contains(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.conditions.push(format!("contains({n}, {v})"));
        self
    }

    /// Only if one of the conditions `alternatives` adds holds (each clause it adds is one
    /// alternative, on this update's names and values).
    pub(super) fn when_one_of(mut self, alternatives: impl FnOnce(Self) -> Self) -> Self {
        let before = self.conditions.len();
        self = alternatives(self);
        let any: Vec<String> = self.conditions.drain(before..).collect();
        match any.len() {
            0 => {}
            1 => self.conditions.extend(any),
            _ => self.conditions.push(format!("({})", any.join(" OR "))),
        }
        self
    }

    /// Only if the item has `attr`.
    pub(super) fn when_exists(mut self, attr: &str) -> Self {
        let n = self.name(attr);
        self.conditions.push(format!("attribute_exists({n})"));
        self
    }

    /// Only if the item has no `attr`.
    pub(super) fn when_absent(mut self, attr: &str) -> Self {
        let n = self.name(attr);
        self.conditions.push(format!("attribute_not_exists({n})"));
        self
    }

    /// Only if `attr <op> v` (`op`: `=`, `<`, `<=`, `>`, `>=`), or (`or_absent`) the item
    /// has no `attr`.
    pub(super) fn when_cmp(
        mut self,
        attr: &str,
        op: Cmp,
        v: AttributeValue,
        or_absent: bool,
    ) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        let cmp = format!("{n} {} {v}", op.as_str());
        self.conditions.push(if or_absent {
            format!("(attribute_not_exists({n}) OR {cmp})")
        } else {
            cmp
        });
        self
    }

    /// Only if `attr = v`.
    pub(super) fn when_eq(mut self, attr: &str, v: AttributeValue) -> Self {
        let (n, v) = (self.name(attr), self.value(v));
        self.conditions.push(format!("{n} = {v}"));
        self
    }

    /// Only if `attr` is one of `vs`, or (`or_absent`) the item has no `attr`.
    pub(super) fn when_in(
        mut self,
        attr: &str,
        vs: impl IntoIterator<Item = AttributeValue>,
        or_absent: bool,
    ) -> Self {
        let n = self.name(attr);
        let mut any: Vec<String> = vs
            .into_iter()
            .map(|v| {
                let v = self.value(v);
                format!("{n} = {v}")
            })
            .collect();
        if or_absent {
            any.push(format!("attribute_not_exists({n})"));
        }
        self.conditions.push(format!("({})", any.join(" OR ")));
        self
    }

    /// The `SET ... REMOVE ... ADD ...` expression.
    fn update_expression(&self) -> String {
        let mut parts = Vec::new();
        for (clause, items) in [
            ("SET", &self.sets),
            ("REMOVE", &self.removes),
            ("ADD", &self.adds),
            ("DELETE", &self.deletes),
        ] {
            if !items.is_empty() {
                parts.push(format!("{clause} {}", items.join(", ")));
            }
        }
        parts.join(" ")
    }

    /// A transaction's update item `b` with this update's expressions, names and values.
    pub(super) fn apply_to_transaction(
        self,
        b: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        let mut b = b.update_expression(self.update_expression());
        if let Some(c) = self.condition_expression() {
            b = b.condition_expression(c);
        }
        for (k, a) in self.names {
            b = b.expression_attribute_names(k, a);
        }
        for (k, v) in self.values {
            b = b.expression_attribute_values(k, v);
        }
        b
    }

    /// Its condition alone, for a put or a delete (`When::when`); `None` without one.
    pub(super) fn into_condition(self) -> Option<Condition> {
        Some(Condition {
            expression: self.condition_expression()?,
            names: self.names,
            values: self.values,
        })
    }

    /// `req` with this update's expressions, names and values.
    pub(super) fn apply(self, req: UpdateItemFluentBuilder) -> UpdateItemFluentBuilder {
        let mut req = req.update_expression(self.update_expression());
        if let Some(c) = self.condition_expression() {
            req = req.condition_expression(c);
        }
        for (k, a) in self.names {
            req = req.expression_attribute_names(k, a);
        }
        for (k, v) in self.values {
            req = req.expression_attribute_values(k, v);
        }
        req
    }
}

/// A condition alone, built with [`Update`]'s `when_*` clauses: what a put or a delete is
/// sent with.
#[derive(Debug)]
pub(super) struct Condition {
    expression: String,
    names: Vec<(String, String)>,
    values: Vec<(String, AttributeValue)>,
}

/// A put or a delete request with a [`Condition`] and the names and values it binds.
pub(super) trait When: Sized {
    fn when(self, c: Option<Condition>) -> Self;
}

macro_rules! when_for {
    ($($t:ty),*) => {$(
        impl When for $t {
            fn when(mut self, c: Option<Condition>) -> Self {
                if let Some(c) = c {
                    self = self.condition_expression(c.expression);
                    for (k, a) in c.names {
                        self = self.expression_attribute_names(k, a);
                    }
                    for (k, v) in c.values {
                        self = self.expression_attribute_values(k, v);
                    }
                }
                self
            }
        }
    )*};
}

when_for!(
    aws_sdk_dynamodb::types::builders::PutBuilder,
    aws_sdk_dynamodb::types::builders::DeleteBuilder,
    aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_bound_once_each_in_order() {
        let u = Update::new()
            .set("window", AttributeValue::N("2".into()))
            .set_if_absent("window", AttributeValue::N("3".into()))
            .remove("probe")
            .when_in("circuit_state", [AttributeValue::S("open".into())], true)
            .when_eq("probe", AttributeValue::S("d1".into()));
        assert_eq!(
            u.update_expression(),
            "SET #n0 = :v0, #n0 = if_not_exists(#n0, :v1) REMOVE #n1"
        );
        assert_eq!(
            u.conditions.join(" AND "),
            "(#n2 = :v2 OR attribute_not_exists(#n2)) AND #n1 = :v3"
        );
        assert_eq!(
            u.names,
            vec![
                ("#n0".to_owned(), "window".to_owned()),
                ("#n1".to_owned(), "probe".to_owned()),
                ("#n2".to_owned(), "circuit_state".to_owned()),
            ]
        );
        assert_eq!(u.values.len(), 4);
    }

    #[test]
    fn a_path_names_each_of_its_parts() {
        let u = Update::new()
            .remove("slots.dlv_1")
            .set_if_absent("slots.dlv_2", AttributeValue::N("5".into()))
            .when_exists("slots");
        assert_eq!(
            u.update_expression(),
            "SET #n0.#n2 = if_not_exists(#n0.#n2, :v0) REMOVE #n0.#n1"
        );
        assert_eq!(u.conditions, vec!["attribute_exists(#n0)".to_owned()]);
    }

    #[test]
    fn sets_sizes_and_alternatives_of_any_clauses() {
        let topic = AttributeValue::S("channel_health".into());
        let one = AttributeValue::Ss(vec!["channel_health".into()]);
        let u = Update::new()
            .add("topics", one.clone())
            .when_exists("pk")
            .when_one_of(|u| {
                u.when_absent("topics")
                    .when_contains("topics", topic)
                    .when_size_lt("topics", AttributeValue::N("20".into()))
            });
        assert_eq!(u.update_expression(), "ADD #n0 :v0");
        assert_eq!(
            u.condition_expression().unwrap(),
            "attribute_exists(#n1) AND (attribute_not_exists(#n0) OR contains(#n0, :v1) \
             OR size(#n0) < :v2)"
        );
        let u = Update::new()
            .delete("topics", one)
            .when_one_of(|u| u.when_exists("pk"));
        assert_eq!(u.update_expression(), "DELETE #n0 :v0");
        assert_eq!(u.condition_expression().unwrap(), "attribute_exists(#n1)");
    }

    #[test]
    fn comparisons_alternatives_and_increments_share_the_names() {
        let n = |v: i64| AttributeValue::N(v.to_string());
        let u = Update::new()
            .increment("attempts", 1)
            .remove_each(["lease_token", "lease_until"])
            .when_cmp("next_attempt_at", Cmp::Le, n(5), false)
            .when_cmp("lease_until", Cmp::Lt, n(5), true)
            .when_absent("handed_off")
            .when_one_of(|u| u.when_exists("bl_pk").when_absent("lease_token"));
        assert_eq!(
            u.update_expression(),
            "SET #n0 = if_not_exists(#n0, :v0) + :v1 REMOVE #n1, #n2"
        );
        assert_eq!(
            u.condition_expression().unwrap(),
            "#n3 <= :v2 AND (attribute_not_exists(#n2) OR #n2 < :v3) \
             AND attribute_not_exists(#n4) AND (attribute_exists(#n5) OR attribute_not_exists(#n1))"
        );
    }
}
