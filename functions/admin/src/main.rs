//! The `admin` Lambda: the operators' API behind API Gateway, with the token in `ADMIN_TOKEN`.

use lambda_http::Error;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_pipeline::bootstrap::init_tracing();
    let pipeline = Arc::new(converger_pipeline::bootstrap::from_env().await?);
    let token = std::env::var("ADMIN_TOKEN").ok().filter(|t| t.len() >= 16);
    let state = converger_http::AppState::new(pipeline, token);
    lambda_http::run(converger_http::admin::router(state)).await
}
