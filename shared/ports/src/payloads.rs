//! Payloads kept apart from their rows (a claim check): past
//! `core::payload::KEPT_IN_ROW_BYTES` an activity's payload goes to the payload bucket
//! (Amazon S3 on AWS), its row holding a [`PayloadRef`]; producers upload payloads larger
//! than an API request may carry straight to the bucket and name the upload.

use crate::StoreResult;
use async_trait::async_trait;
use converger_core::TenantId;
use serde::{Deserialize, Serialize};

/// Where an activity's payload is kept when its row does not hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadRef {
    /// The object's key in the payload bucket.
    pub key: String,
    /// Its size (the payload serialized).
    pub bytes: u64,
}

/// A URL a producer sends a payload's bytes to, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UploadUrl {
    pub url: String,
    /// The method to send with (`PUT`).
    pub method: String,
    /// Headers the request must carry as given (they are signed).
    pub headers: Vec<(String, String)>,
}

/// What an upload came to when an activity named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upload {
    /// Nothing was uploaded under the id (never, or more than a day ago).
    Missing,
    /// The upload is this large: over the limit, it is not read.
    TooLarge(u64),
    Bytes(Vec<u8>),
}

/// The payload bucket.
#[async_trait]
pub trait PayloadStore: Send + Sync + 'static {
    /// Keeps `bytes` (a payload serialized) for `tenant` under a new key. The object lives
    /// as long as the deployment's retention; an activity whose write failed leaves one
    /// behind until then (one found written before is removed: [`Self::delete_payload`]).
    async fn put_payload(&self, tenant: &TenantId, bytes: Vec<u8>) -> StoreResult<PayloadRef>;
    /// Removes the object `r` names: kept for an activity that was not written (its
    /// producer's id was taken before). Removing a missing object is no error.
    async fn delete_payload(&self, r: &PayloadRef) -> StoreResult<()>;
    /// The bytes `r` names, or `None` when the object is gone.
    async fn get_payload(&self, r: &PayloadRef) -> StoreResult<Option<Vec<u8>>>;
    /// A URL that reads the payload `r` names for `ttl_s` seconds.
    async fn download_url(&self, r: &PayloadRef, ttl_s: u64) -> StoreResult<String>;
    /// A URL that takes one upload `upload_id` (`core::payload::is_upload_id`) of `tenant`
    /// for `ttl_s` seconds.
    async fn upload_url(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        ttl_s: u64,
    ) -> StoreResult<UploadUrl>;
    /// The upload `upload_id` of `tenant`, read only when it is at most `max` bytes.
    async fn take_upload(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        max: u64,
    ) -> StoreResult<Upload>;
}
