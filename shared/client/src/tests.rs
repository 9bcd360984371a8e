#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::collections::BTreeSet;

fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every operation the client calls is in the API's document, with that method.
#[test]
fn every_operation_is_in_the_document() {
    let doc = document();
    for op in op::OPERATIONS {
        let item = &doc["paths"][op.path];
        assert!(
            item[op.method.to_lowercase()].is_object(),
            "{} {} is not in docs/openapi.json",
            op.method,
            op.path
        );
    }
}

/// A schema's properties, following `allOf`.
fn properties(doc: &Value, name: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let schema = &doc["components"]["schemas"][name];
    assert!(schema.is_object(), "no schema {name}");
    let mut props = BTreeSet::new();
    let mut required = BTreeSet::new();
    let parts: Vec<&Value> = match schema["allOf"].as_array() {
        Some(list) => list.iter().collect(),
        None => vec![schema],
    };
    for part in parts {
        let part = match part["$ref"].as_str() {
            Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
            None => part,
        };
        props.extend(part["properties"].as_object().unwrap().keys().cloned());
        required.extend(
            part["required"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap().to_owned()),
        );
    }
    (props, required)
}

fn keys<T: Serialize + Default>() -> BTreeSet<String> {
    serde_json::to_value(T::default())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// Each answer type reads only documented fields and every field the document requires;
/// each request type sends only documented fields.
#[test]
fn every_type_follows_its_schema() {
    let doc = document();
    fn answer<T: Serialize + Default>(doc: &Value, schema: &str) {
        let (props, required) = properties(doc, schema);
        let ours = keys::<T>();
        assert!(
            ours.is_subset(&props),
            "{schema}: {:?} undocumented",
            ours.difference(&props)
        );
        assert!(
            required.is_subset(&ours) || schema == "ChannelView" || schema == "CreatedChannel",
            "{schema}: {:?} not read",
            required.difference(&ours)
        );
    }
    answer::<Channel>(&doc, "ChannelView");
    answer::<CreatedChannel>(&doc, "CreatedChannel");
    answer::<Ingested>(&doc, "Ingested");
    answer::<DeliveryRef>(&doc, "DeliveryRef");
    answer::<Delivery>(&doc, "DeliveryView");
    answer::<Attempt>(&doc, "AttemptView");
    answer::<DeliveryState>(&doc, "DeliveryState");
    answer::<AwsIdentity>(&doc, "AwsIdentityView");
    answer::<Usage>(&doc, "UsageView");
    answer::<UsageDay>(&doc, "UsageDayView");
    answer::<BatchResults>(&doc, "BatchResults");
    answer::<ItemError>(&doc, "ItemError");
    // Both shapes of a batch's result are among the schema's.
    let shapes: Vec<BTreeSet<String>> = doc["components"]["schemas"]["BatchResult"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        })
        .collect();
    for r in [
        BatchResult::Ingested {
            status: 201,
            activity: Ingested::default(),
        },
        BatchResult::Refused {
            status: 422,
            error: ItemError::default(),
        },
    ] {
        let ours: BTreeSet<String> = serde_json::to_value(r)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert!(shapes.contains(&ours), "{ours:?}");
    }
    for (ours, schema) in [
        (keys::<NewChannel>(), "NewChannel"),
        (
            serde_json::to_value(NewActivity {
                id: Some("a".into()),
                seq: Some(1),
                channel_ids: vec!["c".into()],
                event_type: Some("e".into()),
                ..Default::default()
            })
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect(),
            "NewActivity",
        ),
    ] {
        let (props, _) = properties(&doc, schema);
        assert!(
            ours.is_subset(&props),
            "{schema}: {:?}",
            ours.difference(&props)
        );
    }
    // The list's filters are the operation's parameters.
    let params: BTreeSet<String> = doc["paths"][op::LIST_DELIVERIES.path]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    for k in keys::<DeliveryQuery>() {
        assert!(params.contains(&k), "{k}");
    }
}

#[test]
fn ids_are_encoded_as_one_path_segment_and_urls_are_checked() {
    let api = Client::new("https://api.example.com/", "k").unwrap();
    assert_eq!(
        api.url(op::GET_DELIVERY, Some("a/b c")).unwrap().as_str(),
        "https://api.example.com/api/v1/deliveries/a%2Fb%20c"
    );
    let staged = Client::new("https://api.example.com/prod", "k").unwrap();
    assert_eq!(
        staged.url(op::LIST_CHANNELS, None).unwrap().as_str(),
        "https://api.example.com/prod/api/v1/channels"
    );
    assert!(matches!(
        Client::new("ftp://x", "k"),
        Err(Error::Config(m)) if m.contains("http")
    ));
}

#[test]
fn an_error_answer_keeps_its_code_and_the_gateways_throttle_is_named() {
    let own = api_error(
        429,
        br#"{"error": {"code": "rate_limited", "message": "slow down"}}"#,
    );
    assert_eq!(own.to_string(), "429 rate_limited: slow down");
    let gateway = api_error(429, br#"{"message":"Too Many Requests"}"#);
    assert_eq!(
        gateway.to_string(),
        "429 gateway_throttled: Too Many Requests"
    );
    let other = api_error(502, b"<html>bad gateway</html>");
    assert_eq!(other.to_string(), "502 unknown: <html>bad gateway</html>");
}

/// `Debug` never prints the API key.
#[test]
fn debug_hides_the_api_key() {
    let api = Client::new("https://api.example.com", "ck_live_0123456789abcdef").unwrap();
    let printed = format!("{api:?}");
    assert!(!printed.contains("0123456789abcdef"), "{printed}");
    assert!(printed.contains("api.example.com"), "{printed}");
}

/// `listen`'s settings print without the channel's connect token.
#[test]
fn debug_hides_the_connect_token() {
    let l = cli::Listen {
        channel_id: "ch_1".into(),
        forward_to: "http://localhost:3000/hook".into(),
        ws_url: "wss://ws.example.com/prod".into(),
        token: "tok_secret_0123456789".into(),
        count: None,
        json: false,
    };
    let printed = format!("{l:?}");
    assert!(!printed.contains("tok_secret_0123456789"), "{printed}");
    assert!(printed.contains("ch_1"), "{printed}");
}

/// What the command line prints for people carries no control character but line breaks.
#[test]
fn terminal_output_escapes_control_characters() {
    let hostile = "ok\u{1b}[2J\u{1b}]0;title\u{7}\r\nnext\u{9b}31m";
    let shown = cli::terminal_safe(hostile);
    assert!(
        !shown.chars().any(|c| c.is_control() && c != '\n'),
        "{shown:?}"
    );
    assert!(shown.starts_with("ok\\u{1b}[2J"), "{shown}");
    assert!(shown.contains("\nnext"), "{shown}");
}

/// A credential never goes in clear to another machine: `http://` and `ws://` to this one only.
#[test]
fn clear_transports_only_to_this_machine() {
    for ok in [
        "https://api.example.com",
        "wss://ws.example.com/prod",
        "http://127.0.0.1:8080",
        "http://localhost:3000/hook",
        "ws://[::1]:9000",
    ] {
        assert!(check_transport(ok, "x").is_ok(), "{ok}");
    }
    for bad in [
        "http://api.example.com",
        "ws://10.0.0.5/ws",
        "ftp://localhost",
    ] {
        assert!(check_transport(bad, "x").is_err(), "{bad}");
    }
    assert!(matches!(
        Client::new("http://api.example.com", "k"),
        Err(Error::Config(m)) if m.contains("https://")
    ));
}
