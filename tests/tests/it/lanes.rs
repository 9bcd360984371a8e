//! Ordered lanes through the API: an ordered channel delivers each conversation in `seq`
//! order; a dead head holds its lane (visible on the waiting deliveries) until it is replayed
//! (it goes first) or the lane is released past it (audited), or the lane goes on (`skip`).

use converger_tests::client::{Tenant, is_settled};
use converger_tests::views::{AuditView, Page};
use converger_tests::{Receiver, Reply, TestStack};
use serde_json::{Value, json};
use std::time::Duration;

/// What a lane's release answers (built in its handler; no view type of its own).
#[derive(Debug, serde::Deserialize)]
struct LaneReleased {
    dead_delivery_id: String,
}

/// The changes a `release_lane` audit entry records.
#[derive(Debug, serde::Deserialize)]
struct ReleaseChanges {
    dead_delivery_id: String,
    conversation_id: String,
}

async fn ordered(t: &Tenant<'_>, url: &str, on_dead: &str) -> String {
    let c = t
        .create_channel(json!({
            "type": "webhook", "name": "ordered", "config": {"url": url},
            "retry_policy": {"max_attempts": 1},
            "ordering": {"by": "conversation", "on_dead_letter": on_dead},
        }))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(c.channel.ordering).unwrap(),
        json!({"by": "conversation", "on_dead_letter": on_dead})
    );
    c.channel.id
}

async fn say(t: &Tenant<'_>, ch: &str, conversation: &str, text: &str) -> String {
    let (_, i) = t
        .post_activity(json!({"conversation_id": conversation, "channel_ids": [ch], "payload": {"text": text}}))
        .await
        .unwrap();
    i.deliveries[0].id.clone()
}

/// The texts the receiver got, in order.
fn texts(rx: &Receiver) -> Vec<String> {
    rx.requests()
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
            v.pointer("/payload/text")
                .or_else(|| v.pointer("/text"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

async fn settled(t: &Tenant<'_>, id: &str) -> converger_http::views::DeliveryView {
    t.wait_delivery(id, Duration::from_secs(20), is_settled)
        .await
}

#[tokio::test]
async fn a_dead_head_holds_its_lane_until_it_is_replayed_or_released() {
    let t = TestStack::start().await;
    let rx = Receiver::start(vec![Reply::status(400)], Reply::status(200))
        .await
        .unwrap();
    let a = t.new_tenant("default").await;
    let ch = ordered(&a, &rx.url, "hold").await;
    let a1 = say(&a, &ch, "c", "a1").await;
    assert_eq!(settled(&a, &a1).await.status, "failed");
    let a2 = say(&a, &ch, "c", "a2").await;
    let a3 = say(&a, &ch, "c", "a3").await;
    // Another conversation is not held.
    let b1 = say(&a, &ch, "other", "b1").await;
    assert_eq!(settled(&a, &b1).await.status, "sent");
    // The waiting ones say why they wait.
    let d2 = a.delivery(&a2).await;
    assert_eq!(d2.status, "pending");
    let lane = d2.lane.expect("a lane");
    assert_eq!(
        (
            lane.position.as_str(),
            lane.head_delivery_id.as_deref(),
            lane.held
        ),
        ("waiting", Some(a1.as_str()), true)
    );
    assert_eq!(texts(&rx), ["a1", "b1"]);
    // The dead head, replayed, goes first; then the rest in order.
    let r = a
        .api("POST", &format!("/api/v1/deliveries/{a1}/retry"), None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(settled(&a, &a3).await.status, "sent");
    assert_eq!(texts(&rx), ["a1", "b1", "a1", "a2", "a3"]);

    // A release goes past a dead head: it stays dead, the next one goes.
    // (A marker no id's hex digits can contain.)
    rx.answer_when("fourth-dies", Reply::status(400));
    let a4 = say(&a, &ch, "c", "fourth-dies").await;
    assert_eq!(settled(&a, &a4).await.status, "failed");
    let a5 = say(&a, &ch, "c", "fifth").await;
    let path = format!("/api/v1/channels/{ch}/lanes/release");
    let r = a
        .api("POST", &path, Some(json!({"conversation_id": "c"})))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r: LaneReleased = r.typed(200).unwrap();
    assert_eq!(r.dead_delivery_id, a4);
    assert_eq!(settled(&a, &a5).await.status, "sent");
    assert_eq!(a.delivery(&a4).await.status, "failed");
    let again = a
        .api("POST", &path, Some(json!({"conversation_id": "c"})))
        .await;
    assert_eq!((again.status, again.code()), (409, "lane_not_held"));
    let audit: Page<AuditView> = a
        .api("GET", "/api/v1/audit", None)
        .await
        .typed(200)
        .unwrap();
    let released: Vec<&AuditView> = audit
        .data
        .iter()
        .filter(|e| e.action == "release_lane")
        .collect();
    assert_eq!(released.len(), 1);
    let changes: ReleaseChanges = serde_json::from_value(released[0].changes.clone()).unwrap();
    assert_eq!(changes.dead_delivery_id, a4, "{changes:?}");
    assert_eq!(changes.conversation_id, "c");
}

#[tokio::test]
async fn with_skip_a_lane_goes_on_past_a_dead_head() {
    let t = TestStack::start().await;
    let rx = Receiver::start(vec![Reply::status(400)], Reply::status(200))
        .await
        .unwrap();
    let a = t.new_tenant("default").await;
    let ch = ordered(&a, &rx.url, "skip").await;
    let a1 = say(&a, &ch, "c", "a1").await;
    let a2 = say(&a, &ch, "c", "a2").await;
    let a3 = say(&a, &ch, "c", "a3").await;
    assert_eq!(settled(&a, &a3).await.status, "sent");
    assert_eq!(a.delivery(&a1).await.status, "failed");
    assert_eq!(a.delivery(&a2).await.status, "sent");
    assert_eq!(texts(&rx), ["a1", "a2", "a3"]);
    // An ordering that is not one is refused.
    let r = a
        .api(
            "POST",
            "/api/v1/channels",
            Some(
                json!({"type": "webhook", "name": "x", "config": {"url": rx.url},
                        "ordering": {"by": "tenant"}}),
            ),
        )
        .await;
    assert_eq!((r.status, r.code()), (422, "invalid_ordering"));
}

mod emulator {
    use super::*;

    /// A producer writing to the activities queue: the ingest function joins each delivery
    /// to its lane and hands it on, through its own policy. q1 holds the lane (its receiver
    /// holds the answer) while q3 and q2 arrive in that order; they go in `seq` order after it.
    #[tokio::test]
    async fn the_ingest_function_joins_ordered_deliveries_to_their_lane() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::always(200).await.unwrap();
        let a = t.new_tenant("default").await;
        let ch = ordered(&a, &rx.url, "hold").await;
        let url = t
            .aws()
            .resources
            .queue_url(&converger_store::resources::ACTIVITIES_QUEUE)
            .unwrap()
            .to_owned();
        let send = async |seq: u64, text: &str| {
            let body = json!({"tenant_id": a.id, "activity": {"conversation_id": "q",
                              "seq": seq, "channel_ids": [ch], "payload": {"text": text}}});
            t.aws()
                .clients
                .sqs
                .send_message()
                .queue_url(&url)
                .message_body(body.to_string())
                .send()
                .await
                .unwrap();
        };
        rx.hold();
        send(1, "q1").await;
        rx.wait_for(1, Duration::from_secs(30)).await;
        send(3, "q3").await;
        send(2, "q2").await;
        let lane =
            converger_ports::keys::lane_key(&converger_core::ChannelId::parse(&ch).unwrap(), "q");
        let store = t.stack.store.clone();
        let joined = converger_tests::wait_until(Duration::from_secs(30), || {
            let (store, lane) = (store.clone(), lane.clone());
            async move { store.lane_entries(&lane, 10).await.unwrap().len() == 2 }
        })
        .await;
        assert!(joined, "q2 and q3 wait in the lane behind q1");
        rx.release();
        rx.wait_for(3, Duration::from_secs(30)).await;
        assert_eq!(texts(&rx), ["q1", "q2", "q3"]);
        let violations = t.stack.iam_violations();
        assert!(violations.is_empty(), "{violations:?}");
    }

    /// On DynamoDB, through the deployed functions' IAM: a conversation in order behind a
    /// head that failed once.
    #[tokio::test]
    async fn a_conversation_arrives_in_order_on_the_emulator() {
        let t = TestStack::on_emulator().await;
        let rx = Receiver::start(vec![Reply::status(503)], Reply::status(200))
            .await
            .unwrap();
        let a = t.new_tenant("default").await;
        let c = a
            .create_channel(json!({
                "type": "webhook", "name": "ordered", "config": {"url": rx.url},
                "retry_policy": {"backoff": "fixed", "base_ms": 1000},
                "ordering": {"by": "conversation"},
            }))
            .await
            .unwrap();
        let ch = c.channel.id;
        let a1 = say(&a, &ch, "c", "a1").await;
        rx.wait_for(1, Duration::from_secs(20)).await;
        say(&a, &ch, "c", "a2").await;
        let a3 = say(&a, &ch, "c", "a3").await;
        let b1 = say(&a, &ch, "d", "b1").await;
        assert_eq!(settled(&a, &a3).await.status, "sent");
        assert_eq!(settled(&a, &b1).await.status, "sent");
        assert_eq!(a.delivery(&a1).await.attempts, 2);
        let got = texts(&rx);
        let conv: Vec<&String> = got.iter().filter(|t| t.starts_with('a')).collect();
        assert_eq!(conv, ["a1", "a1", "a2", "a3"], "{got:?}");
    }
}
