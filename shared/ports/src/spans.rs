//! Where the spans of attempts go, when a deployment exports them (`SPAN_EXPORT_ENDPOINT`):
//! each attempt is a span of its activity's trace, child of the producer's span, and the
//! `traceparent` the receiver gets names that span, so its own spans join the same trace.

use converger_core::trace::TraceContext;

/// What an attempt's span says when it starts.
#[derive(Debug, Clone, Copy)]
pub struct AttemptStart<'a> {
    pub channel_type: &'a str,
    pub channel_id: &'a str,
    pub tenant_id: &'a str,
    pub delivery_id: &'a str,
    pub activity_id: &'a str,
    pub attempt: u32,
}

/// How an attempt's call ended, for its span.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEnd<'a> {
    /// The HTTP status the endpoint answered with, if it did.
    pub status: Option<u16>,
    /// Why it failed; `None` for a success.
    pub error: Option<&'a str>,
}

/// One attempt's span while it runs.
pub trait AttemptSpan: Send {
    /// Its id (16 lowercase hex digits), when the span is exported: the `traceparent` the
    /// receiver gets names it. `None`: the attempt picks one of its own.
    fn span_id(&self) -> Option<String>;
    /// Ends it.
    fn end(self: Box<Self>, end: AttemptEnd<'_>);
}

/// Starts attempts' spans and sends what ended.
#[async_trait::async_trait]
pub trait Spans: Send + Sync + 'static {
    /// A span for an attempt of a delivery of an activity of `trace`, child of the producer's.
    fn attempt(&self, trace: &TraceContext, start: AttemptStart<'_>) -> Box<dyn AttemptSpan>;
    /// Sends the spans that ended (at the end of a batch, before the instance can be frozen).
    async fn flush(&self) {}
}

/// No export (the default): spans are neither kept nor sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSpans;

struct Unexported;

impl AttemptSpan for Unexported {
    fn span_id(&self) -> Option<String> {
        None
    }
    fn end(self: Box<Self>, _: AttemptEnd<'_>) {}
}

impl Spans for NoSpans {
    fn attempt(&self, _: &TraceContext, _: AttemptStart<'_>) -> Box<dyn AttemptSpan> {
        Box::new(Unexported)
    }
}
