//! The tenant's audit log.

use super::*;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Page size, 1 to 500 (50 when absent).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_cursor` of the page before.
    cursor: Option<String>,
}

/// `GET /api/v1/audit`: the tenant's audit log, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    summary = "List the audit log",
    params(AuditQuery),
    responses((status = 200, description = "Newest first", body = views::Page<views::AuditView>))
)]
pub(crate) async fn list_audit(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<views::Page<views::AuditView>>, ApiError> {
    let q = params(query)?;
    let limit = page_limit(q.limit)?;
    let scope = format!("audit|{}", tenant.id);
    let after = cursor(q.cursor.as_deref(), &scope)?;
    let listed = state
        .pipeline
        .reads()
        .audit(&tenant.id, limit, after.as_ref())
        .await?;
    Ok(Json(views::Page {
        data: listed.items.iter().map(views::AuditView::from).collect(),
        next_cursor: listed.next.map(|c| c.encode(&scope)),
    }))
}
