//! A client's frames past API Gateway's 32 KB: the local gateway closes the connection, as
//! API Gateway does; a frame within it is answered.

use super::*;

/// A replay frame padded to `bytes` of JSON.
fn padded(bytes: usize) -> Message {
    let mut frame = json!({"action": "replay", "pad": ""}).to_string();
    let pad = "x".repeat(bytes - frame.len());
    frame = json!({"action": "replay", "pad": pad}).to_string();
    assert_eq!(frame.len(), bytes);
    Message::text(frame)
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
