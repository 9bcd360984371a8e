//! The `admin` Lambda: the operators' API (its token read from Secrets Manager) and the web pages of the
//! admin (`/admin`) and the tenants' portal (`/portal`) behind API Gateway.

use lambda_http::Error;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    // A rotated key's live stream connections are closed through the management API.
    let pipeline = Arc::new(converger_lambda::bootstrap::from_env_with_websockets().await?);
    let (token, session) = converger_lambda::bootstrap::admin_secrets().await?;
    let state = converger_http::AppState::new(pipeline, token).with_web(
        converger_http::web::WebConfig::from_env_with_secret(session)?,
    );
    let app = converger_http::admin::router(state.clone())
        .merge(converger_http::web::router(state))
        .layer(axum::middleware::map_request(
            converger_lambda::http::source_ip,
        ));
    lambda_http::run(app).await
}
