//! Large payloads (ADR 0090): kept in the payload bucket past a row's share, sent whole,
//! taken from producers' uploads, refused over the limit with nothing written.

use super::common::*;
use converger_memory::MemPayloads;
use converger_pipeline::ingest::IngestError;

struct Bucketed {
    f: Fixture,
    bucket: Arc<MemPayloads>,
    clock: Arc<ManualClock>,
}

fn bucketed() -> Bucketed {
    let clock = Arc::new(ManualClock::starting_now());
    let f = fixture_on(clock.clone());
    let bucket = Arc::new(MemPayloads::new());
    let f = Fixture {
        pipeline: f.pipeline.with_payloads(bucket.clone()),
        ..f
    };
    Bucketed { f, bucket, clock }
}

/// A payload of about `bytes` bytes serialized.
fn sized(bytes: usize) -> serde_json::Value {
    json!({"text": "large", "blob": "x".repeat(bytes.saturating_sub(40))})
}

fn with_payload(c: &Channel, payload: serde_json::Value) -> NewActivity {
    NewActivity {
        payload: Some(payload),
        ..activity(None, &[c])
    }
}

/// The activity's row as the store keeps it.
async fn stored(f: &Fixture, a: &converger_ports::Activity) -> converger_ports::Activity {
    f.store
        .get_activity(&a.tenant_id, &a.id)
        .await
        .unwrap()
        .unwrap()
}

async fn channel_to(f: &Fixture, t: &Tenant, url: &str) -> Channel {
    hook_to(
        f,
        t,
        url,
        json!({"retry_policy": {}, "circuit_breaker": {}}),
    )
    .await
}

#[tokio::test]
async fn a_large_payload_is_kept_apart_and_its_receiver_gets_it_whole() {
    let Bucketed { f, bucket, clock } = bucketed();
    let t = tenant(&f).await;
    let receiver = Responder::start(200).await;
    let c = channel_to(&f, &t, &receiver.url).await;
    let payload = sized(1024 * 1024);
    let done = f
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, payload.clone()))
        .await
        .unwrap();
    // The row names the object; the object is the payload serialized.
    let row = stored(&f, &done.activity).await;
    assert!(row.payload.is_null(), "the row holds no payload");
    let r = row.payload_ref.clone().unwrap();
    assert_eq!(
        r.bytes as usize,
        serde_json::to_vec(&payload).unwrap().len()
    );
    assert_eq!(bucket.kept(), vec![r.key.clone()]);
    // The queue message carries no copy of it.
    assert!(f.queue.peek().iter().all(|m| m.activity.is_none()));
    pump(&f, &clock).await;
    let bodies = receiver.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    let got: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(got["payload"], payload, "every byte of the payload arrives");
    let d = f
        .store
        .get_delivery(&done.deliveries[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Sent);

    // A payload a row holds stays there: nothing more in the bucket.
    let small = f
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, sized(16 * 1024 - 100)))
        .await
        .unwrap();
    let row = stored(&f, &small.activity).await;
    assert!(row.payload_ref.is_none() && !row.payload.is_null());
    assert_eq!(bucket.kept().len(), 1);
}

#[tokio::test]
async fn a_payload_over_the_limit_is_refused_and_nothing_is_written() {
    let Bucketed { f, bucket, .. } = bucketed();
    let t = tenant(&f).await;
    let c = webhook(&f, &t).await;
    let over = sized(converger_core::payload::MAX_BYTES + 100);
    let e = f
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, over))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, IngestError::TooLarge(m) if m.contains("at most 10485760")),
        "{e}"
    );
    assert!(bucket.kept().is_empty());
    assert!(f.queue.peek().is_empty());
    let page = f
        .store
        .conversation_activities(&t.id, "conv-1", None, 10)
        .await
        .unwrap();
    assert!(page.0.is_empty());

    // Without a bucket, a row's 256 KiB is the limit, and a payload under it stays whole
    // in its row.
    let plain = fixture();
    let t = tenant(&plain).await;
    let c = webhook(&plain, &t).await;
    let e = plain
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, sized(256 * 1024 + 100)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, IngestError::TooLarge(m) if m.contains("at most 262144")),
        "{e}"
    );
    let kept = plain
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, sized(200 * 1024)))
        .await
        .unwrap();
    let row = stored(&plain, &kept.activity).await;
    assert!(row.payload_ref.is_none() && !row.payload.is_null());
}

#[tokio::test]
async fn an_upload_is_taken_as_the_payload() {
    let Bucketed { f, bucket, clock } = bucketed();
    let t = tenant(&f).await;
    let receiver = Responder::start(200).await;
    let c = channel_to(&f, &t, &receiver.url).await;
    let payload = sized(3 * 1024 * 1024);
    let id = converger_core::payload::new_upload_id();
    bucket.upload(&t.id, &id, serde_json::to_vec_pretty(&payload).unwrap());
    let upload = |id: &str| NewActivity {
        payload: None,
        payload_upload: Some(id.to_owned()),
        ..activity(None, &[&c])
    };
    f.pipeline.intake().ingest(&t, upload(&id)).await.unwrap();
    pump(&f, &clock).await;
    let bodies = receiver.bodies.lock().unwrap().clone();
    let got: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(got["payload"], payload);

    // What is refused, each with nothing written.
    let refused = |n: NewActivity| {
        let f = &f;
        let t = &t;
        async move { f.pipeline.intake().ingest(t, n).await.unwrap_err() }
    };
    let e = refused(upload(&converger_core::payload::new_upload_id())).await;
    assert!(
        matches!(&e, IngestError::Invalid(m) if m.contains("nothing was uploaded")),
        "{e}"
    );
    let e = refused(upload("up_../../payloads/x")).await;
    assert!(
        matches!(&e, IngestError::Invalid(m) if m.contains("not an upload id")),
        "{e}"
    );
    // Another tenant's upload id is not this tenant's.
    let other = f
        .pipeline
        .tenants()
        .create_tenant("other", Tier::Default)
        .await
        .unwrap()
        .0;
    let theirs = converger_core::payload::new_upload_id();
    bucket.upload(&other.id, &theirs, b"{}".to_vec());
    let e = refused(upload(&theirs)).await;
    assert!(matches!(&e, IngestError::Invalid(_)), "{e}");
    let not_json = converger_core::payload::new_upload_id();
    bucket.upload(&t.id, &not_json, b"{not json".to_vec());
    let e = refused(upload(&not_json)).await;
    assert!(
        matches!(&e, IngestError::Invalid(m) if m.contains("not JSON")),
        "{e}"
    );
    let huge = converger_core::payload::new_upload_id();
    bucket.upload(
        &t.id,
        &huge,
        vec![b' '; converger_core::payload::MAX_BYTES + 1],
    );
    let e = refused(upload(&huge)).await;
    assert!(matches!(&e, IngestError::TooLarge(_)), "{e}");
    let e = refused(NewActivity {
        payload: Some(json!({})),
        ..upload(&id)
    })
    .await;
    assert!(
        matches!(&e, IngestError::Invalid(m) if m.contains("not both")),
        "{e}"
    );
    let e = refused(NewActivity {
        payload: None,
        ..activity(None, &[&c])
    })
    .await;
    assert!(
        matches!(&e, IngestError::Invalid(m) if m.contains("payload is required")),
        "{e}"
    );
    // A batch carries its payloads inline: an item naming an upload refuses itself only.
    let done = f
        .pipeline
        .intake()
        .ingest_batch(&t, vec![Ok(upload(&id)), Ok(activity(None, &[&c]))])
        .await;
    assert!(
        matches!(&done[0], Err(IngestError::Invalid(m)) if m.contains("one activity a request"))
    );
    assert!(done[1].is_ok());
    assert_eq!(
        bucket.kept().len(),
        1,
        "only the first upload's payload was kept"
    );
}

#[tokio::test]
async fn a_payload_gone_from_the_bucket_dead_letters_its_delivery_with_the_reason() {
    let Bucketed { f, bucket, clock } = bucketed();
    let t = tenant(&f).await;
    let receiver = Responder::start(200).await;
    let c = channel_to(&f, &t, &receiver.url).await;
    let done = f
        .pipeline
        .intake()
        .ingest(&t, with_payload(&c, sized(512 * 1024)))
        .await
        .unwrap();
    let row = stored(&f, &done.activity).await;
    bucket.lose(row.payload_ref.as_ref().unwrap());
    pump(&f, &clock).await;
    assert!(
        receiver.bodies.lock().unwrap().is_empty(),
        "no request is made"
    );
    let d = f
        .store
        .get_delivery(&done.deliveries[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Failed);
    assert!(
        d.last_error
            .as_deref()
            .is_some_and(|e| e.contains("gone from the payload bucket")),
        "{:?}",
        d.last_error
    );
}

#[tokio::test]
async fn a_producers_retry_of_a_large_payload_leaves_one_object() {
    let Bucketed { f, bucket, .. } = bucketed();
    let t = tenant(&f).await;
    let c = channel_to(&f, &t, "http://127.0.0.1:9/h").await;
    let again = || NewActivity {
        payload: Some(sized(64 * 1024)),
        ..activity(Some("act_producer-retry-1"), &[&c])
    };
    let first = f.pipeline.intake().ingest(&t, again()).await.unwrap();
    let kept = stored(&f, &first.activity).await.payload_ref.unwrap();
    assert_eq!(bucket.kept(), vec![kept.key.clone()]);
    // The retry keeps its copy before its write finds the id taken: the copy is removed,
    // the first one stays, and the answer is the first activity's.
    let retried = f.pipeline.intake().ingest(&t, again()).await.unwrap();
    assert_eq!(retried.activity.id, first.activity.id);
    assert_eq!(
        bucket.kept(),
        vec![kept.key],
        "one object, the written one's"
    );
}
