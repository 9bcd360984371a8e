//! The tenant's event-type catalog: names, descriptions and payload schemas.

use super::*;
use converger_pipeline::event_types::{EventTypeChange, EventTypeError, EventTypeSpec};

impl From<EventTypeError> for ApiError {
    fn from(e: EventTypeError) -> Self {
        match e {
            EventTypeError::Invalid(m) => ApiError::invalid(ErrorCode::InvalidEventType, m),
            EventTypeError::Exists(_) => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::EventTypeExists,
                e.to_string(),
            ),
            EventTypeError::NotFound => ApiError::not_found("event type"),
            EventTypeError::Store(e) => e.into(),
        }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewEventType {
    /// 1 to 100 letters, digits, `.`, `_`, `-`, `:` (`order.paid`).
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    /// What the type means, for producers and receivers (at most 1,000 characters).
    #[serde(default)]
    description: Option<String>,
    /// A JSON Schema (draft 2020-12, at most 32 KiB, references within itself only) that
    /// every payload of this type must fit.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    schema: Option<Value>,
    #[serde(default)]
    deprecated: bool,
}

#[utoipa::path(
    post,
    path = "/api/v1/event-types",
    tag = "event types",
    summary = "Add an event type to the catalog",
    request_body = NewEventType,
    responses((status = 201, description = "Created", body = views::EventTypeView))
)]
pub(crate) async fn create_event_type(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Body(req): Body<NewEventType>,
) -> Result<impl IntoResponse, ApiError> {
    let t = state
        .pipeline
        .event_types()
        .create(
            &tenant.id,
            EventTypeSpec {
                name: req.name,
                description: req.description,
                schema: req.schema,
                deprecated: req.deprecated,
            },
        )
        .await?;
    // Its first schema marks the tenant: this instance's next request reads the mark.
    state.forget_tenant(&tenant.id);
    Ok((StatusCode::CREATED, Json(views::EventTypeView::of(&t))))
}

#[utoipa::path(
    get,
    path = "/api/v1/event-types/{name}",
    tag = "event types",
    summary = "Read an event type",
    params(("name" = String, Path, description = "The event type's name")),
    responses((status = 200, body = views::EventTypeView))
)]
pub(crate) async fn get_event_type(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(name): Path<String>,
) -> Result<Json<views::EventTypeView>, ApiError> {
    let t = state.pipeline.event_types().get(&tenant.id, &name).await?;
    Ok(Json(views::EventTypeView::of(&t)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchEventType {
    /// `null` removes it.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    description: Option<Option<String>>,
    /// Replaces the schema; `null` removes it (payloads are no longer checked).
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<Object>)]
    schema: Option<Option<Value>>,
    deprecated: Option<bool>,
}

#[utoipa::path(
    patch,
    path = "/api/v1/event-types/{name}",
    tag = "event types",
    summary = "Change an event type",
    params(("name" = String, Path, description = "The event type's name")),
    request_body = PatchEventType,
    responses((status = 200, body = views::EventTypeView))
)]
pub(crate) async fn patch_event_type(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    Path(name): Path<String>,
    Body(req): Body<PatchEventType>,
) -> Result<Json<views::EventTypeView>, ApiError> {
    let t = state
        .pipeline
        .event_types()
        .change(
            &tenant.id,
            &name,
            EventTypeChange {
                description: req.description,
                schema: req.schema,
                deprecated: req.deprecated,
            },
        )
        .await?;
    state.forget_tenant(&tenant.id);
    Ok(Json(views::EventTypeView::of(&t)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventTypeListQuery {
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/event-types`: the catalog in name order.
#[utoipa::path(
    get,
    path = "/api/v1/event-types",
    tag = "event types",
    summary = "List the event types",
    params(EventTypeListQuery),
    responses((status = 200, description = "A page of event types, by name", body = views::Page<views::EventTypeView>))
)]
pub(crate) async fn list_event_types(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<EventTypeListQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::EventTypeView>>, ApiError> {
    let q = params(query)?;
    let limit = page_limit(q.limit)?;
    let scope = format!("event_types|{}", tenant.id);
    let after = cursor(q.cursor.as_deref(), &scope)?.map(|c| c.id);
    let (items, more) = state
        .pipeline
        .event_types()
        .list(&tenant.id, after.as_deref(), limit)
        .await?;
    let next = more.then(|| items.last()).flatten().map(|t| {
        Cursor {
            sort_key: t.name.clone(),
            id: t.name.clone(),
        }
        .encode(&scope)
    });
    Ok(Json(views::Page {
        data: items.iter().map(views::EventTypeView::of).collect(),
        next_cursor: next,
    }))
}
