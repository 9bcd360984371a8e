//! Channel middleware: an ordered list of steps a channel applies to each delivery's copy of
//! the activity's payload before its adapter sends it. The stored activity never changes: the
//! payload preview, and every replay, start from the original, and a replay runs the steps
//! again.
//!
//! Two kinds of step:
//! - `{"type": "transform", "script": "..."}`: a Rhai script that changes `payload` in place
//!   (the copy the adapter sends). `activity` holds what the step may read about the delivery
//!   (`id`, `conversation_id`, `seq`, `event_type`, `created_at`, `tenant_id`, `channel_id`,
//!   `channel_type`, `attempt`). `halt("reason")` stops the delivery.
//! - `{"type": "halt", "if": "<expression>", "reason": "..."}`: stops the delivery when the
//!   expression is `true`.
//!
//! A halt, or a step that fails (a script error, a bound exceeded, a payload that is no longer
//! storable), dead-letters the delivery with `last_error` `"halted: ..."` and no request made.
//!
//! Every run is bounded: at most [`MAX_OPERATIONS`] operations and [`MAX_STEP_MILLIS`] of
//! time per step, [`MAX_CALL_LEVELS`] nested calls, strings of [`MAX_STRING_BYTES`], arrays and
//! maps of [`MAX_COLLECTION`] items, and a result of [`MAX_OUTPUT_BYTES`]. The scripts have no
//! way to reach files, the network, the environment or the clock of another delivery.

use crate::Invalid;

use rhai::{Dynamic, Engine, EvalAltResult, Scope};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Most steps a channel may have.
pub const MAX_STEPS: usize = 10;
/// Longest script or condition, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 4096;
/// Longest halt reason, in characters.
pub const MAX_REASON_CHARS: usize = 200;
/// Most operations one step may run.
pub const MAX_OPERATIONS: u64 = 100_000;
/// Most CPU time one step may take (a backstop: the operation count is the main bound). The
/// thread's own CPU time, not the wall clock's, so that a busy machine does not fail a step
/// that would pass on an idle one.
pub const MAX_STEP_MILLIS: u64 = 100;
/// Most wall-clock time one delivery's middleware may take, all its steps together: the CPU
/// bound is per step and counts only the thread's own time, so on a small function (a sixth
/// of a vCPU at 256 MB) ten steps could otherwise outlast the attempt's lease and hold up
/// the other records of its batch.
pub const MAX_WALL_MILLIS: u64 = 3_000;
/// Operations between two readings of the thread's CPU time (a system call each).
const CLOCK_EVERY_OPS: u64 = 64;
/// Deepest nesting of function calls.
pub const MAX_CALL_LEVELS: usize = 16;
/// Most text, in bytes, one string or one container (an array or a map, with what it nests)
/// may hold while a step runs: a channel with middleware handles payloads up to this much text.
pub const MAX_STRING_BYTES: usize = 64 * 1024;
/// Most items of an array (with what it nests) a step may build.
pub const MAX_COLLECTION: usize = 10_000;
/// Most entries of a map (with what it nests): the engine does not count the size of keys,
/// so their number is kept low.
pub const MAX_MAP_ENTRIES: usize = 1_000;
/// Longest error text a failed step leaves in `last_error`.
pub const MAX_ERROR_CHARS: usize = 500;
/// Largest payload a step may leave, as JSON.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// Most bytes one step may hold at once (every string, key, copy and container it makes, less
/// what it freed): the bound on a script's memory, since the engine's own limits do not count
/// map keys and a copy of a large value is one operation. Checked between
/// operations, so a step's peak is at most about twice this (its last operation may copy
/// what it holds).
pub const MAX_STEP_ALLOC_BYTES: i64 = 16 * 1024 * 1024;

/// This thread's CPU time so far (the process's wall clock since it began, where the system
/// cannot tell).
fn cpu_now() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    cpu_time::ThreadTime::try_now().map_or_else(
        |_| START.get_or_init(Instant::now).elapsed(),
        |t| t.as_duration(),
    )
}

/// Most steps running at once in one process: each may hold up to [`MAX_STEP_ALLOC_BYTES`]
/// (twice that at its peak), so a batch of hostile scripts stays far inside a 256 MB function.
pub const MAX_STEPS_AT_ONCE: usize = 4;
/// Most of them one tenant holds at once: a tenant's hostile batch leaves the others theirs.
pub const MAX_STEPS_AT_ONCE_PER_TENANT: usize = MAX_STEPS_AT_ONCE / 2;

/// Bytes this thread holds, by the process's counting allocator (`converger-alloc`).
fn allocated() -> i64 {
    converger_alloc::live_bytes()
}

/// One step of a channel's middleware.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Changes the delivery's copy of the payload.
    Transform { script: String },
    /// Stops the delivery when `if` is true.
    Halt {
        #[serde(rename = "if")]
        condition: String,
        reason: String,
    },
}

impl Step {
    fn kind(&self) -> &'static str {
        match self {
            Self::Transform { .. } => "transform",
            Self::Halt { .. } => "halt",
        }
    }
}

/// What a step may read about the delivery it runs for.
#[derive(Debug, Clone, Serialize)]
pub struct Meta<'a> {
    pub id: &'a str,
    pub conversation_id: &'a str,
    pub seq: u64,
    pub event_type: Option<&'a str>,
    pub created_at: &'a str,
    pub tenant_id: &'a str,
    pub channel_id: &'a str,
    pub channel_type: &'a str,
    pub attempt: u32,
}

/// Why a delivery was stopped: its `last_error` is the `Display` (`halted: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Halted(pub String);

impl std::error::Error for Halted {}

impl std::fmt::Display for Halted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "halted: {}", self.0)
    }
}

/// Reads and checks a channel's `middleware` as written by a tenant: the steps, or the first
/// problem, naming its step (`step 2 (transform): ...`).
pub fn parse(raw: &Value) -> Result<Vec<Step>, Invalid> {
    let items = match raw {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        _ => return Err(Invalid::new("middleware must be an array of steps")),
    };
    if items.len() > MAX_STEPS {
        return Err(Invalid(format!("middleware has at most {MAX_STEPS} steps")));
    }
    let mut steps = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let step: Step = serde_json::from_value(item.clone()).map_err(|e| {
            format!("step {n}: {e} (a step is {{\"type\": \"transform\", \"script\"}} or {{\"type\": \"halt\", \"if\", \"reason\"}})")
        })?;
        check(&step).map_err(|e| Invalid(format!("step {n} ({}): {e}", step.kind())))?;
        steps.push(step);
    }
    Ok(steps)
}

/// Whether a step can run: its script or condition compiles against the names it can see.
fn check(step: &Step) -> Result<(), Invalid> {
    let e = engine();
    let scope = scope(&Value::Null, None);
    match step {
        Step::Transform { script } => {
            bounded(script)?;
            e.compile_with_scope(&scope, script)
                .map(drop)
                .map_err(|e| Invalid(e.to_string()))
        }
        Step::Halt { condition, reason } => {
            bounded(condition)?;
            let reason = reason.trim();
            if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
                return Err(Invalid(format!(
                    "`reason` must be 1 to {MAX_REASON_CHARS} characters"
                )));
            }
            if reason.chars().any(char::is_control) {
                return Err(Invalid::new("`reason` must not contain control characters"));
            }
            e.compile_expression_with_scope(&scope, condition)
                .map(drop)
                .map_err(|e| Invalid(e.to_string()))
        }
    }
}

fn bounded(text: &str) -> Result<(), Invalid> {
    if text.trim().is_empty() {
        return Err(Invalid::new("the script is empty"));
    }
    if text.len() > MAX_SCRIPT_BYTES {
        return Err(Invalid(format!(
            "the script is longer than {MAX_SCRIPT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Runs `steps` over `payload` (the delivery's copy): the payload the adapter sends, or why
/// the delivery stops. No steps: the payload as it is.
pub fn apply(steps: &[Step], payload: Value, meta: &Meta<'_>) -> Result<Value, Halted> {
    apply_within(steps, payload, meta, Duration::from_millis(MAX_WALL_MILLIS))
}

/// [`apply`] with every step ending by `wall` from now (of the wall clock).
pub fn apply_within(
    steps: &[Step],
    payload: Value,
    meta: &Meta<'_>,
    wall: Duration,
) -> Result<Value, Halted> {
    let until = Instant::now() + wall;
    WALL.with(|w| w.set(Some(until)));
    let out = apply_steps(steps, payload, meta, until, wall);
    WALL.with(|w| w.set(None));
    out
}

fn apply_steps(
    steps: &[Step],
    payload: Value,
    meta: &Meta<'_>,
    until: Instant,
    wall: Duration,
) -> Result<Value, Halted> {
    let mut current = payload;
    for (i, step) in steps.iter().enumerate() {
        if Instant::now() > until {
            return Err(Halted(format!(
                "the middleware ran longer than {} ms before step {}",
                wall.as_millis(),
                i + 1
            )));
        }
        let failed = |e: String| {
            Halted(format!(
                "step {} ({}) failed: {}",
                i + 1,
                step.kind(),
                clip(&e)
            ))
        };
        current = match run_step(step, current, meta) {
            Ok(v) => v,
            Err(Stop::Halt(reason)) => return Err(Halted(clip(&reason))),
            Err(Stop::Failed(e)) => return Err(failed(e)),
        };
        if let Step::Halt { .. } = step {
            continue; // it passed the payload on as it was
        }
        let size = json_size(&current);
        if size > MAX_OUTPUT_BYTES {
            return Err(failed(format!(
                "the payload it left is {size} bytes, over {MAX_OUTPUT_BYTES}"
            )));
        }
        crate::payload::check(&current).map_err(|e| failed(e.0))?;
    }
    Ok(current)
}

/// The length of `v` as JSON, counted as it is written: no copy of the payload is made.
fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, v).map_or(usize::MAX, |()| c.0)
}

/// `text` cut to [`MAX_ERROR_CHARS`]: a script's error text can be as long as its strings, and
/// it is kept in the delivery row, its attempt log and an event.
fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(MAX_ERROR_CHARS).collect();
    s.push_str("...");
    s
}

/// Whether `d` nests arrays and maps at most `left` levels deep. Recursive, but never deeper
/// than the bound: a script can nest far deeper, and converting such a value (recursively)
/// would overflow the stack.
fn within_depth(d: &Dynamic, left: usize) -> bool {
    if let Ok(a) = d.as_array_ref() {
        return left > 0 && a.iter().all(|x| within_depth(x, left - 1));
    }
    if let Ok(m) = d.as_map_ref() {
        return left > 0 && m.values().all(|x| within_depth(x, left - 1));
    }
    true
}

enum Stop {
    Halt(String),
    Failed(String),
}

thread_local! {
    /// The thread's CPU time at which the running step must end (the engine is shared; each
    /// run is on one thread).
    static DEADLINE: Cell<Option<Duration>> = const { Cell::new(None) };
    /// The thread's allocation count past which the running step must end.
    static ALLOC_LIMIT: Cell<Option<i64>> = const { Cell::new(None) };
    /// The instant by which the delivery's whole middleware must end.
    static WALL: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The token of a step stopped by the middleware's wall-clock bound: a map `#{wall: true}`.
const WALL_KEY: &str = "wall";

/// The token of a step stopped for allocating too much: a map `#{alloc: true}`.
const ALLOC_KEY: &str = "alloc";

/// The token of a step stopped by `halt()`: a map `#{halt: reason}`, which no deadline or
/// engine error carries.
const HALT_KEY: &str = "halt";

fn run_step(step: &Step, payload: Value, meta: &Meta<'_>) -> Result<Value, Stop> {
    let e = engine();
    let mut scope = scope(&payload, Some(meta));
    DEADLINE.with(|d| d.set(Some(cpu_now() + Duration::from_millis(MAX_STEP_MILLIS))));
    ALLOC_LIMIT.with(|l| l.set(Some(allocated().saturating_add(MAX_STEP_ALLOC_BYTES))));
    let result = match step {
        Step::Transform { script } => e
            .compile_with_scope(&scope, script)
            .map_err(|e| Stop::Failed(e.to_string()))
            .and_then(|ast| {
                e.run_ast_with_scope(&mut scope, &ast)
                    .map_err(|err| stop(*err))
            })
            .and_then(|()| {
                let out = scope
                    .get_value::<Dynamic>("payload")
                    .ok_or_else(|| Stop::Failed("`payload` is gone".into()))?;
                if !within_depth(&out, crate::payload::MAX_DEPTH) {
                    return Err(Stop::Failed(format!(
                        "the payload nests more than {} levels deep",
                        crate::payload::MAX_DEPTH
                    )));
                }
                let value = rhai::serde::from_dynamic::<Value>(&out).map_err(|err| stop(*err))?;
                // The step's copy as JSON counts against its bound too: the engine's script
                // and its conversion are the step's, whatever did the allocating.
                if over_alloc_limit() {
                    return Err(over_alloc());
                }
                Ok(value)
            }),
        Step::Halt { condition, reason } => e
            .compile_expression_with_scope(&scope, condition)
            .map_err(|e| Stop::Failed(e.to_string()))
            .and_then(|ast| {
                e.eval_ast_with_scope::<bool>(&mut scope, &ast)
                    .map_err(|err| stop(*err))
            })
            .and_then(|halt| {
                if halt {
                    Err(Stop::Halt(reason.trim().to_owned()))
                } else {
                    Ok(payload)
                }
            }),
    };
    DEADLINE.with(|d| d.set(None));
    ALLOC_LIMIT.with(|l| l.set(None));
    result
}

/// Whether the running step holds more than its bound ([`MAX_STEP_ALLOC_BYTES`]).
fn over_alloc_limit() -> bool {
    ALLOC_LIMIT.with(Cell::get).is_some_and(|l| allocated() > l)
}

/// The failure of a step that held more than its bound.
fn over_alloc() -> Stop {
    Stop::Failed(format!(
        "allocated more than {} MB",
        MAX_STEP_ALLOC_BYTES >> 20
    ))
}

/// What an engine error means for the step: `halt()` or a failure.
fn stop(err: EvalAltResult) -> Stop {
    match err {
        EvalAltResult::ErrorTerminated(token, _) => match token.try_cast::<rhai::Map>() {
            Some(m) if m.contains_key(ALLOC_KEY) => over_alloc(),
            Some(m) if m.contains_key(WALL_KEY) => Stop::Failed(format!(
                "the middleware ran longer than {MAX_WALL_MILLIS} ms"
            )),
            Some(m) => Stop::Halt(m.get(HALT_KEY).map(ToString::to_string).unwrap_or_default()),
            None => Stop::Failed(format!("ran longer than {MAX_STEP_MILLIS} ms of CPU time")),
        },
        EvalAltResult::ErrorTooManyOperations(_) => {
            Stop::Failed(format!("ran more than {MAX_OPERATIONS} operations"))
        }
        other => Stop::Failed(other.to_string()),
    }
}

fn scope(payload: &Value, meta: Option<&Meta<'_>>) -> Scope<'static> {
    let mut scope = Scope::new();
    let payload = rhai::serde::to_dynamic(payload).unwrap_or(Dynamic::UNIT);
    scope.push("payload", payload);
    let meta = meta
        .and_then(|m| rhai::serde::to_dynamic(m).ok())
        .unwrap_or_else(|| Dynamic::from_map(rhai::Map::new()));
    scope.push_constant("activity", meta);
    scope
}

/// The one engine: the operators and the string, number, array and map functions; no
/// modules, no `eval`, no printing, none of the language-core functions (`sleep` would block
/// the thread past any bound, `exit`, function metadata), and the bounds.
fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        use rhai::packages::{
            ArithmeticPackage, BasicArrayPackage, BasicIteratorPackage, BasicMapPackage,
            BasicMathPackage, BasicStringPackage, BitFieldPackage, LogicPackage, MoreStringPackage,
            Package,
        };
        let mut e = Engine::new_raw();
        for m in [
            ArithmeticPackage::new().as_shared_module(),
            LogicPackage::new().as_shared_module(),
            BitFieldPackage::new().as_shared_module(),
            BasicMathPackage::new().as_shared_module(),
            BasicStringPackage::new().as_shared_module(),
            MoreStringPackage::new().as_shared_module(),
            BasicIteratorPackage::new().as_shared_module(),
            BasicArrayPackage::new().as_shared_module(),
            BasicMapPackage::new().as_shared_module(),
        ] {
            e.register_global_module(m);
        }
        e.set_strict_variables(true)
            .set_max_operations(MAX_OPERATIONS)
            .set_max_call_levels(MAX_CALL_LEVELS)
            .set_max_expr_depths(64, 32)
            .set_max_string_size(MAX_STRING_BYTES)
            .set_max_array_size(MAX_COLLECTION)
            .set_max_map_size(MAX_MAP_ENTRIES)
            .set_max_functions(32)
            .set_max_variables(64);
        e.disable_symbol("eval");
        e.on_print(|_| {});
        e.on_debug(|_, _, _| {});
        e.on_progress(|ops| {
            let over = over_alloc_limit();
            if over {
                let mut token = rhai::Map::new();
                token.insert(ALLOC_KEY.into(), Dynamic::TRUE);
                return Some(Dynamic::from_map(token));
            }
            if ops % CLOCK_EVERY_OPS != 0 {
                return None;
            }
            if WALL.with(Cell::get).is_some_and(|w| Instant::now() > w) {
                let mut token = rhai::Map::new();
                token.insert(WALL_KEY.into(), Dynamic::TRUE);
                return Some(Dynamic::from_map(token));
            }
            let late = DEADLINE.with(Cell::get).is_some_and(|d| cpu_now() > d);
            late.then_some(Dynamic::UNIT)
        });
        e.register_fn("halt", |reason: &str| -> Result<(), Box<EvalAltResult>> {
            let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
            let mut token = rhai::Map::new();
            token.insert(HALT_KEY.into(), Dynamic::from(reason));
            Err(Box::new(EvalAltResult::ErrorTerminated(
                Dynamic::from_map(token),
                rhai::Position::NONE,
            )))
        });
        e
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> Meta<'static> {
        Meta {
            id: "act_1",
            conversation_id: "conv-1",
            seq: 7,
            event_type: Some("order.created"),
            created_at: "2026-12-01T00:00:00Z",
            tenant_id: "ten_1",
            channel_id: "ch_1",
            channel_type: "webhook",
            attempt: 1,
        }
    }

    fn steps(v: Value) -> Vec<Step> {
        parse(&v).unwrap()
    }

    /// The delivery's middleware as a whole ends by its wall-clock bound, whatever each step's
    /// CPU time: a busy loop is stopped inside its step, and a step never starts past it.
    #[test]
    fn a_deliverys_middleware_ends_by_its_wall_clock_bound() {
        let busy = steps(json!([
            {"type": "transform", "script": "let n = 0; for i in 0..20000 { n += 1; } payload.n = n;"},
        ]));
        let e = apply_within(&busy, json!({}), &meta(), Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ran longer than"), "{e}");
        // Within the bound, the same step passes.
        let out = apply_within(&busy, json!({}), &meta(), Duration::from_secs(30)).unwrap();
        assert_eq!(out["n"], 20000);
    }

    #[test]
    fn a_step_that_allocates_too_much_fails_whatever_its_keys_and_copies() {
        assert!(
            converger_alloc::is_installed(),
            "the counting allocator is installed"
        );
        // Long map keys (not counted by the engine's size limits), then copies of the map
        // (one operation each).
        let s = steps(json!([{"type": "transform", "script":
            "let s = \"x\"; for i in 0..15 { s += s; } s += s.sub_string(0, 28000); \
             let m = #{}; for i in 0..150 { m[s + i] = i; } \
             let c1 = m; let c2 = m; let c3 = m; loop { let c = m; c.y = 1; }"}]));
        let e = apply(&s, json!({}), &meta()).unwrap_err().to_string();
        assert!(e.contains("allocated more than 16 MB"), "{e}");
        // An ordinary step on a large payload is far below the bound.
        let big: Vec<String> = (0..200)
            .map(|i| format!("item {i} {}", "y".repeat(100)))
            .collect();
        let s = steps(
            json!([{"type": "transform", "script": "payload.n = payload.items.len(); let c = payload; payload.copy = c.items;"}]),
        );
        let out = apply(&s, json!({"items": big}), &meta()).unwrap();
        assert_eq!(out["n"], 200);
    }

    #[test]
    fn transforms_change_the_copy_in_order() {
        let s = steps(json!([
            {"type": "transform", "script": "payload.text = `[${activity.event_type}] ${payload.text}`;"},
            {"type": "transform", "script": "payload.seq = activity.seq; payload.remove(\"secret\");"},
        ]));
        let original = json!({"text": "hi", "secret": "x"});
        let out = apply(&s, original.clone(), &meta()).unwrap();
        assert_eq!(out, json!({"text": "[order.created] hi", "seq": 7}));
        assert_eq!(original["secret"], "x", "the original is untouched");
        assert_eq!(apply(&[], original.clone(), &meta()).unwrap(), original);
    }

    #[test]
    fn halts_stop_with_their_reason() {
        let s = steps(json!([
            {"type": "halt", "if": "payload.internal == true", "reason": "internal note"},
        ]));
        assert_eq!(
            apply(&s, json!({"internal": true}), &meta())
                .unwrap_err()
                .to_string(),
            "halted: internal note"
        );
        assert!(apply(&s, json!({"internal": false}), &meta()).is_ok());
        let s = steps(json!([
            {"type": "transform", "script": "if payload.text == \"\" { halt(\"empty text\") }"}
        ]));
        assert_eq!(
            apply(&s, json!({"text": ""}), &meta()).unwrap_err(),
            Halted("empty text".into())
        );
    }

    #[test]
    fn a_failing_step_halts_naming_the_step() {
        let s = steps(json!([
            {"type": "transform", "script": "payload.n = 1;"},
            {"type": "transform", "script": "throw \"no customer\";"},
        ]));
        let e = apply(&s, json!({}), &meta()).unwrap_err().to_string();
        assert!(
            e.starts_with("halted: step 2 (transform) failed:") && e.contains("no customer"),
            "{e}"
        );
        // A condition that is not a boolean fails too.
        let s = steps(json!([{"type": "halt", "if": "payload.n", "reason": "x"}]));
        let e = apply(&s, json!({"n": 1}), &meta()).unwrap_err().to_string();
        assert!(e.starts_with("halted: step 1 (halt) failed:"), "{e}");
    }

    #[test]
    fn hostile_scripts_are_bounded() {
        for (script, why) in [
            ("loop { }", "operations"),
            ("let s = \"x\"; loop { s += s; }", "string"),
            ("let a = []; loop { a.push(1); }", "array"),
            ("fn f(n) { f(n + 1) } f(0);", "call"),
            (
                "let s = \"x\"; s.pad(1000000000, 'x'); payload.big = s;",
                "pad",
            ),
            (
                "let m = #{}; let i = 0; loop { m[`${i}`] = i; i += 1; }",
                "map",
            ),
            // Long keys, which the engine's sizes leave out.
            (
                "let k = \"k\"; k.pad(60000, 'k'); let m = #{}; let i = 0; loop { m[k + i] = 1; i += 1; }",
                "keys",
            ),
            // Nesting far past what can be stored (and what a recursive conversion survives).
            ("loop { payload = [payload]; }", "nesting"),
            (
                "let i = 0; while i < 5000 { payload = [payload]; i += 1; }",
                "nesting-bounded",
            ),
            // No way to hold the thread.
            ("sleep(3600);", "sleep"),
            ("sleep(1e300);", "sleep-float"),
            ("exit();", "exit"),
        ] {
            let s = steps(json!([{"type": "transform", "script": script}]));
            // Each ends on its own (a step that could hold the thread would hang the test).
            let e = apply(&s, json!({}), &meta()).unwrap_err().to_string();
            assert!(
                e.starts_with("halted: step 1 (transform) failed:"),
                "{why}: {e}"
            );
        }
        // A payload over the output bound (here from the start) does not go on.
        let big = "x".repeat(150_000);
        let s = steps(json!([{"type": "transform", "script": "payload.n = 1;"}]));
        let e = apply(&s, json!({"a": big, "b": big}), &meta())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("halted: step 1 (transform) failed:"), "{e}");
    }

    #[test]
    fn a_long_error_is_clipped() {
        let s = steps(json!([{"type": "transform", "script":
            "let s = \"e\"; s.pad(60000, 'e'); throw s;"}]));
        let e = apply(&s, json!({}), &meta()).unwrap_err().to_string();
        assert!(e.chars().count() < MAX_ERROR_CHARS + 100, "{}", e.len());
        assert!(e.ends_with("..."), "{e}");
    }

    #[test]
    fn the_environment_is_out_of_reach() {
        // Refused when written: modules and names the step cannot see.
        for script in [
            "import \"x\" as y;",
            "payload.x = undefined_name;",
            "payload.t = eval(\"1\");",
        ] {
            let e = parse(&json!([{"type": "transform", "script": script}])).unwrap_err();
            assert!(e.starts_with("step 1 (transform):"), "{script}: {e}");
        }
        // No such functions: the step fails when it runs.
        for script in [
            "payload.e = env(\"PATH\");",
            "payload.f = open_file(\"/etc/passwd\");",
        ] {
            let s = steps(json!([{"type": "transform", "script": script}]));
            let e = apply(&s, json!({}), &meta()).unwrap_err().to_string();
            assert!(
                e.starts_with("halted: step 1 (transform) failed:"),
                "{script}: {e}"
            );
        }
    }

    #[test]
    fn steps_are_validated_when_written() {
        assert_eq!(parse(&Value::Null).unwrap(), vec![]);
        assert!(parse(&json!({"type": "transform"})).is_err());
        let e = parse(&json!([{"type": "transform", "script": "payload.x = ;"}])).unwrap_err();
        assert!(e.starts_with("step 1 (transform):"), "{e}");
        let e = parse(&json!([{"type": "jq", "filter": "."}])).unwrap_err();
        assert!(e.starts_with("step 1:"), "{e}");
        let e = parse(&json!([{"type": "halt", "if": "true"}])).unwrap_err();
        assert!(e.starts_with("step 1:"), "{e}");
        let e = parse(&json!([{"type": "halt", "if": "true", "reason": " "}])).unwrap_err();
        assert!(e.contains("reason"), "{e}");
        let e = parse(&json!([{"type": "transform", "script": "x".repeat(5000)}])).unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        let many: Vec<Value> = (0..11)
            .map(|_| json!({"type": "transform", "script": "1"}))
            .collect();
        assert!(parse(&Value::Array(many)).is_err());
        let e = parse(&json!([{"type": "transform", "script": "1", "extra": 1}])).unwrap_err();
        assert!(e.contains("extra"), "{e}");
    }
}
