//! What a store call can fail with.

/// The error a storage service answered with, kept as the source of a [`StoreError`] or a
/// [`crate::QueueError`] (the SDK's, with its request id and cause chain).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("conflict: {0}")]
    Conflict(String),
    /// Storage failed in a way the store describes itself (throttled through every retry, a
    /// transaction that kept conflicting, an injected outage).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A request the storage service failed or refused: `message` is the SDK error's full
    /// context, `source` the error itself.
    #[error("storage unavailable: {message}")]
    Service {
        message: String,
        #[source]
        source: Source,
    },
    /// An item the store found wrong in a way it describes itself.
    #[error("corrupt item: {0}")]
    Corrupt(String),
    /// An item that does not read as its type, or a value that does not write as one:
    /// `source` is the (de)serializer's or request builder's error.
    #[error("corrupt item: {message}")]
    Unreadable {
        message: String,
        #[source]
        source: Source,
    },
}

impl StoreError {
    /// An item (or value) `e` could not read or write.
    pub fn unreadable(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Unreadable {
            message: e.to_string(),
            source: Box::new(e),
        }
    }

    /// Whether storage could not be reached or kept refusing (worth trying again later), as
    /// opposed to a conflict or an item that does not read.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::Service { .. })
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A queue that failed a store operation's send (a replay's or a lane's message): the queue's
/// error is kept as the source.
impl From<crate::QueueError> for StoreError {
    fn from(e: crate::QueueError) -> Self {
        Self::Service {
            message: e.to_string(),
            source: Box::new(e),
        }
    }
}
