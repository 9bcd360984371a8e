//! A tenant's event-type catalog: create, read, list and change its types. A type with a
//! payload schema has each of its activities checked at ingest (`crate::ingest`, through the
//! instance's cache); channels subscribe by name as before, whether a type is in the catalog
//! or not.

use converger_core::TenantId;
use converger_core::schema::{PayloadSchema, check_description};
use converger_ports::{StoreError, TenantEventType};
use serde_json::Value;

/// A new event type as its writer asks for it.
#[derive(Debug, Clone, Default)]
pub struct EventTypeSpec {
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<Value>,
    pub deprecated: bool,
}

/// A change of an event type (`None`: unchanged; `Some(None)`: removed).
#[derive(Debug, Clone, Default)]
pub struct EventTypeChange {
    pub description: Option<Option<String>>,
    pub schema: Option<Option<Value>>,
    pub deprecated: Option<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum EventTypeError {
    /// A name, description or schema that does not fit: what and why.
    #[error("{0}")]
    Invalid(String),
    #[error("the tenant has an event type named `{0}`")]
    Exists(String),
    #[error("event type not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Most event types one page lists.
pub const MAX_PAGE: usize = 500;

/// A tenant's event-type catalog.
#[derive(Clone, Copy)]
pub struct EventTypes<'p> {
    pub(crate) clock: &'p dyn converger_core::time::Clock,
    pub(crate) store: &'p dyn converger_ports::EventTypeStore,
    pub(crate) tenants: &'p dyn converger_ports::TenantStore,
    pub(crate) cache: &'p crate::cache::ChannelCache,
}

fn check_schema(schema: Option<&Value>) -> Result<(), EventTypeError> {
    if let Some(s) = schema {
        PayloadSchema::compile(s).map_err(|e| EventTypeError::Invalid(e.to_string()))?;
    }
    Ok(())
}

fn check_text(description: Option<&str>) -> Result<(), EventTypeError> {
    if let Some(d) = description {
        check_description(d).map_err(|e| EventTypeError::Invalid(e.to_string()))?;
    }
    Ok(())
}

impl EventTypes<'_> {
    /// Adds a type to `tenant`'s catalog, every field checked first.
    pub async fn create(
        &self,
        tenant: &TenantId,
        spec: EventTypeSpec,
    ) -> Result<TenantEventType, EventTypeError> {
        if spec.name == "*" {
            return Err(EventTypeError::Invalid(
                "`*` subscribes to every type; it cannot be one".into(),
            ));
        }
        converger_core::channel::check_event_type(&spec.name)
            .map_err(|e| EventTypeError::Invalid(e.to_string()))?;
        check_text(spec.description.as_deref())?;
        check_schema(spec.schema.as_ref())?;
        let now = self.clock.now();
        let t = TenantEventType {
            tenant_id: tenant.clone(),
            name: spec.name,
            description: spec.description,
            schema: spec.schema,
            deprecated: spec.deprecated,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        if t.schema.is_some() {
            self.typed(tenant).await?;
        }
        if !self.store.create_event_type(&t).await? {
            return Err(EventTypeError::Exists(t.name));
        }
        self.cache.forget_schema(tenant, &t.name);
        Ok(t)
    }

    /// Marks `tenant`'s activities for the schema check, before a schema is stored (a crash
    /// between the two leaves a mark whose lookups find no schema: a cost, not a hole).
    async fn typed(&self, tenant: &TenantId) -> Result<(), EventTypeError> {
        self.tenants
            .mark_typed_events(tenant)
            .await?
            .map(drop)
            .ok_or(EventTypeError::NotFound)
    }

    pub async fn get(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<TenantEventType, EventTypeError> {
        // A name no type can have is not looked up (nor sent to the store as a key).
        if converger_core::channel::check_event_type(name).is_err() {
            return Err(EventTypeError::NotFound);
        }
        self.store
            .get_event_type(tenant, name)
            .await?
            .ok_or(EventTypeError::NotFound)
    }

    /// Up to `limit` (at most [`MAX_PAGE`]) types in name order after `after`, and whether
    /// more follow.
    pub async fn list(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<TenantEventType>, bool), EventTypeError> {
        Ok(self
            .store
            .list_event_types(tenant, after, limit.clamp(1, MAX_PAGE))
            .await?)
    }

    /// Changes a type as `change` asks, every field checked first; written over the version
    /// read, read again if another change came first.
    pub async fn change(
        &self,
        tenant: &TenantId,
        name: &str,
        change: EventTypeChange,
    ) -> Result<TenantEventType, EventTypeError> {
        if let Some(d) = &change.description {
            check_text(d.as_deref())?;
        }
        if let Some(s) = &change.schema {
            check_schema(s.as_ref())?;
        }
        for _ in 0..5 {
            let mut t = self.get(tenant, name).await?;
            if let Some(d) = &change.description {
                t.description = d.clone();
            }
            if let Some(s) = &change.schema {
                t.schema = s.clone();
            }
            if let Some(d) = change.deprecated {
                t.deprecated = d;
            }
            t.version += 1;
            t.updated_at = self.clock.now();
            if t.schema.is_some() {
                self.typed(tenant).await?;
            }
            if self.store.replace_event_type(&t).await? {
                self.cache.forget_schema(tenant, name);
                return Ok(t);
            }
        }
        Err(EventTypeError::Store(StoreError::Conflict(
            "the event type kept changing; try again".into(),
        )))
    }
}
