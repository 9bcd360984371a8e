//! Event types and their payload schemas: a tenant's catalog names the kinds of activity it
//! sends, and a type with a JSON Schema (draft 2020-12) has every activity of that type
//! checked at ingest (`docs/event-types.md`).
//!
//! Bounded on both sides: a schema is at most [`MAX_SCHEMA_BYTES`] of JSON, references only
//! itself (nothing is fetched: a remote or file `$ref` is refused when the type is written),
//! and its `pattern`s run on a regex engine without backtracking, so a check takes time linear
//! in the payload (at most [`crate::payload::MAX_BYTES`], 10 MiB, through an upload) times the schema's
//! keywords (at most 32 KiB of them).

use crate::Invalid;
use serde_json::Value;
use std::sync::Arc;

/// Largest schema, as JSON.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// Longest description of an event type, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// Most problems one refusal names.
pub const MAX_ERRORS: usize = 5;
/// The only draft taken.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Most bytes one `pattern`'s compiled regex may take.
const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

/// A payload schema, compiled.
#[derive(Clone)]
pub struct PayloadSchema {
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for PayloadSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadSchema")
    }
}

impl PayloadSchema {
    /// `raw` checked and compiled; the error says why it cannot be used.
    pub fn compile(raw: &Value) -> Result<Self, Invalid> {
        let size = serde_json::to_vec(raw)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_SCHEMA_BYTES {
            return Err(Invalid(format!(
                "`schema` is {size} bytes as JSON; at most {MAX_SCHEMA_BYTES}"
            )));
        }
        match raw {
            Value::Object(m) => {
                if let Some(draft) = m.get("$schema")
                    && draft.as_str() != Some(DRAFT_2020_12)
                {
                    return Err(Invalid(format!(
                        "`schema.$schema` must be `{DRAFT_2020_12}` (draft 2020-12) or absent"
                    )));
                }
            }
            // `true` and `false` are schemas too, but a catalog's type is described by an
            // object (and `false` would refuse every payload).
            _ => return Err(Invalid::new("`schema` must be a JSON Schema object")),
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_pattern_options(
                jsonschema::PatternOptions::regex().size_limit(PATTERN_SIZE_LIMIT),
            )
            .build(raw)
            .map_err(|e| Invalid(format!("`schema` is not a usable JSON Schema: {e}")))?;
        Ok(Self {
            validator: Arc::new(validator),
        })
    }

    /// `Ok` when `payload` fits; else up to [`MAX_ERRORS`] problems, each naming where in the
    /// payload (a JSON pointer) and what is wrong, without quoting the payload's values.
    pub fn check(&self, payload: &Value) -> Result<(), Vec<String>> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(payload)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at `{at}`: {}", e.masked())
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// An event type's description: 1 to [`MAX_DESCRIPTION_CHARS`] characters, no control
/// characters but line breaks.
pub fn check_description(d: &str) -> Result<(), Invalid> {
    let n = d.chars().count();
    if n == 0 || n > MAX_DESCRIPTION_CHARS || d.chars().any(|c| c.is_control() && c != '\n') {
        return Err(Invalid(format!(
            "`description` must be 1 to {MAX_DESCRIPTION_CHARS} characters, no control characters but line breaks"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn order() -> PayloadSchema {
        PayloadSchema::compile(&json!({
            "type": "object",
            "required": ["order_id", "total"],
            "properties": {
                "order_id": {"type": "string", "pattern": "^ord_[a-z0-9]+$"},
                "total": {"type": "number", "minimum": 0},
                "customer": {"$ref": "#/$defs/customer"}
            },
            "$defs": {"customer": {"type": "object", "required": ["tier"],
                                   "properties": {"tier": {"enum": ["gold", "silver"]}}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_payload_that_fits_passes_and_one_that_does_not_is_told_where() {
        let s = order();
        assert!(
            s.check(&json!({"order_id": "ord_1", "total": 12.5}))
                .is_ok()
        );
        let missing = s.check(&json!({"total": 1})).unwrap_err();
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].starts_with("at `/`:") && missing[0].contains("order_id"),
            "{missing:?}"
        );
        let wrong = s
            .check(
                &json!({"order_id": "ord_1", "total": "secret-ish", "customer": {"tier": "tin"}}),
            )
            .unwrap_err();
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(
            wrong.iter().any(|p| p.starts_with("at `/total`:")),
            "{wrong:?}"
        );
        assert!(
            wrong.iter().any(|p| p.starts_with("at `/customer/tier`:")),
            "{wrong:?}"
        );
        assert!(
            wrong.iter().all(|p| !p.contains("secret-ish")),
            "values are not quoted: {wrong:?}"
        );
    }

    #[test]
    fn at_most_a_few_problems_are_named() {
        let s =
            PayloadSchema::compile(&json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let many = s.check(&json!([1, 2, 3, 4, 5, 6, 7, 8])).unwrap_err();
        assert_eq!(many.len(), MAX_ERRORS);
    }

    #[test]
    fn schemas_that_cannot_be_used_are_refused() {
        for (bad, word) in [
            (json!("string"), "object"),
            (json!({"type": "nonsense"}), "usable"),
            (
                json!({"$ref": "https://schemas.example/order.json"}),
                "usable",
            ),
            (json!({"$ref": "file:///etc/passwd"}), "usable"),
            (
                json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
                "2020-12",
            ),
            (json!({"type": "string", "pattern": "(a"}), "usable"),
            (
                json!({"description": "x".repeat(MAX_SCHEMA_BYTES)}),
                "bytes",
            ),
        ] {
            let e = PayloadSchema::compile(&bad).unwrap_err();
            assert!(e.message().contains(word), "{bad}: {e}");
        }
        assert!(PayloadSchema::compile(&json!(true)).is_err());
        assert!(PayloadSchema::compile(&json!({})).is_ok());
        assert!(PayloadSchema::compile(&json!({"$schema": DRAFT_2020_12})).is_ok());
    }

    #[test]
    fn a_pattern_runs_without_backtracking() {
        // A pattern that backtracks exponentially on a backtracking engine.
        let s = PayloadSchema::compile(&json!({"type": "string", "pattern": "^(a+)+$"})).unwrap();
        let hostile = format!("{}!", "a".repeat(50_000));
        assert!(s.check(&json!(hostile)).is_err());
        // Back-references and look-arounds need backtracking: refused at creation.
        assert!(PayloadSchema::compile(&json!({"pattern": "(a)\\1"})).is_err());
    }

    #[test]
    fn descriptions_are_bounded() {
        assert!(check_description("Sent when an order is paid.\nCarries the order.").is_ok());
        assert!(check_description("").is_err());
        assert!(check_description("tab\there").is_err());
        assert!(check_description(&"x".repeat(MAX_DESCRIPTION_CHARS + 1)).is_err());
    }
}
