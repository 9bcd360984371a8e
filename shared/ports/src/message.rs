//! The platform's own queue messages on the wire: each carries its format version (`"v"`) and
//! what it is (`"message"`: `delivery`, `flow_job`, `replay`) beside its fields. A reader takes
//! a message of its version or an older one (a message without the two fields was written
//! before they existed: version 1), and refuses one that is newer or of another kind rather than
//! misread it: the message goes back to its queue and, past the redrive policy, to the
//! dead-letter queue, from which it is redriven once code that reads it runs again (after a
//! rollback, say). A new field that old readers may ignore keeps the version; a change they
//! would misread raises it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The version this build writes and the newest it reads.
pub const MESSAGE_VERSION: u32 = 1;

/// A message the platform sends itself on one of its queues.
pub trait QueueMessage: Serialize + DeserializeOwned {
    /// What it is on the wire (`"message"`).
    const KIND: &'static str;
}

impl QueueMessage for crate::DeliveryMessage {
    const KIND: &'static str = "delivery";
}

impl QueueMessage for crate::FlowJob {
    const KIND: &'static str = "flow_job";
}

impl QueueMessage for crate::ReplayMessage {
    const KIND: &'static str = "replay";
}

#[derive(Serialize)]
struct Outgoing<'a, T> {
    v: u32,
    message: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

/// The two fields every message carries, read before its body.
#[derive(Deserialize)]
struct Header {
    #[serde(default = "first")]
    v: u32,
    #[serde(default)]
    message: Option<String>,
}

fn first() -> u32 {
    1
}

/// Why a message body was not read.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("message format {found} is newer than this reader's ({MESSAGE_VERSION})")]
    Newer { found: u32 },
    #[error("a {found:?} message where a {expected:?} one belongs")]
    WrongKind {
        found: String,
        expected: &'static str,
    },
    #[error("message body is not valid: {0}")]
    Body(#[from] serde_json::Error),
}

/// `m` as its queue carries it.
pub fn encode<T: QueueMessage>(m: &T) -> serde_json::Result<String> {
    serde_json::to_string(&Outgoing {
        v: MESSAGE_VERSION,
        message: T::KIND,
        body: m,
    })
}

/// A message body of kind `T` (see the module's rules).
pub fn decode<T: QueueMessage>(body: &str) -> Result<T, MessageError> {
    let h: Header = serde_json::from_str(body)?;
    if h.v > MESSAGE_VERSION {
        return Err(MessageError::Newer { found: h.v });
    }
    match h.message {
        Some(k) if k != T::KIND => Err(MessageError::WrongKind {
            found: k,
            expected: T::KIND,
        }),
        _ => Ok(serde_json::from_str(body)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeliveryMessage, FlowJob, FlowJobKind};
    use converger_core::{ChannelId, DeliveryId, Tier};

    fn delivery() -> DeliveryMessage {
        DeliveryMessage::new(DeliveryId::generate(), Tier::Default, None)
    }

    #[test]
    fn a_message_reads_back_as_written_with_its_version_and_kind() {
        let m = delivery().beside_row(5);
        let wire = encode(&m).unwrap();
        let v: serde_json::Value = serde_json::from_str(&wire).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["message"], "delivery");
        assert_eq!(decode::<DeliveryMessage>(&wire).unwrap(), m);
    }

    #[test]
    fn a_message_from_before_versions_reads_as_version_one() {
        let m = delivery();
        let old = serde_json::to_string(&m).unwrap();
        assert_eq!(decode::<DeliveryMessage>(&old).unwrap(), m);
    }

    #[test]
    fn a_newer_or_misplaced_message_is_refused_not_misread() {
        let mut v: serde_json::Value = serde_json::from_str(&encode(&delivery()).unwrap()).unwrap();
        v["v"] = 2.into();
        assert!(matches!(
            decode::<DeliveryMessage>(&v.to_string()),
            Err(MessageError::Newer { found: 2 })
        ));
        let job = FlowJob {
            channel_id: ChannelId::generate(),
            kind: FlowJobKind::Probe,
        };
        let wire = encode(&job).unwrap();
        assert!(matches!(
            decode::<DeliveryMessage>(&wire),
            Err(MessageError::WrongKind {
                expected: "delivery",
                ..
            })
        ));
        assert_eq!(decode::<FlowJob>(&wire).unwrap(), job);
    }
}
