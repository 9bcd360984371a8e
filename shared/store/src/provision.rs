//! Creates every table, queue and bus that `infra/template.yaml` declares, for the local
//! stack and the tests. Idempotent: existing resources are left as they are.

use crate::resources::{MAX_RECEIVE_COUNT, QUEUES, Resources, TABLES, TableDef};
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use std::collections::{BTreeSet, HashMap};

#[derive(Debug, thiserror::Error)]
#[error("provisioning {what} failed: {message}")]
pub struct ProvisionError {
    pub what: String,
    pub message: String,
}

fn perr(what: impl Into<String>, message: impl std::fmt::Display) -> ProvisionError {
    ProvisionError {
        what: what.into(),
        message: message.to_string(),
    }
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, ProvisionError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(|e| perr(name, e))
}

async fn create_table(
    ddb: &aws_sdk_dynamodb::Client,
    name: String,
    def: &TableDef,
) -> Result<(), ProvisionError> {
    let name = name.as_str();
    let mut attrs: BTreeSet<&str> = BTreeSet::from([def.hash_key]);
    let mut req = ddb
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(def.hash_key, KeyType::Hash)?);
    if let Some(range) = def.range_key {
        attrs.insert(range);
        req = req.key_schema(key(range, KeyType::Range)?);
    }
    for g in def.gsis {
        attrs.insert(g.hash_key);
        attrs.insert(g.range_key);
        req = req.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(g.name)
                .key_schema(key(g.hash_key, KeyType::Hash)?)
                .key_schema(key(g.range_key, KeyType::Range)?)
                .projection(if g.include.is_empty() {
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build()
                } else {
                    Projection::builder()
                        .projection_type(ProjectionType::Include)
                        .set_non_key_attributes(Some(
                            g.include.iter().map(|a| (*a).to_owned()).collect(),
                        ))
                        .build()
                })
                .build()
                .map_err(|e| perr(g.name, e))?,
        );
    }
    for a in attrs {
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| perr(a, e))?,
        );
    }
    match req.send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_in_use_exception()) => {}
        Err(e) => return Err(perr(name, DisplayErrorContext(&e))),
    }
    if let Some(ttl) = def.ttl_attribute {
        ddb.update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(ttl)
                    .enabled(true)
                    .build()
                    .map_err(|e| perr(name, e))?,
            )
            .send()
            .await
            .map_err(|e| perr(name, DisplayErrorContext(&e)))?;
    }
    Ok(())
}

/// Queue settings that a deployment (the template's parameters) or a test may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Receives before a message moves to the dead-letter queue.
    pub max_receive_count: u32,
    /// Overrides every queue's visibility timeout (tests of redelivery use a short one).
    pub visibility_timeout_s: Option<u32>,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            max_receive_count: MAX_RECEIVE_COUNT,
            visibility_timeout_s: None,
        }
    }
}

/// Creates all resources under `res`'s prefix.
pub async fn provision(
    ddb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    eb: &aws_sdk_eventbridge::Client,
    res: &Resources,
    settings: QueueSettings,
) -> Result<(), ProvisionError> {
    let tables = TABLES
        .iter()
        .map(|def| create_table(ddb, res.table(def), def));
    futures::future::try_join_all(tables).await?;

    let queues = QUEUES.iter().map(|def| async move {
        let name = res.queue_name(def);
        let dlq_name = format!("{name}-dlq");
        let dlq = sqs
            .create_queue()
            .queue_name(&dlq_name)
            .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
            .send()
            .await
            .map_err(|e| perr(&dlq_name, aws_sdk_sqs::error::DisplayErrorContext(&e)))?;
        let dlq_url = dlq.queue_url.unwrap_or_default();
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&dlq_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| perr(&dlq_name, aws_sdk_sqs::error::DisplayErrorContext(&e)))?
            .attributes
            .and_then(|mut a: HashMap<QueueAttributeName, String>| {
                a.remove(&QueueAttributeName::QueueArn)
            })
            .unwrap_or_default();
        let redrive = serde_json::json!({
            "deadLetterTargetArn": arn,
            "maxReceiveCount": settings.max_receive_count,
        });
        sqs.create_queue()
            .queue_name(&name)
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                settings
                    .visibility_timeout_s
                    .unwrap_or(def.visibility_timeout_s)
                    .to_string(),
            )
            .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
            .send()
            .await
            .map_err(|e| perr(&name, aws_sdk_sqs::error::DisplayErrorContext(&e)))?;
        Ok::<(), ProvisionError>(())
    });
    futures::future::try_join_all(queues).await?;

    match eb.create_event_bus().name(&res.bus).send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_already_exists_exception()) => {}
        Err(e) => {
            return Err(perr(
                &res.bus,
                aws_sdk_eventbridge::error::DisplayErrorContext(&e),
            ));
        }
    }
    Ok(())
}
