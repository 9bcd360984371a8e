//! The `health` Lambda: every 5 minutes, the health of every active channel of the checked
//! types from its per-minute counters; a change emits `channel.health_changed` (and alerts the
//! tenant); a change to unhealthy opens the channel's breaker.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use converger_pipeline::health::HealthReport;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<EventBridgeEvent<Value>>| async move {
            Ok::<HealthReport, Error>(pipeline.health().health_check().await?)
        },
    ))
    .await
}
