//! Email in process: messages from verified identities are kept for tests to read.

use async_trait::async_trait;
use converger_core::email::Email;
use converger_ports::{MailError, Mailer};
use std::collections::HashSet;
use std::sync::Mutex;

/// An in-process mail service with SES's identity rule: the sender (its address or its
/// domain) must be verified, else the message is rejected.
#[derive(Default)]
pub struct MemMailer {
    verified: Mutex<HashSet<String>>,
    sent: Mutex<Vec<(String, Email)>>,
}

impl MemMailer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Verifies an address or a domain.
    pub fn verify(&self, identity: &str) {
        if let Ok(mut v) = self.verified.lock() {
            v.insert(identity.to_ascii_lowercase());
        }
    }

    /// What was sent, with the message ids, in order.
    pub fn sent(&self) -> Vec<(String, Email)> {
        self.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Mailer for MemMailer {
    async fn send(&self, email: &Email, _ses_tenant: Option<&str>) -> Result<String, MailError> {
        let from = email.from.to_ascii_lowercase();
        let domain = from.rsplit_once('@').map_or("", |(_, d)| d).to_owned();
        let ok = self
            .verified
            .lock()
            .map(|v| v.contains(&from) || v.contains(&domain))
            .unwrap_or(false);
        if !ok {
            return Err(MailError {
                reason: format!("MessageRejected: Email address not verified {}", email.from),
                retryable: false,
                status: Some(400),
            });
        }
        let id = format!("mem-{}", uuid::Uuid::new_v4().simple());
        if let Ok(mut s) = self.sent.lock() {
            s.push((id.clone(), email.clone()));
        }
        Ok(id)
    }
}
