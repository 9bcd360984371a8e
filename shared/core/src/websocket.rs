//! API Gateway's WebSocket API limits, which the code and the local gateway hold to as API
//! Gateway does (the emulator enforces none of them).

/// The largest message the WebSocket API carries either way: 128 KB (made of frames of up to
/// 32 KB). Not adjustable. `PostToConnection` answers a larger one with 413
/// (`PayloadTooLargeException`); a client's larger message closes its connection (1009).
pub const MAX_MESSAGE_BYTES: usize = 128 * 1024;

/// The largest frame a client may send: 32 KB. Not adjustable; a client sends a longer
/// message in several frames (continuations), and a larger frame closes its connection.
pub const MAX_FRAME_BYTES: usize = 32 * 1024;

/// Refuses a message the WebSocket API would refuse for its size: it never can be pushed,
/// however often it is tried.
pub fn check_message_size(bytes: usize) -> Result<(), crate::Invalid> {
    if bytes > MAX_MESSAGE_BYTES {
        Err(crate::Invalid(format!(
            "the websocket message is {bytes} bytes; API Gateway's WebSocket API carries at most \
             {MAX_MESSAGE_BYTES} (128 KB) (make the payload smaller, or send a reference to it)"
        )))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_past_128_kb_is_refused_with_its_size() {
        assert!(check_message_size(MAX_MESSAGE_BYTES).is_ok());
        let e = check_message_size(MAX_MESSAGE_BYTES + 1).unwrap_err();
        assert!(e.0.contains("131073 bytes"), "{e}");
        assert!(e.0.contains("at most 131072"), "{e}");
    }
}
