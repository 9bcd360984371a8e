//! Tenants, users and their keys, channels and idempotency keys.

use super::*;
use converger_core::Timestamp;

pub(super) async fn tenants_channels_and_activities_round_trip(b: Backend) {
    let f = fixture(b).await;
    assert_eq!(
        f.store.get_tenant(&f.tenant.id).await.unwrap(),
        Some(f.tenant.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-1").await.unwrap(),
        Some(f.tenant.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-2").await.unwrap(),
        None
    );
    assert!(
        f.store.create_channel(&f.channel).await.is_err(),
        "ids are unique"
    );

    let patched = f
        .store
        .update_channel(
            &f.tenant.id,
            &f.channel.id,
            &ChannelPatch {
                active: Some(false),
                ..Default::default()
            },
            Timestamp::parse("2030-01-01T00:00:00.000000Z").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(!patched.active);
    assert_eq!(
        patched.signing_secret, f.channel.signing_secret,
        "a patch leaves other fields alone"
    );
    // Middleware steps are kept as written, and an empty list removes them.
    let steps = converger_core::middleware::parse(&serde_json::json!([
        {"type": "halt", "if": "payload.x == 1", "reason": "x is one"},
        {"type": "transform", "script": "payload.y = 2;"},
    ]))
    .unwrap();
    for want in [steps, Vec::new()] {
        let patched = f
            .store
            .update_channel(
                &f.tenant.id,
                &f.channel.id,
                &ChannelPatch {
                    middleware: Some(want.clone()),
                    ..Default::default()
                },
                Timestamp::parse("2030-01-01T00:00:00.000000Z").unwrap(),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(patched.middleware, want);
        let read = f.store.get_channel(&f.channel.id).await.unwrap().unwrap();
        assert_eq!(read.middleware, want);
    }
    // A channel's settings are kept typed: what a patch writes reads back equal, every
    // override set (a `null` cap included), and a patch that clears them leaves the defaults.
    fn settings<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }
    let all = ChannelPatch {
        retry_policy: Some(settings(serde_json::json!({
            "max_attempts": 7, "backoff": "linear", "base_ms": 1000, "max_ms": 60000,
            "timeout_ms": 5000, "schedule": [5000, 30000], "jitter": 0.1,
            "retry_after_max_ms": 90000,
        }))),
        circuit_breaker: Some(settings(serde_json::json!({
            "failure_threshold": 3, "cooldown_ms": 5000, "park_seconds": 60,
            "max_in_flight": null, "replay_dead_letters_on_close": true,
            "replay_window_ms": 60000,
        }))),
        rate_limit: Some(Some("80/s".parse().unwrap())),
        auto_disable: Some(settings(
            serde_json::json!({"failed_attempts": 0, "success_window_ms": 60000}),
        )),
        ..Default::default()
    };
    let cleared = ChannelPatch {
        retry_policy: Some(Default::default()),
        circuit_breaker: Some(Default::default()),
        rate_limit: Some(None),
        auto_disable: Some(Default::default()),
        ..Default::default()
    };
    for patch in [all, cleared] {
        let patched = f
            .store
            .update_channel(
                &f.tenant.id,
                &f.channel.id,
                &patch,
                Timestamp::parse("2030-01-01T00:00:00.000000Z").unwrap(),
            )
            .await
            .unwrap()
            .unwrap();
        let read = f.store.get_channel(&f.channel.id).await.unwrap().unwrap();
        for c in [&patched, &read] {
            assert_eq!(Some(&c.retry_policy), patch.retry_policy.as_ref());
            assert_eq!(Some(c.circuit_breaker), patch.circuit_breaker);
            assert_eq!(Some(c.rate_limit), patch.rate_limit);
            assert_eq!(Some(c.auto_disable), patch.auto_disable);
        }
    }
    let other = TenantId::generate();
    assert_eq!(
        f.store
            .update_channel(
                &other,
                &f.channel.id,
                &ChannelPatch::default(),
                Timestamp::now()
            )
            .await
            .unwrap(),
        None,
        "another tenant cannot update the channel"
    );

    assert_eq!(f.store.next_seq(&f.tenant.id, "conv").await.unwrap(), 1);
    assert_eq!(f.store.next_seq(&f.tenant.id, "conv").await.unwrap(), 2);
    assert_eq!(f.store.next_seq(&f.tenant.id, "other").await.unwrap(), 1);

    let a = activity(&f);
    let d = new_delivery(
        &a,
        &f.channel,
        Tier::Bulk,
        time::now_ms(),
        &a.created_at.rfc3339(),
    );
    assert_eq!(
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap(),
        Created::New
    );
    assert_eq!(
        f.store
            .create_activity(&a, std::slice::from_ref(&d))
            .await
            .unwrap(),
        Created::Duplicate
    );
    assert_eq!(
        f.store.get_activity(&a.tenant_id, &a.id).await.unwrap(),
        Some(a.clone())
    );
    // Activity ids are per tenant: another tenant reads nothing under the id, and may use it.
    assert_eq!(f.store.get_activity(&other, &a.id).await.unwrap(), None);
    let theirs = Activity {
        tenant_id: other.clone(),
        channel_ids: vec![],
        ..a.clone()
    };
    assert_eq!(
        f.store.create_activity(&theirs, &[]).await.unwrap(),
        Created::New
    );
    assert_eq!(
        f.store.get_activity(&other, &a.id).await.unwrap(),
        Some(theirs)
    );
    assert_eq!(
        f.store.get_activity(&a.tenant_id, &a.id).await.unwrap(),
        Some(a.clone())
    );
    assert_eq!(f.store.get_delivery(&d.id).await.unwrap(), Some(d.clone()));
    assert_eq!(
        f.store
            .get_deliveries(std::slice::from_ref(&d.id))
            .await
            .unwrap(),
        vec![d]
    );
}

pub(super) async fn scoped_reads_see_only_their_tenant(b: Backend) {
    use converger_ports::Scope;
    let f = fixture(b).await;
    let a = activity(&f);
    let d = new_delivery(
        &a,
        &f.channel,
        Tier::Default,
        time::now_ms(),
        &a.created_at.rfc3339(),
    );
    f.store
        .create_fresh_activity(&a, std::slice::from_ref(&d))
        .await
        .unwrap();
    let other = TenantId::generate();
    let own = Scope::Tenant(&f.tenant.id);
    for (scope, seen) in [
        (own, true),
        (Scope::Tenant(&other), false),
        (Scope::Operator, true),
    ] {
        assert_eq!(
            f.store
                .channel_in(scope, &f.channel.id)
                .await
                .unwrap()
                .is_some(),
            seen
        );
        assert_eq!(
            f.store.delivery_in(scope, &d.id).await.unwrap().is_some(),
            seen
        );
    }
}

pub(super) async fn users_tenants_and_keys(b: Backend) {
    use converger_core::web::{Realm, Role};
    use converger_ports::{StoreError, User};
    let f = fixture(b).await;
    let user = User {
        realm: Realm::Admin,
        email: "ops@example.com".into(),
        role: Role::Viewer,
        tenant_id: None,
        password_hash: "hash-a".into(),
        created_at: converger_core::Timestamp::now(),
        sessions_after: None,
    };
    f.store.create_user(&user).await.unwrap();
    assert!(matches!(
        f.store.create_user(&user).await,
        Err(StoreError::Conflict(_))
    ));
    // Emails are found whatever their case; realms are apart.
    assert_eq!(
        f.store
            .get_user(Realm::Admin, "OPS@example.com")
            .await
            .unwrap(),
        Some(user.clone())
    );
    assert_eq!(
        f.store
            .get_user(Realm::Portal, "ops@example.com")
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .set_password(Realm::Admin, "ops@example.com", "hash-b")
            .await
            .unwrap()
    );
    let changed = f
        .store
        .get_user(Realm::Admin, "ops@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.password_hash, "hash-b");
    assert!(
        changed.sessions_after.is_some(),
        "a password change ends the sessions"
    );
    assert!(
        f.store
            .end_sessions(Realm::Admin, "ops@example.com", 42)
            .await
            .unwrap()
    );
    assert_eq!(
        f.store
            .get_user(Realm::Admin, "ops@example.com")
            .await
            .unwrap()
            .unwrap()
            .sessions_after,
        Some(42)
    );
    assert!(
        !f.store
            .end_sessions(Realm::Admin, "nobody@example.com", 42)
            .await
            .unwrap()
    );
    // Sign-in counts: written only over the revision read (parallel attempts count one
    // each), for any key (known email or not), cleared to nothing.
    let key = converger_ports::sign_in_account_key(Realm::Admin, "ops@example.com", "203.0.113.9");
    let now_s = converger_core::time::now_ms() / 1000;
    let later = now_s + 3_600;
    let once = converger_core::web::SignInState::default().after_failure(now_s, 5);
    assert_eq!(
        f.store.sign_in_count(&key).await.unwrap(),
        (Default::default(), 0)
    );
    assert!(
        f.store
            .put_sign_in_count(&key, 0, &once, later)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, 0, &once, later)
            .await
            .unwrap(),
        "a second writer of revision 0 loses"
    );
    let (read, rev) = f.store.sign_in_count(&key).await.unwrap();
    assert_eq!(read, once);
    let twice = read.after_failure(now_s + 1, 5);
    assert!(
        f.store
            .put_sign_in_count(&key, rev, &twice, later)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, rev, &twice, later)
            .await
            .unwrap()
    );
    assert_eq!(f.store.sign_in_count(&key).await.unwrap().0.failures, 2);
    f.store.clear_sign_in_count(&key).await.unwrap();
    assert_eq!(
        f.store.sign_in_count(&key).await.unwrap(),
        (Default::default(), 0)
    );
    assert!(
        !f.store
            .put_sign_in_count(&key, rev + 1, &twice, later)
            .await
            .unwrap(),
        "a writer that read before the clear loses"
    );
    let unknown = converger_ports::sign_in_source_key("2001:db8::/64");
    assert!(
        f.store
            .put_sign_in_count(&unknown, 0, &once, i64::MAX / 2)
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .set_password(Realm::Admin, "nobody@example.com", "x")
            .await
            .unwrap()
    );

    // Tenants only (not their key and user items); the tenant's channels.
    let tenants = f.store.list_tenants().await.unwrap();
    assert_eq!(
        tenants.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        vec![f.tenant.id.clone()]
    );
    let channels = f.store.list_channels(&f.tenant.id).await.unwrap();
    assert_eq!(
        channels.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![f.channel.id.clone()]
    );
    assert!(
        f.store
            .list_channels(&TenantId::generate())
            .await
            .unwrap()
            .is_empty()
    );

    // A rotated key: the new one finds the tenant, the old one nothing.
    assert!(
        f.store
            .rotate_api_key(&f.tenant.id, "hash-2")
            .await
            .unwrap()
    );
    assert_eq!(
        f.store
            .tenant_by_api_key_hash("hash-2")
            .await
            .unwrap()
            .map(|t| t.id),
        Some(f.tenant.id.clone())
    );
    assert_eq!(
        f.store.tenant_by_api_key_hash("hash-1").await.unwrap(),
        None
    );
    assert!(
        !f.store
            .rotate_api_key(&TenantId::generate(), "hash-3")
            .await
            .unwrap()
    );
}

pub(super) async fn channel_lifecycle_lists_rotates_and_deletes(backend: Backend) {
    use converger_core::signing::RetiringSecret;
    use converger_ports::{ChannelQuery, Scope};
    let f = fixture(backend).await;
    let now = Timestamp::now();
    // Five more channels: webhooks, one inactive; another tenant's channel is never listed.
    let mut ids = vec![f.channel.id.clone()];
    for i in 0..5 {
        let mut c = Channel::new(
            f.tenant.id.clone(),
            ChannelType::Webhook,
            &format!("hook {i}"),
            Map::new(),
            now,
        );
        c.active = i != 4;
        c.event_types = vec!["order.paid".into()];
        f.store.create_channel(&c).await.unwrap();
        ids.push(c.id);
    }
    let foreign = Channel::new(
        TenantId::generate(),
        ChannelType::Webhook,
        "x",
        Map::new(),
        now,
    );
    f.store.create_channel(&foreign).await.unwrap();
    ids.sort();
    let query = |kind, active, limit, after| ChannelQuery {
        tenant: f.tenant.id.clone(),
        kind,
        active,
        limit,
        after,
    };
    // Pages of two, in id order, cover every channel once.
    let (mut seen, mut after) = (Vec::new(), None);
    loop {
        let (page, more) = f
            .store
            .list_channel_page(&query(None, None, 2, after))
            .await
            .unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|c| c.id.clone()));
        after = page.last().map(|c| c.id.clone());
        if !more {
            break;
        }
    }
    assert_eq!(seen, ids);
    let (webhooks, _) = f
        .store
        .list_channel_page(&query(Some(ChannelType::Webhook), Some(true), 100, None))
        .await
        .unwrap();
    assert_eq!(webhooks.len(), 4);
    assert!(
        webhooks
            .iter()
            .all(|c| c.kind == ChannelType::Webhook && c.active)
    );
    assert_eq!(webhooks[0].event_types, ["order.paid"]);
    let (inactive, more) = f
        .store
        .list_channel_page(&query(None, Some(false), 100, None))
        .await
        .unwrap();
    assert_eq!((inactive.len(), more), (1, false));

    // A rotation replaces the secret it names, and only that one.
    let old = f.channel.signing_secret.clone();
    let retiring = vec![RetiringSecret {
        secret: old.clone(),
        until_ms: time::now_ms() + 60_000,
    }];
    let rotation = SecretRotation {
        replaces: old.clone(),
        secret: "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldw==".into(),
        retiring: retiring.clone(),
    };
    let rotated = f
        .store
        .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.signing_secret, rotation.secret);
    assert_eq!(rotated.retiring_secrets, retiring);
    let again = f
        .store
        .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, now)
        .await
        .unwrap();
    assert_eq!(again, None, "the secret it replaces is no longer current");
    assert_eq!(
        f.store
            .rotate_secret(&TenantId::generate(), &f.channel.id, &rotation, now)
            .await
            .unwrap(),
        None
    );
    let stored = f.store.get_channel(&f.channel.id).await.unwrap().unwrap();
    assert_eq!(stored.signing_secret, rotation.secret);
    assert_eq!(stored.retiring_secrets, retiring);

    // Deleting: once, by its tenant; then gone from the tenant's reads, lists and writes,
    // kept for an operator and for the history of its deliveries.
    assert_eq!(
        f.store
            .delete_channel(&TenantId::generate(), &f.channel.id, now, 1)
            .await
            .unwrap(),
        None
    );
    let expires = time::now_ms() / 1000 + 86_400;
    let deleted = f
        .store
        .delete_channel(&f.tenant.id, &f.channel.id, now, expires)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.deleted_at, Some(now));
    assert!(!deleted.active);
    assert_eq!(deleted.expires_at, Some(expires));
    assert_eq!(
        f.store
            .delete_channel(&f.tenant.id, &f.channel.id, now, expires)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        f.store
            .channel_in(Scope::Tenant(&f.tenant.id), &f.channel.id)
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .channel_in(Scope::Operator, &f.channel.id)
            .await
            .unwrap()
            .is_some()
    );
    let patch = ChannelPatch {
        name: Some("renamed".into()),
        ..Default::default()
    };
    assert_eq!(
        f.store
            .update_channel(&f.tenant.id, &f.channel.id, &patch, now)
            .await
            .unwrap(),
        None
    );
    let rotation = SecretRotation {
        replaces: stored.signing_secret.clone(),
        ..rotation
    };
    assert_eq!(
        f.store
            .rotate_secret(&f.tenant.id, &f.channel.id, &rotation, now)
            .await
            .unwrap(),
        None
    );
    let (left, _) = f
        .store
        .list_channel_page(&query(None, None, 100, None))
        .await
        .unwrap();
    assert!(left.iter().all(|c| c.id != f.channel.id));
    assert_eq!(left.len(), 5);
    assert!(
        f.store
            .list_channels(&f.tenant.id)
            .await
            .unwrap()
            .iter()
            .all(|c| c.id != f.channel.id)
    );
}

pub(super) async fn idempotency_keys_are_held_once_answered_freed_and_taken_over(backend: Backend) {
    use converger_ports::KeyRecord;
    let f = fixture(backend).await;
    let now = time::now_ms();
    let record = |fp: &str, locked_until: i64| KeyRecord {
        fingerprint: fp.into(),
        locked_until,
        status: None,
        body: None,
        expires_at: now / 1000 + 86_400,
    };
    let t = &f.tenant.id;
    // One holder; the others see it, running.
    assert_eq!(
        f.store
            .take_key(t, "k1", &record("a", now + 60_000), Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );
    let held = f
        .store
        .take_key(t, "k1", &record("a", now + 60_000), Timestamp::from_ms(now))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((held.fingerprint.as_str(), held.answer()), ("a", None));
    // Another tenant's key of the same name is another key.
    let other = TenantId::generate();
    assert_eq!(
        f.store
            .take_key(
                &other,
                "k1",
                &record("b", now + 60_000),
                Timestamp::from_ms(now)
            )
            .await
            .unwrap(),
        None
    );
    // Answered: kept, and given to whoever asks; an answer by another fingerprint is ignored.
    f.store.answer_key(t, "k1", "zzz", 500, "{}").await.unwrap();
    f.store
        .answer_key(t, "k1", "a", 201, r#"{"id":1}"#)
        .await
        .unwrap();
    let held = f.store.get_key(t, "k1").await.unwrap().unwrap();
    assert_eq!(held.answer(), Some((201, r#"{"id":1}"#)));
    let later = now + 120_000;
    let held = f
        .store
        .take_key(
            t,
            "k1",
            &record("a", later + 60_000),
            Timestamp::from_ms(later),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        held.answer(),
        Some((201, r#"{"id":1}"#)),
        "an answer outlives the lock"
    );
    // An answered key is not freed.
    f.store.free_key(t, "k1", "a").await.unwrap();
    assert!(f.store.get_key(t, "k1").await.unwrap().is_some());

    // Freed without an answer: taken again at once.
    assert_eq!(
        f.store
            .take_key(t, "k2", &record("c", now + 60_000), Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );
    f.store.free_key(t, "k2", "other").await.unwrap();
    assert!(
        f.store.get_key(t, "k2").await.unwrap().is_some(),
        "only its holder frees it"
    );
    f.store.free_key(t, "k2", "c").await.unwrap();
    assert_eq!(f.store.get_key(t, "k2").await.unwrap(), None);
    assert_eq!(
        f.store
            .take_key(t, "k2", &record("d", now + 60_000), Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );

    // A holder that never answered is taken over once its lock ends.
    assert_eq!(
        f.store
            .take_key(t, "k3", &record("e", now + 1_000), Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );
    assert!(
        f.store
            .take_key(
                t,
                "k3",
                &record("e", now + 61_000),
                Timestamp::from_ms(now + 500)
            )
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        f.store
            .take_key(
                t,
                "k3",
                &record("e", now + 62_000),
                Timestamp::from_ms(now + 2_000)
            )
            .await
            .unwrap(),
        None
    );
    // An expired record is absent, and its key free.
    let gone = KeyRecord {
        expires_at: now / 1000 - 1,
        status: Some(201),
        body: Some("{}".into()),
        ..record("g", now + 60_000)
    };
    assert_eq!(
        f.store
            .take_key(t, "k4", &gone, Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );
    assert_eq!(f.store.get_key(t, "k4").await.unwrap(), None);
    assert_eq!(
        f.store
            .take_key(t, "k4", &record("h", now + 60_000), Timestamp::from_ms(now))
            .await
            .unwrap(),
        None
    );
}
