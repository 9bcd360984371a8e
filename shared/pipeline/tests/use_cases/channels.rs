//! A channel's creation and changes: every field checked before anything is written.

use crate::common::*;
use converger_pipeline::channels::{ChannelChange, ChannelRefused, ChannelSpec, ChannelWriteError};
use converger_pipeline::tenants::TenantChange;
use serde_json::{Map, Value};

fn object(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn spec(kind: ChannelType, config: Value) -> ChannelSpec {
    ChannelSpec {
        kind,
        name: "hook".into(),
        config: object(config),
        active: true,
        retry_policy: Map::new(),
        circuit_breaker: Map::new(),
        rate_limit: None,
        auto_disable: Map::new(),
        event_types: Vec::new(),
        middleware: Value::Null,
        filter: None,
        ordering: None,
    }
}

fn webhook_spec() -> ChannelSpec {
    spec(
        ChannelType::Webhook,
        json!({"url": "https://receiver.example/hook"}),
    )
}

fn refused(r: Result<impl std::fmt::Debug, ChannelWriteError>) -> ChannelRefused {
    match r {
        Err(ChannelWriteError::Refused(r)) => r,
        other => panic!("not refused: {other:?}"),
    }
}

/// A spec, and whether a refusal is the one it should get.
type Case = (ChannelSpec, fn(&ChannelRefused) -> bool);

async fn stored(f: &Fixture, t: &Tenant) -> Vec<Channel> {
    f.store.list_channels(&t.id).await.unwrap()
}

#[tokio::test]
async fn a_channel_is_stored_only_when_every_field_fits() {
    let f = fixture();
    let t = tenant(&f).await;
    let cases: Vec<Case> = vec![
        (
            ChannelSpec {
                name: String::new(),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::Name(_)),
        ),
        (spec(ChannelType::Webhook, json!({"url": "ftp://x"})), |r| {
            matches!(r, ChannelRefused::Config(_))
        }),
        (
            ChannelSpec {
                retry_policy: object(json!({"max_attempts": "many"})),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::RetryPolicy(_)),
        ),
        (
            ChannelSpec {
                circuit_breaker: object(json!({"failure_threshold": -1})),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::CircuitBreaker(_)),
        ),
        (
            ChannelSpec {
                rate_limit: Some("fast".into()),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::RateLimit(_)),
        ),
        (
            ChannelSpec {
                middleware: json!([{"no_such_step": true}]),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::Middleware(_)),
        ),
        (
            ChannelSpec {
                filter: Some(json!({"payload": {"kind": {"$regex": "x"}}})),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::Filter(_)),
        ),
        (
            ChannelSpec {
                ordering: Some(json!({"by": "moon"})),
                ..webhook_spec()
            },
            |r| matches!(r, ChannelRefused::Ordering(_)),
        ),
    ];
    for (s, expected) in cases {
        let r = refused(f.pipeline.channels().create(&t, s.clone()).await);
        assert!(expected(&r), "{s:?}: refused as {r:?}");
        assert!(!r.to_string().is_empty());
    }
    assert!(
        stored(&f, &t).await.is_empty(),
        "a refused channel is not stored"
    );

    // A spec that fits is stored with its settings parsed.
    let c = f
        .pipeline
        .channels()
        .create(
            &t,
            ChannelSpec {
                rate_limit: Some("5/s".into()),
                event_types: vec!["order.created".into()],
                filter: Some(json!({"payload": {"kind": "order"}})),
                ..webhook_spec()
            },
        )
        .await
        .unwrap();
    let all = stored(&f, &t).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].id, c.id);
    assert_eq!(all[0].rate_limit.map(|r| r.to_string()), Some("5/s".into()));
    assert_eq!(all[0].event_types, ["order.created"]);
    assert_eq!(
        all[0].filter.as_ref().map(|f| f.source().clone()),
        Some(json!({"payload": {"kind": "order"}}))
    );
}

#[tokio::test]
async fn an_email_channel_sends_only_as_a_sender_its_tenant_was_granted() {
    let f = fixture();
    let t = tenant(&f).await;
    let email = || {
        spec(
            ChannelType::Email,
            json!({"from": "news@acme.example", "to": "ops@customer.example", "subject": "Hi"}),
        )
    };
    let r = refused(f.pipeline.channels().create(&t, email()).await);
    assert!(matches!(r, ChannelRefused::EmailSender(_)), "{r:?}");
    assert!(stored(&f, &t).await.is_empty());
    // Granted by an operator: read from the store, so it applies at once.
    let senders = ["acme.example".to_owned()];
    f.pipeline
        .tenants()
        .update_tenant(
            &t.id,
            TenantChange {
                email_senders: Some(&senders),
                ..TenantChange::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    f.pipeline.channels().create(&t, email()).await.unwrap();
    assert_eq!(stored(&f, &t).await.len(), 1);
}

#[tokio::test]
async fn an_aws_channel_never_assumes_a_role_of_the_platforms_account() {
    let f = fixture_with(PipelineConfig {
        platform_account: Some("111122223333".into()),
        ..PipelineConfig::default()
    });
    let t = tenant(&f).await;
    let sqs = |account: &str| {
        spec(
            ChannelType::AwsSqs,
            json!({
                "queue_url": format!("https://sqs.eu-west-1.amazonaws.com/{account}/q"),
                "role_arn": format!("arn:aws:iam::{account}:role/converger-delivery"),
            }),
        )
    };
    let r = refused(f.pipeline.channels().create(&t, sqs("111122223333")).await);
    assert!(
        matches!(r, ChannelRefused::RoleInPlatformAccount(_)),
        "{r:?}"
    );
    f.pipeline
        .channels()
        .create(&t, sqs("222233334444"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_change_with_one_field_that_does_not_fit_changes_nothing() {
    let f = fixture();
    let t = tenant(&f).await;
    let c = f
        .pipeline
        .channels()
        .create(&t, webhook_spec())
        .await
        .unwrap();
    let bad = ChannelChange {
        name: Some("renamed".into()),
        middleware: Some(json!([{"no_such_step": true}])),
        ..ChannelChange::default()
    };
    let r = refused(f.pipeline.channels().change(&t, &c, bad).await);
    assert!(matches!(r, ChannelRefused::Middleware(_)), "{r:?}");
    let now = f.store.get_channel(&c.id).await.unwrap().unwrap();
    assert_eq!(now.name, "hook", "the name that fit was not written either");

    let good = ChannelChange {
        name: Some("renamed".into()),
        rate_limit: Some(Some("2/s".into())),
        ..ChannelChange::default()
    };
    let changed = f
        .pipeline
        .channels()
        .change(&t, &c, good)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.name, "renamed");
    let now = f.store.get_channel(&c.id).await.unwrap().unwrap();
    assert_eq!(now.name, "renamed");
    assert_eq!(now.rate_limit.map(|r| r.to_string()), Some("2/s".into()));
}

/// A tenant keeps at most `MAX_CHANNELS_PER_TENANT` channels: one more is refused with
/// nothing stored, and a deleted one makes room.
#[tokio::test]
async fn a_tenant_keeps_at_most_its_channel_limit() {
    let f = fixture();
    let t = tenant(&f).await;
    let most = converger_core::policy::MAX_CHANNELS_PER_TENANT;
    let channels = f.pipeline.channels();
    for n in 0..most {
        let c = Channel::new(
            t.id.clone(),
            ChannelType::Webhook,
            &format!("hook-{n}"),
            object(json!({"url": "https://receiver.example/hook"})),
            converger_core::Timestamp::now(),
        );
        channels.create_channel(&c).await.unwrap();
    }
    let r = refused(channels.create(&t, webhook_spec()).await);
    assert!(matches!(r, ChannelRefused::TooMany(_)), "{r:?}");
    assert_eq!(stored(&f, &t).await.len(), most);
    // Another tenant is not held to this one's count.
    let other = tenant(&f).await;
    channels.create(&other, webhook_spec()).await.unwrap();
    // A deleted channel no longer counts.
    let first = stored(&f, &t).await.remove(0);
    let now = converger_core::Timestamp::now();
    f.store
        .delete_channel(&t.id, &first.id, now, now.secs() + 86_400)
        .await
        .unwrap();
    channels.create(&t, webhook_spec()).await.unwrap();
}
