//! Attempts' spans exported over OTLP/HTTP (`SPAN_EXPORT_ENDPOINT`: an OpenTelemetry
//! collector, such as the ADOT collector layer's on `http://localhost:4318`, which forwards
//! them to X-Ray). Each attempt is a client span of its activity's trace, child of the
//! producer's span; the spans are batched and sent at the end of each batch of deliveries.

use converger_core::trace::TraceContext;
use converger_ports::{AttemptEnd, AttemptSpan, AttemptStart, Spans};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::time::Duration;

/// How long one export may take: a collector that does not answer costs a batch this much
/// at most, never its deliveries.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why spans cannot be exported.
#[derive(Debug, thiserror::Error)]
#[error("span export to {endpoint}: {reason}")]
pub struct SpanExportError {
    endpoint: String,
    reason: String,
}

/// The OTLP exporter of a function's attempts' spans.
pub struct OtlpSpans {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl OtlpSpans {
    /// Spans sent to the collector at `endpoint` (its base URL: `/v1/traces` is added), as
    /// the service `service` (the function's name).
    pub fn new(endpoint: &str, service: &str) -> Result<Self, SpanExportError> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| SpanExportError {
                endpoint: endpoint.to_owned(),
                reason: e.to_string(),
            })?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("converger");
        Ok(Self { provider, tracer })
    }
}

/// The producer's span as the parent of an attempt's (a remote one: it is not ours).
fn parent(trace: &TraceContext) -> Context {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&trace.trace_id),
        SpanId::from_hex(&trace.parent_id),
    ) else {
        return Context::new();
    };
    let flags = if trace.flags == "01" {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::NOT_SAMPLED
    };
    Context::new().with_remote_span_context(SpanContext::new(
        trace_id,
        span_id,
        flags,
        true,
        TraceState::default(),
    ))
}

struct Exported(opentelemetry_sdk::trace::Span);

impl AttemptSpan for Exported {
    fn span_id(&self) -> Option<String> {
        let c = self.0.span_context();
        c.is_valid().then(|| c.span_id().to_string())
    }

    fn end(mut self: Box<Self>, end: AttemptEnd<'_>) {
        if let Some(status) = end.status {
            self.0.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        if let Some(error) = end.error {
            self.0.set_status(Status::error(error.to_owned()));
        } else {
            self.0.set_status(Status::Ok);
        }
        self.0.end();
    }
}

#[async_trait::async_trait]
impl Spans for OtlpSpans {
    fn attempt(&self, trace: &TraceContext, start: AttemptStart<'_>) -> Box<dyn AttemptSpan> {
        let builder = self
            .tracer
            .span_builder(format!("deliver {}", start.channel_type))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("converger.channel_type", start.channel_type.to_owned()),
                KeyValue::new("converger.channel_id", start.channel_id.to_owned()),
                KeyValue::new("converger.tenant_id", start.tenant_id.to_owned()),
                KeyValue::new("converger.delivery_id", start.delivery_id.to_owned()),
                KeyValue::new("converger.activity_id", start.activity_id.to_owned()),
                KeyValue::new("converger.attempt", i64::from(start.attempt)),
            ]);
        Box::new(Exported(
            self.tracer.build_with_context(builder, &parent(trace)),
        ))
    }

    async fn flush(&self) {
        // The batch processor exports on its own thread; the flush waits for it, which
        // blocks, so it runs where blocking is allowed.
        let provider = self.provider.clone();
        match tokio::task::spawn_blocking(move || provider.force_flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "spans not exported"),
            Err(e) => tracing::warn!(error = %e, "span export stopped"),
        }
    }
}
