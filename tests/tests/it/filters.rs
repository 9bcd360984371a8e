//! Channel filters end to end on the emulator: a delivery the filter does not want is
//! recorded `filtered` at ingest (single posts and batch items alike), makes no request, never
//! moves the breaker, is listed and counted, and goes again by hand once the filter wants it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{BatchResult, Client, DeliveryQuery, Error, NewActivity, NewChannel};
use converger_tests::{Receiver, TestStack, settled_delivery as settled, wait_until};
use serde_json::{Map, Value, json};
use std::time::Duration;

fn activity(channel: &str, payload: Value) -> NewActivity {
    NewActivity {
        conversation_id: "conv-filter".into(),
        channel_ids: vec![channel.to_owned()],
        event_type: Some("order.created".into()),
        payload,
        ..Default::default()
    }
}

async fn channel(api: &Client, url: &str, settings: Value) -> String {
    let settings: Map<String, Value> = settings.as_object().cloned().unwrap();
    api.create_channel(&NewChannel {
        kind: "webhook".into(),
        name: "filtered".into(),
        config: json!({"url": url}).as_object().cloned().unwrap(),
        settings,
    })
    .await
    .unwrap()
    .channel
    .id
}

fn code(r: Result<impl std::fmt::Debug, Error>) -> (u16, String) {
    match r {
        Err(Error::Api { status, code, .. }) => (status, code),
        other => panic!("not an API error: {other:?}"),
    }
}

#[tokio::test]
async fn a_delivery_the_filter_does_not_want_is_recorded_filtered_and_sent_by_hand_later() {
    let t = TestStack::on_emulator().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let rx = Receiver::always(200).await.unwrap();

    // A filter that does not fit is refused, naming where.
    let bad = api
        .create_channel(&NewChannel {
            kind: "webhook".into(),
            name: "bad".into(),
            config: json!({"url": rx.url}).as_object().cloned().unwrap(),
            settings: json!({"filter": {"payload": {"kind": {"$regex": "o.*"}}}})
                .as_object()
                .cloned()
                .unwrap(),
        })
        .await;
    assert_eq!(code(bad), (422, "invalid_filter".to_owned()));

    let ch = channel(
        &api,
        &rx.url,
        json!({"filter": {"payload": {"kind": "order", "customer.tier": {"$in": ["gold", "platinum"]}}}}),
    )
    .await;
    assert_eq!(
        api.channel(&ch).await.unwrap().filter,
        Some(json!({"payload": {"kind": "order", "customer.tier": {"$in": ["gold", "platinum"]}}}))
    );

    // Wanted: sent. Not wanted: `filtered` in the answer itself, no request.
    let wanted = api
        .post_activity(&activity(
            &ch,
            json!({"kind": "order", "customer": {"tier": "gold"}}),
        ))
        .await
        .unwrap();
    assert_eq!(wanted.deliveries[0].status, "pending");
    let skipped = api
        .post_activity(&activity(
            &ch,
            json!({"kind": "refund", "customer": {"tier": "gold"}}),
        ))
        .await
        .unwrap();
    assert_eq!(skipped.deliveries[0].status, "filtered");
    let skipped_id = skipped.deliveries[0].id.clone();
    assert_eq!(settled(&api, &wanted.deliveries[0].id).await.status, "sent");

    // A batch: each item decided on its own.
    let batch = api
        .post_activities(&[
            activity(
                &ch,
                json!({"kind": "order", "customer": {"tier": "platinum"}}),
            ),
            activity(
                &ch,
                json!({"kind": "order", "customer": {"tier": "bronze"}}),
            ),
        ])
        .await
        .unwrap();
    let statuses: Vec<String> = batch
        .iter()
        .map(|r| match r {
            BatchResult::Ingested { activity, .. } => activity.deliveries[0].status.clone(),
            BatchResult::Refused { error, .. } => panic!("refused: {error:?}"),
        })
        .collect();
    assert_eq!(statuses, ["pending", "filtered"]);
    let BatchResult::Ingested {
        activity: first, ..
    } = &batch[0]
    else {
        unreachable!()
    };
    assert_eq!(settled(&api, &first.deliveries[0].id).await.status, "sent");
    assert_eq!(
        rx.requests().len(),
        2,
        "a filtered delivery makes no request"
    );

    let d = api.delivery(&skipped_id).await.unwrap();
    assert_eq!((d.status.as_str(), d.attempts), ("filtered", 0));
    let listed = api
        .deliveries(&DeliveryQuery {
            status: Some("filtered".into()),
            channel_id: Some(ch.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 2, "{:?}", listed.data);
    assert!(listed.data.iter().any(|d| d.id == skipped_id));

    // Counted in usage (from the table's stream), apart from what was attempted.
    let counted = wait_until(Duration::from_secs(60), || async {
        api.usage(None, None)
            .await
            .is_ok_and(|u| u.total.filtered == 2 && u.total.deliveries == 4)
    })
    .await;
    assert!(counted, "usage: {:?}", api.usage(None, None).await);

    // Retried by hand while the filter still does not want it: refused, nothing changes.
    assert_eq!(
        code(api.retry_delivery(&skipped_id).await),
        (409, "still_filtered".to_owned())
    );
    assert_eq!(api.delivery(&skipped_id).await.unwrap().status, "filtered");
    // The filter changed: the retry sends it.
    let changed = api
        .patch_channel(
            &ch,
            &json!({"filter": {"payload": {"kind": {"$in": ["order", "refund"]}}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        changed.filter,
        Some(json!({"payload": {"kind": {"$in": ["order", "refund"]}}}))
    );
    let retried = api.retry_delivery(&skipped_id).await.unwrap();
    assert_eq!(retried.status, "pending");
    let d = settled(&api, &skipped_id).await;
    assert_eq!((d.status.as_str(), d.retry_count), ("sent", 1));
    assert_eq!(rx.requests().len(), 3);

    // `null` removes the filter: everything goes.
    let open = api
        .patch_channel(&ch, &json!({"filter": null}))
        .await
        .unwrap();
    assert_eq!(open.filter, None);
    let any = api
        .post_activity(&activity(&ch, json!({"kind": "anything"})))
        .await
        .unwrap();
    assert_eq!(settled(&api, &any.deliveries[0].id).await.status, "sent");
}

#[tokio::test]
async fn filtered_deliveries_leave_a_failing_channels_breaker_alone() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let rx = Receiver::always(500).await.unwrap();
    let ch = channel(
        &api,
        &rx.url,
        json!({"filter": {"event_type": {"$prefix": "order."}, "not": {"payload": {"test": true}}},
               "circuit_breaker": {"failure_threshold": 1}}),
    )
    .await;
    for n in 0..5 {
        let mut x = activity(&ch, json!({"n": n, "test": true}));
        if n % 2 == 0 {
            x.event_type = Some("user.created".into());
            x.payload = json!({"n": n});
        }
        let posted = api.post_activity(&x).await.unwrap();
        assert_eq!(posted.deliveries[0].status, "filtered", "{n}");
    }
    let state = api.channel_delivery_state(&ch).await.unwrap();
    assert_eq!(
        (state.circuit_state.as_str(), state.consecutive_failures),
        ("closed", 0)
    );
    assert!(rx.requests().is_empty());
}
