//! The tenant API as the API function serves it: its routes and the route of the OpenAPI
//! document that describes them (kept apart so that the handlers the document lists do not
//! import it back).

use crate::AppState;
use axum::Router;

/// The tenant API's router, with `GET /api/v1/openapi.json`; every answer `nosniff`.
pub fn tenant_api(state: AppState) -> Router {
    crate::api::router(state)
        .merge(crate::openapi::router())
        .layer(axum::middleware::from_fn(crate::error::api_headers))
}
