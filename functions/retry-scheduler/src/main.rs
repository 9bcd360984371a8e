//! The `retry-scheduler` Lambda: every minute, enqueue again the pending deliveries that are
//! overdue and hold no live lease (the sweeper), then watch for crashed attempts until shortly
//! before the next minute.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use converger_pipeline::sweep::SweepReport;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// How long one invocation watches for crashed attempts (the schedule fires every minute).
const WATCH: Duration = Duration::from_secs(50);

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<EventBridgeEvent<Value>>| async move {
            // Until 5 s before the invocation's deadline, and never into the next minute.
            let left = event
                .context
                .deadline()
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            let budget = left.saturating_sub(Duration::from_secs(5)).min(WATCH);
            Ok::<SweepReport, Error>(pipeline.sweeper().sweep_and_watch(budget).await?)
        },
    ))
    .await
}
