//! A tenant's event types: created once, changed over their version, listed by name.

use super::*;
use converger_core::Timestamp;

pub(super) async fn event_types_are_created_once_changed_over_their_version_and_listed_by_name(
    backend: Backend,
) {
    use converger_ports::TenantEventType;
    let f = fixture(backend).await;
    let t = &f.tenant.id;
    let now = Timestamp::now();
    let ty = |name: &str, schema: Option<serde_json::Value>| TenantEventType {
        tenant_id: t.clone(),
        name: name.into(),
        description: None,
        schema,
        deprecated: false,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    // Keys that are not valid as DynamoDB attribute names survive, as written.
    let schema = serde_json::json!({"$defs": {"a b": {"type": "string"}}, "": 1.5, "e": []});
    assert!(
        f.store
            .create_event_type(&ty("b.two", Some(schema.clone())))
            .await
            .unwrap()
    );
    assert!(
        !f.store.create_event_type(&ty("b.two", None)).await.unwrap(),
        "once"
    );
    let read = f.store.get_event_type(t, "b.two").await.unwrap().unwrap();
    assert_eq!(read.schema, Some(schema));
    // A change over the version read; a stale one is refused.
    let mut next = read.clone();
    next.version = 2;
    next.deprecated = true;
    assert!(f.store.replace_event_type(&next).await.unwrap());
    assert!(!f.store.replace_event_type(&next).await.unwrap(), "stale");
    assert!(
        f.store
            .get_event_type(t, "b.two")
            .await
            .unwrap()
            .unwrap()
            .deprecated
    );
    let mut gone = ty("nowhere", None);
    gone.version = 2;
    assert!(!f.store.replace_event_type(&gone).await.unwrap());
    // Listed in name order, a page at a time; another tenant's are not.
    for name in ["c.three", "a.one"] {
        assert!(f.store.create_event_type(&ty(name, None)).await.unwrap());
    }
    let mut other = ty("a.zero", None);
    other.tenant_id = TenantId::generate();
    assert!(f.store.create_event_type(&other).await.unwrap());
    let (first, more) = f.store.list_event_types(t, None, 2).await.unwrap();
    let names: Vec<_> = first.iter().map(|e| e.name.as_str()).collect();
    assert_eq!((names, more), (vec!["a.one", "b.two"], true));
    let (rest, more) = f.store.list_event_types(t, Some("b.two"), 2).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!((rest[0].name.as_str(), more), ("c.three", false));
    assert_eq!(f.store.get_event_type(t, "a.zero").await.unwrap(), None);
}
