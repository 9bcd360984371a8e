//! The `websocket` Lambda: the API Gateway WebSocket API's routes (`$connect`,
//! `$disconnect`, `$default` for client frames).

use aws_lambda_events::event::apigw::ApiGatewayWebsocketProxyRequest;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = converger_lambda::bootstrap::from_env_with_websockets().await?;
    let pipeline = &pipeline;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<ApiGatewayWebsocketProxyRequest>| async move {
            Ok::<_, Error>(
                converger_lambda::handlers::websocket_event(pipeline, event.payload).await,
            )
        },
    ))
    .await
}
