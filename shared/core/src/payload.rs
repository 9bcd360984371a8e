//! What an activity's payload must be for the store to keep it: DynamoDB nests maps and lists
//! at most 32 levels deep, and keeps numbers whose magnitude is 0 or from 1e-130 to below
//! 1e126. A payload outside those bounds is refused when it is submitted (422), never found
//! out when it is written (where it would read as a storage failure, and a producer would
//! retry it for ever).

use crate::Invalid;

use serde_json::Value;

/// The deepest nesting of objects and arrays a payload may have (a scalar is 0, `{"a": 1}` is 1).
pub const MAX_DEPTH: usize = 32;

/// The largest payload (serialized) a deployment with a payload bucket takes: kept in the
/// bucket past [`KEPT_IN_ROW_BYTES`], its row and queue messages holding a reference.
pub const MAX_BYTES: usize = 10 * 1024 * 1024;
/// The largest payload a deployment without a payload bucket takes, all of it in the row.
pub const ROW_MAX_BYTES: usize = 256 * 1024;
/// Past this size (serialized) a payload is kept in the payload bucket, not in its row: an
/// S3 PUT costs what 8 KiB of DynamoDB writes cost, and a row's size is paid again on
/// every read of it.
pub const KEPT_IN_ROW_BYTES: usize = 16 * 1024;
/// How long an upload URL (`POST /api/v1/payloads`) takes a body, and how long an upload
/// waits in the bucket for the activity that names it (seconds).
pub const UPLOAD_URL_TTL_S: u64 = 15 * 60;
/// How long a download URL of a kept payload (an activity read through the API) works.
pub const DOWNLOAD_URL_TTL_S: u64 = 15 * 60;
/// Resolved payload bytes one process holds at once for attempts: an attempt whose payload
/// would pass it waits for others to finish (a 10 MiB payload parsed is several times that
/// in memory, and a function has 256 MB).
pub const RESOLVED_BUDGET_BYTES: usize = 24 * 1024 * 1024;

/// The largest payload (serialized) a deployment takes: [`MAX_BYTES`] with a payload bucket,
/// [`ROW_MAX_BYTES`] without one.
pub fn limit(bucket: bool) -> usize {
    if bucket { MAX_BYTES } else { ROW_MAX_BYTES }
}

/// Whether a payload of `size` bytes (serialized) is kept in the payload bucket rather than
/// its row: past [`KEPT_IN_ROW_BYTES`], where there is a bucket.
pub fn kept_apart(size: usize, bucket: bool) -> bool {
    bucket && size > KEPT_IN_ROW_BYTES
}

/// The share of [`RESOLVED_BUDGET_BYTES`] a payload of `bytes` holds, in KiB (at least one,
/// at most the whole budget, so that the largest payload waits rather than never runs).
pub fn budget_kib(bytes: usize) -> u32 {
    let whole = RESOLVED_BUDGET_BYTES / 1024;
    u32::try_from(bytes.div_ceil(1024).clamp(1, whole)).unwrap_or(u32::MAX)
}

/// The largest kept payload a read of one activity through the API carries itself (under
/// the 6 MB a Lambda function's answer may be); a larger one is read through its URL.
pub const READ_INLINE_BYTES: u64 = 1024 * 1024;
/// The largest kept payload a delivery's page shows (a larger one is described by its size).
pub const PREVIEW_BYTES: u64 = 256 * 1024;

/// A new upload id.
pub fn new_upload_id() -> String {
    format!("up_{}", uuid::Uuid::new_v4().simple())
}

/// Whether `id` is an upload id this platform hands out (`up_` and 32 hex digits): checked
/// before it becomes part of an object key.
pub fn is_upload_id(id: &str) -> bool {
    id.strip_prefix("up_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A new key in the payload bucket for a payload of `tenant` (`payloads/<tenant>/<random>`:
/// a producer's activity id is never part of it, so a duplicate submission never overwrites
/// what a row names).
pub fn object_key(tenant: &str) -> String {
    format!("payloads/{tenant}/{}", uuid::Uuid::new_v4().simple())
}

/// The key of upload `upload_id` of `tenant`.
pub fn upload_key(tenant: &str, upload_id: &str) -> String {
    format!("uploads/{tenant}/{upload_id}")
}

/// What a payload of `size` bytes is told when it is over `max`.
pub fn too_large(size: usize, max: usize) -> String {
    format!("payload is {size} bytes; at most {max}")
}

/// Why `payload` cannot be stored, or `Ok`.
pub fn check(payload: &Value) -> Result<(), Invalid> {
    // Depth first, iteratively: a hostile payload cannot exhaust the stack.
    let mut stack: Vec<(&Value, usize)> = vec![(payload, 0)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Object(m) => {
                if depth + 1 > MAX_DEPTH {
                    return Err(too_deep().into());
                }
                stack.extend(m.values().map(|c| (c, depth + 1)));
            }
            Value::Array(a) => {
                if depth + 1 > MAX_DEPTH {
                    return Err(too_deep().into());
                }
                stack.extend(a.iter().map(|c| (c, depth + 1)));
            }
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                    let m = f.abs();
                    if m != 0.0 && !(1e-130..1e126).contains(&m) {
                        return Err(Invalid(format!(
                            "payload number {n} is outside the storable range (0, or a magnitude from 1e-130 to below 1e126)"
                        )));
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    Ok(())
}

fn too_deep() -> String {
    format!("payload nests objects and arrays more than {MAX_DEPTH} levels deep")
}

/// What the body of a message sent to a channel holds (a webhook's or an AWS channel's
/// `config.body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyShape {
    /// `"envelope"` (the default): activity id, seq, conversation and payload.
    #[default]
    Envelope,
    /// `"payload"`: the activity's payload alone.
    Payload,
    /// `"standard"`: the Standard Webhooks shape, `{type, timestamp, data}`.
    Standard,
}

/// The `type` of a Standard Webhooks body for an activity sent without an event type.
pub const STANDARD_DEFAULT_TYPE: &str = "activity.created";

/// The parts of an activity a body is made of.
#[derive(Debug, Clone, Copy)]
pub struct BodyParts<'a> {
    pub activity_id: &'a str,
    pub seq: u64,
    pub conversation_id: &'a str,
    pub event_type: Option<&'a str>,
    /// When the activity was ingested (RFC 3339).
    pub created_at: &'a str,
    pub payload: &'a Value,
}

impl BodyShape {
    /// `config.body`: absent is the envelope.
    pub fn parse(v: Option<&Value>) -> Result<Self, Invalid> {
        match v {
            None | Some(Value::Null) => Ok(Self::Envelope),
            Some(Value::String(b)) if b == "envelope" => Ok(Self::Envelope),
            Some(Value::String(b)) if b == "payload" => Ok(Self::Payload),
            Some(Value::String(b)) if b == "standard" => Ok(Self::Standard),
            Some(_) => Err(Invalid::new(
                "body must be \"envelope\", \"payload\" or \"standard\"",
            )),
        }
    }

    /// The body, as JSON.
    pub fn value(self, p: BodyParts<'_>) -> Value {
        match self {
            Self::Payload => p.payload.clone(),
            Self::Envelope => serde_json::json!({
                "activity_id": p.activity_id,
                "seq": p.seq,
                "conversation_id": p.conversation_id,
                "payload": p.payload,
            }),
            Self::Standard => serde_json::json!({
                "type": p.event_type.unwrap_or(STANDARD_DEFAULT_TYPE),
                "timestamp": p.created_at,
                "data": p.payload,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        let mut v = json!("leaf");
        for i in 0..depth {
            v = if i % 2 == 0 {
                json!({ "k": v })
            } else {
                json!([v])
            };
        }
        v
    }

    #[test]
    fn a_bucket_raises_the_limit_and_keeps_what_a_row_should_not() {
        assert_eq!(limit(false), ROW_MAX_BYTES);
        assert_eq!(limit(true), MAX_BYTES);
        assert!(!kept_apart(KEPT_IN_ROW_BYTES, true));
        assert!(kept_apart(KEPT_IN_ROW_BYTES + 1, true));
        assert!(
            !kept_apart(ROW_MAX_BYTES, false),
            "no bucket: every payload in its row"
        );
        assert_eq!(budget_kib(0), 1);
        assert_eq!(budget_kib(1025), 2);
        assert_eq!(budget_kib(MAX_BYTES), 10 * 1024);
        assert_eq!(
            budget_kib(usize::MAX),
            24 * 1024,
            "never more than the whole budget"
        );
    }

    #[test]
    fn upload_ids_are_checked_before_they_name_an_object() {
        assert!(is_upload_id("up_0123456789abcdef0123456789abcdef"));
        assert!(is_upload_id(&new_upload_id()));
        assert!(!is_upload_id("up_0123456789abcdef0123456789abcde"));
        assert!(!is_upload_id("up_../../0123456789abcdef0123456789a"));
        assert!(!is_upload_id("0123456789abcdef0123456789abcdef"));
    }

    #[test]
    fn nesting_up_to_the_limit_is_kept_and_one_more_is_refused() {
        assert_eq!(check(&json!("scalar")), Ok(()));
        assert_eq!(check(&nested(MAX_DEPTH)), Ok(()));
        assert_eq!(check(&nested(MAX_DEPTH + 1)), Err(too_deep().into()));
        // Deep enough to overflow a recursive check's stack.
        let deep: Value = serde_json::from_str(&format!("{}{}", "[".repeat(100), "]".repeat(100)))
            .unwrap_or(Value::Null);
        assert!(check(&deep).is_err());
    }

    #[test]
    fn numbers_are_kept_within_dynamodbs_range() {
        for ok in [
            json!(0),
            json!(0.0),
            json!(-1.5),
            json!(1e125),
            json!(-1e-130),
            json!(u64::MAX),
            json!(i64::MIN),
        ] {
            assert_eq!(check(&json!({"n": ok})), Ok(()), "{ok}");
        }
        for bad in [json!(1e200), json!(-1e126), json!(1e-131), json!(-5e-200)] {
            assert!(check(&json!({"n": [bad]})).is_err(), "{bad}");
        }
    }
}
