//! W3C trace context: a producer's trace reaches every delivery's request.

use converger_tests::views::{BatchResult, BatchResults, Ingested};
use converger_tests::{Receiver, Reply, TestStack, view};
use serde_json::{Value, json};
use std::time::Duration;

const PRODUCER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// An answer of the API read as its view `T`.
/// A received request's `traceparent`, split: (trace id, span id).
fn span(r: &converger_tests::Received) -> (String, String) {
    let h = r
        .headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let parts: Vec<&str> = h.split('-').collect();
    assert_eq!(parts.len(), 4, "traceparent {h:?}");
    assert_eq!(parts[0], "00", "{h}");
    assert_eq!(
        (parts[1].len(), parts[2].len(), parts[3]),
        (32, 16, "01"),
        "{h}"
    );
    (parts[1].to_owned(), parts[2].to_owned())
}

/// A `traceparent` on the API call reaches the receiver with the same trace id and a span of
/// its own for each attempt (its parent the producer's, so never the producer's span id), the
/// `tracestate` with it; the answer names the trace. Without one, or with one that does not
/// parse, a trace starts; a batch item's own `traceparent` wins over the request's header.
#[tokio::test]
async fn a_producers_trace_reaches_every_attempt() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    // The first request fails once: two attempts of the same delivery.
    let rx = Receiver::start(vec![Reply::status(503)], Reply::status(200))
        .await
        .unwrap();
    let ch = a
        .webhook(&rx.url, json!({"schedule": [200], "max_attempts": 3}))
        .await
        .channel
        .id;
    let post = |path: &'static str, body: Value, traceparent: Option<&'static str>| {
        let mut req = t
            .http
            .post(format!("{}{path}", t.stack.api_url))
            .bearer_auth(&a.key)
            .header("content-type", "application/json");
        if let Some(tp) = traceparent {
            req = req
                .header("traceparent", tp)
                .header("tracestate", "congo=t61rcWkgMzE");
        }
        async move {
            let r = req.body(body.to_string()).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            r.json::<Value>().await.unwrap()
        }
    };
    let one = |text: &str| json!({"conversation_id": "c1", "channel_ids": [ch], "payload": {"text": text}});
    let answer: Ingested = view(&post("/api/v1/activities", one("traced"), Some(PRODUCER)).await);
    assert_eq!(
        answer.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736",
        "{answer:?}"
    );
    let got = rx.wait_for(2, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 2, "the failed attempt and the retry");
    let (a1, a2) = (span(&got[0]), span(&got[1]));
    assert_eq!(a1.0, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(a2.0, a1.0, "one trace for every attempt");
    assert_ne!(a1.1, a2.1, "each attempt its own span");
    assert_ne!(
        a1.1, "00f067aa0ba902b7",
        "the producer's span is the parent"
    );
    assert_eq!(
        got[0]
            .headers
            .get("tracestate")
            .and_then(|v| v.to_str().ok()),
        Some("congo=t61rcWkgMzE")
    );

    // Without a traceparent, or with one that does not parse: a new trace of its own.
    let fresh: Ingested = view(&post("/api/v1/activities", one("untraced"), None).await);
    let bad: Ingested = view(&post("/api/v1/activities", one("bad"), Some("00-zz-zz-01")).await);
    let got = rx.wait_for(4, Duration::from_secs(30)).await;
    let started: Vec<String> = got[2..].iter().map(|r| span(r).0).collect();
    for (answer, trace) in [(&fresh, &started), (&bad, &started)] {
        let id = answer.trace_id.clone();
        assert_ne!(id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(trace.contains(&id), "{id} in {trace:?}");
    }
    assert_ne!(started[0], started[1], "each activity its own trace");

    // A batch: an item's own traceparent wins; the others take the request's.
    let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let batch = json!({"activities": [
        {"conversation_id": "c2", "channel_ids": [ch], "payload": {"n": 1}, "traceparent": own},
        {"conversation_id": "c2", "channel_ids": [ch], "payload": {"n": 2}},
    ]});
    let answer: BatchResults = view(&post("/api/v1/activities/batch", batch, Some(PRODUCER)).await);
    let ids: Vec<&str> = answer
        .results
        .iter()
        .map(|r| match r {
            BatchResult::Ingested { activity, .. } => activity.trace_id.as_str(),
            refused => panic!("an item refused: {refused:?}"),
        })
        .collect();
    assert_eq!(
        ids,
        [
            "0af7651916cd43dd8448eb211c80319c",
            "4bf92f3577b34da6a3ce929d0e0e4736"
        ]
    );
    let got = rx.wait_for(6, Duration::from_secs(30)).await;
    let mut traces: Vec<String> = got[4..].iter().map(|r| span(r).0).collect();
    traces.sort();
    assert_eq!(
        traces,
        [
            "0af7651916cd43dd8448eb211c80319c",
            "4bf92f3577b34da6a3ce929d0e0e4736"
        ]
    );
}

/// With `SpanExportEndpoint` set, each attempt is exported as a span of the producer's trace
/// (OTLP over HTTP to the collector): the span the receiver's `traceparent` names is the one
/// the collector gets, in the producer's trace, after the producer's span.
#[tokio::test]
async fn an_attempts_span_is_exported_as_the_one_the_receiver_names() {
    let collector = Receiver::always(200).await.unwrap();
    let base = collector.url.trim_end_matches("/hook").to_owned();
    let t = TestStack::with(|o| {
        o.parameters
            .insert("SpanExportEndpoint".to_owned(), base.clone());
    })
    .await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = a.webhook(&rx.url, json!({})).await.channel.id;
    let r = t
        .http
        .post(format!("{}/api/v1/activities", t.stack.api_url))
        .bearer_auth(&a.key)
        .header("content-type", "application/json")
        .header("traceparent", PRODUCER)
        .body(
            json!({"conversation_id": "c1", "channel_ids": [ch], "payload": {"text": "hi"}})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let got = rx.wait_for(1, Duration::from_secs(30)).await;
    let (trace_id, span_id) = span(&got[0]);
    // The exported batch: OTLP protobuf, whose span carries the ids as raw bytes.
    let exported = collector.wait_for(1, Duration::from_secs(30)).await;
    assert!(!exported.is_empty(), "no span exported");
    let req = &exported[0];
    assert_eq!(req.uri.path(), "/v1/traces");
    assert_eq!(
        req.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/x-protobuf")
    );
    let bytes = |hex: &str| -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    };
    let body = exported
        .iter()
        .flat_map(|r| r.body.iter().copied())
        .collect::<Vec<u8>>();
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(has(&bytes(&trace_id)), "the producer's trace");
    assert!(has(&bytes(&span_id)), "the span the receiver was told of");
    assert!(
        has(&bytes("00f067aa0ba902b7")),
        "the producer's span, its parent"
    );
    assert!(has(b"deliver webhook"));
}
