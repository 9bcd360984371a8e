//! What a tenant's AWS account needs for the AWS channel types (`docs/channels/aws.md`): the
//! platform's account and the tenant's external id, which the tenant's role must trust, and
//! a template that creates the role.

use super::*;
use crate::error::ErrorCode;
use converger_core::aws;

fn identity(account: &str, external_id: &str) -> views::AwsIdentityView {
    views::AwsIdentityView {
        account_id: account.to_owned(),
        external_id: external_id.to_owned(),
        send_actions: aws::Service::ALL
            .iter()
            .map(|s| (s.channel_type().to_string(), s.send_action().to_owned()))
            .collect(),
        role_template: aws::role_template(account, external_id),
    }
}

fn platform_account(state: &AppState) -> Result<String, ApiError> {
    state
        .pipeline
        .config()
        .platform_account
        .clone()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::AwsIdentityUnavailable,
                "this deployment does not know its AWS account (PLATFORM_ACCOUNT_ID is not set)",
            )
        })
}

fn gone() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        "the tenant no longer exists",
    )
}

/// `GET /api/v1/aws-identity`: the account and external id a role in the tenant's account
/// must trust, with a CloudFormation template that creates one.
#[utoipa::path(
    get,
    path = "/api/v1/aws-identity",
    tag = "aws",
    summary = "What a role in your AWS account must trust",
    responses((status = 200, body = views::AwsIdentityView))
)]
pub(crate) async fn get_aws_identity(
    State(state): State<AppState>,
    Authed(tenant, _): Authed,
) -> Result<Json<views::AwsIdentityView>, ApiError> {
    let account = platform_account(&state)?;
    let id = state
        .pipeline
        .tenants()
        .aws_external_id(&tenant.id)
        .await?
        .ok_or_else(gone)?;
    Ok(Json(identity(&account, &id)))
}

/// `POST /api/v1/aws-identity/rotate`: a new external id. Roles that trust only the old one
/// refuse the platform from now on: add the new one to their trust policy first. Audited
/// (`rotate_external_id`).
#[utoipa::path(
    post,
    path = "/api/v1/aws-identity/rotate",
    tag = "aws",
    summary = "Rotate your external id",
    responses((status = 200, body = views::AwsIdentityView))
)]
pub(crate) async fn rotate_aws_identity(
    State(state): State<AppState>,
    Authed(tenant, actor): Authed,
) -> Result<Json<views::AwsIdentityView>, ApiError> {
    let account = platform_account(&state)?;
    let id = state
        .pipeline
        .tenants()
        .rotate_external_id(&tenant.id, &actor)
        .await?
        .ok_or_else(gone)?;
    Ok(Json(identity(&account, &id)))
}
