//! Secrets a function reads once at init from AWS Secrets Manager (the template creates them
//! and passes their ARNs), never as plaintext environment values.

use crate::aws::SharedInterceptor;
use aws_sdk_secretsmanager::error::DisplayErrorContext;

/// The secret string of `arn`.
pub async fn secret_value(
    config: &aws_config::SdkConfig,
    interceptors: &[SharedInterceptor],
    arn: &str,
) -> Result<String, String> {
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
        .map_err(|e| format!("reading secret {arn}: {}", DisplayErrorContext(&e)))?;
    out.secret_string
        .ok_or_else(|| format!("secret {arn} has no string value"))
}

/// Sets a new value of `arn` (an operator's rotation; the local runner's given admin token).
pub async fn put_secret_value(
    config: &aws_config::SdkConfig,
    arn: &str,
    value: &str,
) -> Result<(), String> {
    aws_sdk_secretsmanager::Client::new(config)
        .put_secret_value()
        .secret_id(arn)
        .secret_string(value)
        .send()
        .await
        .map_err(|e| format!("writing secret {arn}: {}", DisplayErrorContext(&e)))?;
    Ok(())
}

/// A setting that the template passes as a secret's ARN in `arn_var`: read from Secrets
/// Manager when that variable is set; else the plain `var` (a process run by hand), else
/// `None`.
pub async fn secret_or_env(
    config: &aws_config::SdkConfig,
    arn_var: &str,
    var: &str,
) -> Result<Option<String>, String> {
    match std::env::var(arn_var) {
        Ok(arn) if !arn.is_empty() => secret_value(config, &[], &arn).await.map(Some),
        _ => Ok(std::env::var(var).ok().filter(|v| !v.is_empty())),
    }
}
