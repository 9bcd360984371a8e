//! The DynamoDB requests of the conditional writes, pinned: each is sent to a client that
//! records it instead of sending it (the SDK's capturing HTTP client), and its expressions,
//! names and values are compared with the recorded form. A change to a request shows up here
//! as a diff, before any emulator sees it.

use super::*;
use aws_smithy_http_client::test_util::{CaptureRequestReceiver, capture_request};
use converger_core::Timestamp;
use serde_json::{Value, json};

/// A store whose client records its one request (answered `{}`), and that recording.
fn recording() -> (DynamoStore, CaptureRequestReceiver) {
    let (http, rx) = capture_request(None);
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "key", "secret", None, None, "pinned",
        ))
        .http_client(http)
        .build();
    let res = Resources::from_vars(|k| {
        Some(match k {
            "DUE_SHARDS" => "16".to_owned(),
            other => format!("t-{other}"),
        })
    })
    .expect("every name is given");
    (
        DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(conf), res)
            .with_due_grants(Default::default()),
        rx,
    )
}

/// The recorded request's operation (`X-Amz-Target`) and JSON body.
fn recorded(rx: CaptureRequestReceiver) -> (String, Value) {
    let req = rx.expect_request();
    let target = req
        .headers()
        .get("x-amz-target")
        .unwrap_or_default()
        .to_owned();
    let body = serde_json::from_slice(req.body().bytes().expect("an in-memory body"))
        .expect("a JSON body");
    (target, body)
}

/// The parts of an update request that say what it does.
fn expressions(body: &Value) -> Value {
    json!({
        "UpdateExpression": body["UpdateExpression"],
        "ConditionExpression": body["ConditionExpression"],
        "ExpressionAttributeNames": body["ExpressionAttributeNames"],
        "ExpressionAttributeValues": body["ExpressionAttributeValues"],
    })
}

fn channel() -> ChannelId {
    ChannelId::parse("ch_0123456789abcdef0123456789abcdef").expect("an id")
}

fn delivery() -> DeliveryId {
    DeliveryId::parse("dlv_0123456789abcdef0123456789abcdef").expect("an id")
}

#[tokio::test]
async fn a_slot_take_on_the_flow_item() {
    let (store, rx) = recording();
    let _ = store
        .take_slot(&channel(), &delivery(), 8, Timestamp::from_ms(1_000), true)
        .await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.UpdateItem");
    assert_eq!(body["TableName"], "t-FLOW_TABLE");
    assert_eq!(body["Key"], json!({"key": {"S": channel().as_str()}}));
    assert_eq!(body["ReturnValues"], "ALL_NEW");
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "SET #n1.#n2 = if_not_exists(#n1.#n2, :v1)",
            "ConditionExpression": "(#n0 = :v0 OR attribute_not_exists(#n0)) AND attribute_exists(#n1) AND attribute_not_exists(#n1.#n2) AND size(#n1) < :v2",
            "ExpressionAttributeNames": {"#n0": "circuit_state", "#n1": "slots", "#n2": delivery().as_str()},
            "ExpressionAttributeValues": {":v0": {"S": "closed"}, ":v1": {"N": "1000"}, ":v2": {"N": "8"}},
        })
    );
}

#[tokio::test]
async fn a_rate_schedules_idle_write() {
    let (store, rx) = recording();
    let limit: converger_core::RateLimit = "10/s".parse().expect("a rate");
    let _ = store.rate_take_n("rate#ch_x", &limit, 1, 5_000_000).await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.UpdateItem");
    assert_eq!(body["Key"], json!({"key": {"S": "rate#ch_x"}}));
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "SET #n0 = :v0, #n1 = :v1",
            "ConditionExpression": "(attribute_not_exists(#n0) OR #n0 <= :v2)",
            "ExpressionAttributeNames": {"#n0": "tat", "#n1": "expires_at"},
            "ExpressionAttributeValues": {":v0": {"N": "5100000"}, ":v1": {"N": "3605"}, ":v2": {"N": "5000000"}},
        })
    );
}

#[tokio::test]
async fn a_subscribe_and_an_unsubscribe() {
    let (store, rx) = recording();
    let _ = store
        .subscribe("conn-1", "channel_health", 20, Timestamp::from_ms(0))
        .await;
    let (_, body) = recorded(rx);
    assert_eq!(body["TableName"], "t-STREAM_TABLE");
    assert_eq!(body["ReturnValuesOnConditionCheckFailure"], "ALL_OLD");
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "ADD #n0 :v0",
            "ConditionExpression": "attribute_exists(#n1) AND (attribute_not_exists(#n0) OR contains(#n0, :v1) OR size(#n0) < :v2)",
            "ExpressionAttributeNames": {"#n0": "topics", "#n1": "pk"},
            "ExpressionAttributeValues": {":v0": {"SS": ["channel_health"]}, ":v1": {"S": "channel_health"}, ":v2": {"N": "20"}},
        })
    );
    let (store, rx) = recording();
    let _ = store.unsubscribe("conn-1", "channel_health").await;
    let (_, body) = recorded(rx);
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "DELETE #n0 :v0",
            "ConditionExpression": "attribute_exists(#n1)",
            "ExpressionAttributeNames": {"#n0": "topics", "#n1": "pk"},
            "ExpressionAttributeValues": {":v0": {"SS": ["channel_health"]}},
        })
    );
}

#[tokio::test]
async fn a_usage_counters_marked_add() {
    let (store, rx) = recording();
    let add = CounterAdd::Usage {
        key: UsageKey::new(
            UsageOf::Channel(channel()),
            converger_core::usage::Grain::Minute,
            100,
        ),
        part: 3,
        counts: converger_core::usage::Counts {
            created: 2,
            ..Default::default()
        },
    };
    let mark = StreamMark {
        shard: "shardId-1".into(),
        first: seq_key("11"),
        last: seq_key("19"),
    };
    let _ = store.add_marked(&add, &mark).await;
    let (_, body) = recorded(rx);
    assert_eq!(body["TableName"], "t-USAGE_TABLE");
    assert_eq!(
        body["Key"],
        json!({"key": {"S": format!("us#c#{}#m#100#3", channel())}})
    );
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "SET #n0 = :v0, #n2 = :v2 ADD #n1 :v1",
            "ConditionExpression": "(attribute_not_exists(#n2) OR #n2 < :v3)",
            "ExpressionAttributeNames": {"#n0": "expires_at", "#n1": "created", "#n2": "mk_shardId_1"},
            "ExpressionAttributeValues": {
                ":v0": {"N": "13260"},
                ":v1": {"N": "2"},
                ":v2": {"S": seq_key("19")},
                ":v3": {"S": seq_key("11")},
            },
        })
    );
}

#[tokio::test]
async fn a_busy_channels_entry_on_its_tenants_item() {
    let (store, rx) = recording();
    let tenant = TenantId::parse("ten_0123456789abcdef0123456789abcdef").expect("an id");
    let entry = converger_core::flow::BusyEntry {
        at: 1_000,
        window: 12,
    };
    let _ = store.set_busy(&tenant, &channel(), Some(entry)).await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.UpdateItem");
    assert_eq!(body["TableName"], "t-FLOW_TABLE");
    assert_eq!(body["Key"], json!({"key": {"S": format!("busy#{tenant}")}}));
    assert_eq!(
        expressions(&body),
        json!({
            "UpdateExpression": "SET #n0 = :v0",
            "ConditionExpression": null,
            "ExpressionAttributeNames": {"#n0": format!("c_{}", channel())},
            "ExpressionAttributeValues": {":v0": {"M": {"at": {"N": "1000"}, "w": {"N": "12"}}}},
        })
    );
}

/// A pending delivery of [`channel`] with fixed ids and times, so that its keys are pinned.
fn a_delivery() -> Delivery {
    let tenant = TenantId::parse("ten_0123456789abcdef0123456789abcdef").expect("an id");
    let at = Timestamp::from_ms(1_600_000_000_000);
    let mut ch = Channel::new(
        tenant.clone(),
        converger_core::ChannelType::Webhook,
        "c",
        serde_json::Map::new(),
        at,
    );
    ch.id = channel();
    let activity = Activity {
        event_type: None,
        id: ActivityId::parse("act_0123456789abcdef0123456789abcdef").expect("an id"),
        tenant_id: tenant,
        conversation_id: "conv".into(),
        seq: 1,
        payload_ref: None,
        payload: Value::Null,
        channel_ids: vec![channel()],
        created_at: at,
        expires_at: None,
        trace: None,
    };
    let mut d = Delivery::new(&activity, &ch, converger_core::Tier::Default, at);
    d.id = delivery();
    d
}

/// An update request's expressions with its names and values put in (`S` values quoted, `N`
/// bare), as one reads them: `(update, condition)`.
fn rendered(body: &Value) -> (String, String) {
    let put_in = |expr: &str| {
        let mut out = String::new();
        let mut rest = expr;
        while let Some(at) = rest.find(['#', ':']) {
            out.push_str(&rest[..at]);
            let (sigil, tail) = rest[at..].split_at(1);
            let len = tail
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(tail.len());
            let token = &rest[at..at + 1 + len];
            match sigil {
                "#" => out.push_str(
                    body["ExpressionAttributeNames"][token]
                        .as_str()
                        .expect("a bound name"),
                ),
                _ => {
                    let v = &body["ExpressionAttributeValues"][token];
                    match (v["S"].as_str(), v["N"].as_str()) {
                        (Some(s), _) => out.push_str(&format!("'{s}'")),
                        (_, Some(n)) => out.push_str(n),
                        _ => out.push_str(&v.to_string()),
                    }
                }
            }
            rest = &rest[at + 1 + len..];
        }
        out.push_str(rest);
        out
    };
    (
        put_in(body["UpdateExpression"].as_str().unwrap_or_default()),
        put_in(body["ConditionExpression"].as_str().unwrap_or_default()),
    )
}

/// The one request `call` makes on a recording store: its table and its rendered expressions.
async fn flow_move<F, Fut>(call: F) -> (String, String, String)
where
    F: FnOnce(DynamoStore) -> Fut,
    Fut: std::future::Future,
{
    let (store, rx) = recording();
    let _ = call(store).await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.UpdateItem");
    assert_eq!(body["Key"], json!({"id": {"S": delivery().as_str()}}));
    let (update, condition) = rendered(&body);
    (
        body["TableName"].as_str().unwrap_or_default().to_owned(),
        update,
        condition,
    )
}

const AT_MS: i64 = 1_700_000_000_000;

#[tokio::test]
async fn a_parking_by_its_attempt() {
    let at = Timestamp::from_ms(AT_MS);
    let got = flow_move(|s| async move { s.park(&a_delivery(), Some("tok"), at).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET status = 'paused', updated_at = '2023-11-14T22:13:20.000000Z', tl_pk = 'ten_0123456789abcdef0123456789abcdef#paused#0', upd_sk = '2023-11-14T22:13:20.000000Z#dlv_0123456789abcdef0123456789abcdef', cl_pk = 'ch_0123456789abcdef0123456789abcdef#paused#2' REMOVE unlisted, lease_token, lease_until, slot, slot_item, due_shard, due_at, in_backlog, bl_pk, bl_sk, watched".to_owned(),
            "lease_token = 'tok'".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_parking_of_a_row_no_attempt_holds() {
    let at = Timestamp::from_ms(AT_MS);
    let got = flow_move(|s| async move { s.park(&a_delivery(), None, at).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET status = 'paused', updated_at = '2023-11-14T22:13:20.000000Z', tl_pk = 'ten_0123456789abcdef0123456789abcdef#paused#0', upd_sk = '2023-11-14T22:13:20.000000Z#dlv_0123456789abcdef0123456789abcdef', cl_pk = 'ch_0123456789abcdef0123456789abcdef#paused#2' REMOVE unlisted, lease_token, lease_until, slot, slot_item, due_shard, due_at, in_backlog, bl_pk, bl_sk, watched".to_owned(),
            "status = 'pending' AND (attribute_exists(bl_pk) OR attribute_not_exists(lease_token))".to_owned(),
        )
    );
}

#[tokio::test]
async fn an_unparking_to_the_queue() {
    let at = Timestamp::from_ms(AT_MS);
    let got =
        flow_move(|s| async move { s.unpark(&a_delivery(), Placement::Live, at).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET status = 'pending', updated_at = '2023-11-14T22:13:20.000000Z', tl_pk = 'ten_0123456789abcdef0123456789abcdef#pending#0', upd_sk = '2023-11-14T22:13:20.000000Z#dlv_0123456789abcdef0123456789abcdef', next_attempt_at = 1700000000000, due_shard = 'due#10', due_at = '001700000000000' REMOVE unlisted, cl_pk, watched, in_backlog, bl_pk, bl_sk".to_owned(),
            "status = 'paused'".to_owned(),
        )
    );
}

#[tokio::test]
async fn an_unparking_into_the_backlog() {
    let at = Timestamp::from_ms(AT_MS);
    let got =
        flow_move(|s| async move { s.unpark(&a_delivery(), Placement::Backlog, at).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            r#"SET status = 'pending', updated_at = '2023-11-14T22:13:20.000000Z', tl_pk = 'ten_0123456789abcdef0123456789abcdef#pending#0', upd_sk = '2023-11-14T22:13:20.000000Z#dlv_0123456789abcdef0123456789abcdef', next_attempt_at = 1700000000000, in_backlog = {"BOOL":true}, bl_pk = 'ch_0123456789abcdef0123456789abcdef', bl_sk = '001700000000000' REMOVE unlisted, cl_pk, watched, due_shard, due_at"#.to_owned(),
            "status = 'paused'".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_move_into_the_backlog() {
    let at = Timestamp::from_ms(AT_MS);
    let got =
        flow_move(|s| async move { s.to_backlog(&a_delivery(), "tok", AT_MS + 5_000, at).await })
            .await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            r#"SET next_attempt_at = 1700000005000, in_backlog = {"BOOL":true}, bl_pk = 'ch_0123456789abcdef0123456789abcdef', bl_sk = '001700000005000' REMOVE lease_token, lease_until, slot, slot_item, watched, due_shard, due_at"#.to_owned(),
            "lease_token = 'tok'".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_move_out_of_the_backlog() {
    let at = Timestamp::from_ms(AT_MS);
    let got = flow_move(|s| async move { s.leave_backlog(&delivery(), at, 2).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            r#"SET slot = {"BOOL":true}, slot_item = 2, next_attempt_at = 1700000000000, due_shard = 'due#10', due_at = '001700000000000' REMOVE watched, in_backlog, bl_pk, bl_sk"#.to_owned(),
            "status = 'pending' AND attribute_exists(bl_pk)".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_move_out_of_the_backlog_leased() {
    let at = Timestamp::from_ms(AT_MS);
    let got = flow_move(|s| async move {
        s.leave_backlog_leased(&delivery(), at, "tok", AT_MS + 30_000, 2)
            .await
    })
    .await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET lease_token = 'tok', lease_until = 1700000030000, slot_item = 2, next_attempt_at = 1700000000000, due_shard = 'due#10', due_at = '001700000000000' REMOVE watched, in_backlog, bl_pk, bl_sk".to_owned(),
            "status = 'pending' AND attribute_exists(bl_pk) AND next_attempt_at <= 1700000000000".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_lease_given_back_by_a_first_try_its_messages_carry() {
    let mut d = a_delivery();
    d.unlisted = true;
    let got = flow_move(|s| async move { s.release(&d, "tok").await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "REMOVE lease_token, lease_until".to_owned(),
            "lease_token = 'tok'".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_lease_given_back_by_a_row_due_in_the_index() {
    let got = flow_move(|s| async move { s.release(&a_delivery(), "tok").await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET next_attempt_at = 1600000000000, due_shard = 'due#10', due_at = '001600000000000' REMOVE lease_token, lease_until, watched, in_backlog, bl_pk, bl_sk".to_owned(),
            "lease_token = 'tok'".to_owned(),
        )
    );
}

#[tokio::test]
async fn a_lease_taken_back_from_an_attempt_that_died() {
    let at = Timestamp::from_ms(AT_MS);
    let got =
        flow_move(|s| async move { s.requeue_expired(&delivery(), AT_MS - 1, at).await }).await;
    assert_eq!(
        got,
        (
            "t-DELIVERIES_TABLE".to_owned(),
            "SET next_attempt_at = 1700000000000, due_shard = 'due#10', due_at = '001700000000000' REMOVE lease_token, lease_until, watched, in_backlog, bl_pk, bl_sk".to_owned(),
            "status = 'pending' AND lease_until = 1699999999999".to_owned(),
        )
    );
}

const LANE: &str = "ch_0123456789abcdef0123456789abcdef#conv-1";

/// A lane item's key as sent: `(pk, sk)`.
fn lane_key(key: &Value) -> (String, String) {
    let text = |k: &str| key[k]["S"].as_str().unwrap_or_default().to_owned();
    (text("pk"), text("sk"))
}

#[tokio::test]
async fn a_lane_promotion_puts_the_head_and_takes_the_entry() {
    let (store, rx) = recording();
    let entry = LaneEntry {
        seq: 7,
        delivery_id: delivery(),
    };
    let _ = store
        .promote(LANE, &entry, Timestamp::from_ms(AT_MS), 99)
        .await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.TransactWriteItems");
    let items = body["TransactItems"].as_array().expect("items");
    let head = &items[0]["Put"];
    assert_eq!(
        lane_key(&head["Item"]),
        (LANE.to_owned(), LANE_HEAD.to_owned())
    );
    assert_eq!(head["Item"]["holder"], json!({"S": delivery().as_str()}));
    assert_eq!(rendered(head).1, "attribute_not_exists(pk)");
    let gone = &items[1]["Delete"];
    assert_eq!(
        lane_key(&gone["Key"]),
        (
            LANE.to_owned(),
            converger_core::lanes::entry_key(7, delivery().as_str())
        )
    );
    assert_eq!(rendered(gone).1, "attribute_exists(pk)");
}

#[tokio::test]
async fn a_lane_let_go_by_its_holder() {
    let (store, rx) = recording();
    let _ = store.let_go(LANE, &delivery()).await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.DeleteItem");
    assert_eq!(
        lane_key(&body["Key"]),
        (LANE.to_owned(), LANE_HEAD.to_owned())
    );
    assert_eq!(
        rendered(&body).1,
        "holder = 'dlv_0123456789abcdef0123456789abcdef'"
    );
}

#[tokio::test]
async fn a_lane_held_by_its_holder() {
    let (store, rx) = recording();
    let _ = store.set_held(LANE, &delivery(), true).await;
    let (target, body) = recorded(rx);
    assert_eq!(target, "DynamoDB_20120810.UpdateItem");
    assert_eq!(
        rendered(&body),
        (
            "SET held = {\"BOOL\":true}".to_owned(),
            "holder = 'dlv_0123456789abcdef0123456789abcdef'".to_owned()
        )
    );
}

/// A failed attempt's outcome with the retry at `retry`: its rendered update.
async fn a_retry_outcome(retry: RetryAt) -> String {
    let at = Timestamp::from_ms(AT_MS);
    let log = LogUpdate {
        recent: Vec::new(),
        spill: Vec::new(),
    };
    let (table, update, condition) = flow_move(|s| async move {
        s.mark_attempt_failed(&a_delivery(), "tok", "HTTP 503", retry, &log, at)
            .await
    })
    .await;
    assert_eq!(table, "t-DELIVERIES_TABLE");
    assert_eq!(condition, "lease_token = 'tok'");
    update
}

#[tokio::test]
async fn a_retry_that_rides_its_messages_leaves_the_due_index() {
    let update = a_retry_outcome(RetryAt::watched(AT_MS + 30_000)).await;
    assert!(
        update.contains(r#"next_attempt_at = 1700000030000, watched = {"BOOL":true}"#),
        "{update}"
    );
    assert!(!update.contains("due_shard ="), "{update}");
    let removed = update.split(" REMOVE ").nth(1).unwrap_or_default();
    assert!(removed.contains("due_shard, due_at"), "{update}");
}

#[tokio::test]
async fn a_retry_past_one_hop_waits_in_the_due_index() {
    let update = a_retry_outcome(RetryAt::at(AT_MS + 3_600_000)).await;
    assert!(
        update.contains("next_attempt_at = 1700003600000, due_shard = 'due#"),
        "{update}"
    );
    assert!(update.contains("due_at = '001700003600000'"), "{update}");
    let removed = update.split(" REMOVE ").nth(1).unwrap_or_default();
    assert!(removed.contains("watched"), "{update}");
    assert!(!removed.contains("due_shard"), "{update}");
}
