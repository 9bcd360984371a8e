//! The pages' frame (CSS, header, error page) and small helpers they share.

use super::session::{Viewer, prefix};
use crate::AppState;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use converger_core::web::Realm;
use maud::{DOCTYPE, Markup, PreEscaped, html};

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
th,td{border-bottom:1px solid #dde;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f3f4f8}.error{color:#a01818}.muted{color:#667}\
form.inline{display:inline}fieldset{border:1px solid #dde;margin:0 0 12px}\
pre{background:#f6f7fa;padding:6px;max-width:60em;overflow:auto;white-space:pre-wrap}\
.badge{padding:1px 6px;border-radius:8px;background:#eef}.failed{background:#fde2e2}\
.sent,.delivered,.read{background:#e0f5e6}\
table.fields{width:auto;margin-bottom:12px}.actions{margin:8px 0 12px;display:flex;gap:16px;align-items:center}\
td.changes .change{display:inline-block;margin-right:10px;word-break:break-all}table.fields th{width:11em}.flash{background:#fff7d6;padding:6px 10px}";

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
pub(super) fn short_time(t: &str) -> String {
    t.get(..19).unwrap_or(t).replacen('T', " ", 1)
}
