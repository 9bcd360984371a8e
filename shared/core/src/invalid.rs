//! A value that breaks a rule of the domain: a channel's configuration, a name, a query, a
//! setting. Its message says which rule and how to fix it; the API answers it as a 4xx's
//! message.

/// A value that breaks a rule; the message is for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Invalid {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

impl From<Invalid> for String {
    fn from(e: Invalid) -> Self {
        e.0
    }
}

/// Reads as its message (`e.contains(..)`, `&*e`), as the `String` it replaces did.
impl std::ops::Deref for Invalid {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}
