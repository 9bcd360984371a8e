//! Batch ingest (`POST /api/v1/activities/batch`): one result per item in order, a bad item
//! refusing itself only, sequence numbers of a conversation in the items' order, a repeat of
//! the same ids creating nothing, the whole request refused past the limits with nothing
//! written, and every taken item delivered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{BatchResult, BatchResults, NewActivity};
use converger_tests::views::{ActivityView, Page};
use converger_tests::{Receiver, TestStack};
use serde_json::{Value, json};
use std::time::Duration;

fn taken(r: &BatchResult) -> (u16, &converger_client::Ingested) {
    match r {
        BatchResult::Ingested { status, activity } => (*status, activity),
        BatchResult::Refused { status, error } => panic!("refused {status}: {error:?}"),
    }
}

fn refused(r: &BatchResult) -> (u16, &str) {
    match r {
        BatchResult::Refused { status, error } => (*status, error.code.as_str()),
        BatchResult::Ingested { .. } => panic!("taken: {r:?}"),
    }
}

/// The activities listed in `conversation`.
async fn listed(t: &TestStack, key: &str, conversation: &str) -> Vec<ActivityView> {
    let a = t
        .api(
            "GET",
            &format!("/api/v1/activities?conversation_id={conversation}"),
            key,
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.typed::<Page<ActivityView>>(200).unwrap().data
}

async fn a_batch_is_taken_item_by_item(t: &TestStack) {
    let (_, key) = t.tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = t
        .webhook(&key, &rx.url, json!({}))
        .await
        .id
        .as_str()
        .to_owned();
    let api = t.client(&key);
    let item = |conv: &str, text: &str| NewActivity {
        conversation_id: conv.into(),
        channel_ids: vec![ch.clone()],
        payload: json!({"text": text}),
        ..Default::default()
    };

    // Four taken (two of one conversation without seq, one with the producer's id, one with
    // its own seq), one naming a channel that does not exist; and one that is not an
    // activity at all, sent raw.
    let mut own_id = item("conv-b", "own id");
    own_id.id = Some("act_batch_1".into());
    let mut own_seq = item("conv-c", "own seq");
    own_seq.seq = Some(40);
    let mut unknown = item("conv-a", "unknown");
    unknown.channel_ids = vec!["ch_nosuch".into()];
    let batch = [
        item("conv-a", "first"),
        unknown,
        item("conv-a", "second"),
        own_id.clone(),
        own_seq,
    ];
    let mut raw: Vec<Value> = batch
        .iter()
        .map(|a| serde_json::to_value(a).unwrap())
        .collect();
    raw.insert(
        2,
        json!({"conversation_id": "conv-a", "channel_ids": [ch], "payload": {}, "colour": "red"}),
    );
    let a = t
        .api(
            "POST",
            "/api/v1/activities/batch",
            &key,
            Some(json!({"activities": raw})),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    // Read with the client's types.
    let results: Vec<BatchResult> = a.typed::<BatchResults>(200).unwrap().results;
    assert_eq!(results.len(), 6, "one result per item");
    assert_eq!(refused(&results[1]), (422, "unknown_channel"));
    assert_eq!(refused(&results[2]), (422, "invalid_activity"));
    let (s0, first) = taken(&results[0]);
    let (s3, second) = taken(&results[3]);
    let (s4, named) = taken(&results[4]);
    let (s5, seq40) = taken(&results[5]);
    assert_eq!((s0, s3, s4, s5), (201, 201, 201, 201));
    assert_eq!(
        second.seq,
        first.seq + 1,
        "a conversation's items are numbered in order"
    );
    assert_eq!(named.activity_id, "act_batch_1");
    assert_eq!(seq40.seq, 40);
    for r in [first, second, named, seq40] {
        assert_eq!(r.deliveries.len(), 1);
        assert_eq!(r.deliveries[0].channel_id, ch);
    }
    // Every taken item is delivered, once.
    let got = rx.wait_for(4, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 4, "the four taken items reach the receiver");
    for r in [first, second, named, seq40] {
        let d = t
            .wait_delivery(
                &key,
                &r.deliveries[0].id,
                Duration::from_secs(30),
                converger_tests::is_settled,
            )
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert_eq!(
        listed(t, &key, "conv-a").await.len(),
        2,
        "refused items wrote nothing"
    );

    // The same producer id again: the stored activity, nothing new.
    let again = api.post_activities(&[own_id]).await.unwrap();
    let (status, same) = taken(&again[0]);
    assert_eq!(status, 200);
    assert_eq!(same.activity_id, "act_batch_1");
    assert_eq!(same.deliveries[0].id, named.deliveries[0].id);
    assert_eq!(listed(t, &key, "conv-b").await.len(), 1);

    // With an Idempotency-Key, items without an id are named after it: the same batch again
    // creates nothing (the layer answers the first answer again).
    let keyed = json!({"activities": [
        serde_json::to_value(item("conv-k", "k1")).unwrap(),
        serde_json::to_value(item("conv-k", "k2")).unwrap(),
    ]});
    let send_keyed = || async {
        let resp = t
            .http
            .post(format!("{}/api/v1/activities/batch", t.stack.api_url))
            .bearer_auth(&key)
            .header("idempotency-key", "batch-key-1")
            .header("content-type", "application/json")
            .body(keyed.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        resp.json::<Value>().await.unwrap()
    };
    let k1 = send_keyed().await;
    let k2 = send_keyed().await;
    assert_eq!(k1, k2);
    assert_eq!(listed(t, &key, "conv-k").await.len(), 2);

    // Past the limits: the whole request refused, nothing written.
    let many: Vec<NewActivity> = (0..101)
        .map(|i| item("conv-over", &i.to_string()))
        .collect();
    match api.post_activities(&many).await {
        Err(converger_client::Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (422, "invalid_batch"));
        }
        other => panic!("{other:?}"),
    }
    let empty = t
        .api(
            "POST",
            "/api/v1/activities/batch",
            &key,
            Some(json!({"activities": []})),
        )
        .await;
    assert_eq!((empty.status, empty.code()), (422, "invalid_batch"));
    let big = "x".repeat(200 * 1024);
    let large: Vec<NewActivity> = (0..26)
        .map(|_| {
            let mut a = item("conv-over", "");
            a.payload = json!({"text": big});
            a
        })
        .collect();
    match api.post_activities(&large).await {
        Err(converger_client::Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (413, "body_too_large"));
        }
        other => panic!("{other:?}"),
    }
    assert!(listed(t, &key, "conv-over").await.is_empty());
}

#[tokio::test]
async fn a_batch_is_taken_item_by_item_in_process() {
    let t = TestStack::start().await;
    a_batch_is_taken_item_by_item(&t).await;
}

mod emulator {
    use super::*;

    /// On DynamoDB and SQS: the shared batch writes and sends, one sequence write per
    /// conversation.
    #[tokio::test]
    async fn a_batch_is_taken_item_by_item() {
        let t = TestStack::on_emulator().await;
        super::a_batch_is_taken_item_by_item(&t).await;
    }
}
