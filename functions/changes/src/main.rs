//! The `changes` Lambda: the deliveries table's stream in (one shard's batch at a time, in
//! a tumbling window), and what follows from each row change out: the bus's events, the live
//! stream's frames, the health and usage counts (`pipeline::changes`).

use aws_lambda_events::event::dynamodb::TimeWindowEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env_with_websockets().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<TimeWindowEvent>| async move {
            Ok::<_, Error>(converger_lambda::handlers::changes_batch(pipeline, event.payload).await)
        },
    ))
    .await
}
