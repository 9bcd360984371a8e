//! Sending into a tenant's own AWS account: the port the AWS channel types' messages go
//! through. The AWS backend assumes the tenant's role with STS and keeps the credentials
//! until shortly before they expire; the in-process one models accounts, roles and targets.

use async_trait::async_trait;
use converger_core::aws::Stage;
pub use converger_core::aws::{AssumedRole, AwsMessage, AwsReceipt, AwsSendError};

/// Sends messages into tenants' accounts.
#[async_trait]
pub trait TenantAws: Send + Sync + 'static {
    /// Sends `message` as `role`: the role is assumed once and its credentials reused until
    /// shortly before they expire.
    async fn send(
        &self,
        role: AssumedRole<'_>,
        message: &AwsMessage<'_>,
    ) -> Result<AwsReceipt, AwsSendError>;
}

/// No way into tenants' accounts configured: every send fails (retryable), so deliveries
/// wait.
pub struct NoTenantAws;

#[async_trait]
impl TenantAws for NoTenantAws {
    async fn send(
        &self,
        _role: AssumedRole<'_>,
        _message: &AwsMessage<'_>,
    ) -> Result<AwsReceipt, AwsSendError> {
        Err(AwsSendError {
            stage: Stage::AssumeRole,
            code: None,
            message: "no AWS sender configured".into(),
            status: None,
        })
    }
}
