//! Payloads kept apart from their rows (a claim check, ADR 0090): ingest keeps one over
//! `core::payload::KEPT_IN_ROW_BYTES` in the payload bucket and writes its row with a
//! reference; whatever sends or checks the payload (an attempt, a websocket replay, a replay's
//! filter) reads it back here, within a per-process budget of bytes.

use converger_core::TenantId;
use converger_core::payload::{self, MAX_BYTES};
use converger_ports::{Activity, PayloadStore, StoreError, Upload};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The payload bucket, when the deployment has one, and the bytes read from it in flight.
#[derive(Clone)]
pub struct Payloads {
    store: Option<Arc<dyn PayloadStore>>,
    budget: Arc<Semaphore>,
}

impl Default for Payloads {
    fn default() -> Self {
        Self {
            store: None,
            budget: Arc::new(Semaphore::new(
                payload::budget_kib(payload::RESOLVED_BUDGET_BYTES) as usize,
            )),
        }
    }
}

/// Why a kept payload could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bucket has no such object (its lifecycle ended it, or it was removed by hand).
    #[error("payload {0} is gone from the payload bucket")]
    Gone(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What ingest made of a producer's payload: the value and its serialized bytes, and, for an
/// upload, its share of the process's budget (held until the activity is written).
pub struct Taken {
    pub value: Value,
    pub bytes: Vec<u8>,
    pub held: Option<OwnedSemaphorePermit>,
}

/// Why a payload was not taken.
#[derive(Debug)]
pub enum TakeError {
    /// Over the deployment's limit: the message.
    TooLarge(String),
    /// Not an upload of this tenant, or not JSON, or a payload the store cannot keep.
    Invalid(String),
    Store(StoreError),
}

impl Payloads {
    pub fn new(store: Arc<dyn PayloadStore>) -> Self {
        Self {
            store: Some(store),
            ..Self::default()
        }
    }

    /// The largest payload this deployment takes: 10 MiB with a payload bucket, what a row
    /// holds without one.
    pub fn max_bytes(&self) -> usize {
        payload::limit(self.store.is_some())
    }

    /// The bucket, when there is one.
    pub fn store(&self) -> Option<&Arc<dyn PayloadStore>> {
        self.store.as_ref()
    }

    /// `value` serialized, refused over the limit.
    pub fn measured(&self, value: Value) -> Result<Taken, TakeError> {
        let bytes = serde_json::to_vec(&value).map_err(|e| TakeError::Invalid(e.to_string()))?;
        if bytes.len() > self.max_bytes() {
            return Err(TakeError::TooLarge(payload::too_large(
                bytes.len(),
                self.max_bytes(),
            )));
        }
        Ok(Taken {
            value,
            bytes,
            held: None,
        })
    }

    /// Holds `bytes` of the process's budget until the permit is dropped.
    async fn hold(&self, bytes: usize) -> Result<OwnedSemaphorePermit, StoreError> {
        self.budget
            .clone()
            .acquire_many_owned(payload::budget_kib(bytes))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    /// The payload a producer uploaded as `upload_id`: read once, at most the limit, and
    /// parsed.
    pub async fn take_upload(
        &self,
        tenant: &TenantId,
        upload_id: &str,
    ) -> Result<Taken, TakeError> {
        let Some(store) = &self.store else {
            return Err(TakeError::Invalid(
                "payload_upload needs a payload bucket, which this deployment does not have".into(),
            ));
        };
        if !payload::is_upload_id(upload_id) {
            return Err(TakeError::Invalid(format!(
                "payload_upload `{upload_id}` is not an upload id (`up_` and 32 hex digits, from POST /api/v1/payloads)"
            )));
        }
        // Its size is known once read: the largest is held for it meanwhile.
        let held = self.hold(MAX_BYTES).await.map_err(TakeError::Store)?;
        let bytes = match store
            .take_upload(tenant, upload_id, MAX_BYTES as u64)
            .await
            .map_err(TakeError::Store)?
        {
            Upload::Missing => {
                return Err(TakeError::Invalid(format!(
                    "nothing was uploaded as {upload_id} (an upload is kept for a day)"
                )));
            }
            Upload::TooLarge(n) => {
                return Err(TakeError::TooLarge(payload::too_large(
                    usize::try_from(n).unwrap_or(usize::MAX),
                    MAX_BYTES,
                )));
            }
            Upload::Bytes(b) => b,
        };
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| TakeError::Invalid(format!("the upload {upload_id} is not JSON: {e}")))?;
        // The uploaded bytes are the payload's: kept as they came (JSON, within the limit),
        // not serialized again.
        Ok(Taken {
            value,
            bytes,
            held: Some(held),
        })
    }

    /// Removes the object kept for `activity`, which was not written (its producer's id was
    /// taken before): best effort, the bucket's lifecycle ends a leftover at the retention.
    pub async fn forget(&self, activity: &Activity) {
        if let (Some(store), Some(r)) = (&self.store, &activity.payload_ref)
            && let Err(e) = store.delete_payload(r).await
        {
            tracing::warn!(error = %e, key = %r.key, "a payload kept for an activity not written is left to the lifecycle");
        }
    }

    /// Keeps `taken` in the bucket when it is over what a row holds, and says so on
    /// `activity` (whose `payload` stays whole for this process).
    pub async fn keep(&self, activity: &mut Activity, taken: Vec<u8>) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        if !payload::kept_apart(taken.len(), true) {
            return Ok(());
        }
        activity.payload_ref = Some(store.put_payload(&activity.tenant_id, taken).await?);
        Ok(())
    }

    /// Reads `activity`'s payload from the bucket when its row did not hold it, holding
    /// its size of the process's budget until the permit is dropped (an attempt keeps it
    /// until its call ends).
    pub async fn read(
        &self,
        activity: &mut Activity,
    ) -> Result<Option<OwnedSemaphorePermit>, ReadError> {
        let Some(r) = activity
            .payload_ref
            .clone()
            .filter(|_| activity.payload_unread())
        else {
            return Ok(None);
        };
        let Some(store) = &self.store else {
            return Err(ReadError::Store(StoreError::Unavailable(format!(
                "payload {} is in a payload bucket this function is not given (PAYLOADS_BUCKET)",
                r.key
            ))));
        };
        let permit = self
            .hold(usize::try_from(r.bytes).unwrap_or(usize::MAX))
            .await?;
        let bytes = store
            .get_payload(&r)
            .await?
            .ok_or_else(|| ReadError::Gone(r.key.clone()))?;
        activity.payload = serde_json::from_slice(&bytes).map_err(StoreError::unreadable)?;
        Ok(Some(permit))
    }
}
