//! Sending email: the port the `email` adapter's messages go through (Amazon SES v2 on AWS).

use async_trait::async_trait;
use converger_core::email::Email;

/// Why a message was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailError {
    pub reason: String,
    /// A retry can heal it (throttling, the service's own failures, the network).
    pub retryable: bool,
    /// The service's HTTP status, when it answered (429 when throttled).
    pub status: Option<u16>,
}

/// Hands messages to the mail service.
#[async_trait]
pub trait Mailer: Send + Sync + 'static {
    /// Sends `email`, on behalf of the SES tenant `ses_tenant` where the tenant has one (SES
    /// then refuses an identity or configuration set not associated with it, and keeps its
    /// reputation, and any pause, apart from every other tenant's); the service's message id.
    async fn send(&self, email: &Email, ses_tenant: Option<&str>) -> Result<String, MailError>;
}

/// No mail service configured: every message fails (retryable), so deliveries wait.
pub struct NoMailer;

#[async_trait]
impl Mailer for NoMailer {
    async fn send(&self, _email: &Email, _ses_tenant: Option<&str>) -> Result<String, MailError> {
        Err(MailError {
            reason: "no email sender configured".into(),
            retryable: true,
            status: None,
        })
    }
}
