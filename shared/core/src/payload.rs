//! What an activity's payload must be for the store to keep it: DynamoDB nests maps and lists
//! at most 32 levels deep, and keeps numbers whose magnitude is 0 or from 1e-130 to below
//! 1e126. A payload outside those bounds is refused when it is submitted (422), never found
//! out when it is written (where it would read as a storage failure, and a producer would
//! retry it for ever).

use crate::Invalid;

use serde_json::Value;

/// The deepest nesting of objects and arrays a payload may have (a scalar is 0, `{"a": 1}` is 1).
pub const MAX_DEPTH: usize = 32;

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
