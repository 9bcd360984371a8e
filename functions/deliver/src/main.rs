//! The `deliver` Lambda: SQS records in, partial batch failures out.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_pipeline::bootstrap::init_tracing();
    let pipeline = converger_pipeline::bootstrap::from_env_with_websockets().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(pipeline.deliver_batch(event.payload).await)
    }))
    .await
}
