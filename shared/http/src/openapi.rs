//! The OpenAPI 3.1 document of the tenant API, the admin JSON API and the receipt
//! endpoints, generated from the handlers' annotations and the answer types
//! (`GET /api/v1/openapi.json`; committed as `docs/openapi.json`, kept current by a test).
//! Every operation that can refuse a request also answers the error statuses of
//! [`ERROR_STATUSES`] with the [`ErrorBody`] shape.

use crate::error::ErrorCode;
use crate::schemas::*;
use crate::{admin, api, receipts, views};
use axum::http::header;
use axum::response::IntoResponse;
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Converger",
        version = "1",
        description = "Outbound delivery of activities to webhooks, WhatsApp, bots and websocket \
                       clients: retries, dead letters, replay and flow control per channel. \
                       Tenant routes take `Authorization: Bearer <API key>`; admin routes the \
                       operators' token. Every tenant POST takes an `Idempotency-Key`."
    ),
    paths(
        api::health,
        serve,
        api::create_channel,
        api::list_channels,
        api::get_channel,
        api::patch_channel,
        api::delete_channel,
        api::get_secret,
        api::rotate_secret,
        api::pause_channel,
        api::resume_channel,
        api::release_lane,
        api::channel_delivery,
        api::channel_health,
        api::create_activity,
        api::create_activities,
        api::create_upload,
        api::list_activities,
        api::get_activity,
        api::list_deliveries,
        api::get_delivery,
        api::retry_delivery,
        api::list_attempts,
        api::retry_channel,
        api::start_replay,
        api::get_replay,
        api::list_audit,
        api::create_stream_token,
        api::get_aws_identity,
        api::rotate_aws_identity,
        api::get_usage,
        api::create_event_type,
        api::list_event_types,
        api::get_event_type,
        api::patch_event_type,
        receipts::verify_subscription,
        receipts::receive_receipts,
        receipts::acknowledge,
        admin::health,
        admin::create_tenant,
        admin::get_tenant,
        admin::patch_tenant,
        admin::create_user,
    ),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode)),
    modifiers(&Conventions),
    security(("api_key" = [])),
    tags(
        (name = "channels", description = "Where deliveries go"),
        (name = "activities", description = "What is delivered"),
        (name = "event types", description = "The tenant's catalog of event types and their payload schemas"),
        (name = "deliveries", description = "One activity to one channel: attempts, dead letters, replays"),
        (name = "flow control", description = "Pause, resume, breaker and health of a channel"),
        (name = "audit", description = "Who did what"),
        (name = "aws", description = "What a tenant's AWS account needs to receive deliveries (the AWS channel types)"),
        (name = "usage", description = "What a tenant's traffic did per day, and an estimate of its AWS cost"),
        (name = "stream", description = "The live stream of a tenant's delivery and channel changes (WebSocket)"),
        (name = "receipts", description = "Providers' delivery reports and clients' acknowledgements"),
        (name = "admin", description = "Operators: tenants and users"),
        (name = "operations", description = "Liveness and this document"),
    )
)]
pub struct ApiDoc;

/// The error statuses an operation that takes input may answer, each with [`ErrorBody`];
/// its description lists the `error.code`s answered with it ([`ErrorCode::statuses`]).
pub const ERROR_STATUSES: [(&str, &str); 11] = [
    ("400", "Malformed"),
    ("401", "Missing or invalid credentials"),
    ("403", "Not allowed"),
    ("404", "No such resource, or another tenant's"),
    ("409", "Not in a state that allows it"),
    ("413", "The body is too large"),
    ("415", "The body is not JSON"),
    ("422", "Invalid input, `error.code` naming the rule"),
    ("429", "Too many requests; see Retry-After"),
    ("501", "Not offered by this deployment"),
    (
        "503",
        "Unavailable for a moment; safe to retry (with the same Idempotency-Key)",
    ),
];

/// An error status's description: its headline and its codes.
fn error_description(status: &str, headline: &str) -> String {
    let codes: Vec<String> = status
        .parse::<u16>()
        .map(|s| {
            ErrorCode::answered_with(s)
                .map(|c| format!("`{c}`"))
                .collect()
        })
        .unwrap_or_default();
    format!("{headline}: {}", codes.join(", "))
}

/// Security schemes, the `Idempotency-Key` header of every POST, and the error answers.
struct Conventions;

impl Modify for Conventions {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let bearer = |what: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(what.to_owned()))
                    .build(),
            )
        };
        components.add_security_scheme("api_key", bearer("A tenant API key (`cvg_...`)"));
        components.add_security_scheme("admin_token", bearer("The operators' admin token"));
        // Each error status once, in `components.responses`; operations refer to it.
        for (status, headline) in ERROR_STATUSES {
            components.responses.insert(
                error_name(status),
                RefOr::T(
                    ResponseBuilder::new()
                        .description(error_description(status, headline))
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build(),
                ),
            );
        }
        let idempotency_key = utoipa::openapi::path::ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(utoipa::openapi::path::ParameterIn::Header)
            .required(utoipa::openapi::Required::False)
            .description(Some(
                "The same key and request within 24 h get the first answer again \
                 (`Idempotent-Replayed: true`) without the work being done twice",
            ))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .min_length(Some(1))
                    .max_length(Some(converger_core::idempotency::MAX_KEY_LEN))
                    .pattern(Some("^[!-~]+$")),
            ))
            .build();
        for (path, item) in doc.paths.paths.iter_mut() {
            let open = path.ends_with("/api/health") || path.ends_with("openapi.json");
            let tenant_post = path.starts_with("/api/v1/") && !path.ends_with("/status");
            if let Some(op) = item.post.as_mut()
                && tenant_post
            {
                op.parameters
                    .get_or_insert_with(Vec::new)
                    .push(idempotency_key.clone());
            }
            for op in [
                item.get.as_mut(),
                item.post.as_mut(),
                item.patch.as_mut(),
                item.delete.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                if open {
                    continue;
                }
                for (status, _) in ERROR_STATUSES {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| {
                            RefOr::Ref(utoipa::openapi::Ref::from_response_name(error_name(status)))
                        });
                }
            }
        }
    }
}

/// The name of an error status's shared response (`Error422`).
fn error_name(status: &str) -> String {
    format!("Error{status}")
}

/// The document, built once per process.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        ApiDoc::openapi()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    })
}

/// `GET /api/v1/openapi.json`: this document (no authentication).
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations", security(()),
    summary = "This document",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)))]
pub async fn serve() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document())
}

/// The route that serves this document, merged into the tenant API's router by whoever builds
/// it (the API function, the local stack), so that the handlers the document lists do not
/// import it back.
pub fn router() -> axum::Router {
    axum::Router::new().route("/api/v1/openapi.json", axum::routing::get(serve))
}

/// Keeps the answer types named in `views` in the document even where only a page of them is.
#[allow(dead_code)]
fn _uses(_: views::Page<views::ChannelView>) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/openapi.json` is this document; `UPDATE_OPENAPI=1` rewrites it.
    #[test]
    fn the_committed_document_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
        let now = format!("{}\n", document());
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == now,
            "docs/openapi.json is not the document the code generates; run \
             `UPDATE_OPENAPI=1 cargo test -p converger-http openapi` and commit it"
        );
    }

    #[test]
    fn every_operation_is_documented_with_its_errors_and_tenant_posts_take_a_key() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        assert_eq!(doc["openapi"].as_str().map(|v| &v[..3]), Some("3.1"));
        let paths = doc["paths"].as_object().unwrap();
        let mut ops = 0;
        for (path, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                ops += 1;
                assert!(
                    op["summary"].is_string() || op["description"].is_string(),
                    "{method} {path}"
                );
                let open = path.ends_with("/api/health") || path.ends_with("openapi.json");
                if !open {
                    for status in ["401", "404", "422", "503"] {
                        assert!(
                            op["responses"][status].is_object(),
                            "{method} {path} {status}"
                        );
                    }
                }
                let key = op["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
                let tenant_post =
                    method == "post" && path.starts_with("/api/v1/") && !path.ends_with("/status");
                assert_eq!(key, tenant_post, "{method} {path}");
            }
        }
        assert_eq!(ops, 43);
    }

    /// The channel type's pattern (a new channel's `type`, the list's filter) admits every
    /// type this build delivers to, and nothing else.
    #[test]
    fn the_channel_type_pattern_lists_every_type() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        let pattern = doc["components"]["schemas"]["NewChannel"]["properties"]["type"]["pattern"]
            .as_str()
            .unwrap();
        let list = pattern
            .trim_start_matches("^(")
            .trim_end_matches(")$")
            .split('|')
            .collect::<Vec<_>>();
        let all: Vec<&str> = converger_core::ChannelType::ALL
            .iter()
            .map(|t| t.as_str())
            .collect();
        assert_eq!(list, all);
        let filter = doc["paths"]["/api/v1/channels"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "type")
            .unwrap();
        assert_eq!(filter["schema"]["pattern"], pattern);
    }

    /// Every code is listed under each status it is answered with, and the document's
    /// `code` field takes exactly the declared codes.
    #[test]
    fn every_error_code_is_in_the_document() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        let listed: Vec<u16> = ERROR_STATUSES
            .iter()
            .map(|(s, _)| s.parse().unwrap())
            .collect();
        // A 405 answers a method no operation has: no operation lists it.
        for c in ErrorCode::ALL
            .iter()
            .filter(|c| **c != ErrorCode::MethodNotAllowed)
        {
            for s in c.statuses() {
                assert!(listed.contains(s), "{c} is answered {s}, not documented");
                let d = doc["components"]["responses"][format!("Error{s}")]["description"]
                    .as_str()
                    .unwrap();
                assert!(d.contains(&format!("`{c}`")), "{c} not under {s}: {d}");
            }
        }
        for s in &listed {
            assert!(
                ErrorCode::answered_with(*s).next().is_some(),
                "{s} has no code"
            );
        }
        let values: Vec<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let declared: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(values, declared);
    }
}
