//! The payload bucket in process: objects in a map, uploads put by tests with
//! [`MemPayloads::upload`].

use async_trait::async_trait;
use converger_core::TenantId;
use converger_ports::{PayloadRef, PayloadStore, StoreResult, Upload, UploadUrl};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct MemPayloads {
    objects: Mutex<HashMap<String, Vec<u8>>>,
}

fn upload_key(tenant: &TenantId, upload_id: &str) -> String {
    converger_core::payload::upload_key(tenant.as_str(), upload_id)
}

impl MemPayloads {
    pub fn new() -> Self {
        Self::default()
    }

    /// What a producer's `PUT` to an upload URL leaves in the bucket.
    pub fn upload(&self, tenant: &TenantId, upload_id: &str, bytes: Vec<u8>) {
        if let Ok(mut o) = self.objects.lock() {
            o.insert(upload_key(tenant, upload_id), bytes);
        }
    }

    /// The keys of the payloads kept (uploads left out), sorted.
    pub fn kept(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .objects
            .lock()
            .map(|o| {
                o.keys()
                    .filter(|k| k.starts_with("payloads/"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        keys.sort();
        keys
    }

    /// Loses the object `r` names (a bucket's lifecycle ended it).
    pub fn lose(&self, r: &PayloadRef) {
        if let Ok(mut o) = self.objects.lock() {
            o.remove(&r.key);
        }
    }
}

#[async_trait]
impl PayloadStore for MemPayloads {
    async fn put_payload(&self, tenant: &TenantId, bytes: Vec<u8>) -> StoreResult<PayloadRef> {
        let key = converger_core::payload::object_key(tenant.as_str());
        let r = PayloadRef {
            key: key.clone(),
            bytes: bytes.len() as u64,
        };
        if let Ok(mut o) = self.objects.lock() {
            o.insert(key, bytes);
        }
        Ok(r)
    }
    async fn delete_payload(&self, r: &PayloadRef) -> StoreResult<()> {
        self.lose(r);
        Ok(())
    }
    async fn get_payload(&self, r: &PayloadRef) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .objects
            .lock()
            .ok()
            .and_then(|o| o.get(&r.key).cloned()))
    }
    async fn download_url(&self, r: &PayloadRef, _ttl_s: u64) -> StoreResult<String> {
        Ok(format!("memory:///{}", r.key))
    }
    async fn upload_url(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        _ttl_s: u64,
    ) -> StoreResult<UploadUrl> {
        Ok(UploadUrl {
            url: format!("memory:///{}", upload_key(tenant, upload_id)),
            method: "PUT".into(),
            headers: vec![],
        })
    }
    async fn take_upload(
        &self,
        tenant: &TenantId,
        upload_id: &str,
        max: u64,
    ) -> StoreResult<Upload> {
        let o = self.objects.lock().ok();
        Ok(
            match o.and_then(|o| o.get(&upload_key(tenant, upload_id)).cloned()) {
                None => Upload::Missing,
                Some(b) if b.len() as u64 > max => Upload::TooLarge(b.len() as u64),
                Some(b) => Upload::Bytes(b),
            },
        )
    }
}
