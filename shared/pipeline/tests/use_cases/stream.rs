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
                connected_at: now.rfc3339(),
                expires_at: now.secs() + 3600,
                topics: Vec::new(),
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
        .issue_token(&t.id, Some(&converger_core::secret::hash_api_key(&key)))
        .await
        .unwrap()
        .token;
    let page = streams.issue_token(&t.id, None).await.unwrap().token;
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
