//! The tenant's usage and the estimate of what it cost.

use super::*;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    /// The first day, `YYYY-MM-DD` (UTC); 29 days before `to` when absent.
    from: Option<String>,
    /// The last day, `YYYY-MM-DD` (UTC); today when absent. At most 400 days in all.
    to: Option<String>,
}

/// `GET /api/v1/usage`: deliveries, attempts and dead letters per day, with an estimate of
/// the AWS cost they caused at the deployment's prices (list prices unless its operator set
/// others): an estimate, not a bill.
#[utoipa::path(
    get,
    path = "/api/v1/usage",
    tag = "usage",
    summary = "Your usage per day and its estimated cost",
    params(UsageQuery),
    responses((status = 200, body = views::UsageView))
)]
pub(crate) async fn get_usage(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
    query: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<views::UsageView>, ApiError> {
    let q = params(query)?;
    let now = state.pipeline.clock().now_ms();
    let (from, to) = converger_core::usage::usage_days(q.from.as_deref(), q.to.as_deref(), now)
        .map_err(|m| ApiError::invalid(ErrorCode::InvalidQuery, m.0))?;
    let usage = state
        .pipeline
        .usage()
        .tenant_usage(&tenant.id, from, to)
        .await?;
    Ok(Json(views::UsageView::of(
        &usage,
        state.pipeline.config().usage_prices,
    )))
}
