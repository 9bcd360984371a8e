//! The pages' stylesheet and the bare error page: what every page, signed in or not, uses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, PreEscaped, html};

pub(super) fn page_error(status: StatusCode, message: &str) -> Response {
    let body = html! {
        (DOCTYPE)
        html { head { title { "Converger" } style { (PreEscaped(CSS)) } }
            body { main { h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) } p.error id="page-error" { (message) } } } }
    };
    (status, axum::response::Html(body.into_string())).into_response()
}

pub(super) const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2230}\
header{background:#1d2230;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}\
header a{color:#fff;text-decoration:none}header .who{margin-left:auto;opacity:.8}\
main{padding:16px}table{border-collapse:collapse;width:100%}\
figure.chart{margin:12px 0 20px}figure.chart svg{max-width:100%;height:auto}\
.legend{margin-left:12px;white-space:nowrap}.legend svg{vertical-align:middle}\
th,td{border-bottom:1px solid #dde;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f3f4f8}.error{color:#a01818}.muted{color:#667}\
form.inline{display:inline}fieldset{border:1px solid #dde;margin:0 0 12px}\
pre{background:#f6f7fa;padding:6px;max-width:60em;overflow:auto;white-space:pre-wrap}\
.badge{padding:1px 6px;border-radius:8px;background:#eef}.failed{background:#fde2e2}\
.sent,.delivered,.read{background:#e0f5e6}.pending,.paused{background:#fff3d6}\
td.deliveries a.badge{display:inline-block;margin:1px 0;color:inherit;text-decoration:none}\
table.fields{width:auto;margin-bottom:12px}.actions{margin:8px 0 12px;display:flex;gap:16px;align-items:center}\
td.changes .change{display:inline-block;margin-right:10px;word-break:break-all}table.fields th{width:11em}.flash{background:#fff7d6;padding:6px 10px}";

/// A storage or queue failure, as a page: logged with its detail, shown without it (an SDK's
/// error text names tables, queues and request ids that are no business of a page).
pub(super) fn unavailable(e: &dyn std::fmt::Display) -> Response {
    tracing::error!(error = %e, "page failed: storage unavailable");
    page_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Storage is unavailable just now; try again in a moment.",
    )
}

/// Why a page could not be built from its query: the query itself (422, with the reason) or
/// storage (503, without the store's text).
#[derive(Debug)]
pub(super) enum PageFail {
    Invalid(String),
    Unavailable(converger_ports::StoreError),
}

impl From<converger_ports::StoreError> for PageFail {
    fn from(e: converger_ports::StoreError) -> Self {
        Self::Unavailable(e)
    }
}

impl PageFail {
    pub(super) fn invalid(e: impl std::fmt::Display) -> Self {
        Self::Invalid(e.to_string())
    }

    /// The page for a failed query on the deliveries views.
    pub(super) fn page(&self) -> Response {
        match self {
            Self::Invalid(m) => page_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("Invalid filter: {m}"),
            ),
            Self::Unavailable(e) => unavailable(e),
        }
    }

    /// A JSON answer (`{"error": ...}`) for the pages' polling endpoints.
    pub(super) fn json(&self) -> Response {
        match self {
            Self::Invalid(m) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                axum::Json(serde_json::json!({"error": m})),
            )
                .into_response(),
            Self::Unavailable(e) => {
                tracing::error!(error = %e, "poll failed: storage unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(serde_json::json!({"error": "storage unavailable"})),
                )
                    .into_response()
            }
        }
    }
}
