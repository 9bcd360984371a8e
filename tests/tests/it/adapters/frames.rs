//! A client's frames past API Gateway's 32 KB: the local gateway closes the connection, as
//! API Gateway does; a frame within it is answered.

use super::*;

/// `frame` (an object) with a `pad` field that makes it `bytes` of JSON.
fn padded_to(mut frame: Value, bytes: usize) -> String {
    frame["pad"] = json!("");
    let pad = "x".repeat(bytes - frame.to_string().len());
    frame["pad"] = json!(pad);
    let text = frame.to_string();
    assert_eq!(text.len(), bytes);
    text
}

/// A replay frame padded to `bytes` of JSON.
fn padded(bytes: usize) -> Message {
    Message::text(padded_to(json!({"action": "replay"}), bytes))
}

#[tokio::test]
async fn a_client_frame_past_32_kb_closes_its_connection() {
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, true).await;

    let mut within = connect(&t, &ch).await;
    within
        .send(padded(converger_core::websocket::MAX_FRAME_BYTES))
        .await
        .unwrap();
    // Answered (the frame's `pad` is not a field a client frame has: refused by the
    // function, not by the gateway).
    let f = next_frame(&mut within).await;
    assert!(f["type"] == "error" || f["type"] == "replayed", "{f}");

    let mut past = connect(&t, &ch).await;
    past.send(padded(converger_core::websocket::MAX_FRAME_BYTES + 1))
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match past.next().await {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => continue,
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the connection stays open past a 32 KB frame");
}

/// A message past API Gateway's 128 KB: `PostToConnection` through the store's sockets
/// adapter is refused as the service refuses it (`PayloadTooLargeException`, which the adapter
/// reads as `Pushed::TooLarge`), and the connection stays: a message at the limit still
/// arrives.
#[tokio::test]
async fn a_message_past_128_kb_is_refused_and_the_connection_stays() {
    use converger_ports::{Pushed, Sockets};
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let ch = websocket_channel(&t, &key, true).await;
    let mut ws = connect(&t, &ch).await;
    let id = converger_core::ChannelId::parse(&ch).unwrap();
    let conns = t.stack.store.channel_connections(&id).await.unwrap();
    assert_eq!(conns.len(), 1, "{conns:?}");
    let management = t.stack.ws_url.replacen("ws://", "http://", 1);
    let sdk = converger_store::aws::load_config_for(Some(&management)).await;
    let sockets = converger_store::ApiGatewaySockets::new(&sdk, &management, &[]);
    let limit = converger_core::websocket::MAX_MESSAGE_BYTES;
    let message = |n: usize| padded_to(json!({"type": "probe"}), n).into_bytes();
    let past = sockets
        .post(&conns[0].connection_id, &message(limit + 1))
        .await
        .unwrap();
    assert_eq!(past, Pushed::TooLarge);
    let at = sockets
        .post(&conns[0].connection_id, &message(limit))
        .await
        .unwrap();
    assert_eq!(at, Pushed::Sent);
    let f = next_frame(&mut ws).await;
    assert_eq!(f["type"], "probe");
    assert_eq!(f.to_string().len(), limit);
}
