//! The live stream's doors: a tenant's connections are capped, a token admits only while the
//! key it was asked for with is the tenant's, and a rotated key's connections are closed.

use crate::common::*;
use converger_pipeline::stream::{MAX_TENANT_CONNECTIONS, StreamAuth, StreamRefused};
use converger_ports::{StreamConnection, StreamStore};

#[tokio::test]
async fn a_tenants_connections_are_capped_and_close_with_its_key() {
    let f = fixture_with(PipelineConfig {
        live_stream: true,
        ..PipelineConfig::default()
    });
    let (t, key) = f
        .pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap();
    let streams = f.pipeline.streams();
    let now = converger_core::Timestamp::now();
    for i in 0..MAX_TENANT_CONNECTIONS {
        f.store
            .put_stream_connection(&StreamConnection {
                connection_id: format!("c{i}"),
                tenant_id: t.id.clone(),
                connected_at: now,
                expires_at: now.secs() + 3600,
                topics: Vec::new(),
                allowed_topics: None,
            })
            .await
            .unwrap();
    }
    assert!(matches!(
        streams.connect("one-more", StreamAuth::ApiKey(&key)).await,
        Err(StreamRefused::TooMany(n)) if n == MAX_TENANT_CONNECTIONS
    ));
    // Another tenant is not held back by it.
    let (_, other) = f
        .pipeline
        .tenants()
        .create_tenant("other", Tier::Default)
        .await
        .unwrap();
    assert!(
        streams
            .connect("theirs", StreamAuth::ApiKey(&other))
            .await
            .is_ok()
    );
    // One closed frees a place.
    assert!(streams.disconnect("c0").await.unwrap());
    assert!(
        streams
            .connect("one-more", StreamAuth::ApiKey(&key))
            .await
            .is_ok()
    );

    // A token asked for with the key admits while the key is the tenant's.
    let token = streams
        .issue_token(
            &t.id,
            Some(&converger_core::secret::hash_api_key(&key)),
            None,
        )
        .await
        .unwrap()
        .token;
    let page = streams.issue_token(&t.id, None, None).await.unwrap().token;
    assert!(streams.disconnect("c1").await.unwrap());
    assert!(
        streams
            .connect("by-token", StreamAuth::Token(&token))
            .await
            .is_ok()
    );
    // The rotation closes what the old key opened, and its token admits no one.
    assert_eq!(
        f.store.tenant_connections(&t.id, 1000).await.unwrap().len(),
        MAX_TENANT_CONNECTIONS
    );
    assert!(
        f.pipeline
            .tenants()
            .rotate_api_key(&t.id)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        f.store
            .tenant_connections(&t.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        streams.connect("again", StreamAuth::Token(&token)).await,
        Err(StreamRefused::BadCredentials)
    ));
    // An operator page's token names no key.
    assert!(
        streams
            .connect("page", StreamAuth::Token(&page))
            .await
            .is_ok()
    );
}

/// A token limited to topics admits a connection that may follow those and no others; the
/// tenant's own key follows any.
#[tokio::test]
async fn a_token_limited_to_a_topic_follows_only_it() {
    let f = fixture_with(PipelineConfig {
        live_stream: true,
        ..PipelineConfig::default()
    });
    let (t, key) = f
        .pipeline
        .tenants()
        .create_tenant("acme", Tier::Default)
        .await
        .unwrap();
    let streams = f.pipeline.streams();
    let topic = converger_core::stream::Topic::Conversation("c-1".into());
    let token = streams
        .issue_token(&t.id, None, Some(std::slice::from_ref(&topic)))
        .await
        .unwrap()
        .token;
    streams
        .connect("limited", StreamAuth::Token(&token))
        .await
        .unwrap();
    let sub = |topic: &str| format!(r#"{{"action": "subscribe", "topic": "{topic}"}}"#);
    let frame = |c: &'static str, topic: &str| {
        let body = sub(topic);
        async move { serde_json::to_value(streams.message(c, &body).await.unwrap()).unwrap() }
    };
    assert_eq!(
        frame("limited", "conversation:c-1").await["type"],
        "subscribed"
    );
    let refused = frame("limited", "conversation:c-2").await;
    assert_eq!(refused["code"], "topic_not_allowed", "{refused}");
    let refused = frame("limited", "channel_health").await;
    assert_eq!(refused["code"], "topic_not_allowed", "{refused}");
    // Nothing was subscribed beyond the allowed topic.
    let c = f
        .store
        .get_stream_connection("limited")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.topics, ["conversation:c-1"]);
    // A connection with the key follows any topic of its tenant.
    streams
        .connect("keyed", StreamAuth::ApiKey(&key))
        .await
        .unwrap();
    assert_eq!(frame("keyed", "channel_health").await["type"], "subscribed");
}

/// A websocket channel's client connections are capped; another channel of the tenant is not
/// held back by it, and one closed frees a place.
#[tokio::test]
async fn a_websocket_channels_connections_are_capped() {
    use converger_core::policy::MAX_CHANNEL_CONNECTIONS;
    use converger_pipeline::handoff::ConnectRefused;
    let f = fixture();
    let t = tenant(&f).await;
    let token = "a-websocket-token-0123456789";
    let socket = |name: &str| {
        converger_ports::Channel::new(
            t.id.clone(),
            converger_core::ChannelType::Websocket,
            name,
            serde_json::json!({"token": token})
                .as_object()
                .cloned()
                .unwrap(),
            converger_core::Timestamp::now(),
        )
    };
    let (a, b) = (socket("a"), socket("b"));
    for c in [&a, &b] {
        f.pipeline.channels().create_channel(c).await.unwrap();
    }
    let h = f.pipeline.handoff();
    for i in 0..MAX_CHANNEL_CONNECTIONS {
        h.socket_connect(&format!("a{i}"), a.id.as_str(), token)
            .await
            .unwrap();
    }
    assert!(matches!(
        h.socket_connect("a-more", a.id.as_str(), token).await,
        Err(ConnectRefused::TooMany(n)) if n == MAX_CHANNEL_CONNECTIONS
    ));
    h.socket_connect("b0", b.id.as_str(), token).await.unwrap();
    h.socket_disconnect("a0").await.unwrap();
    h.socket_connect("a-more", a.id.as_str(), token)
        .await
        .unwrap();
}
