//! W3C trace context (`traceparent`, `tracestate`): a producer's trace is kept with its
//! activity and carried to every delivery's request, each attempt a span of its own, so that a
//! receiver's traces join the producer's. An activity sent without one (or with one that does
//! not parse, which the recommendation says to ignore) has a trace of its own, derived from
//! its id ([`TraceContext::derived`]).

use serde::{Deserialize, Serialize};

/// The longest `tracestate` kept (the recommendation's 512 characters); a longer one is
/// dropped, not cut.
pub const MAX_TRACESTATE: usize = 512;

/// An activity's trace: its trace id, the span the producer sent it from, and the flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// The producer's span (16 lowercase hex digits): the parent of every attempt's span.
    pub parent_id: String,
    /// The trace flags (`01`: sampled).
    pub flags: String,
    /// The vendors' state, passed on as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn random_hex<const N: usize>() -> String {
    hex::encode(crate::secret::random_bytes::<N>())
}

impl TraceContext {
    /// The context a `traceparent` (and `tracestate`) says, if it parses: version `00` as
    /// written, a later version read by its first four fields; an all-zero trace or parent id,
    /// upper-case hex or version `ff` does not.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let t = traceparent.trim();
        let mut parts = t.split('-');
        let (version, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        if !is_hex(version, 2) || version == "ff" || (version == "00" && rest.is_some()) {
            return None;
        }
        if !is_hex(trace_id, 32) || !is_hex(parent_id, 16) || !is_hex(flags, 2) {
            return None;
        }
        if trace_id.bytes().all(|b| b == b'0') || parent_id.bytes().all(|b| b == b'0') {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.is_ascii())
            .map(str::to_owned);
        Some(Self {
            trace_id: trace_id.to_owned(),
            parent_id: parent_id.to_owned(),
            // Only the sampled bit is defined for version 00.
            flags: if u8::from_str_radix(flags, 16).unwrap_or(0) & 1 == 1 {
                "01".into()
            } else {
                "00".into()
            },
            tracestate,
        })
    }

    /// The trace the platform starts for an activity sent without one, derived from its id
    /// (`key`): the same on every read, so nothing of it is stored with the activity.
    pub fn derived(key: &str) -> Self {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(key.as_bytes());
        Self {
            trace_id: hex::encode(&h[..16]),
            parent_id: hex::encode(&h[16..24]),
            flags: "01".into(),
            tracestate: None,
        }
    }

    /// The `traceparent` of a new span of this trace (an attempt), child of the producer's.
    pub fn child(&self) -> String {
        self.span(&random_hex::<8>())
    }

    /// The `traceparent` of span `span_id` of this trace.
    fn span(&self, span_id: &str) -> String {
        format!("00-{}-{}-{}", self.trace_id, span_id, self.flags)
    }

    /// The `traceparent` of the span `span_id` (16 lowercase hex digits, as a tracer gave
    /// it) of this trace; a new span of its own if `span_id` is not one.
    pub fn child_of(&self, span_id: &str) -> String {
        if !is_hex(span_id, 16) || span_id.bytes().all(|b| b == b'0') {
            return self.child();
        }
        self.span(span_id)
    }

    /// The same span in AWS X-Ray's header form (EventBridge's `TraceHeader`): the trace id's
    /// first eight digits are its time, the rest its unique part.
    pub fn xray_header(traceparent: &str) -> Option<String> {
        let c = Self::parse(traceparent, None)?;
        Some(format!(
            "Root=1-{}-{};Parent={};Sampled={}",
            &c.trace_id[..8],
            &c.trace_id[8..],
            c.parent_id,
            if c.flags == "01" { 1 } else { 0 }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn an_exported_span_is_the_child_the_receiver_is_told_of() {
        let c = TraceContext::parse(GOOD, None).unwrap();
        assert_eq!(
            c.child_of("b7ad6b7169203331"),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
        );
        // Not a span id: a span of its own, of the same trace.
        for bad in ["0000000000000000", "B7AD6B7169203331", "b7ad"] {
            let t = c.child_of(bad);
            assert!(t.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{t}");
            assert!(!t.contains(bad), "{t}");
        }
    }

    #[test]
    fn a_version_00_header_parses_and_its_state_is_kept() {
        let c = TraceContext::parse(GOOD, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(c.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.parent_id, "00f067aa0ba902b7");
        assert_eq!(c.flags, "01");
        assert_eq!(c.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    }

    #[test]
    fn what_the_recommendation_rejects_is_not_a_context() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(TraceContext::parse(bad, None).is_none(), "{bad}");
        }
        // A later version is read by its first four fields.
        assert!(TraceContext::parse(&format!("cc{}-more", &GOOD[2..]), None).is_some());
        // A state past the bound, or not ASCII, is dropped; the parent is kept.
        let long = format!("a={}", "b".repeat(MAX_TRACESTATE));
        assert_eq!(
            TraceContext::parse(GOOD, Some(&long)).unwrap().tracestate,
            None
        );
        assert_eq!(
            TraceContext::parse(GOOD, Some("é=1")).unwrap().tracestate,
            None
        );
    }

    #[test]
    fn an_attempt_is_a_new_span_of_the_same_trace() {
        let c = TraceContext::parse(GOOD, None).unwrap();
        let (a, b) = (c.child(), c.child());
        assert_ne!(a, b);
        for h in [&a, &b] {
            let child = TraceContext::parse(h, None).unwrap();
            assert_eq!(child.trace_id, c.trace_id);
            assert_ne!(child.parent_id, c.parent_id);
            assert_eq!(child.flags, "01");
        }
        let started = TraceContext::derived("act_1");
        assert!(TraceContext::parse(&started.child(), None).is_some());
        // The same activity, the same trace; another, another.
        assert_eq!(started, TraceContext::derived("act_1"));
        assert_ne!(started.trace_id, TraceContext::derived("act_2").trace_id);
    }

    #[test]
    fn xray_reads_the_same_trace() {
        assert_eq!(
            TraceContext::xray_header(GOOD).unwrap(),
            "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
        );
    }
}
