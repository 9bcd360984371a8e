//! The event types page: a tenant's catalog, with its schemas, and no other tenant's.

use super::*;

#[tokio::test]
async fn the_event_types_page_shows_a_tenants_catalog_with_its_schemas() {
    let t = TestStack::start().await;
    let (tenant, key) = t.tenant("default").await;
    let (other, other_key) = t.tenant("default").await;
    for (k, body) in [
        (
            &key,
            json!({"name": "order.paid", "description": "An order was paid.",
                   "schema": {"type": "object", "required": ["order_id"]}}),
        ),
        (&key, json!({"name": "order.legacy", "deprecated": true})),
        (&other_key, json!({"name": "secret.other"})),
    ] {
        let r = t.api("POST", "/api/v1/event-types", k, Some(body)).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    let web = Browser::new(&t.stack.admin_url);
    web.sign_in("admin", &t.stack.admin_email, &t.stack.admin_password)
        .await;
    let (status, html) = web
        .get(&format!("/admin/event-types?tenant={tenant}"))
        .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("order.paid") && html.contains("An order was paid."),
        "{html}"
    );
    assert!(
        html.contains("&quot;order_id&quot;") || html.contains("\"order_id\""),
        "{html}"
    );
    assert!(
        html.contains("order.legacy") && html.contains("deprecated"),
        "{html}"
    );
    assert!(!html.contains("secret.other"), "{html}");
    let (_, html) = web.get(&format!("/admin/event-types?tenant={other}")).await;
    assert!(
        html.contains("secret.other") && !html.contains("order.paid"),
        "{html}"
    );
}
