//! The payload bucket (ADR 0090): S3 on the emulator and the in-process map keep, read and
//! bound uploads alike.

use super::*;
use converger_memory::MemPayloads;
use converger_ports::{PayloadRef, PayloadStore, Upload};
use converger_store::S3Payloads;

/// A payload bucket, and how a producer's upload reaches it.
struct Bucket {
    _t: Option<TestTables>,
    store: Arc<dyn PayloadStore>,
    memory: Option<Arc<MemPayloads>>,
}

async fn bucket(backend: Backend) -> Bucket {
    match backend {
        Backend::Dynamo => {
            let t = TestTables::on_emulator().await;
            let name = format!(
                "payloads-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            );
            let s3 = aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&t.config)
                    .force_path_style(true)
                    .build(),
            );
            s3.create_bucket().bucket(&name).send().await.unwrap();
            let store = Arc::new(S3Payloads::new(&t.config, &[], name));
            Bucket {
                _t: Some(t),
                store,
                memory: None,
            }
        }
        Backend::Memory => {
            let m = Arc::new(MemPayloads::new());
            Bucket {
                _t: None,
                store: m.clone(),
                memory: Some(m),
            }
        }
    }
}

impl Bucket {
    /// What a producer does with an upload URL: one `PUT` of `bytes`.
    async fn upload(&self, tenant: &TenantId, id: &str, bytes: Vec<u8>) {
        if let Some(m) = &self.memory {
            m.upload(tenant, id, bytes);
            return;
        }
        let url = self.store.upload_url(tenant, id, 900).await.unwrap();
        assert_eq!(url.method, "PUT");
        let mut req = reqwest::Client::new().put(&url.url).body(bytes);
        for (k, v) in &url.headers {
            req = req.header(k, v);
        }
        let status = req.send().await.unwrap().status();
        assert!(status.is_success(), "{status}");
    }
}

pub(super) async fn kept_payloads_read_back_and_uploads_are_read_within_their_bound(
    backend: Backend,
) {
    let b = bucket(backend).await;
    let tenant = TenantId::generate();
    let bytes = serde_json::to_vec(&json!({"blob": "p".repeat(100_000)})).unwrap();
    let r = b.store.put_payload(&tenant, bytes.clone()).await.unwrap();
    assert_eq!(r.bytes, bytes.len() as u64);
    assert!(
        r.key.starts_with(&format!("payloads/{tenant}/")),
        "{}",
        r.key
    );
    assert_eq!(b.store.get_payload(&r).await.unwrap(), Some(bytes.clone()));
    // Each payload its own key, never another's.
    let again = b.store.put_payload(&tenant, b"{}".to_vec()).await.unwrap();
    assert_ne!(again.key, r.key);
    let gone = PayloadRef {
        key: format!("payloads/{tenant}/nothing"),
        bytes: 1,
    };
    assert_eq!(b.store.get_payload(&gone).await.unwrap(), None);

    // Uploads: missing, within the bound, over it (never read whole), empty.
    let id = converger_core::payload::new_upload_id();
    assert_eq!(
        b.store.take_upload(&tenant, &id, 1000).await.unwrap(),
        Upload::Missing
    );
    b.upload(&tenant, &id, vec![b'7'; 1000]).await;
    assert_eq!(
        b.store.take_upload(&tenant, &id, 1000).await.unwrap(),
        Upload::Bytes(vec![b'7'; 1000])
    );
    assert_eq!(
        b.store.take_upload(&tenant, &id, 999).await.unwrap(),
        Upload::TooLarge(1000)
    );
    // Another tenant's id is not found under this tenant.
    assert_eq!(
        b.store
            .take_upload(&TenantId::generate(), &id, 1000)
            .await
            .unwrap(),
        Upload::Missing
    );
    let empty = converger_core::payload::new_upload_id();
    b.upload(&tenant, &empty, Vec::new()).await;
    assert_eq!(
        b.store.take_upload(&tenant, &empty, 1000).await.unwrap(),
        Upload::Bytes(Vec::new())
    );
    // A kept payload's download URL reads it (S3's own: the in-process one is a name).
    if b.memory.is_none() {
        let url = b.store.download_url(&r, 900).await.unwrap();
        let got = reqwest::get(&url).await.unwrap().bytes().await.unwrap();
        assert_eq!(got.as_ref(), bytes.as_slice());
    }
}
