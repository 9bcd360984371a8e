//! Signing in and out: every session of a user ended by signing out, and the counts that lock
//! an account or throttle an address after failed sign-ins.

use super::*;

/// Signing out ends every session of the user, not only the browser's cookie: another
/// browser signed in as the same user is sent to the sign-in page; signing in again works.
#[tokio::test]
async fn signing_out_ends_every_session_of_the_user() {
    let t = TestStack::start().await;
    let (email, password) = (&t.stack.admin_email, &t.stack.admin_password);
    let a = Browser::new(&t.stack.admin_url);
    let b = Browser::new(&t.stack.admin_url);
    a.sign_in("admin", email, password).await;
    b.sign_in("admin", email, password).await;
    assert_eq!(b.get("/admin/deliveries").await.0, 200);
    // A session that began earlier than the sign-out (sessions count whole seconds).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let token = a.csrf("/admin/deliveries").await;
    let (status, _, loc) = a.post("/admin/logout", &[("_csrf", &token)]).await;
    assert_eq!((status, loc.as_deref()), (303, Some("/admin/login")));
    let (status, _) = b.get("/admin/deliveries").await;
    assert_eq!(status, 303, "the other browser's session ended too");
    let (status, loc) = b.sign_in("admin", email, password).await;
    assert_eq!((status, loc.as_deref()), (303, Some("/admin")));
    assert_eq!(b.get("/admin/deliveries").await.0, 200);
}

/// Five failed sign-ins within 15 minutes lock the account for 15 minutes: then even the right
/// password gets the wrong-password answer. A success before that starts the count again.
#[tokio::test]
async fn repeated_failed_sign_ins_lock_the_account() {
    let t = TestStack::start().await;
    t.web_user("admin", "guarded@ops.example", "viewer", None)
        .await;
    t.web_user("admin", "other@ops.example", "viewer", None)
        .await;
    let b = Browser::new(&t.stack.admin_url);
    let wrong = |n: usize| {
        let b = &b;
        async move {
            for _ in 0..n {
                let (status, loc) = b.sign_in("admin", "guarded@ops.example", "not it").await;
                assert_eq!((status, loc), (200, None), "refused");
            }
        }
    };
    wrong(4).await;
    let (status, _) = b
        .sign_in("admin", "guarded@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(
        status, 303,
        "four failures do not lock; a success clears them"
    );
    wrong(4).await;
    let (status, _) = b
        .sign_in("admin", "guarded@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(status, 303, "the count started again");
    wrong(5).await;
    let fresh = Browser::new(&t.stack.admin_url);
    let (status, loc) = fresh
        .sign_in("admin", "guarded@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(
        (status, loc),
        (200, None),
        "locked: the right password is refused"
    );
    let (_, html) = fresh.get("/admin/login").await;
    assert!(
        !html.to_lowercase().contains("locked"),
        "the page tells a guesser nothing"
    );
    let (status, _) = fresh
        .sign_in("admin", "other@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(status, 303, "other users are not locked");
}

/// Guesses sent in parallel count one each: 20 at once lock the account from their address,
/// even for the right password. The lock is the guesser's address's only: the same account
/// signs in from another address. An unknown email is counted the same way as a known one.
#[tokio::test]
async fn parallel_wrong_passwords_lock_the_account_from_their_address_only() {
    let t = TestStack::start().await;
    t.web_user("admin", "raced@ops.example", "viewer", None)
        .await;
    let guesser = Browser::at(&t.stack.admin_url, "127.0.0.2");
    let answers = futures::future::join_all((0..20).map(|i| {
        let g = &guesser;
        async move {
            g.sign_in("admin", "raced@ops.example", &format!("guess {i}"))
                .await
        }
    }))
    .await;
    assert!(answers.iter().all(|a| *a == (200, None)), "{answers:?}");
    let (status, loc) = guesser
        .sign_in("admin", "raced@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(
        (status, loc),
        (200, None),
        "locked from the guesser's address"
    );
    let store = &t.stack.store;
    let (count, _) = store
        .sign_in_count(&converger_ports::sign_in_account_key(
            converger_core::web::Realm::Admin,
            "raced@ops.example",
            "127.0.0.2",
        ))
        .await
        .unwrap();
    assert!(
        count.locked(converger_core::time::now_ms() / 1000),
        "{count:?}"
    );

    let operator = Browser::at(&t.stack.admin_url, "127.0.0.3");
    let (status, _) = operator
        .sign_in("admin", "raced@ops.example", WEB_PASSWORD)
        .await;
    assert_eq!(status, 303, "another address is not locked out");

    // Unknown: counted under its own key like any email (the same reads and writes).
    for _ in 0..2 {
        guesser.sign_in("admin", "nobody@ops.example", "x").await;
    }
    let (count, rev) = store
        .sign_in_count(&converger_ports::sign_in_account_key(
            converger_core::web::Realm::Admin,
            "nobody@ops.example",
            "127.0.0.2",
        ))
        .await
        .unwrap();
    assert_eq!((count.failures, rev), (2, 2));
}

/// One address may try 50 sign-ins in 15 minutes, at every account together: then it is
/// answered 429 before any password is checked, and other addresses are not.
#[tokio::test]
async fn one_address_is_throttled_across_accounts() {
    let t = TestStack::start().await;
    let spray = Browser::at(&t.stack.admin_url, "127.0.0.4");
    let max = converger_core::web::SIGN_IN_SOURCE_MAX as usize;
    for i in 0..max {
        let (status, _) = spray
            .sign_in("admin", &format!("user{i}@ops.example"), "x")
            .await;
        assert_eq!(status, 200, "attempt {i}");
    }
    let token = spray.csrf("/admin/login").await;
    let (status, html, _) = spray
        .post(
            "/admin/login",
            &[
                ("_csrf", &token),
                ("email", &t.stack.admin_email),
                ("password", &t.stack.admin_password),
            ],
        )
        .await;
    assert_eq!(status, 429, "{html}");
    assert!(html.contains("Too many sign-in attempts"), "{html}");
    let (status, _) = Browser::at(&t.stack.admin_url, "127.0.0.5")
        .sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    assert_eq!(status, 303);
}
