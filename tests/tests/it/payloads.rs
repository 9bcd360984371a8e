//! Large payloads end to end on the emulator (ADR 0090): past 16 KiB a payload is kept in the
//! stack's payload bucket and its receiver gets every byte; a producer uploads one larger than
//! a request carries and names the upload; one over 10 MiB is refused with nothing written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{Client, Error, NewActivity, NewChannel};
use converger_http::views::{ActivityView, Page};
use converger_tests::{Receiver, TestStack, settled_delivery as settled};
use serde_json::{Value, json};
use std::time::Duration;

/// A payload whose serialized form is exactly `bytes` long, keys in order (so the bytes the
/// receiver gets are the bytes sent).
fn payload_of(bytes: usize) -> (Value, Vec<u8>) {
    let v = json!({"blob": "y".repeat(bytes - 24), "kind": "big"});
    let b = serde_json::to_vec(&v).unwrap();
    assert_eq!(b.len(), bytes);
    (v, b)
}

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> (u16, String) {
    match r {
        Err(Error::Api { status, code, .. }) => (status, code),
        other => panic!("not an API error: {other:?}"),
    }
}

async fn kept_objects(t: &TestStack) -> usize {
    let aws = t.aws();
    let bucket = aws.deployed.outputs["PayloadsBucketName"].clone();
    let conf = aws_sdk_s3::config::Builder::from(&aws.clients.config)
        .force_path_style(true)
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(conf);
    s3.list_objects_v2()
        .bucket(bucket)
        .prefix("payloads/")
        .send()
        .await
        .unwrap()
        .key_count()
        .unwrap_or(0) as usize
}

/// A tenant with a webhook channel named `name` whose receiver gets the payload as the body:
/// the tenant, its typed client, the receiver and the channel's id.
async fn payload_hook<'s>(
    t: &'s TestStack,
    name: &str,
) -> (
    converger_tests::client::Tenant<'s>,
    Client,
    Receiver,
    String,
) {
    let a = t.new_tenant("default").await;
    let api: Client = t.client(&a.key);
    let rx = Receiver::always(200).await.unwrap();
    let ch = api
        .create_channel(&NewChannel {
            kind: "webhook".into(),
            name: name.into(),
            config: json!({"url": rx.url, "body": "payload"})
                .as_object()
                .cloned()
                .unwrap(),
            ..Default::default()
        })
        .await
        .unwrap()
        .channel
        .id;
    (a, api, rx, ch)
}

#[tokio::test]
async fn a_large_payload_arrives_byte_for_byte_and_one_over_the_limit_writes_nothing() {
    let t = TestStack::on_emulator().await;
    let (a, api, rx, ch) = payload_hook(&t, "large").await;
    let activity = |payload: Value| NewActivity {
        conversation_id: "conv-large".into(),
        channel_ids: vec![ch.clone()],
        payload,
        ..Default::default()
    };

    // 1 MiB in the request itself.
    let (one_mib, one_mib_bytes) = payload_of(1024 * 1024);
    let sent = api.post_activity(&activity(one_mib.clone())).await.unwrap();
    let d = settled(&api, &sent.deliveries[0].id).await;
    assert_eq!(d.status, "sent", "{d:?}");
    let got = rx.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(
        got[0].body.as_ref(),
        one_mib_bytes.as_slice(),
        "byte for byte"
    );
    assert_eq!(kept_objects(&t).await, 1);
    // Read back: whole (up to 1 MiB), with its size and a URL that reads it.
    let read = t
        .api(
            "GET",
            &format!("/api/v1/activities/{}", sent.activity_id),
            &a.key,
            None,
        )
        .await;
    assert_eq!(read.status, 200);
    let read: ActivityView = read.typed(200).unwrap();
    assert_eq!(read.payload, one_mib);
    assert_eq!(read.payload_bytes, Some(1024 * 1024));
    let url = read.payload_url.unwrap();
    let fetched = t
        .http
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(fetched.as_ref(), one_mib_bytes.as_slice());

    // 6 MiB through an upload: more than any request carries.
    let (six, six_bytes) = payload_of(6 * 1024 * 1024);
    let inline = api.post_activity(&activity(six)).await;
    assert_eq!(code(inline), (413, "body_too_large".to_owned()));
    let upload = api.upload_payload(six_bytes.clone()).await.unwrap();
    let sent = api
        .post_activity_with_upload(&activity(Value::Null), &upload)
        .await
        .unwrap();
    let d = settled(&api, &sent.deliveries[0].id).await;
    assert_eq!(d.status, "sent", "{d:?}");
    let got = rx.wait_for(2, Duration::from_secs(30)).await;
    assert_eq!(got[1].body.len(), six_bytes.len());
    assert!(
        got[1].body.as_ref() == six_bytes.as_slice(),
        "byte for byte"
    );
    assert_eq!(kept_objects(&t).await, 2);
    // The conversation's page names the kept payloads without carrying them.
    let page = t
        .api(
            "GET",
            "/api/v1/activities?conversation_id=conv-large",
            &a.key,
            None,
        )
        .await;
    let items = page.typed::<Page<ActivityView>>(200).unwrap().data;
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|i| i.payload.is_null() && i.payload_url.is_some()),
        "{items:?}"
    );

    // Over 10 MiB: refused, nothing written, nothing kept.
    let (over, over_bytes) = payload_of(10 * 1024 * 1024 + 1);
    drop(over);
    let upload = api.upload_payload(over_bytes).await.unwrap();
    let refused = api
        .post_activity_with_upload(&activity(Value::Null), &upload)
        .await;
    assert_eq!(code(refused), (413, "payload_too_large".to_owned()));
    let page = t
        .api(
            "GET",
            "/api/v1/activities?conversation_id=conv-large",
            &a.key,
            None,
        )
        .await;
    assert_eq!(page.typed::<Page<ActivityView>>(200).unwrap().data.len(), 2);
    assert_eq!(kept_objects(&t).await, 2);
    assert_eq!(rx.count(), 2);

    // A producer's retry of a kept payload: the retry's copy is removed once its write finds
    // the id taken, and the answer is the first activity's.
    let (kept, _) = payload_of(64 * 1024);
    let retried = NewActivity {
        id: Some("act_large-retry-1".into()),
        ..activity(kept)
    };
    let first = api.post_activity(&retried).await.unwrap();
    assert_eq!(kept_objects(&t).await, 3);
    let again = api.post_activity(&retried).await.unwrap();
    assert_eq!(again.activity_id, first.activity_id);
    assert_eq!(kept_objects(&t).await, 3, "the retry's copy is gone");

    // Every S3 request was one the functions' policies allow.
    let violations = t.stack.iam_violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// A producer on the activities queue names an upload: the ingest function reads it and keeps
/// it as it keeps any large payload.
#[tokio::test]
async fn the_ingest_function_takes_an_upload_named_on_the_activities_queue() {
    let t = TestStack::on_emulator().await;
    let (a, api, rx, ch) = payload_hook(&t, "queued").await;
    let (_, bytes) = payload_of(2 * 1024 * 1024);
    let upload = api.upload_payload(bytes.clone()).await.unwrap();
    let url = t
        .aws()
        .resources
        .queue_url(&converger_store::resources::ACTIVITIES_QUEUE)
        .unwrap()
        .to_owned();
    let body = json!({"tenant_id": a.id, "activity": {
        "conversation_id": "conv-queued", "channel_ids": [ch], "payload_upload": upload}});
    t.aws()
        .clients
        .sqs
        .send_message()
        .queue_url(&url)
        .message_body(body.to_string())
        .send()
        .await
        .unwrap();
    let got = rx.wait_for(1, Duration::from_secs(30)).await;
    assert!(got[0].body.as_ref() == bytes.as_slice(), "byte for byte");
    assert_eq!(kept_objects(&t).await, 1);
    let violations = t.stack.iam_violations();
    assert!(violations.is_empty(), "{violations:?}");
}
