//! The scenarios that also cover AWS code paths: on the template deployed on the emulator,
//! every request IAM-checked.

use super::*;
use converger_ports::events::DeliveryStatusChanged;
use converger_tests::EventTap;
use converger_tests::views::Page;

/// A `delivery.status_changed` event's detail.
#[tokio::test]
async fn the_echo_bot_answers_in_the_conversation_without_loops() {
    let t = TestStack::on_emulator().await;
    let rx = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let echo = t
        .channel(&key, json!({"type": "echo", "name": "bot"}))
        .await
        .id
        .as_str()
        .to_owned();
    let hook = t
        .webhook(&key, &rx.url, json!({}))
        .await
        .id
        .as_str()
        .to_owned();
    let ids = post(&t, &key, &[&echo, &hook], json!({"text": "ping"})).await;
    let d = settle(&t, &key, &ids[0]).await;
    assert_eq!(d.status, "sent", "{d:?}");
    let reply_id = d
        .provider_message_id
        .as_deref()
        .unwrap_or_else(|| panic!("no reply id: {d:?}"))
        .to_owned();
    assert!(reply_id.starts_with("act_re_"), "{reply_id}");

    // The webhook gets the activity and the bot's reply; the reply never targets the bot.
    let got = rx.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 2);
    let bodies: Vec<Value> = got
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let reply = bodies
        .iter()
        .find(|b| b["activity_id"] == reply_id.as_str())
        .expect("the reply reached the webhook");
    assert_eq!(reply["conversation_id"], "conv-wa");
    assert_eq!(reply["payload"]["text"], "ping");
    assert_eq!(reply["payload"]["author"]["type"], "bot");
    assert_eq!(reply["payload"]["in_reply_to"], d.activity_id);
    let listed = t
        .api(
            "GET",
            &format!("/api/v1/deliveries?activity_id={reply_id}&status=sent"),
            &key,
            None,
        )
        .await;
    let rows = listed.typed::<Page<DeliveryView>>(200).unwrap().data;
    assert!(rows.iter().all(|r| r.channel_id == hook), "{rows:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rx.count(), 2, "no loop");
}

#[tokio::test]
async fn meta_receipts_move_deliveries_forward_only() {
    let t = TestStack::on_emulator().await;
    let tap = t.tap_events().await;
    let fake = fakes::meta(TOKEN, vec![]).await;
    let (_, key) = t.tenant("default").await;
    let ch = meta_channel(&t, &key, &fake).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = post(&t, &key, &[&ch], text_to("15551234567")).await;
        assert_eq!(settle(&t, &key, &id[0]).await.status, "sent");
        ids.push(id[0].clone());
    }
    let wamid = fake.ids();
    let status = |i: usize| {
        let (t, key, id) = (&t, &key, ids[i].clone());
        async move { t.delivery(key, &id).await.status.as_str().to_owned() }
    };

    // In order, with a duplicate: sent -> delivered -> read.
    let a = meta_receipt(&t, &ch, &[(&wamid[0], "delivered")]).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(applied(&a).applied, 1);
    assert_eq!(status(0).await, "delivered");
    let a = meta_receipt(&t, &ch, &[(&wamid[0], "delivered")]).await;
    assert_eq!(
        a.typed::<ReceiptsApplied>(200).map(|r| r.ignored),
        Ok(1),
        "duplicate"
    );
    meta_receipt(&t, &ch, &[(&wamid[0], "read")]).await;
    assert_eq!(status(0).await, "read");
    // Late and backwards ones change nothing; failed after read is ignored.
    for late in ["delivered", "sent", "failed"] {
        let a = meta_receipt(&t, &ch, &[(&wamid[0], late)]).await;
        assert_eq!(applied(&a).ignored, 1, "{late}: {:?}", a.body);
        assert_eq!(status(0).await, "read", "{late} after read");
    }

    // Out of order in one notification: read first, then delivered.
    let a = meta_receipt(&t, &ch, &[(&wamid[1], "read"), (&wamid[1], "delivered")]).await;
    let r = applied(&a);
    assert_eq!((r.applied, r.ignored), (1, 1), "{r:?}");
    assert_eq!(status(1).await, "read");

    // Failed from delivered; nothing leaves failed.
    meta_receipt(&t, &ch, &[(&wamid[2], "delivered"), (&wamid[2], "failed")]).await;
    let d = t.delivery(&key, &ids[2]).await;
    assert_eq!(d.status, "failed");
    assert!(d.last_error.as_deref().unwrap().contains("131026"), "{d:?}");
    meta_receipt(&t, &ch, &[(&wamid[2], "read")]).await;
    assert_eq!(status(2).await, "failed");

    // Each change is published with the conversation id.
    let events = tap
        .wait(Duration::from_secs(15), |e| {
            EventTap::of(e, "delivery.status_changed")
                .iter()
                .any(|e| EventTap::detail::<DeliveryStatusChanged>(e).status == "read")
        })
        .await;
    let read = EventTap::of(&events, "delivery.status_changed")
        .iter()
        .map(EventTap::detail::<DeliveryStatusChanged>)
        .find(|e| e.status == "read" && e.delivery.delivery_id.as_str() == ids[0])
        .expect("a read event");
    assert_eq!(read.delivery.conversation_id, "conv-wa", "{read:?}");
}

#[tokio::test]
async fn websocket_without_a_client_hands_off_and_a_replay_delivers() {
    let t = TestStack::on_emulator().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, false).await;

    // A wrong token is refused at the handshake.
    let bad = format!(
        "{}?channel_id={ch}&token=wrong-token-0123456789",
        t.stack.ws_url
    );
    assert!(tokio_tungstenite::connect_async(bad).await.is_err());

    // A connection whose client is gone without a $disconnect: the push gets 410 from the
    // management endpoint and the record is removed.
    let store = &t.stack.store;
    let c: ChannelView = t
        .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
        .await
        .typed(200)
        .unwrap();
    store
        .put_connection(&converger_ports::Connection {
            connection_id: "StaleConn0001=".into(),
            channel_id: converger_core::ChannelId::parse(&ch).unwrap(),
            tenant_id: converger_core::TenantId::parse(&c.tenant_id).unwrap(),
            connected_at: converger_core::Timestamp::now(),
            expires_at: converger_core::time::now_ms() / 1000 + 3600,
            token_fp: None,
        })
        .await
        .unwrap();

    let ids = post(&t, &key, &[&ch], json!({"text": "while you were away"})).await;
    let handed = |d: &DeliveryView| d.attempts == 1;
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), handed)
        .await;
    assert_eq!(d.status, "pending", "{d:?}");
    assert!(d.awaiting_ack, "{d:?}");
    assert_eq!(
        store.get_connection("StaleConn0001=").await.unwrap(),
        None,
        "a gone connection is removed"
    );
    // Not retried while it waits.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let d = t.delivery(&key, &ids[0]).await;
    assert_eq!((d.status.as_str(), d.attempts), ("pending", 1), "{d:?}");

    // A client connects and asks for what it missed.
    let mut ws = connect(&t, &ch).await;
    send(&mut ws, json!({"action": "replay"})).await;
    let mut frames = vec![next_frame(&mut ws).await, next_frame(&mut ws).await];
    frames.sort_by_key(|f| f["type"].as_str().unwrap().to_owned());
    assert_eq!(frames[0]["type"], "activity", "{frames:?}");
    assert_eq!(frames[0]["delivery_id"], ids[0].as_str());
    assert_eq!(frames[0]["payload"]["text"], "while you were away");
    assert_eq!(frames[1], json!({"type": "replayed", "count": 1}));
    let d = t.delivery(&key, &ids[0]).await;
    assert_eq!(d.status, "sent", "{d:?}");

    // Connected: the next activity is pushed and sent at once.
    let ids = post(&t, &key, &[&ch], json!({"text": "live"})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(f["delivery_id"], ids[0].as_str());
    assert_eq!(settle(&t, &key, &ids[0]).await.status, "sent");
}

#[tokio::test]
async fn websocket_require_ack_waits_for_the_client() {
    let t = TestStack::on_emulator().await;
    let tap = t.tap_events().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, true).await;
    let mut ws = connect(&t, &ch).await;

    let ids = post(&t, &key, &[&ch], json!({"text": "confirm me"})).await;
    let f = next_frame(&mut ws).await;
    assert_eq!(f["delivery_id"], ids[0].as_str());
    assert_eq!(f["require_ack"], true);
    let handed = |d: &DeliveryView| d.attempts == 1;
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), handed)
        .await;
    assert_eq!(
        (d.status.as_str(), d.awaiting_ack),
        ("pending", true),
        "{d:?}"
    );
    // Its attempt is logged as waiting for the client, and the hand-off is announced.
    assert_eq!(d.log()[0].outcome.as_deref(), Some("pending"), "{d:?}");
    let hand_off = |e: &serde_json::Value| {
        let e = EventTap::detail::<DeliveryStatusChanged>(e);
        e.delivery.delivery_id.as_str() == ids[0] && e.awaiting_ack
    };
    let events = tap
        .wait(Duration::from_secs(15), |e| {
            EventTap::of(e, "delivery.status_changed")
                .iter()
                .any(hand_off)
        })
        .await;
    let e = EventTap::of(&events, "delivery.status_changed")
        .into_iter()
        .find(hand_off)
        .expect("the hand-off announced");
    let e = EventTap::detail::<DeliveryStatusChanged>(&e);
    assert_eq!(e.status, "pending", "{e:?}");

    // The socket's ack.
    send(&mut ws, json!({"action": "ack", "delivery_id": ids[0]})).await;
    let a = next_frame(&mut ws).await;
    assert_eq!(
        a,
        json!({"type": "ack", "delivery_id": ids[0], "status": "sent"})
    );
    assert_eq!(t.delivery(&key, &ids[0]).await.status, "sent");

    // Reconnect and replay: still pending until acknowledged, here through the API.
    drop(ws);
    let ids = post(&t, &key, &[&ch], json!({"text": "second"})).await;
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), handed)
        .await;
    assert_eq!(d.status, "pending");
    let mut ws = connect(&t, &ch).await;
    send(&mut ws, json!({"action": "replay"})).await;
    let mut frames = vec![next_frame(&mut ws).await, next_frame(&mut ws).await];
    frames.sort_by_key(|f| f["type"].as_str().unwrap().to_owned());
    assert_eq!(frames[0]["delivery_id"], ids[0].as_str(), "{frames:?}");
    assert_eq!(frames[0]["replay"], true);
    assert_eq!(t.delivery(&key, &ids[0]).await.status, "pending");
    let path = format!("/api/v1/deliveries/{}/ack", ids[0]);
    let a = t.api("POST", &path, &key, None).await;
    assert_eq!(
        a.typed::<DeliveryView>(200).map(|d| d.status),
        Ok("sent".to_owned()),
        "{:?}",
        a.body
    );
    let again = t.api("POST", &path, &key, None).await;
    assert_eq!(again.status, 200, "an ack is idempotent");

    // Another tenant cannot ack it; a webhook delivery is not waiting for one.
    let (_, other) = t.tenant("default").await;
    assert_eq!(t.api("POST", &path, &other, None).await.status, 404);
    let hook = t
        .webhook(&key, "http://127.0.0.1:9/x", json!({"max_attempts": 1}))
        .await;
    let w = post(&t, &key, &[hook.id.as_str()], json!({"text": "x"})).await;
    settle(&t, &key, &w[0]).await;
    let a = t
        .api(
            "POST",
            &format!("/api/v1/deliveries/{}/ack", w[0]),
            &key,
            None,
        )
        .await;
    assert_eq!((a.status, a.code()), (409, "not_awaiting_ack"));
    // A frame the socket does not know.
    send(&mut ws, json!({"action": "dance"})).await;
    assert_eq!(next_frame(&mut ws).await["code"], "unknown_action");
}
