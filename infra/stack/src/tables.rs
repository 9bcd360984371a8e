//! The template's DynamoDB tables made directly on the emulator, without a stack: what a test
//! of the store alone needs (the conformance suite). Each table is created as
//! `infra/template.yaml` declares it (attributes, key schema, global secondary indexes with
//! their projections, time to live), under a prefix of the caller's, and named to the store as
//! the functions' environment names it (`TENANTS_TABLE: !Ref TenantsTable`). A CloudFormation
//! deployment of the whole template takes about a second of the emulator's time and starts a
//! Python process; these take a few milliseconds. The deployment itself is tested by the
//! test command's reference stack and every test that starts a stack.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use converger_store::resources::Resources;
use serde_yaml::Value;
use std::collections::BTreeMap;

/// A table as the template declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    pub logical_id: String,
    pub attributes: Vec<(String, String)>,
    pub key: Vec<(String, String)>,
    pub indexes: Vec<IndexDef>,
    pub ttl_attribute: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndexDef {
    pub name: String,
    pub key: Vec<(String, String)>,
    pub projection: String,
    pub non_key_attributes: Vec<String>,
}

/// Every `AWS::DynamoDB::Table` of `infra/template.yaml`, and which environment variable
/// names each (`NAME: !Ref LogicalId`, in the functions' environment as
/// [`crate::cfn::declared_functions`] reads it).
pub fn declared() -> Result<(Vec<TableDef>, BTreeMap<String, String>), String> {
    let tables = tables_in(&crate::cfn::template()?)?;
    let mut names = BTreeMap::new();
    for f in crate::cfn::declared_functions()?.into_values() {
        for (var, target) in f.environment {
            if let Some(target) = target
                && tables.iter().any(|t| t.logical_id == target)
            {
                names.insert(var, target);
            }
        }
    }
    Ok((tables, names))
}

/// Each table's partition key attribute, by logical id, as `infra/template.yaml` declares it
/// (read once per process; empty if the template cannot be read).
pub fn hash_keys() -> &'static BTreeMap<String, String> {
    static KEYS: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        crate::cfn::template()
            .and_then(|t| tables_in(&t))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| {
                let (attr, _) = t.key.into_iter().find(|(_, kind)| kind == "HASH")?;
                Some((t.logical_id, attr))
            })
            .collect()
    })
}

fn tables_in(doc: &Value) -> Result<Vec<TableDef>, String> {
    let resources = doc
        .get("Resources")
        .and_then(Value::as_mapping)
        .ok_or("infra/template.yaml: no Resources")?;
    let mut tables = Vec::new();
    for (id, r) in resources {
        if r.get("Type").and_then(Value::as_str) != Some("AWS::DynamoDB::Table") {
            continue;
        }
        let id = id.as_str().ok_or("a resource id that is not a string")?;
        let p = r
            .get("Properties")
            .ok_or_else(|| format!("{id}: no Properties"))?;
        let ttl = p
            .get("TimeToLiveSpecification")
            .filter(|t| t.get("Enabled").and_then(Value::as_bool) == Some(true));
        tables.push(TableDef {
            logical_id: id.to_owned(),
            attributes: pairs(
                p.get("AttributeDefinitions"),
                "AttributeName",
                "AttributeType",
            )
            .map_err(|e| format!("{id}: {e}"))?,
            key: pairs(p.get("KeySchema"), "AttributeName", "KeyType")
                .map_err(|e| format!("{id}: {e}"))?,
            indexes: p
                .get("GlobalSecondaryIndexes")
                .and_then(Value::as_sequence)
                .map(|s| s.iter().map(|g| index(id, g)).collect())
                .transpose()?
                .unwrap_or_default(),
            ttl_attribute: ttl
                .and_then(|t| t.get("AttributeName"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    Ok(tables)
}

fn pairs(v: Option<&Value>, a: &str, b: &str) -> Result<Vec<(String, String)>, String> {
    v.and_then(Value::as_sequence)
        .ok_or_else(|| format!("no list of {a} and {b}"))?
        .iter()
        .map(|e| {
            let get = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("an entry without {k}"))
            };
            Ok((get(a)?, get(b)?))
        })
        .collect()
}

fn index(table: &str, g: &Value) -> Result<IndexDef, String> {
    let name = g
        .get("IndexName")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{table}: an index without a name"))?;
    let projection = g.get("Projection");
    Ok(IndexDef {
        name: name.to_owned(),
        key: pairs(g.get("KeySchema"), "AttributeName", "KeyType")
            .map_err(|e| format!("{table}.{name}: {e}"))?,
        projection: projection
            .and_then(|p| p.get("ProjectionType"))
            .and_then(Value::as_str)
            .unwrap_or("ALL")
            .to_owned(),
        non_key_attributes: projection
            .and_then(|p| p.get("NonKeyAttributes"))
            .and_then(Value::as_sequence)
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn keys(key: &[(String, String)]) -> Result<Vec<KeySchemaElement>, String> {
    key.iter()
        .map(|(name, kind)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(KeyType::from(kind.as_str()))
                .build()
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Creates `t` as `{prefix}{logical id}`, with its time to live, and returns its name.
async fn create(client: &Client, prefix: &str, t: &TableDef) -> Result<String, String> {
    let name = format!("{prefix}{}", t.logical_id);
    let mut req = client
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(keys(&t.key)?));
    for (attr, kind) in &t.attributes {
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(attr)
                .attribute_type(ScalarAttributeType::from(kind.as_str()))
                .build()
                .map_err(|e| e.to_string())?,
        );
    }
    for i in &t.indexes {
        let projection = Projection::builder()
            .projection_type(ProjectionType::from(i.projection.as_str()))
            .set_non_key_attributes(
                (!i.non_key_attributes.is_empty()).then(|| i.non_key_attributes.clone()),
            )
            .build();
        req = req.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&i.name)
                .set_key_schema(Some(keys(&i.key)?))
                .projection(projection)
                .build()
                .map_err(|e| e.to_string())?,
        );
    }
    req.send().await.map_err(|e| {
        format!(
            "{name}: {}",
            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
        )
    })?;
    if let Some(attr) = &t.ttl_attribute {
        client
            .update_time_to_live()
            .table_name(&name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attr)
                    .enabled(true)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
            .send()
            .await
            .map_err(|e| {
                format!(
                    "{name}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                )
            })?;
    }
    Ok(name)
}

/// The template's tables made under `prefix`, named to the store as the functions'
/// environment names them. The stack's queues and bus are not made: their names in the
/// answer say so, and a store call that needs one fails with that name.
pub async fn create_tables(
    client: &Client,
    endpoint: &str,
    prefix: &str,
) -> Result<Resources, String> {
    let (tables, names) = declared()?;
    // The emulator's stack builds read its table list while they make a stream's mapping,
    // which a table made beside them changes under them: tables wait for the deploy lock.
    let _lock = crate::cfn::deploy_lock(endpoint).await?;
    let made =
        futures::future::try_join_all(tables.iter().map(|t| create(client, prefix, t))).await?;
    let by_id: BTreeMap<&str, &String> = tables
        .iter()
        .map(|t| t.logical_id.as_str())
        .zip(made.iter())
        .collect();
    Resources::from_vars(|var| match names.get(var) {
        Some(id) => by_id.get(id.as_str()).map(|n| (*n).clone()),
        None if var == converger_store::resources::DUE_SHARDS_ENV => None,
        None => Some(format!("{var}-not-made")),
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_the_store_names_is_declared_with_its_key_and_indexes() {
        let (tables, names) = declared().unwrap();
        for var in converger_store::resources::TABLE_ENVS {
            let id = names
                .get(var)
                .unwrap_or_else(|| panic!("{var} names no table"));
            assert!(tables.iter().any(|t| &t.logical_id == id), "{var}: {id}");
        }
        let deliveries = tables
            .iter()
            .find(|t| t.logical_id == "DeliveriesTable")
            .unwrap();
        assert!(!deliveries.key.is_empty());
        assert!(
            deliveries
                .indexes
                .iter()
                .any(|i| i.projection == "INCLUDE" && !i.non_key_attributes.is_empty()),
            "{deliveries:?}"
        );
    }
}
