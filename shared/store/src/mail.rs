//! Email through Amazon SES v2 (`SendEmail`).

use async_trait::async_trait;
use aws_sdk_sesv2::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_sesv2::operation::send_email::SendEmailError;
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message, MessageTag};
use converger_core::email::Email;
use converger_ports::{MailError, Mailer};

/// `SendEmail` through the SDK, with the stack's configuration set (whose event destination
/// publishes bounces, complaints and deliveries) and, where the tenant has one, its SES
/// tenant.
pub struct SesMailer {
    client: aws_sdk_sesv2::Client,
    configuration_set: Option<String>,
}

impl SesMailer {
    pub fn new(
        config: &aws_config::SdkConfig,
        interceptors: &[crate::aws::SharedInterceptor],
        configuration_set: Option<String>,
    ) -> Self {
        let mut conf = aws_sdk_sesv2::config::Builder::from(config);
        for i in interceptors {
            conf.push_interceptor(i.clone());
        }
        Self {
            client: aws_sdk_sesv2::Client::from_conf(conf.build()),
            configuration_set: configuration_set.filter(|s| !s.is_empty()),
        }
    }
}

fn content(data: &str) -> Result<Content, MailError> {
    Content::builder()
        .data(data)
        .charset("UTF-8")
        .build()
        .map_err(|e| MailError {
            reason: format!("SES: {e}"),
            retryable: false,
            status: None,
        })
}

/// A `SendEmail` failure, classified by `core::email::ses_error_retryable`.
fn classify(e: &aws_sdk_sesv2::error::SdkError<SendEmailError>) -> MailError {
    let status = e.raw_response().map(|r| r.status().as_u16());
    let code = e.as_service_error().and_then(|se| se.code());
    let reason = match (e.as_service_error(), code) {
        (Some(se), Some(code)) => {
            format!("SES: {code}: {}", se.message().unwrap_or_default())
        }
        _ => format!("SES: {}", DisplayErrorContext(e)),
    };
    MailError {
        reason,
        retryable: converger_core::email::ses_error_retryable(code, status),
        status,
    }
}

#[async_trait]
impl Mailer for SesMailer {
    async fn send(&self, email: &Email, ses_tenant: Option<&str>) -> Result<String, MailError> {
        let mut body = Body::builder();
        if let Some(t) = &email.text {
            body = body.text(content(t)?);
        }
        if let Some(h) = &email.html {
            body = body.html(content(h)?);
        }
        let message = Message::builder()
            .subject(content(&email.subject)?)
            .body(body.build())
            .build();
        let mut req = self
            .client
            .send_email()
            .from_email_address(&email.from)
            .destination(
                Destination::builder()
                    .set_to_addresses(Some(email.to.clone()))
                    .build(),
            )
            .set_reply_to_addresses((!email.reply_to.is_empty()).then(|| email.reply_to.clone()))
            .content(EmailContent::builder().simple(message).build())
            .set_configuration_set_name(self.configuration_set.clone())
            .set_tenant_name(ses_tenant.map(str::to_owned));
        for (name, value) in &email.tags {
            let tag = MessageTag::builder()
                .name(name)
                .value(value)
                .build()
                .map_err(|e| MailError {
                    reason: format!("SES: {e}"),
                    retryable: false,
                    status: None,
                })?;
            req = req.email_tags(tag);
        }
        match req.send().await {
            Ok(out) => out.message_id.ok_or_else(|| MailError {
                reason: "SES: the answer has no message id".into(),
                retryable: true,
                status: None,
            }),
            Err(e) => Err(classify(&e)),
        }
    }
}
