//! The `admin` Lambda: the operators' API (its token read from Secrets Manager) and the web pages of the
//! admin (`/admin`) and the tenants' portal (`/portal`) behind API Gateway.

use lambda_http::Error;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    converger_lambda::bootstrap::init_tracing();
    let pipeline = Arc::new(converger_lambda::bootstrap::from_env().await?);
    // The admin token and the session secret come from Secrets Manager (the template passes
    // their ARNs), read once here.
    let sdk = converger_store::aws::load_config().await;
    let token =
        converger_store::secrets::secret_or_env(&sdk, "ADMIN_TOKEN_SECRET_ARN", "ADMIN_TOKEN")
            .await?
            .filter(|t| t.len() >= 16);
    let session =
        converger_store::secrets::secret_or_env(&sdk, "SESSION_SECRET_ARN", "SESSION_SECRET")
            .await?;
    let state = converger_http::AppState::new(pipeline, token).with_web(
        converger_http::web::WebConfig::from_env_with_secret(session),
    );
    let app = converger_http::admin::router(state.clone())
        .merge(converger_http::web::router(state))
        .layer(axum::middleware::map_request(
            converger_lambda::http::source_ip,
        ));
    lambda_http::run(app).await
}
