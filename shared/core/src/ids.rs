//! Typed identifiers. Each id is a prefixed string (`ten_`, `ch_`, `act_`, `dlv_`) so that an
//! id of one kind can never be passed where another is expected, and a stray id in a log line
//! says what it is.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// Namespace for delivery ids derived from (activity, channel).
const DELIVERY_NAMESPACE: Uuid = Uuid::from_u128(0x5c0f_9a0e_2b7d_4e4b_9d0c_c0a1_7e11_de11);

macro_rules! typed_id {
    ($name:ident, $prefix:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new random id.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, Uuid::new_v4().simple()))
            }

            /// Parses an id received from outside (an URL path, a JSON body).
            pub fn parse(s: &str) -> Result<Self, IdError> {
                let rest = s.strip_prefix($prefix).ok_or(IdError::Prefix {
                    kind: stringify!($name),
                    prefix: $prefix,
                })?;
                if rest.is_empty()
                    || rest.len() > 64
                    || !rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(IdError::Body {
                        kind: stringify!($name),
                    });
                }
                Ok(Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

typed_id!(TenantId, "ten_");
typed_id!(ChannelId, "ch_");
typed_id!(ActivityId, "act_");
typed_id!(DeliveryId, "dlv_");

impl DeliveryId {
    /// The delivery of an activity to a channel. The id is a function of the pair, so creating
    /// "the" delivery twice names the same row and a conditional create makes the pair unique.
    pub fn for_pair(activity: &ActivityId, channel: &ChannelId) -> Self {
        let name = format!("{}/{}", activity.as_str(), channel.as_str());
        Self(format!(
            "dlv_{}",
            Uuid::new_v5(&DELIVERY_NAMESPACE, name.as_bytes()).simple()
        ))
    }
}

impl ActivityId {
    /// The activity a tenant's POST with `Idempotency-Key` `key` creates when it names no id:
    /// a function of the tenant and the key, so a retry after an answer that was lost (or a
    /// server error after the rows were written) names the same activity and creates nothing
    /// new.
    pub fn for_idempotency_key(tenant: &TenantId, key: &str) -> Self {
        let name = format!("{tenant}\n{key}");
        Self(format!(
            "{}ik_{}",
            Self::PREFIX,
            Uuid::new_v5(&IDEMPOTENCY_NAMESPACE, name.as_bytes()).simple()
        ))
    }

    /// The reply a bot posts for `delivery`: a function of the delivery, so a retried
    /// attempt names the same activity and posts it once.
    pub fn reply_for(delivery: &DeliveryId) -> Self {
        let body = delivery
            .as_str()
            .strip_prefix(DeliveryId::PREFIX)
            .unwrap_or(delivery.as_str());
        Self(format!("{}re_{body}", Self::PREFIX))
    }
}

/// The namespace of activity ids derived from idempotency keys.
const IDEMPOTENCY_NAMESPACE: Uuid = Uuid::from_u128(0x6a1c_2f3e_8d4b_4e71_9a0c_5b7d_2e8f_1c43);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} must start with `{prefix}`")]
    Prefix {
        kind: &'static str,
        prefix: &'static str,
    },
    #[error("{kind} has an invalid body (1 to 64 letters, digits, `-` or `_`)")]
    Body { kind: &'static str },
}

/// A stable hash (FNV-1a) of a key: the same on every machine and in every release, since
/// shards and slot items chosen by it are stored.
pub fn stable_hash(key: &str) -> u32 {
    key.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_id_is_a_valid_function_of_its_delivery() {
        let d = DeliveryId::generate();
        let t = TenantId::generate();
        let k = ActivityId::for_idempotency_key(&t, "key-1");
        assert_eq!(k, ActivityId::for_idempotency_key(&t, "key-1"));
        assert_ne!(k, ActivityId::for_idempotency_key(&t, "key-2"));
        assert_ne!(
            k,
            ActivityId::for_idempotency_key(&TenantId::generate(), "key-1")
        );
        assert_eq!(ActivityId::parse(k.as_str()), Ok(k));
        let a = ActivityId::reply_for(&d);
        assert_eq!(a, ActivityId::reply_for(&d));
        assert!(a.as_str().starts_with("act_re_"));
        assert_eq!(ActivityId::parse(a.as_str()), Ok(a));
        assert_ne!(
            ActivityId::reply_for(&DeliveryId::generate()),
            ActivityId::reply_for(&d)
        );
    }

    #[test]
    fn ids_round_trip_and_refuse_other_kinds() {
        let t = TenantId::generate();
        assert_eq!(TenantId::parse(t.as_str()).unwrap(), t);
        assert!(ChannelId::parse(t.as_str()).is_err());
        assert!(ChannelId::parse("ch_").is_err());
        assert!(ChannelId::parse("ch_a b").is_err());
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<TenantId>(&json).unwrap(), t);
        assert!(serde_json::from_str::<TenantId>("\"act_x\"").is_err());
    }

    #[test]
    fn delivery_id_is_a_function_of_the_pair() {
        let a = ActivityId::generate();
        let c1 = ChannelId::generate();
        let c2 = ChannelId::generate();
        assert_eq!(DeliveryId::for_pair(&a, &c1), DeliveryId::for_pair(&a, &c1));
        assert_ne!(DeliveryId::for_pair(&a, &c1), DeliveryId::for_pair(&a, &c2));
        let d = DeliveryId::for_pair(&a, &c1);
        assert_eq!(DeliveryId::parse(d.as_str()).unwrap(), d);
    }
}
