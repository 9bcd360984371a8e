//! What the HTTP functions (api, admin) take from API Gateway beyond the request itself.

use lambda_http::RequestExt;
use lambda_http::request::RequestContext;

/// Puts API Gateway's source IP where the admin IP allowlist, the sign-in counts and the
/// refused-request throttle read it (`converger_http::web::SourceIp`).
pub async fn source_ip(mut req: axum::extract::Request) -> axum::extract::Request {
    let ip = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => {
            ctx.http.source_ip.as_deref().and_then(|ip| ip.parse().ok())
        }
        _ => None,
    };
    if let Some(ip) = ip {
        req.extensions_mut()
            .insert(converger_http::web::SourceIp(ip));
    }
    req
}
