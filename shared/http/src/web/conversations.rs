//! One conversation: its activities in `seq` order, each with a badge per channel delivery.

use super::layout::{layout, nonempty, short_time, urlencode};
use super::page::{PageFail, page_error, unavailable};
use super::scope::{names_of, tenant_choices};
use super::session::{Viewer, prefix};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use converger_core::web::Realm;
use converger_core::{ActivityId, ChannelId, DeliveryId, TenantId};
use converger_ports::{Activity, Delivery};
use maud::{PreEscaped, html};
use serde::Deserialize;
use std::collections::HashMap;

/// Activities one page shows.
const PAGE_ACTIVITIES: usize = 50;

#[derive(Debug, Default, Deserialize)]
pub(super) struct ConversationQuery {
    /// The tenant whose conversation it is (operators; the portal's is its own).
    #[serde(default)]
    tenant: Option<String>,
    /// The conversation id (the search form's field).
    #[serde(default)]
    id: Option<String>,
    /// Continue after this activity: `<seq>.<activity id>` (Load more).
    #[serde(default)]
    after: Option<String>,
}

/// The search form's target: on to the conversation's page.
pub(super) async fn find_conversation(v: Viewer, Query(q): Query<ConversationQuery>) -> Response {
    let p = prefix(v.realm);
    let Some(id) = nonempty(&q.id) else {
        return page_error(StatusCode::BAD_REQUEST, "Give a conversation id.");
    };
    let tenant = match (v.realm, nonempty(&q.tenant)) {
        (Realm::Admin, Some(t)) => format!("?tenant={}", urlencode(t)),
        _ => String::new(),
    };
    Redirect::to(&format!("{p}/conversations/{}{tenant}", path_segment(id))).into_response()
}

/// `/admin/conversations/{id}?tenant=` and `/portal/conversations/{id}`: the conversation's
/// activities, oldest first, each with its deliveries (status, attempts, last error on hover)
/// linked to their pages. An operator names the tenant (conversation ids are the producers'
/// and repeat across tenants); without one, the page asks for it.
pub(super) async fn conversation_page(
    State(state): State<AppState>,
    v: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ConversationQuery>,
) -> Response {
    let p = prefix(v.realm);
    let tenant = match tenant_of(&v, &q) {
        Ok(Some(t)) => t,
        Ok(None) => return choose_tenant(&state, &v, &id).await,
        Err(e) => return e.page(),
    };
    let after = match nonempty(&q.after).map(parse_after) {
        Some(Some(a)) => Some(a),
        Some(None) => return page_error(StatusCode::BAD_REQUEST, "Not a place in the list."),
        None => None,
    };
    let Page {
        activities,
        more,
        rows,
        names,
    } = match load(&state, &tenant, &id, after.as_ref()).await {
        Ok(x) => x,
        Err(e) => return unavailable(&e),
    };
    let reads = state.pipeline.reads();
    let by_id: HashMap<&DeliveryId, &Delivery> = rows.iter().map(|d| (&d.id, d)).collect();
    let tenant_name = match v.realm {
        Realm::Admin => reads.tenant(&tenant).await.ok().flatten().map(|t| t.name),
        Realm::Portal => None,
    };
    let tenant_q = match v.realm {
        Realm::Admin => format!("tenant={}", urlencode(tenant.as_str())),
        Realm::Portal => String::new(),
    };
    let title = format!("Conversation {id}");
    let states_url = {
        let mut q = tenant_q.clone();
        if let Some((seq, a)) = &after {
            if !q.is_empty() {
                q.push('&');
            }
            q.push_str(&format!("after={seq}.{a}"));
        }
        format!("{p}/conversations/{}/states?{q}", path_segment(&id))
    };
    // The live stream, where the stack has one: a token for the page's tenant (five minutes
    // to connect), the conversation as its topic. Without it, the page polls.
    let stream = match state
        .web
        .stream_url
        .as_ref()
        .filter(|_| state.pipeline.streams().enabled())
    {
        // The page's token follows its conversation and nothing else of the tenant's.
        Some(url) => match state
            .pipeline
            .streams()
            .issue_token(
                &tenant,
                None,
                Some(&[converger_core::stream::Topic::Conversation(id.clone())]),
            )
            .await
        {
            Ok(t) => Some((url.clone(), t.token)),
            Err(e) => {
                tracing::warn!(error = %e, "no stream token for the conversation page; it polls");
                None
            }
        },
        None => None,
    };
    let (stream_url, stream_token) = stream.unzip();
    let topic = format!("conversation:{id}");
    let content = html! {
        @if v.realm == Realm::Admin {
            p.muted { "Tenant " (tenant_name.unwrap_or_default()) " " code { (tenant) } }
        }
        @if activities.is_empty() && after.is_none() {
            p.muted id="empty" { "No activities in this conversation." }
        } @else {
            table id="conversation" {
                thead { tr { th { "Seq" } th { "Activity" } th { "Event type" } th { "Created (UTC)" } th { "Deliveries" } } }
                tbody { @for a in &activities {
                    tr.activity data-id=(a.id) {
                        td { (a.seq) }
                        td { code { (a.id) } }
                        td { (a.event_type.as_deref().unwrap_or("")) }
                        td { (short_time(a.created_at)) }
                        td.deliveries { @for c in &a.channel_ids {
                            @let did = a.delivery_id(c);
                            @let name = names.get(c).map_or(c.as_str(), String::as_str);
                            @match by_id.get(&did) {
                                Some(d) => {
                                    a class={ "badge delivery " (d.status) } data-id=(d.id)
                                        href={ (p) "/deliveries/" (d.id) }
                                        title=(hover(d)) {
                                        (badge_text(name, d))
                                    }
                                    " "
                                }
                                None => {
                                    span.badge.muted title="No longer stored, or not written yet." { (name) ": —" } " "
                                }
                            }
                        } }
                    }
                } }
            }
        }
        @if more {
            @if let Some(last) = activities.last() {
                p { a id="load-more" href={ (p) "/conversations/" (path_segment(&id)) "?" (tenant_q) (if tenant_q.is_empty() { "" } else { "&" }) "after=" (last.seq) "." (last.id) } { "Load more" } }
            }
        }
        p { a href={ (p) "/deliveries" (if tenant_q.is_empty() { String::new() } else { format!("?{tenant_q}") }) } { "← Deliveries" } }
        // The badges follow their deliveries while the page is open (the same script on
        // every conversation page, its hash in the pages' CSP; where it reads, an attribute).
        script data-states=(states_url) data-stream=[stream_url] data-token=[stream_token]
            data-topic=(topic) { (PreEscaped(CONVERSATION_SCRIPT)) }
    };
    layout(&state, &v, &title, content)
}

/// The conversation page's live refresh: it reads its deliveries' badges and updates each
/// one's class, text and hover, on every frame of the live stream about the conversation
/// (and every 60 s besides), or every 2 s where the stream is not there or has closed. A
/// frame that comes while a read is under way reads again after it: that read may have been
/// answered before the change the frame tells of.
pub(super) const CONVERSATION_SCRIPT: &str = r#"const cfg = document.currentScript.dataset;
let busy = false;
let again = false;
async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  try {
    const r = await fetch(cfg.states);
    if (!r.ok) return;
    const states = await r.json();
    for (const a of document.querySelectorAll('a.badge.delivery')) {
      const v = states[a.dataset.id];
      if (!v) continue;
      a.className = 'badge delivery ' + v.status;
      a.textContent = v.text;
      a.title = v.title;
    }
  } catch (e) {
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}
let timer = null;
function poll(ms) {
  if (timer) clearInterval(timer);
  timer = setInterval(refresh, ms);
}
poll(2000);
if (cfg.stream && cfg.token) {
  try {
    const ws = new WebSocket(cfg.stream + '?token=' + encodeURIComponent(cfg.token));
    ws.onopen = () => ws.send(JSON.stringify({action: 'subscribe', topic: cfg.topic}));
    ws.onmessage = (m) => {
      let f;
      try { f = JSON.parse(m.data); } catch (e) { return; }
      if (f.type === 'subscribed') {
        document.body.dataset.live = 'stream';
        poll(60000);
      } else if (f.type === 'delivery_status') {
        refresh();
      }
    };
    ws.onclose = () => { delete document.body.dataset.live; poll(2000); };
    setInterval(() => { if (ws.readyState === 1) ws.send('{"action":"ping"}'); }, 300000);
  } catch (e) {}
}"#;

/// The badges of one conversation page (`after` as the page's), by delivery id: `status`,
/// `text` and `title`, as the page draws them.
pub(super) async fn conversation_states(
    State(state): State<AppState>,
    v: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ConversationQuery>,
) -> Response {
    let tenant = match tenant_of(&v, &q) {
        Ok(Some(t)) => t,
        Ok(None) => return page_error(StatusCode::BAD_REQUEST, "No such tenant."),
        Err(e) => return e.json(),
    };
    let after = nonempty(&q.after).and_then(parse_after);
    let page = match load(&state, &tenant, &id, after.as_ref()).await {
        Ok(x) => x,
        Err(e) => return unavailable(&e),
    };
    let map: serde_json::Map<String, serde_json::Value> = page
        .rows
        .iter()
        .map(|d| {
            let name = page
                .names
                .get(&d.channel_id)
                .map_or(d.channel_id.as_str(), String::as_str);
            let badge = serde_json::json!({
                "status": d.status.as_str(), "text": badge_text(name, d), "title": hover(d),
            });
            (d.id.to_string(), badge)
        })
        .collect();
    axum::Json(serde_json::Value::Object(map)).into_response()
}

/// What one conversation page shows: its activities, whether more follow, their deliveries
/// (one read) and their channels' names.
struct Page {
    activities: Vec<Activity>,
    more: bool,
    rows: Vec<Delivery>,
    names: HashMap<ChannelId, String>,
}

async fn load(
    state: &AppState,
    tenant: &TenantId,
    id: &str,
    after: Option<&(u64, ActivityId)>,
) -> Result<Page, converger_ports::StoreError> {
    let reads = state.pipeline.reads();
    let (activities, more) = reads
        .conversation_activities(tenant, id, after, PAGE_ACTIVITIES)
        .await?;
    let ids: Vec<DeliveryId> = activities.iter().flat_map(|a| a.delivery_ids()).collect();
    let rows = reads.deliveries(&ids).await?;
    let ids: Vec<&ChannelId> = activities.iter().flat_map(|a| &a.channel_ids).collect();
    let names = names_of(state, ids).await;
    Ok(Page {
        activities,
        more,
        rows,
        names,
    })
}

/// A badge's text: the channel, the status and the attempts.
fn badge_text(channel: &str, d: &Delivery) -> String {
    let unit = if d.attempts == 1 {
        "attempt"
    } else {
        "attempts"
    };
    format!("{channel}: {} · {} {unit}", d.status, d.attempts)
}

/// Whose conversation it is: a tenant user's own tenant whatever the URL says, an operator's
/// choice (`None` when the URL names none).
fn tenant_of(v: &Viewer, q: &ConversationQuery) -> Result<Option<TenantId>, PageFail> {
    match v.own_tenant() {
        Some(t) => Ok(Some(t.clone())),
        None => nonempty(&q.tenant)
            .map(TenantId::parse)
            .transpose()
            .map_err(PageFail::invalid),
    }
}

/// An operator's conversation page without a tenant: which tenant's?
async fn choose_tenant(state: &AppState, v: &Viewer, id: &str) -> Response {
    let tenants = tenant_choices(state, v).await;
    let p = prefix(v.realm);
    let content = html! {
        p { "Conversation ids are each tenant's own: choose the tenant." }
        form id="choose-tenant" method="get" action={ (p) "/conversations/" (path_segment(id)) } {
            label { "Tenant " select name="tenant" {
                @for t in tenants.iter() { option value=(t.id) { (t.name) } }
            } } " "
            button type="submit" { "Open" }
        }
    };
    layout(state, v, &format!("Conversation {id}"), content)
}

/// What a badge shows on hover: the attempts and the last error.
fn hover(d: &Delivery) -> String {
    let mut s = format!("{} · {} attempt(s)", d.status, d.attempts);
    if let Some(e) = &d.last_error {
        s.push_str(" · last error: ");
        s.push_str(&e.chars().take(300).collect::<String>());
    }
    s
}

/// `<seq>.<activity id>` back to the place it names.
fn parse_after(s: &str) -> Option<(u64, ActivityId)> {
    let (seq, id) = s.split_once('.')?;
    Some((seq.parse().ok()?, ActivityId::parse(id).ok()?))
}

/// The page of `tenant`'s conversation `id`, in `realm`.
pub(super) fn conversation_href(realm: Realm, tenant: &TenantId, id: &str) -> String {
    match realm {
        Realm::Admin => format!(
            "/admin/conversations/{}?tenant={}",
            path_segment(id),
            urlencode(tenant.as_str())
        ),
        Realm::Portal => format!("/portal/conversations/{}", path_segment(id)),
    }
}

/// A conversation id as one path segment.
fn path_segment(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_in_the_list_reads_back() {
        let id = ActivityId::generate();
        assert_eq!(parse_after(&format!("7.{id}")), Some((7, id)));
        assert_eq!(parse_after("x.y"), None);
        assert_eq!(parse_after("7"), None);
    }

    #[test]
    fn a_conversation_id_is_one_path_segment() {
        assert_eq!(path_segment("a b/c?d"), "a%20b%2Fc%3Fd");
    }
}
