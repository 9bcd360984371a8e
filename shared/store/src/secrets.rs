//! Secrets a function reads once at init from AWS Secrets Manager (the template creates them
//! and passes their ARNs), never as plaintext environment values.

use crate::aws::SharedInterceptor;
use aws_sdk_secretsmanager::error::DisplayErrorContext;

/// A secret that could not be read or written: the secret's ARN, what went wrong, and the
/// service's error where it answered with one.
#[derive(Debug, thiserror::Error)]
#[error("secret {arn}: {message}")]
pub struct SecretError {
    pub arn: String,
    pub message: String,
    #[source]
    pub source: Option<converger_ports::error::Source>,
}

impl SecretError {
    fn sdk<E, R>(arn: &str, doing: &str, e: aws_sdk_secretsmanager::error::SdkError<E, R>) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        Self {
            arn: arn.to_owned(),
            message: format!("{doing}: {}", DisplayErrorContext(&e)),
            source: Some(Box::new(e)),
        }
    }
}

/// The secret string of `arn`.
pub async fn secret_value(
    config: &aws_config::SdkConfig,
    interceptors: &[SharedInterceptor],
    arn: &str,
) -> Result<String, SecretError> {
    let mut conf = aws_sdk_secretsmanager::config::Builder::from(config);
    for i in interceptors {
        conf.push_interceptor(i.clone());
    }
    let client = aws_sdk_secretsmanager::Client::from_conf(conf.build());
    let out = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| SecretError::sdk(arn, "reading", e))?;
    out.secret_string.ok_or_else(|| SecretError {
        arn: arn.to_owned(),
        message: "it has no string value".into(),
        source: None,
    })
}

/// Sets a new value of `arn` (an operator's rotation; the local runner's given admin token).
pub async fn put_secret_value(
    config: &aws_config::SdkConfig,
    arn: &str,
    value: &str,
) -> Result<(), SecretError> {
    aws_sdk_secretsmanager::Client::new(config)
        .put_secret_value()
        .secret_id(arn)
        .secret_string(value)
        .send()
        .await
        .map_err(|e| SecretError::sdk(arn, "writing", e))?;
    Ok(())
}

/// A setting that the template passes as a secret's ARN in `arn_var`: read from Secrets
/// Manager when that variable is set; else the plain `var` (a process run by hand), else
/// `None`.
pub async fn secret_or_env(
    config: &aws_config::SdkConfig,
    arn_var: &str,
    var: &str,
) -> Result<Option<String>, SecretError> {
    match std::env::var(arn_var) {
        Ok(arn) if !arn.is_empty() => secret_value(config, &[], &arn).await.map(Some),
        _ => Ok(std::env::var(var).ok().filter(|v| !v.is_empty())),
    }
}
