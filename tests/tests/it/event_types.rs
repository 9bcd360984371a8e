//! The event-type catalog end to end on the emulator: types with schemas are created, read,
//! listed and changed; an activity of a type with a schema is checked at ingest, one at a time
//! and item by item in a batch; bad names and schemas are refused when written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{BatchResult, Client, Error, NewActivity, NewChannel, NewEventType};
use converger_tests::views::{EventTypeView, Page};
use converger_tests::{Receiver, TestStack};
use serde_json::{Value, json};

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> (u16, String, String) {
    match r {
        Err(Error::Api {
            status,
            code,
            message,
        }) => (status, code, message),
        other => panic!("not an API error: {other:?}"),
    }
}

fn order_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["order_id", "total"],
        "properties": {
            "order_id": {"type": "string"},
            "total": {"type": "number", "minimum": 0},
            "customer": {"$ref": "#/$defs/customer"}
        },
        "$defs": {"customer": {"type": "object", "properties": {"tier": {"enum": ["gold", "silver"]}}}}
    })
}

fn activity(channel: &str, event_type: &str, payload: Value) -> NewActivity {
    NewActivity {
        conversation_id: "conv-types".into(),
        channel_ids: vec![channel.to_owned()],
        event_type: Some(event_type.into()),
        payload,
        ..Default::default()
    }
}

async fn webhook(api: &Client, url: &str) -> String {
    api.create_channel(&NewChannel {
        kind: "webhook".into(),
        name: "typed".into(),
        config: json!({"url": url}).as_object().cloned().unwrap(),
        settings: Default::default(),
    })
    .await
    .unwrap()
    .channel
    .id
}

#[tokio::test]
async fn a_catalog_of_typed_payloads_checks_each_activity_at_ingest() {
    let t = TestStack::on_emulator().await;
    let a = t.new_tenant("default").await;
    let api = t.client(&a.key);
    let rx = Receiver::always(200).await.unwrap();
    let ch = webhook(&api, &rx.url).await;

    // Until a type has a schema, the tenant's activities look nothing up.
    let tenant_id = converger_core::TenantId::parse(&a.id).unwrap();
    let typed = || async {
        t.stack
            .store
            .get_tenant(&tenant_id)
            .await
            .unwrap()
            .unwrap()
            .typed_events
    };
    api.create_event_type(&NewEventType {
        name: "order.created".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(!typed().await);
    let created = api
        .create_event_type(&NewEventType {
            name: "order.paid".into(),
            description: Some("An order was paid.".into()),
            schema: Some(order_schema()),
            deprecated: false,
        })
        .await
        .unwrap();
    assert_eq!(created.schema, Some(order_schema()));
    assert!(typed().await, "a schema marks the tenant");
    assert_eq!(
        api.event_type("order.paid").await.unwrap().schema,
        Some(order_schema()),
        "the schema reads back as written"
    );
    // One name once; names, descriptions and schemas that do not fit are refused.
    let again = api
        .create_event_type(&NewEventType {
            name: "order.paid".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(again).1, "event_type_exists");
    for (bad, word) in [
        (
            NewEventType {
                name: "order paid".into(),
                ..Default::default()
            },
            "",
        ),
        (
            NewEventType {
                name: "*".into(),
                ..Default::default()
            },
            "every type",
        ),
        (
            NewEventType {
                name: "big".into(),
                schema: Some(json!({"description": "x".repeat(40_000)})),
                ..Default::default()
            },
            "bytes",
        ),
        (
            NewEventType {
                name: "remote".into(),
                schema: Some(json!({"$ref": "https://schemas.example/order.json"})),
                ..Default::default()
            },
            "usable",
        ),
        (
            NewEventType {
                name: "typo".into(),
                schema: Some(json!({"type": "strnig"})),
                ..Default::default()
            },
            "usable",
        ),
    ] {
        let (status, c, message) = code(api.create_event_type(&bad).await);
        assert_eq!((status, c.as_str()), (422, "invalid_event_type"), "{bad:?}");
        assert!(message.contains(word), "{message}");
    }
    assert_eq!(code(api.event_type("no.such").await).0, 404);

    // Payloads that fit go; those that do not are refused naming where, nothing written.
    let ok = api
        .post_activity(&activity(
            &ch,
            "order.paid",
            json!({"order_id": "o-1", "total": 12.5, "customer": {"tier": "gold"}}),
        ))
        .await
        .unwrap();
    assert_eq!(ok.deliveries.len(), 1);
    let (status, c, message) = code(
        api.post_activity(&activity(&ch, "order.paid", json!({"total": 3})))
            .await,
    );
    assert_eq!((status, c.as_str()), (422, "payload_does_not_match_schema"));
    assert!(
        message.contains("`order.paid`") && message.contains("order_id"),
        "{message}"
    );
    let (_, _, message) = code(
        api.post_activity(&activity(
            &ch,
            "order.paid",
            json!({"order_id": "o-2", "total": "lots", "customer": {"tier": "tin"}}),
        ))
        .await,
    );
    assert!(
        message.contains("`/total`") && message.contains("`/customer/tier`"),
        "{message}"
    );
    assert!(
        !message.contains("lots"),
        "values are not quoted: {message}"
    );
    // A type outside the catalog is not checked.
    api.post_activity(&activity(&ch, "order.refunded", json!("anything")))
        .await
        .unwrap();

    // A batch: the item that does not fit refuses itself only.
    let results = api
        .post_activities(&[
            activity(&ch, "order.paid", json!({"order_id": "o-3", "total": 1})),
            activity(&ch, "order.paid", json!({"order_id": 4, "total": 1})),
        ])
        .await
        .unwrap();
    assert!(matches!(
        results[0],
        BatchResult::Ingested { status: 201, .. }
    ));
    match &results[1] {
        BatchResult::Refused { status, error } => {
            assert_eq!(
                (*status, error.code.as_str()),
                (422, "payload_does_not_match_schema")
            );
            assert!(error.message.contains("`/order_id`"), "{error:?}");
        }
        other => panic!("{other:?}"),
    }

    // Deprecated, then the schema removed: its payloads are no longer checked.
    let changed = api
        .patch_event_type("order.paid", &json!({"deprecated": true}))
        .await
        .unwrap();
    assert!(changed.deprecated);
    assert_eq!(changed.schema, Some(order_schema()));
    assert!(
        api.post_activity(&activity(&ch, "order.paid", json!({"total": 3})))
            .await
            .is_err()
    );
    let open = api
        .patch_event_type("order.paid", &json!({"schema": null, "description": null}))
        .await
        .unwrap();
    assert_eq!((open.schema, open.description), (None, None));
    api.post_activity(&activity(&ch, "order.paid", json!({"total": 3})))
        .await
        .unwrap();
    let bad_patch = api
        .patch_event_type("order.paid", &json!({"schema": {"type": 7}}))
        .await;
    assert_eq!(code(bad_patch).1, "invalid_event_type");

    // The catalog in name order, a page at a time.
    for name in ["a.first", "z.last"] {
        api.create_event_type(&NewEventType {
            name: name.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/api/v1/event-types?limit=2&cursor={c}"),
            None => "/api/v1/event-types?limit=2".into(),
        };
        let page = t.api("GET", &q, &a.key, None).await;
        assert_eq!(page.status, 200, "{:?}", page.body);
        let page: Page<EventTypeView> = page.typed(200).unwrap();
        names.extend(page.data.into_iter().map(|item| item.name));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(names, ["a.first", "order.created", "order.paid", "z.last"]);
    assert_eq!(api.event_types(None).await.unwrap().data.len(), 4);
}
