//! One layer of the retry policy, as a deployment, an adapter or a channel sets it: read and
//! checked once, so the merge in [`super::RetryPolicy::with_layer`] has nothing left to check.

use super::{
    ADAPTER_TIMEOUT_MAX_MS, Backoff, KEYS, MAX_ATTEMPTS_LIMIT, MAX_DELAY_MS, MAX_SCHEDULE_LEN,
};
use crate::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// One problem with a policy map, named by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

fn positive_int(v: &Value) -> Option<u64> {
    v.as_u64().filter(|n| *n > 0)
}

/// Every problem with one policy layer, each named by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyErrors(pub Vec<PolicyError>);

impl fmt::Display for PolicyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyErrors {}

/// One layer of the retry policy: the settings a deployment, an adapter or a channel sets,
/// `None` where it leaves the layer below in force. Stored and shown as a JSON object with
/// the keys in [`KEYS`]; reading one checks every value, so a layer in hand is valid.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", into = "Map<String, Value>")]
pub struct PolicyLayer {
    pub max_attempts: Option<u32>,
    pub backoff: Option<Backoff>,
    pub base_ms: Option<u64>,
    pub max_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub schedule: Option<Vec<u64>>,
    pub jitter: Option<f64>,
    pub retry_after_max_ms: Option<u64>,
}

impl PolicyLayer {
    /// Whether it sets nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Reads a layer from its JSON object, naming every problem (not just the first).
    pub fn parse(map: &Map<String, Value>) -> Result<Self, PolicyErrors> {
        let mut layer = Self::default();
        let mut errors = Vec::new();
        for (k, v) in map {
            if let Err(e) = layer.set(k, v) {
                errors.push(PolicyError {
                    key: k.clone(),
                    message: e.0,
                });
            }
        }
        if errors.is_empty() {
            Ok(layer)
        } else {
            Err(PolicyErrors(errors))
        }
    }

    /// The deployment's layer (`RETRY_POLICY`): also takes the legacy `base_backoff_seconds`,
    /// as `base_ms` unless `base_ms` is given too.
    pub fn from_config(config: &Map<String, Value>) -> Result<Self, PolicyErrors> {
        let mut map = config.clone();
        let legacy = map.remove("base_backoff_seconds");
        let mut layer = Self::parse(&map)?;
        if let Some(secs) = legacy {
            let secs = positive_int(&secs).ok_or_else(|| {
                PolicyErrors(vec![PolicyError {
                    key: "base_backoff_seconds".into(),
                    message: "must be a positive integer".into(),
                }])
            })?;
            layer.base_ms.get_or_insert(secs.saturating_mul(1000));
        }
        Ok(layer)
    }

    fn set(&mut self, key: &str, v: &Value) -> Result<(), Invalid> {
        let delay = || {
            positive_int(v)
                .filter(|ms| *ms <= MAX_DELAY_MS)
                .ok_or_else(|| {
                    Invalid(format!(
                        "must be a positive integer of at most {MAX_DELAY_MS} (ms, a week)"
                    ))
                })
        };
        match key {
            "backoff" => {
                self.backoff = Some(
                    v.as_str()
                        .and_then(Backoff::parse)
                        .ok_or_else(|| Invalid::new("must be one of exponential, linear, fixed"))?,
                )
            }
            "max_attempts" => {
                self.max_attempts = Some(
                    positive_int(v)
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| *n <= MAX_ATTEMPTS_LIMIT)
                        .ok_or_else(|| {
                            Invalid(format!("must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}"))
                        })?,
                )
            }
            "base_ms" => self.base_ms = Some(delay()?),
            "max_ms" => self.max_ms = Some(delay()?),
            "timeout_ms" => self.timeout_ms = Some(
                positive_int(v)
                    .filter(|ms| *ms <= ADAPTER_TIMEOUT_MAX_MS)
                    .ok_or_else(|| {
                        Invalid(format!(
                            "must be a positive integer of at most {ADAPTER_TIMEOUT_MAX_MS} (ms)"
                        ))
                    })?,
            ),
            "retry_after_max_ms" => self.retry_after_max_ms = Some(delay()?),
            "schedule" => {
                let bad = || {
                    Invalid(format!(
                        "must be a list of 1 to {MAX_SCHEDULE_LEN} positive integers (ms) of at most {MAX_DELAY_MS}"
                    ))
                };
                let list = v.as_array().ok_or_else(bad)?;
                if list.is_empty() || list.len() > MAX_SCHEDULE_LEN {
                    return Err(bad());
                }
                self.schedule = Some(
                    list.iter()
                        .map(|d| {
                            positive_int(d)
                                .filter(|ms| *ms <= MAX_DELAY_MS)
                                .ok_or_else(bad)
                        })
                        .collect::<Result<_, _>>()?,
                );
            }
            "jitter" => {
                self.jitter = Some(v.as_f64().filter(|j| (0.0..1.0).contains(j)).ok_or_else(
                    || Invalid::new("must be a number from 0 up to (not including) 1"),
                )?)
            }
            _ => {
                return Err(Invalid(format!(
                    "unknown key (allowed: {})",
                    KEYS.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// As it is stored and shown: the keys it sets.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("max_attempts", self.max_attempts.map(Value::from));
        put("backoff", self.backoff.map(|b| Value::from(b.name())));
        put("base_ms", self.base_ms.map(Value::from));
        put("max_ms", self.max_ms.map(Value::from));
        put("timeout_ms", self.timeout_ms.map(Value::from));
        put("schedule", self.schedule.clone().map(Value::from));
        put("jitter", self.jitter.map(Value::from));
        put(
            "retry_after_max_ms",
            self.retry_after_max_ms.map(Value::from),
        );
        m
    }
}

impl TryFrom<Map<String, Value>> for PolicyLayer {
    type Error = PolicyErrors;

    fn try_from(map: Map<String, Value>) -> Result<Self, PolicyErrors> {
        Self::parse(&map)
    }
}

impl From<PolicyLayer> for Map<String, Value> {
    fn from(layer: PolicyLayer) -> Self {
        layer.to_map()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn validate_reports_every_problem() {
        assert!(
            PolicyLayer::parse(&map(
                json!({"max_attempts": 3, "backoff": "linear", "base_ms": 30000})
            ))
            .is_ok()
        );
        let errs = PolicyLayer::parse(&map(json!({
            "max_attempts": 0, "backoff": "random", "base_ms": -5, "max_ms": 1.5, "colour": "red", "timeout_ms": "10"
        })))
        .unwrap_err();
        let mut keys: Vec<_> = errs.0.iter().map(|e| e.key.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            vec![
                "backoff",
                "base_ms",
                "colour",
                "max_attempts",
                "max_ms",
                "timeout_ms"
            ]
        );
    }

    #[test]
    fn a_policy_s_numbers_are_bounded() {
        for (bad, key) in [
            (json!({"max_attempts": 101}), "max_attempts"),
            (json!({"timeout_ms": 30_001}), "timeout_ms"),
            (json!({"base_ms": 7 * 86_400_000u64 + 1}), "base_ms"),
            (json!({"max_ms": 10u64.pow(12)}), "max_ms"),
            (
                json!({"retry_after_max_ms": 10u64.pow(12)}),
                "retry_after_max_ms",
            ),
            (json!({"schedule": [1000, 10u64.pow(12)]}), "schedule"),
        ] {
            let e = PolicyLayer::parse(&map(bad.clone())).unwrap_err();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
        let edge = map(
            json!({"max_attempts": 100, "timeout_ms": 30_000, "base_ms": 604_800_000,
                              "max_ms": 604_800_000, "schedule": [604_800_000]}),
        );
        assert!(PolicyLayer::parse(&edge).is_ok());
    }

    #[test]
    fn a_bad_layer_is_refused_not_skipped() {
        // The deployment's layer, too: a bad value stops the start instead of being dropped.
        let bad = map(json!({"max_attempts": 8, "backoff": "nonsense", "base_backoff_seconds": 0}));
        let errs = PolicyLayer::from_config(&bad).unwrap_err();
        assert_eq!(errs.0[0].key, "backoff", "{errs}");
        let legacy = map(json!({"base_backoff_seconds": "5"}));
        let errs = PolicyLayer::from_config(&legacy).unwrap_err();
        assert_eq!(
            errs.to_string(),
            "base_backoff_seconds: must be a positive integer"
        );
    }

    #[test]
    fn a_layer_reads_back_as_it_was_written() {
        let written = json!({
            "max_attempts": 7, "backoff": "linear", "base_ms": 1000, "max_ms": 60000,
            "timeout_ms": 5000, "schedule": [5000, 30000], "jitter": 0.1,
            "retry_after_max_ms": 90000,
        });
        let l: PolicyLayer = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&l).unwrap(), written);
        assert!(serde_json::from_value::<PolicyLayer>(json!({"colour": "red"})).is_err());
        assert!(PolicyLayer::default().is_empty());
        assert_eq!(
            serde_json::to_value(PolicyLayer::default()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn extension_keys_are_validated() {
        for bad in [
            json!({"schedule": []}),
            json!({"schedule": [0]}),
            json!({"schedule": "5s"}),
            json!({"jitter": 1.0}),
            json!({"jitter": -0.1}),
            json!({"jitter": "x"}),
        ] {
            assert!(PolicyLayer::parse(&map(bad.clone())).is_err(), "{bad}");
        }
        assert!(PolicyLayer::parse(&map(json!({"schedule": [1000, 2000], "jitter": 0}))).is_ok());
    }
}
