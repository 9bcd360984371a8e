//! The benchmark scenarios' lines as the smoke tests read them: each struct names the fields
//! a test checks (a line's other fields are ignored), so a line that lost one fails where it
//! is parsed, with the line.

use serde::Deserialize;
use std::collections::BTreeMap;

/// A count and percentiles of milliseconds (`bench::summary`).
#[derive(Debug, Deserialize)]
pub(super) struct Summary {
    pub(super) n: u64,
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct LatencyReport {
    pub(super) scenario: String,
    pub(super) ingest_to_receiver: Summary,
    pub(super) api_answer: Summary,
    pub(super) floor_bare_post: Summary,
    pub(super) machine: Machine,
}

#[derive(Debug, Deserialize)]
pub(super) struct Machine {
    pub(super) cores: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct ThroughputReport {
    pub(super) in_process: ThroughputBackend,
    pub(super) emulator: ThroughputBackend,
}

#[derive(Debug, Deserialize)]
pub(super) struct ThroughputBackend {
    pub(super) deliveries: u64,
    pub(super) deliveries_per_s: f64,
    pub(super) cpu_s: Option<f64>,
    pub(super) cpu_s_per_1000_deliveries: Option<f64>,
    pub(super) emulator_cpu_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RequestsReport {
    pub(super) cases: RequestsCases,
}

#[derive(Debug, Deserialize)]
pub(super) struct RequestsCases {
    pub(super) first_try: RequestsCase,
    pub(super) first_try_no_window: RequestsCase,
    pub(super) first_try_burst: RequestsCase,
    pub(super) first_try_by_event_type: RequestsCase,
    pub(super) three_attempts: RequestsCase,
    pub(super) dead_letter: RequestsCase,
    pub(super) oauth2_first_try: RequestsCase,
    pub(super) aws_sqs_first_try: RequestsCase,
    pub(super) aws_eventbridge_first_try: RequestsCase,
    pub(super) aws_kinesis_first_try: RequestsCase,
    pub(super) aws_sns_first_try: RequestsCase,
    pub(super) aws_firehose_first_try: RequestsCase,
    pub(super) aws_stepfunctions_first_try: RequestsCase,
    pub(super) aws_s3_first_try: RequestsCase,
    pub(super) rabbitmq_first_try: RequestsCase,
}

#[derive(Debug, Deserialize)]
pub(super) struct RequestsCase {
    /// Requests per delivery by kind (`dynamodb/UpdateItem`; `tenant:` and `changes:` before
    /// those made as the tenant and by the changes function).
    pub(super) per_delivery: BTreeMap<String, f64>,
    pub(super) billed_requests_per_delivery: f64,
    pub(super) cost_per_million_usd: f64,
    pub(super) seconds: f64,
    pub(super) api_rate_limit_takes_per_call: f64,
    /// The OAuth 2.0 case's only.
    pub(super) token_requests: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct KeysReport {
    pub(super) cases: KeysCases,
}

#[derive(Debug, Deserialize)]
pub(super) struct KeysCases {
    pub(super) first_try: KeysCase,
    pub(super) first_try_without_seq: KeysCase,
    pub(super) first_try_batch: KeysCase,
    pub(super) three_attempts: KeysCase,
    pub(super) dead_letter: KeysCase,
    pub(super) sweep: KeysCase,
    pub(super) bulk_replay: KeysReplay,
}

#[derive(Debug, Deserialize)]
pub(super) struct KeysCase {
    pub(super) write_units_per_delivery: f64,
    pub(super) read_units_per_delivery: f64,
    pub(super) hottest_write: Hottest,
    pub(super) writes: Vec<KeyFamily>,
}

/// The busiest family written of each scope that has one.
#[derive(Debug, Deserialize)]
pub(super) struct Hottest {
    pub(super) tenant: Option<HotFamily>,
    pub(super) deployment: Option<HotFamily>,
}

#[derive(Debug, Deserialize)]
pub(super) struct HotFamily {
    pub(super) ceiling_per_s: Option<f64>,
}

/// One key family's units: of a table (`index` null) or of one of its indexes.
#[derive(Debug, Deserialize)]
pub(super) struct KeyFamily {
    pub(super) table: String,
    pub(super) index: Option<String>,
    pub(super) units_per_delivery: f64,
}

/// The bulk replay's case: its figures, or the error that stopped it.
#[derive(Debug, Deserialize)]
pub(super) struct KeysReplay {
    pub(super) error: Option<String>,
    pub(super) write_units_per_delivery: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostReport {
    pub(super) cases: CostCases,
    pub(super) fixed_monthly_usd: FixedMonthly,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostCases {
    pub(super) first_try: CostCase,
    pub(super) aws_sqs_first_try: CostCase,
    pub(super) three_attempts: CostCase,
    pub(super) dead_letter: CostCase,
    pub(super) first_try_1mib: CostCase,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostCase {
    pub(super) per_delivery: CostPerDelivery,
    /// By function (`ApiFunction`).
    pub(super) lambda: BTreeMap<String, CostLambda>,
    pub(super) usd_per_million: CostUsd,
    pub(super) usd_per_million_total: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostPerDelivery {
    pub(super) api_requests: f64,
    pub(super) dynamodb_write_units: f64,
    pub(super) sqs_requests: f64,
    pub(super) lambda_invocations: f64,
    pub(super) lambda_gb_seconds: f64,
    pub(super) log_bytes: f64,
    pub(super) eventbridge_events: f64,
    /// By detail type (`delivery.status_changed`).
    pub(super) eventbridge_events_by_type: BTreeMap<String, f64>,
    pub(super) s3_puts: f64,
    pub(super) s3_gets: f64,
    pub(super) bytes_to_receivers: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostLambda {
    pub(super) invocations_per_delivery: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostUsd {
    pub(super) s3_storage_for_the_retention: f64,
    pub(super) data_out_to_receivers: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct FixedMonthly {
    pub(super) total: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct HotTenantReport {
    pub(super) cases: HotTenantCases,
}

#[derive(Debug, Deserialize)]
pub(super) struct HotTenantCases {
    pub(super) tenant_default_shards: HotTenantCase,
    pub(super) tenant_64_shards: HotTenantCase,
    pub(super) one_channel: HotTenantCase,
    pub(super) one_channel_rate_limited: HotTenantCase,
    pub(super) tenant_shards_grow: HotTenantCase,
}

#[derive(Debug, Deserialize)]
pub(super) struct HotTenantCase {
    pub(super) activities: u64,
    pub(super) delivered: u64,
    pub(super) refused: u64,
    pub(super) listing_shards: u64,
    pub(super) due_shards: u64,
    /// The growing case's only.
    pub(super) growth: Option<Growth>,
    pub(super) capacity: Capacity,
}

#[derive(Debug, Deserialize)]
pub(super) struct Growth {
    pub(super) tenant_refresh_s: u64,
    pub(super) granted: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Capacity {
    pub(super) write_units_per_delivery: f64,
    /// By key family (`flow (table): <channel>#slots#<n>`).
    pub(super) throttled_by_family: BTreeMap<String, u64>,
    pub(super) writes: Vec<FamilyWrites>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FamilyWrites {
    pub(super) family: String,
    pub(super) units_per_delivery: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct FairnessReport {
    pub(super) orders: FairnessOrders,
}

#[derive(Debug, Deserialize)]
pub(super) struct FairnessOrders {
    pub(super) fair: FairnessOrder,
    pub(super) fair_default_window: FairnessOrder,
    pub(super) fair_fixed_window: FairnessOrder,
    pub(super) fair_hostile_middleware: FairnessOrder,
    pub(super) oldest_first: FairnessOrder,
}

#[derive(Debug, Deserialize)]
pub(super) struct FairnessOrder {
    pub(super) baseline: QuietRun,
    pub(super) beside_the_backlog: QuietRun,
    pub(super) p95_ratio: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct QuietRun {
    pub(super) quiet_sent: u64,
    pub(super) quiet_delivered: u64,
    pub(super) quiet: Summary,
    /// Null in the baseline (no backlog).
    pub(super) backlog_ingest_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct BinariesReport {
    /// By function (`health`).
    pub(super) functions: BTreeMap<String, Binary>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Binary {
    pub(super) size_mib: f64,
    pub(super) init_ms: f64,
    pub(super) first_event_ms: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct BulkReplayReport {
    pub(super) scenario: String,
    pub(super) retried: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct PagesReport {
    pub(super) scenario: String,
    /// Milliseconds by page (`dashboard_ms`).
    pub(super) pages: BTreeMap<String, f64>,
    pub(super) load_more_pages_followed: u64,
    pub(super) search_rows_found: u64,
    pub(super) search_answers_until_found: u64,
    pub(super) export_rows: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct HeadOfLineReport {
    pub(super) with_retrying: HeadOfLinePhase,
    pub(super) baseline: HeadOfLinePhase,
    pub(super) p95_ratio: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct HeadOfLinePhase {
    pub(super) sent: u64,
    pub(super) delivered: u64,
    pub(super) failing_attempts: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct BurstReport {
    pub(super) capped_max_concurrent: u64,
    pub(super) bound_max_concurrent: u64,
    pub(super) capped_s: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct CostShapeReport {
    pub(super) scenario: String,
    pub(super) per_million: ShapePerMillion,
    pub(super) modes: ShapeModes,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapePerMillion {
    pub(super) single_on_demand: f64,
    pub(super) single_provisioned: f64,
    pub(super) batch_on_demand: f64,
    pub(super) batch_provisioned: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapeModes {
    pub(super) single: ShapeMode,
    pub(super) batch: ShapeMode,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapeMode {
    pub(super) offered: u64,
    pub(super) accepted: u64,
    pub(super) delivered: u64,
    pub(super) api_requests: u64,
    pub(super) usd_per_million: ShapeUsd,
    pub(super) per_delivery: ShapePerDelivery,
    /// By function (`DeliverFunction`).
    pub(super) lambda: BTreeMap<String, ShapeLambda>,
    pub(super) storage: ShapeStorage,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapeUsd {
    pub(super) dynamodb_writes: f64,
    pub(super) dynamodb_reads: f64,
    pub(super) sqs: f64,
    pub(super) eventbridge: f64,
    pub(super) api_gateway: f64,
    pub(super) lambda_requests: f64,
    pub(super) lambda_duration: f64,
    pub(super) logs: f64,
    pub(super) data_out: f64,
    pub(super) dynamodb_writes_provisioned: f64,
    pub(super) xray: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapePerDelivery {
    /// By table (`deliveries`), its indexes included.
    pub(super) dynamodb_write_units_by_table: BTreeMap<String, f64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapeLambda {
    pub(super) instances: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShapeStorage {
    pub(super) bytes_per_delivery: f64,
}

#[derive(Debug, Deserialize)]
pub(super) struct ThroughputShapeReport {
    pub(super) scenario: String,
    pub(super) stage_throttle_per_s: Option<f64>,
    pub(super) cases: ThroughputShapeCases,
}

#[derive(Debug, Deserialize)]
pub(super) struct ThroughputShapeCases {
    pub(super) batch: ThroughputShapeCase,
}

#[derive(Debug, Deserialize)]
pub(super) struct ThroughputShapeCase {
    pub(super) offered: u64,
    pub(super) accepted: u64,
    pub(super) delivered: u64,
    pub(super) throttled_requests: Option<u64>,
    pub(super) ingest_to_receiver: Summary,
}
