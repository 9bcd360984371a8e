//! Websocket pushes in process.

use async_trait::async_trait;
use converger_ports::{Pushed, SocketError, Sockets};

/// In-process connections: frames go to channels a test or the in-process runner reads.
#[derive(Default)]
pub struct MemSockets {
    open: std::sync::Mutex<
        std::collections::HashMap<String, tokio::sync::mpsc::UnboundedSender<Vec<u8>>>,
    >,
}

impl MemSockets {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a connection; frames pushed to it arrive on the returned receiver.
    pub fn open(&self, connection_id: &str) -> tokio::sync::mpsc::UnboundedReceiver<Vec<u8>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if let Ok(mut m) = self.open.lock() {
            m.insert(connection_id.to_owned(), tx);
        }
        rx
    }

    pub fn close(&self, connection_id: &str) {
        if let Ok(mut m) = self.open.lock() {
            m.remove(connection_id);
        }
    }
}

#[async_trait]
impl Sockets for MemSockets {
    async fn post(&self, connection_id: &str, data: &[u8]) -> Result<Pushed, SocketError> {
        if data.len() > converger_core::websocket::MAX_MESSAGE_BYTES {
            return Ok(Pushed::TooLarge);
        }
        let m = self
            .open
            .lock()
            .map_err(|_| SocketError::new("sockets poisoned"))?;
        match m.get(connection_id) {
            Some(tx) if tx.send(data.to_vec()).is_ok() => Ok(Pushed::Sent),
            _ => Ok(Pushed::Gone),
        }
    }

    async fn close(&self, connection_id: &str) -> Result<(), SocketError> {
        MemSockets::close(self, connection_id);
        Ok(())
    }
}
