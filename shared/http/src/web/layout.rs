//! The signed-in pages' frame (header and navigation) and small helpers they share.

use super::page::CSS;
use super::session::{Viewer, prefix};
use crate::AppState;
use axum::response::{IntoResponse, Response};
use converger_core::web::Realm;
use maud::{DOCTYPE, Markup, PreEscaped, html};

pub(super) fn layout(state: &AppState, v: &Viewer, title: &str, content: Markup) -> Response {
    let p = prefix(v.realm);
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Converger" }
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    strong { "Converger " (if v.realm == Realm::Admin { "admin" } else { "portal" }) }
                    @if v.realm == Realm::Admin { a href="/admin" { "Dashboard" } }
                    a href={ (p) "/deliveries" } { "Deliveries" }
                    a href={ (p) "/channels" } { "Channels" }
                    @if v.realm == Realm::Admin { a href="/admin/tenants" { "Tenants" } }
                    a href={ (p) "/usage" } { "Usage" }
                    a href={ (p) "/event-types" } { "Event types" }
                    a href={ (p) "/audit" } { "Audit log" }
                    span.who { (v.user.email) " (" (v.user.role) ")" }
                    form.inline method="post" action={ (p) "/logout" } {
                        input type="hidden" name="_csrf" value=(v.csrf(state));
                        button type="submit" { "Sign out" }
                    }
                }
                main { h1 { (title) } (content) }
            }
        }
    };
    axum::response::Html(body.into_string()).into_response()
}

pub(super) fn nonempty(o: &Option<String>) -> Option<&str> {
    o.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

pub(super) fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `2026-11-30T13:21:21.157153Z` as `2026-11-30 13:21:21`.
pub(super) fn short_time(t: converger_core::Timestamp) -> String {
    let t = t.rfc3339();
    t.get(..19).unwrap_or(&t).replacen('T', " ", 1)
}
