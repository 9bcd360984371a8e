//! The live stream's storage: a connection's topics and each topic's subscribers move
//! together, a connection follows at most its limit of topics, and tokens expire.

use super::*;
use converger_ports::{StreamConnection, StreamToken, Subscribed};

fn connection(f: &Fixture, id: &str, now: Timestamp) -> StreamConnection {
    StreamConnection {
        connection_id: id.into(),
        tenant_id: f.tenant.id.clone(),
        connected_at: now,
        expires_at: now.secs() + 3600,
        topics: Vec::new(),
        allowed_topics: None,
    }
}

pub(super) async fn stream_subscriptions_follow_their_connection(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    let now = Timestamp::now();
    let other_tenant = TenantId::generate();
    s.put_stream_connection(&connection(&f, "c1", now))
        .await
        .unwrap();
    s.put_stream_connection(&connection(&f, "c2", now))
        .await
        .unwrap();
    let got = s.get_stream_connection("c1").await.unwrap().unwrap();
    assert_eq!(got.tenant_id, f.tenant.id);
    assert!(got.topics.is_empty());

    // Subscribing twice is one subscription; the limit counts distinct topics.
    for c in ["c1", "c2"] {
        assert_eq!(
            s.subscribe(c, "conversation:a", 2, now).await.unwrap(),
            Subscribed::Yes
        );
    }
    assert_eq!(
        s.subscribe("c1", "conversation:a", 2, now).await.unwrap(),
        Subscribed::Yes
    );
    assert_eq!(
        s.subscribe("c1", "channel_health", 2, now).await.unwrap(),
        Subscribed::Yes
    );
    assert_eq!(
        s.subscribe("c1", "conversation:b", 2, now).await.unwrap(),
        Subscribed::TooMany
    );
    assert_eq!(
        s.subscribe("c1", "channel_health", 2, now).await.unwrap(),
        Subscribed::Yes,
        "a topic already followed is not one more"
    );
    assert_eq!(
        s.subscribe("gone", "conversation:a", 2, now).await.unwrap(),
        Subscribed::NoConnection
    );
    let mut subs = s.subscribers(&f.tenant.id, "conversation:a").await.unwrap();
    subs.sort();
    assert_eq!(subs, ["c1", "c2"]);
    // A topic is the tenant's: another tenant's same topic has its own subscribers.
    assert!(
        s.subscribers(&other_tenant, "conversation:a")
            .await
            .unwrap()
            .is_empty()
    );
    let mut topics = s.get_stream_connection("c1").await.unwrap().unwrap().topics;
    topics.sort();
    assert_eq!(topics, ["channel_health", "conversation:a"]);

    // Unsubscribing frees a place.
    assert!(s.unsubscribe("c1", "conversation:a").await.unwrap());
    assert!(!s.unsubscribe("c1", "conversation:a").await.unwrap());
    assert!(!s.unsubscribe("gone", "conversation:a").await.unwrap());
    assert_eq!(
        s.subscribers(&f.tenant.id, "conversation:a").await.unwrap(),
        ["c2"]
    );
    assert_eq!(
        s.subscribe("c1", "conversation:b", 2, now).await.unwrap(),
        Subscribed::Yes
    );

    // The tenant's connections are found by tenant (a rotated key closes them).
    let mut open = s.tenant_connections(&f.tenant.id, 10).await.unwrap();
    open.sort();
    assert_eq!(open, ["c1", "c2"]);
    assert!(
        s.tenant_connections(&other_tenant, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A deleted connection takes its subscriptions with it.
    let gone = s.delete_stream_connection("c1").await.unwrap().unwrap();
    assert_eq!(
        s.tenant_connections(&f.tenant.id, 10).await.unwrap(),
        ["c2"]
    );
    assert_eq!(gone.topics.len(), 2);
    assert!(s.get_stream_connection("c1").await.unwrap().is_none());
    assert!(s.delete_stream_connection("c1").await.unwrap().is_none());
    for topic in ["channel_health", "conversation:b"] {
        assert!(
            s.subscribers(&f.tenant.id, topic).await.unwrap().is_empty(),
            "{topic}"
        );
    }
    // One dropped subscription (a gone client found by a push).
    s.drop_subscription(&f.tenant.id, "conversation:a", "c2")
        .await
        .unwrap();
    assert!(
        s.subscribers(&f.tenant.id, "conversation:a")
            .await
            .unwrap()
            .is_empty()
    );
}

pub(super) async fn stream_tokens_admit_until_they_expire(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    let now = Timestamp::now();
    let token = StreamToken {
        tenant_id: f.tenant.id.clone(),
        expires_at: now.secs() + 300,
        key_hash: Some("key-hash-1".into()),
        topics: None,
    };
    s.put_stream_token("h1", &token).await.unwrap();
    assert_eq!(s.stream_token("h1", now).await.unwrap(), Some(token));
    // One of the operators' pages names no key, and only its conversation's topic.
    let page = StreamToken {
        key_hash: None,
        topics: Some(vec!["channel_health".into(), "conversation:c-1".into()]),
        ..s.stream_token("h1", now).await.unwrap().unwrap()
    };
    s.put_stream_token("h3", &page).await.unwrap();
    assert_eq!(s.stream_token("h3", now).await.unwrap(), Some(page));
    assert_eq!(s.stream_token("h2", now).await.unwrap(), None);
    // At its expiry it no longer admits, whether or not TTL has removed it yet.
    assert_eq!(
        s.stream_token("h1", now.plus_ms(300_000)).await.unwrap(),
        None
    );
}

/// The dead-letter day counters (the `dead_letters` gauge) sum what was added and taken
/// away, leave out expired days, and share the health table with the checks without showing
/// in a channel's history.
pub(super) async fn dead_letter_counters_sum_what_is_still_stored(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    let now = Timestamp::now();
    let today = now.secs().div_euclid(86_400);
    let ch = &f.channel.id;
    s.count_dead_letters(ch, today, 3, now.secs() + 86_400)
        .await
        .unwrap();
    s.count_dead_letters(ch, today, -1, now.secs() + 86_400)
        .await
        .unwrap();
    s.count_dead_letters(ch, today - 10, 5, now.secs() + 86_400)
        .await
        .unwrap();
    // Expired (DynamoDB deletes it up to two days late): not counted.
    s.count_dead_letters(ch, today - 40, 7, now.secs() - 1)
        .await
        .unwrap();
    assert_eq!(s.stored_dead_letters(ch, today - 60, now).await.unwrap(), 7);
    assert_eq!(s.stored_dead_letters(ch, today - 5, now).await.unwrap(), 2);
    assert_eq!(
        s.stored_dead_letters(&converger_core::ChannelId::generate(), today - 60, now)
            .await
            .unwrap(),
        0
    );
    let check = converger_ports::HealthCheck {
        channel_id: ch.clone(),
        tenant_id: f.tenant.id.clone(),
        status: converger_core::health::HealthStatus::Healthy,
        previous_status: None,
        failure_rate: 0.0,
        total_deliveries: 4,
        failed_deliveries: 0,
        checked_at: now,
        expires_at: now.secs() + 3600,
    };
    s.record_health(std::slice::from_ref(&check)).await.unwrap();
    assert_eq!(s.health_history(ch, 10, now).await.unwrap(), vec![check]);
}

/// A connection marks its tenant live until it expires, in the day it was made: a reader
/// finds it through the next day, never a tenant that has not connected, nor one whose last
/// connection expired.
pub(super) async fn a_connection_marks_its_tenant_live_until_it_expires(backend: Backend) {
    let f = fixture(backend).await;
    let s = &f.store;
    // A day of its own, to come (away from today's item, which other tests' connections
    // write, and from the table's TTL).
    let day = time::now_ms() / 86_400_000 + 1_000 + time::now_ms() % 100_000;
    let noon = Timestamp::from_ms(day * 86_400_000 + 43_200_000);
    assert!(!s.live_tenants(noon).await.unwrap().has(&f.tenant.id));
    s.put_stream_connection(&connection(&f, "l1", noon))
        .await
        .unwrap();
    let other = TenantId::generate();
    let mut theirs = connection(&f, "l2", noon);
    theirs.tenant_id = other.clone();
    // Its connection expires within the minute.
    theirs.expires_at = noon.secs() + 60;
    s.put_stream_connection(&theirs).await.unwrap();
    let live = s.live_tenants(noon).await.unwrap();
    assert!(live.has(&f.tenant.id) && live.has(&other), "{live:?}");
    assert!(!live.has(&TenantId::generate()), "{live:?}");
    // Half an hour on: the other's connection has expired, this tenant's has not.
    let later = Timestamp::from_ms(noon.ms() + 1_800_000);
    let live = s.live_tenants(later).await.unwrap();
    assert!(live.has(&f.tenant.id) && !live.has(&other), "{live:?}");
    // A connection made just before midnight is found the next day.
    let late = Timestamp::from_ms((day + 1) * 86_400_000 - 60_000);
    let mut night = connection(&f, "l3", late);
    night.tenant_id = other.clone();
    s.put_stream_connection(&night).await.unwrap();
    let next_day = Timestamp::from_ms((day + 1) * 86_400_000 + 600_000);
    assert!(s.live_tenants(next_day).await.unwrap().has(&other));
}
