//! The `deliver` Lambda: SQS records in, partial batch failures out.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env_with_websockets().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(converger_lambda::handlers::deliver_batch(pipeline, event.payload).await)
    }))
    .await
}
