//! The `retry-scheduler` Lambda: every minute, enqueue again the pending deliveries that are
//! overdue and hold no live lease (the sweeper).

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use converger_pipeline::sweep::SweepReport;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<EventBridgeEvent<Value>>| async move {
            Ok::<SweepReport, Error>(pipeline.sweep().await?)
        },
    ))
    .await
}
