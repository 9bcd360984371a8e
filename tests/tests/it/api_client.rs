//! The typed client crate (`converger-client`) against a local stack: the calls a program
//! integrating with Converger makes, and an error answer with its status and code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{Client, DeliveryQuery, Error, NewActivity, NewChannel};
use converger_tests::{Receiver, TestStack};
use serde_json::json;
use std::time::{Duration, Instant};

async fn settled(api: &Client, id: &str) -> converger_client::Delivery {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = api.delivery(id).await.unwrap();
        if d.is_settled() || Instant::now() > deadline {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_client_crate_drives_the_tenant_api() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let api = Client::new(&t.stack.api_url, &a.key).unwrap();

    let mut settings = serde_json::Map::new();
    settings.insert("retry_policy".into(), json!({"max_attempts": 2}));
    let created = api
        .create_channel(&NewChannel {
            kind: "webhook".into(),
            name: "orders".into(),
            config: json!({"url": rx.url}).as_object().cloned().unwrap(),
            settings,
        })
        .await
        .unwrap();
    assert!(created.signing_secret.starts_with("whsec_"));
    let ch = created.channel.id.clone();
    assert_eq!(api.channel(&ch).await.unwrap().name, "orders");
    assert!(
        api.channels(None)
            .await
            .unwrap()
            .data
            .iter()
            .any(|c| c.id == ch)
    );

    let posted = api
        .post_activity(&NewActivity {
            conversation_id: "conv-1".into(),
            channel_ids: vec![ch.clone()],
            payload: json!({"text": "hello"}),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = posted.deliveries[0].id.clone();
    let d = settled(&api, &id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 1));
    assert_eq!(rx.count(), 1);
    let listed = api
        .deliveries(&DeliveryQuery {
            channel_id: Some(ch.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    assert_eq!(api.attempts(&id).await.unwrap().data[0].attempt, 1);

    // Pause parks, resume releases.
    assert_eq!(api.pause_channel(&ch).await.unwrap().state, "paused");
    assert_eq!(api.resume_channel(&ch).await.unwrap().state, "flowing");
    let patched = api
        .patch_channel(&ch, &json!({"name": "orders v2"}))
        .await
        .unwrap();
    assert_eq!(patched.name, "orders v2");

    // An error answer keeps its status and stable code.
    match api.retry_delivery(&id).await {
        Err(Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (409, "not_failed"))
        }
        other => panic!("{other:?}"),
    }
    match api.delivery("dl_unknown").await {
        Err(Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (404, "not_found"))
        }
        other => panic!("{other:?}"),
    }
    let wrong = Client::new(&t.stack.api_url, "cvg_wrong").unwrap();
    assert!(matches!(
        wrong.channels(None).await,
        Err(Error::Api { status: 401, .. })
    ));
    assert!(
        api.aws_identity()
            .await
            .unwrap()
            .external_id
            .starts_with("cvg-")
    );

    api.delete_channel(&ch).await.unwrap();
    assert!(matches!(
        api.channel(&ch).await,
        Err(Error::Api { status: 404, .. })
    ));
    t.stop().await;
}
