//! The `api` Lambda: the tenant API behind API Gateway.

use lambda_http::Error;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = Arc::new(converger_lambda::bootstrap::from_env().await?);
    let state = converger_http::AppState::new(pipeline, None);
    let app = converger_http::app::tenant_api(state).layer(axum::middleware::map_request(
        converger_lambda::http::source_ip,
    ));
    lambda_http::run(app).await
}
