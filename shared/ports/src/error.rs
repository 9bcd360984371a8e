//! What a store call can fail with.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("corrupt item: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;
