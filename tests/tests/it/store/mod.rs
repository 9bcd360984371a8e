//! The store conformance suite: every test runs against the DynamoDB backend on the emulator
//! (over HTTP, with the real SDK) and against the in-process backend, so both keep the same
//! conditional semantics: the transitions that keep one delivery from being attempted twice at
//! once, the due index, the attempt log, listing and replays. The fixture and the helpers are
//! here; the tests are grouped by what they write: `due` (fresh rows and the due index),
//! `deliveries` (claims, outcomes, hand-offs, receipts), `listings`, `flow`, `tenants` and
//! `stream` (the live stream's connections, subscriptions and tokens), `tenant_aws` (sends
//! into a tenant's account, and its external id) and `usage` (the charts' counters).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::CircuitState;
use converger_core::Timestamp;
use converger_core::{ActivityId, ChannelType, DeliveryId, DeliveryStatus, TenantId, Tier, time};
use converger_memory::MemStore;
use converger_ports::{
    Ack, Activity, AttemptEntry, Channel, ChannelPatch, Claim, Connection, Created, Delivery,
    DuePart, HeldSlot, ItemTake, LogUpdate, Mark, Outcome, Placement, Receipted, RetryAt,
    SecretRotation, SentInfo, Settle, SlotTake, Store, Tenant, Transition,
};
use converger_store::dynamo::DynamoStore;
use converger_tests::TestTables;
use serde_json::{Map, json};
use std::sync::Arc;

#[derive(Clone, Copy)]
enum Backend {
    Dynamo,
    Memory,
}

/// A test's store, with a tenant and a channel in it. The tables stay on the emulator after the
/// test, under their own prefix; an emulator started for them stops with `t`.
struct Fixture {
    t: Option<TestTables>,
    store: Arc<dyn Store>,
    tenant: Tenant,
    channel: Channel,
}

mod connections;
mod deliveries;
mod due;
mod event_types;
mod flow;
mod fold;
mod lanes;
mod listings;
mod payloads;
mod stream;
mod tenant_aws;
mod tenants;
mod usage;
use connections::*;
use deliveries::*;
use due::*;
use event_types::*;
use flow::*;
use fold::*;
use lanes::*;
use listings::*;
use payloads::*;
use stream::*;
use tenant_aws::*;
use tenants::*;
use usage::*;

/// Runs each named test against both backends.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod dynamo {
            $( #[tokio::test] async fn $name() { super::$name(super::Backend::Dynamo).await } )*
        }
        mod memory {
            $( #[tokio::test] async fn $name() { super::$name(super::Backend::Memory).await } )*
        }
    };
}

conformance!(
    tenants_channels_and_activities_round_trip,
    a_fresh_activity_is_written_whole_and_is_due,
    a_lease_admits_one_attempt_at_a_time,
    a_recorded_outcome_written_again_is_recognised_as_its_own,
    dead_letters_and_missing_rows,
    only_pending_deliveries_are_in_the_due_index,
    the_due_index_has_the_deployments_shard_count,
    a_due_grant_spreads_new_entries_over_the_shards_the_sweep_reads,
    a_first_try_joins_its_tenants_listing_when_its_attempt_ends,
    old_attempts_spill_out_of_the_item,
    a_failed_attempt_gives_its_slot_back,
    a_retry_that_rides_its_messages_is_in_no_due_index,
    listing_pages_in_order_and_replays_are_disjoint,
    listings_filter_by_event_type_on_both_indexes,
    sharded_listings_page_every_row_once_across_shards_and_ties,
    listings_stay_exact_across_granted_shards,
    the_audit_log_pages_every_entry_once_across_its_partitions_and_ties,
    replay_jobs_save_with_a_version,
    window_slots_are_capped_idempotent_and_closed_only,
    slot_items_hold_their_share_and_are_reconciled_by_item,
    breaker_transitions_have_one_winner,
    backlog_and_parking_move_rows_between_indexes,
    rate_schedules_allow_a_burst_then_the_rate,
    rate_reservations_queue_requests_in_the_schedule,
    a_tenants_busy_channels_are_written_renewed_and_removed_one_by_one,
    a_handed_off_delivery_waits_for_its_ack,
    receipts_find_their_delivery_and_move_it_forward,
    connections_are_found_by_channel,
    users_tenants_and_keys,
    rows_past_their_retention_read_as_absent,
    scoped_reads_see_only_their_tenant,
    channel_lifecycle_lists_rotates_and_deletes,
    a_conversation_lists_its_activities_in_seq_order,
    idempotency_keys_are_held_once_answered_freed_and_taken_over,
    event_types_are_created_once_changed_over_their_version_and_listed_by_name,
    stream_subscriptions_follow_their_connection,
    stream_tokens_admit_until_they_expire,
    a_connection_marks_its_tenant_live_until_it_expires,
    dead_letter_counters_sum_what_is_still_stored,
    a_lane_has_one_head_taken_in_seq_order,
    a_waiting_delivery_is_rescheduled_with_or_without_its_lease,
    a_tenant_queue_takes_a_message_once_and_a_missing_one_is_named,
    a_tenants_external_id_is_kept_once_made_and_replaced_by_a_rotation,
    usage_counters_add_up_per_key_and_read_in_order,
    a_marked_counter_write_adds_each_record_once,
    the_usage_log_takes_a_batch_once_and_reads_it_by_period,
    the_folds_cursor_only_goes_forward,
    a_weeks_health_history_reads_past_one_page,
    kept_payloads_read_back_and_uploads_are_read_within_their_bound,
);

async fn fixture(backend: Backend) -> Fixture {
    let (t, store): (Option<TestTables>, Arc<dyn Store>) = match backend {
        Backend::Dynamo => {
            let t = TestTables::on_emulator().await;
            let store = DynamoStore::new(t.dynamodb.clone(), t.resources.clone())
                .with_serial_transactions(true);
            (Some(t), Arc::new(store))
        }
        Backend::Memory => (None, Arc::new(MemStore::new())),
    };
    let now = Timestamp::now();
    let tenant = Tenant {
        id: TenantId::generate(),
        name: "store test".into(),
        tier: Tier::Bulk,
        created_at: now,
        alert_webhook_url: None,
        alert_channel_id: None,
        api_rate_limit: None,
        delivery_shards: None,
        shard_grants: Default::default(),
        email_senders: Vec::new(),
        ses_tenant: None,
        aws_external_id: None,
        typed_events: false,
    };
    store.create_tenant(&tenant, "hash-1").await.unwrap();
    let channel = Channel::new(
        tenant.id.clone(),
        ChannelType::Echo,
        "echo",
        Map::new(),
        now,
    );
    store.create_channel(&channel).await.unwrap();
    Fixture {
        t,
        store,
        tenant,
        channel,
    }
}

fn activity(f: &Fixture) -> Activity {
    Activity {
        event_type: None,
        id: ActivityId::generate(),
        tenant_id: f.tenant.id.clone(),
        conversation_id: "c".into(),
        seq: 1,
        payload_ref: None,
        payload: json!({"a": [1, 2.5, "x", null, {"b": true}]}),
        channel_ids: vec![f.channel.id.clone()],
        created_at: converger_core::Timestamp::now(),
        expires_at: None,
        trace: None,
    }
}

/// A delivery of the fixture's tenant, in one of its listing shards as ingest places it (the
/// tenant is a bulk one: 8 shards), so that every listing test reads across shards.
/// Created at `created`, due at `due_ms`.
fn new_delivery(a: &Activity, c: &Channel, tier: Tier, due_ms: i64, created: &str) -> Delivery {
    let at = Timestamp::parse(created).expect("an RFC 3339 time");
    let mut d = Delivery::new(a, c, tier, at).in_shards(8);
    d.next_attempt_at = due_ms;
    d.created_at = at;
    d.updated_at = at;
    d
}

fn entry(n: u32) -> LogUpdate {
    LogUpdate::append(&[], attempt(n))
}

fn attempt(n: u32) -> AttemptEntry {
    AttemptEntry {
        attempt: n,
        started_at: converger_core::Timestamp::now(),
        duration_ms: 3,
        status_code: Some(503),
        response_snippet: None,
        error: Some("boom".into()),
        next_retry_at: None,
        trigger: "auto".into(),
        outcome: Some(converger_ports::AttemptOutcome::Failed),
        expires_at: None,
    }
}

/// A request DynamoDB refuses comes back as a storage error that keeps the SDK's error as its
/// source, so the service's code and request id reach the logs and a caller can look at it.
#[tokio::test]
async fn a_refused_dynamodb_request_keeps_the_sdk_error_as_its_source() {
    let t = TestTables::on_emulator().await;
    let mut res = t.resources.clone();
    res.tenants = "converger-no-such-table".into();
    let store: Arc<dyn Store> = Arc::new(DynamoStore::new(t.dynamodb.clone(), res));
    let err = store.get_tenant(&TenantId::generate()).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("ResourceNotFound"), "{err}");
    let source = std::error::Error::source(&err).expect("the SDK's error is kept");
    let sdk = source
        .downcast_ref::<aws_sdk_dynamodb::error::SdkError<
            aws_sdk_dynamodb::operation::get_item::GetItemError,
            aws_sdk_dynamodb::config::http::HttpResponse,
        >>()
        .expect("the source is the SDK's error");
    assert!(
        sdk.as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception()),
        "{sdk:?}"
    );
}

/// Sends every `BatchWriteItem` whose body names `.0` (one activity's id) to a table that
/// does not exist, so that the service refuses it (after a round trip, as a throttled or
/// failed request would come back) while the other requests of the batch go through.
#[derive(Debug)]
struct FailBatchesNaming(String);

impl aws_sdk_dynamodb::config::Intercept for FailBatchesNaming {
    fn name(&self) -> &'static str {
        "fail-batches-naming"
    }
    fn modify_before_signing(
        &self,
        ctx: &mut aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let r = ctx.request_mut();
        let batch = r
            .headers()
            .get("x-amz-target")
            .is_some_and(|t| t.ends_with("BatchWriteItem"));
        let body = r
            .body()
            .bytes()
            .map(|b| String::from_utf8_lossy(b).to_string());
        if let Some(body) = body.filter(|b| batch && b.contains(&self.0)) {
            let mut v: serde_json::Value = serde_json::from_str(&body)?;
            let items = v["RequestItems"].as_object().cloned().unwrap_or_default();
            v["RequestItems"] = serde_json::Value::Object(
                items
                    .into_iter()
                    .map(|(t, w)| (format!("{t}-missing"), w))
                    .collect(),
            );
            let bytes = serde_json::to_vec(&v)?;
            r.headers_mut()
                .insert("content-length", bytes.len().to_string());
            *r.body_mut() = aws_smithy_types::body::SdkBody::from(bytes);
        }
        Ok(())
    }
}

/// A batch of activities is several batch writes, none atomic with another: one that fails
/// leaves no delivery whose activity is missing (such a delivery could never be sent, and a
/// replay of it would never finish).
#[tokio::test]
async fn a_batch_write_that_fails_part_way_leaves_no_delivery_without_its_activity() {
    let f = fixture(Backend::Dynamo).await;
    let t = f.t.as_ref().unwrap();
    let activities: Vec<Activity> = (0..12).map(|_| activity(&f)).collect();
    let deliveries: Vec<Vec<Delivery>> = activities
        .iter()
        .map(|a| {
            (0..3)
                .map(|_| {
                    let mut d = new_delivery(a, &f.channel, Tier::Bulk, 0, &time::now_rfc3339());
                    d.id = converger_core::DeliveryId::generate();
                    d
                })
                .collect()
        })
        .collect();
    // The request that carries the first activity fails.
    let conf = aws_sdk_dynamodb::config::Builder::from(&t.config)
        .interceptor(FailBatchesNaming(activities[0].id.to_string()))
        .build();
    let failing = DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(conf),
        t.resources.clone(),
    );
    let fresh: Vec<(&Activity, &[Delivery])> = activities
        .iter()
        .zip(&deliveries)
        .map(|(a, ds)| (a, ds.as_slice()))
        .collect();
    assert!(
        converger_ports::ActivityStore::create_fresh_activities(&failing, &fresh)
            .await
            .is_err()
    );
    for (a, ds) in activities.iter().zip(&deliveries) {
        let has_activity = f
            .store
            .get_activity(&a.tenant_id, &a.id)
            .await
            .unwrap()
            .is_some();
        for d in ds {
            let written = f.store.get_delivery(&d.id).await.unwrap().is_some();
            assert!(
                !written || has_activity,
                "{} written without its activity {}",
                d.id,
                a.id
            );
        }
    }
}
