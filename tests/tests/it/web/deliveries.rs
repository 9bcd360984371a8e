//! The deliveries page: its filters, and where a delivery waits in its lane.

use super::*;

/// The deliveries page filters by event type, keeps the filter in its links (the export
/// included), and shows the event type on the delivery's page.
#[tokio::test]
async fn the_deliveries_page_filters_by_event_type() {
    let t = TestStack::start().await;
    let rx = Receiver::always(500).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let ch = t
        .webhook(&key, &rx.url, json!({"max_attempts": 1}))
        .await
        .id
        .as_str()
        .to_owned();
    let mut ids = Vec::new();
    for kind in ["order.paid", "order.created"] {
        let a = t
            .api(
                "POST",
                "/api/v1/activities",
                &key,
                Some(json!({"conversation_id": "c", "channel_ids": [ch],
                            "event_type": kind, "payload": {}})),
            )
            .await;
        let id = a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone();
        t.settled(&key, &id).await;
        ids.push(id);
    }
    let web = Browser::new(&t.stack.admin_url);
    web.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (_, html) = web
        .get(&format!(
            "/admin/deliveries?tenant={tenant}&event_type=order.paid"
        ))
        .await;
    assert!(html.contains(&format!("data-id=\"{}\"", ids[0])), "{html}");
    assert!(!html.contains(&format!("data-id=\"{}\"", ids[1])), "{html}");
    assert!(
        html.contains("event_type=order.paid"),
        "kept in the links: {html}"
    );
    let (_, csv) = web
        .get(&format!(
            "/admin/deliveries/export?tenant={tenant}&event_type=order.paid"
        ))
        .await;
    assert!(csv.contains(&ids[0]) && !csv.contains(&ids[1]), "{csv}");
    let (_, page) = web.get(&format!("/admin/deliveries/{}", ids[0])).await;
    assert!(page.contains("order.paid"), "{page}");
}

#[tokio::test]
async fn a_delivery_waiting_in_its_lane_says_behind_which_one() {
    let t = TestStack::start().await;
    let rx = Receiver::always(400).await.unwrap();
    let (tenant, key) = t.tenant("default").await;
    let c = t
        .channel(
            &key,
            json!({"type": "webhook", "name": "ordered", "config": {"url": rx.url},
                   "retry_policy": {"max_attempts": 1}, "ordering": {"by": "conversation"}}),
        )
        .await;
    let ch = c.id.as_str().to_owned();
    let post = async |text: &str| {
        let a = t
            .api(
                "POST",
                "/api/v1/activities",
                &key,
                Some(
                    json!({"conversation_id": "c", "channel_ids": [ch], "payload": {"text": text}}),
                ),
            )
            .await;
        a.typed::<Ingested>(201).unwrap().deliveries[0].id.clone()
    };
    let dead = post("first").await;
    t.settled(&key, &dead).await;
    let waiting = post("second").await;
    let web = Browser::new(&t.stack.admin_url);
    web.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (_, page) = web
        .get(&format!("/admin/deliveries/{waiting}?tenant={tenant}"))
        .await;
    assert!(page.contains("id=\"lane\""), "{page}");
    assert!(page.contains("waiting behind"), "{page}");
    assert!(
        page.contains(&format!("/admin/deliveries/{dead}")),
        "{page}"
    );
    assert!(page.contains("held by a dead letter"), "{page}");
}
