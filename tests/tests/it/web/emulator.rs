//! The scenarios that also cover AWS code paths: on the template deployed on the emulator,
//! every request IAM-checked.

use super::*;
use converger_tests::views::{StreamTokenView, TenantView};

/// A storage failure reaches a page as a plain "try again" page: the store's error text
/// (SDK messages, table names, ARNs, request ids) stays in the log.
#[tokio::test]
async fn pages_show_storage_failures_without_the_stores_error_text() {
    let t = TestStack::on_emulator().await;
    let rx = Receiver::always(400).await.unwrap();
    let failing = t.failing_tenant(&rx, "broken", 1).await;
    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let list = format!("/admin/deliveries?tenant={}", failing.tenant);
    let one = format!(
        "/admin/deliveries/{}?tenant={}",
        failing.deliveries[0], failing.tenant
    );
    assert_eq!(b.get(&list).await.0, 200);
    assert_eq!(b.get(&one).await.0, 200);
    let table = t.aws().resources.deliveries.clone();
    t.aws()
        .clients
        .dynamodb
        .delete_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let export = format!("/admin/deliveries/export?tenant={}", failing.tenant);
    for path in [&list, &one, &export] {
        let (status, html) = b.get(path).await;
        assert_eq!(status, 503, "{path}: {html}");
        assert!(html.contains("Storage is unavailable"), "{path}: {html}");
        for leak in [
            table.as_str(),
            "ResourceNotFound",
            "arn:aws",
            "service error",
            "dispatch",
            "Requested resource",
        ] {
            assert!(!html.contains(leak), "{path} shows {leak:?}: {html}");
        }
    }
}

#[tokio::test]
async fn deliveries_page_filters_retries_and_exports() {
    let t = TestStack::on_emulator().await;
    let rx = Receiver::always(400).await.unwrap();
    let FailingTenant {
        tenant,
        key,
        channel: ch,
        deliveries: ids,
    } = t.failing_tenant(&rx, "=HYPERLINK(\"x\")", 3).await;
    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;

    // Failed by default, all three; filters in the URL.
    let (status, html) = b.get(&format!("/admin/deliveries?tenant={tenant}")).await;
    assert_eq!(status, 200);
    for id in &ids {
        assert!(html.contains(id.as_str()), "{id} listed");
    }
    let (status, page) = b
        .get(&format!("/admin/deliveries/{}?tenant={tenant}", ids[0]))
        .await;
    assert_eq!(status, 200);
    assert!(page.contains("Payload preview") && page.contains("id=\"attempts\""));
    let (_, sent) = b
        .get(&format!("/admin/deliveries?tenant={tenant}&status=sent"))
        .await;
    assert!(!sent.contains(ids[0].as_str()));
    let (_, searched) = b
        .get(&format!("/admin/deliveries?tenant={tenant}&q=HTTP%20400"))
        .await;
    assert!(searched.contains(ids[0].as_str()));
    let (_, none) = b
        .get(&format!(
            "/admin/deliveries?tenant={tenant}&q=no-such-error"
        ))
        .await;
    assert!(none.contains("No deliveries match."));

    // Retry one: it leaves the failed list (pending, then failed again with retry_count 1).
    rx.set_fallback(converger_tests::Reply::status(200));
    let token = csrf_of(&html);
    let (status, _, loc) = b
        .post(
            &format!("/admin/deliveries/{}/retry", ids[0]),
            &[("_csrf", &token), ("back", &format!("tenant={tenant}"))],
        )
        .await;
    assert_eq!(status, 303);
    assert!(loc.unwrap().starts_with("/admin/deliveries?tenant="));
    let d = t
        .wait_delivery(&key, &ids[0], Duration::from_secs(20), |d| {
            d.status == "sent"
        })
        .await;
    assert_eq!(d.retry_count, 1);
    assert_eq!(d.retried_by.as_deref(), Some("admin:admin@localhost"));
    let (_, html) = b.get(&format!("/admin/deliveries?tenant={tenant}")).await;
    assert!(
        !html.contains(&format!("data-id=\"{}\"", ids[0])),
        "left the failed list"
    );

    // Retry all failed (same filters).
    let (status, _, _) = b
        .post(
            "/admin/deliveries/retry-all",
            &[("_csrf", &token), ("tenant", &tenant), ("channel", &ch)],
        )
        .await;
    assert_eq!(status, 303);
    for id in &ids[1..] {
        let d = t
            .wait_delivery(&key, id, Duration::from_secs(20), |d| d.status == "sent")
            .await;
        assert_eq!(d.status, "sent", "{d:?}");
    }

    // The CSV: the reference's columns, formula cells escaped.
    let (status, csv) = b
        .get(&format!(
            "/admin/deliveries/export?tenant={tenant}&status=any"
        ))
        .await;
    assert_eq!(status, 200);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "id,tenant_id,channel_id,channel_name,activity_id,status,attempts,last_error,retry_count,retried_by,retried_at,inserted_at,updated_at"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3, "{csv}");
    for r in &rows {
        assert!(
            r.contains(",\"'=HYPERLINK(\"\"x\"\")\","),
            "the name is escaped and quoted: {r}"
        );
        assert!(!r.contains(",=HYPERLINK"));
    }
}

#[tokio::test]
async fn load_more_pages_through_every_tenant_once_in_order() {
    use converger_core::{DeliveryStatus, time};
    let t = TestStack::on_emulator().await;
    // Two tenants' failed deliveries, interleaved in time: 70 and 40 rows, 110 in all
    // (three pages of 50).
    let mut expected = Vec::new();
    let start = time::now_ms() - 3_600_000;
    let mut rows = Vec::new();
    for (n, every) in [(70usize, 1i64), (40, 2)] {
        let (tenant, key) = t.tenant("default").await;
        let ch = t.webhook(&key, "http://127.0.0.1:9/x", json!({})).await;
        let ch = ch.id.as_str();
        for i in 0..n {
            let mut d = t.bare_delivery(&tenant, ch, start).await;
            let at = start + (i as i64 * every) * 1000 + every;
            d.status = DeliveryStatus::Failed;
            d.updated_at = converger_core::Timestamp::from_ms(at);
            rows.push(d);
        }
    }
    t.stack.seed_rows(&[], &rows).await.unwrap();
    rows.sort_by_key(|d| std::cmp::Reverse(d.sort_key()));
    expected.extend(rows.iter().map(|d| d.id.to_string()));

    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let mut seen = Vec::new();
    let mut next = Some("/admin/deliveries".to_owned());
    let mut pages = 0;
    while let Some(path) = next.take() {
        let (status, html) = b.get(&path).await;
        assert_eq!(status, 200);
        pages += 1;
        assert!(pages <= 5, "Load more does not end");
        for part in html.split("tr class=\"delivery\" data-id=\"").skip(1) {
            seen.push(part[..part.find('"').unwrap()].to_owned());
        }
        if let Some(at) = html.find("id=\"load-more\" href=\"") {
            let rest = &html[at + "id=\"load-more\" href=\"".len()..];
            next = Some(rest[..rest.find('"').unwrap()].replace("&amp;", "&"));
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected, "every row once, newest first");
}

#[tokio::test]
async fn channels_pause_resume_and_tenants() {
    let t = TestStack::on_emulator().await;
    let (tenant, key) = t.tenant("default").await;
    let hook = t.webhook(&key, "http://127.0.0.1:9/x", json!({})).await;
    let ch = hook.id.as_str().to_owned();
    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (_, html) = b.get(&format!("/admin/channels?tenant={tenant}")).await;
    assert!(html.contains("Pause deliveries"));
    assert_eq!(delivery_state(&b, &tenant, &ch).await, "Flowing");
    let token = csrf_of(&html);
    let (status, _, _) = b
        .post(&format!("/admin/channels/{ch}/pause"), &[("_csrf", &token)])
        .await;
    assert_eq!(status, 303);
    assert_eq!(delivery_state(&b, &tenant, &ch).await, "Paused");
    let (_, html) = b.get(&format!("/admin/channels?tenant={tenant}")).await;
    assert!(html.contains("Resume deliveries"));
    b.post(
        &format!("/admin/channels/{ch}/resume"),
        &[("_csrf", &token)],
    )
    .await;
    assert_eq!(delivery_state(&b, &tenant, &ch).await, "Flowing");
    // Both are audited.
    let (_, audit) = b.get(&format!("/admin/audit?tenant={tenant}")).await;
    assert!(
        audit.contains("pause_deliveries") && audit.contains("resume_deliveries"),
        "{audit}"
    );

    // Tenants: create one (its key shown once), rotate a key (the old one stops working).
    let (_, html) = b
        .post(
            "/admin/tenants",
            &[("_csrf", &token), ("name", "Acme"), ("tier", "high")],
        )
        .await
        .1
        .pipe(|h| (0, h));
    assert!(html.contains("id=\"api-key\""), "{html}");
    // Its email sender identities: set on the page, checked, shown.
    let (status, _, _) = b
        .post(
            &format!("/admin/tenants/{tenant}"),
            &[
                ("_csrf", &token),
                ("email_senders", "Acme.example, news@other.example"),
            ],
        )
        .await;
    assert_eq!(status, 303);
    let a: TenantView = t
        .admin_get(&format!("/admin/api/tenants/{tenant}"))
        .await
        .typed(200)
        .unwrap();
    assert_eq!(a.email_senders, ["acme.example", "news@other.example"]);
    let (_, html) = b.get("/admin/tenants").await;
    assert!(html.contains("acme.example, news@other.example"), "{html}");
    let (status, html, _) = b
        .post(
            &format!("/admin/tenants/{tenant}"),
            &[("_csrf", &token), ("email_senders", "not a domain")],
        )
        .await;
    assert_eq!(status, 422, "{html}");
    // A live stream client of the old key, and a token asked for with it.
    let mut old_stream = t
        .stream_with_key(&key)
        .await
        .expect("the stream admits the key");
    let tok = t.api("POST", "/api/v1/stream/tokens", &key, None).await;
    assert_eq!(tok.status, 201, "{:?}", tok.body);
    let old_token = tok.typed::<StreamTokenView>(201).unwrap().token;
    let (_, html, _) = b
        .post(
            &format!("/admin/tenants/{tenant}/rotate-key"),
            &[("_csrf", &token)],
        )
        .await;
    // What the old key opened closes with it, and its token admits no one.
    assert!(
        old_stream.closed_within(Duration::from_secs(20)).await,
        "the old key's stream connection is closed"
    );
    let refused = t
        .stream_with_token(&old_token)
        .await
        .err()
        .expect("the old key's token is refused");
    assert_eq!(
        converger_tests::stream::refused_status(&refused),
        Some(401),
        "{refused}"
    );
    let at = html.find("id=\"api-key\">").unwrap() + "id=\"api-key\">".len();
    let new_key = &html[at..at + html[at..].find('<').unwrap()];
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        t.api("GET", &format!("/api/v1/channels/{ch}"), new_key, None)
            .await
            .status,
        200
    );
    // The old key, which this instance had resolved moments ago, is refused as soon as its
    // resolution runs out (a second); the deadline only bounds the wait.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = t
            .api("GET", &format!("/api/v1/channels/{ch}"), &key, None)
            .await
            .status;
        if status == 401 {
            break;
        }
        assert_eq!(
            status, 200,
            "the old key is either still resolved or refused"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the old key still works"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A payload the payload bucket keeps is shown on its delivery's page, read back by the admin
/// function (up to a preview's size; a larger one is described by its size).
#[tokio::test]
async fn a_kept_payload_is_previewed_and_a_larger_one_described() {
    let t = TestStack::on_emulator().await;
    let (tenant, key) = t.tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = t
        .channel(
            &key,
            json!({"type": "webhook", "name": "large", "config": {"url": rx.url}}),
        )
        .await;
    let post = |blob: String| {
        let (t, key, ch) = (&t, &key, &ch);
        async move {
            let body = json!({"conversation_id": "conv-kept", "channel_ids": [ch.id],
                              "payload": {"marker": "kept-payload-marker", "blob": blob}});
            let a = t.api("POST", "/api/v1/activities", key, Some(body)).await;
            assert_eq!(a.status, 201, "{:?}", a.body);
            a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone()
        }
    };
    let kept = post("k".repeat(100 * 1024)).await;
    let large = post("l".repeat(512 * 1024)).await;
    rx.wait_for(2, Duration::from_secs(30)).await;
    let b = Browser::new(&t.stack.admin_url);
    b.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (status, page) = b
        .get(&format!("/admin/deliveries/{kept}?tenant={tenant}"))
        .await;
    assert_eq!(status, 200);
    assert!(
        page.contains("kept-payload-marker"),
        "the payload is read back"
    );
    let (status, page) = b
        .get(&format!("/admin/deliveries/{large}?tenant={tenant}"))
        .await;
    assert_eq!(status, 200);
    assert!(!page.contains("kept-payload-marker"));
    assert!(page.contains("kept in the payload bucket"), "{page}");
    assert!(t.stack.iam_violations().is_empty());
}
