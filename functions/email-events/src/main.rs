//! The `email-events` Lambda: Amazon SES's events for this stack's configuration set, from
//! EventBridge's default bus. A bounce, complaint or reject fails the delivery it names; a
//! delivery delivers it (the receipts' forward-only rules).

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<EventBridgeEvent<Value>>| async move {
            converger_lambda::handlers::email_event(pipeline, event.payload)
                .await
                .map_err(Error::from)
        },
    ))
    .await
}
