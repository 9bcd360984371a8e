//! The payload bucket on Amazon S3: payloads kept apart from their rows, and producers'
//! uploads through presigned URLs. Objects are written with SSE-S3 (no KMS request charges);
//! the bucket's lifecycle ends payloads with the deployment's retention and uploads after a
//! day (`infra/template.yaml`, `PayloadsBucket`).

use crate::aws::sdk_err;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;
use converger_core::TenantId;
use converger_core::payload::{object_key, upload_key};
use converger_ports::{PayloadRef, PayloadStore, StoreError, StoreResult, Upload, UploadUrl};
use std::time::Duration;

pub struct S3Payloads {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Payloads {
    /// The bucket `bucket` (`PAYLOADS_BUCKET`), through `config`'s endpoint: an endpoint of
    /// its own (the local emulator) takes the bucket in the path, AWS's in the host name.
    pub fn new(
        config: &aws_config::SdkConfig,
        interceptors: &[crate::aws::SharedInterceptor],
        bucket: String,
    ) -> Self {
        let mut conf = aws_sdk_s3::config::Builder::from(config)
            .force_path_style(config.endpoint_url().is_some());
        for i in interceptors {
            conf.push_interceptor(i.clone());
        }
        Self {
            client: aws_sdk_s3::Client::from_conf(conf.build()),
            bucket,
        }
    }
}

fn presigning(ttl_s: u64) -> StoreResult<PresigningConfig> {
    PresigningConfig::expires_in(Duration::from_secs(ttl_s.max(1))).map_err(StoreError::unreadable)
}

/// The total size in a `Content-Range` of `bytes 0-n/total`.
fn total_of(content_range: Option<&str>) -> Option<u64> {
    content_range?.rsplit('/').next()?.parse().ok()
}

#[async_trait::async_trait]
impl PayloadStore for S3Payloads {
    async fn put_payload(&self, tenant: &TenantId, bytes: Vec<u8>) -> StoreResult<PayloadRef> {
        let key = object_key(tenant.as_str());
        let size = bytes.len() as u64;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .content_type("application/json")
            .server_side_encryption(ServerSideEncryption::Aes256)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(PayloadRef { key, bytes: size })
    }

    async fn delete_payload(&self, r: &PayloadRef) -> StoreResult<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(&r.key)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn get_payload(&self, r: &PayloadRef) -> StoreResult<Option<Vec<u8>>> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&r.key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(sdk_err(e)),
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::Unavailable(format!("S3: reading {}: {e}", r.key)))?;
        Ok(Some(body.into_bytes().to_vec()))
    }

    async fn download_url(&self, r: &PayloadRef, ttl_s: u64) -> StoreResult<String> {
        let req = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&r.key)
            .presigned(presigning(ttl_s)?)
            .await
            .map_err(sdk_err)?;
        Ok(req.uri().to_owned())
    }

    async fn upload_url(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        ttl_s: u64,
    ) -> StoreResult<UploadUrl> {
        let req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(upload_key(tenant.as_str(), upload_id))
            .content_type("application/json")
            .presigned(presigning(ttl_s)?)
            .await
            .map_err(sdk_err)?;
        Ok(UploadUrl {
            url: req.uri().to_owned(),
            method: req.method().to_owned(),
            headers: req
                .headers()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        })
    }

    async fn take_upload(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        max: u64,
    ) -> StoreResult<Upload> {
        // One ranged read of at most one byte over the limit: an upload over it is never
        // read whole, and its size comes from the answer's range.
        let key = upload_key(tenant.as_str(), upload_id);
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&key)
            .range(format!("bytes=0-{max}"))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Ok(Upload::Missing);
            }
            // An empty object has no byte 0: an empty body.
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 416) => {
                return Ok(Upload::Bytes(Vec::new()));
            }
            Err(e) => return Err(sdk_err(e)),
        };
        let total = total_of(out.content_range());
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::Unavailable(format!("S3: reading {key}: {e}")))?
            .into_bytes();
        let size = total.unwrap_or(body.len() as u64).max(body.len() as u64);
        if size > max {
            return Ok(Upload::TooLarge(size));
        }
        Ok(Upload::Bytes(body.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_of_a_ranged_read_is_its_total() {
        assert_eq!(
            total_of(Some("bytes 0-10485760/20000000")),
            Some(20_000_000)
        );
        assert_eq!(total_of(Some("bytes 0-9/10")), Some(10));
        assert_eq!(total_of(None), None);
    }
}
