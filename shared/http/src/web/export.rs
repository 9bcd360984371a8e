//! The deliveries' CSV export.

use super::filters::Filters;
use super::page::page_error;
use super::scope::channel_names;
use super::session::Viewer;
use crate::AppState;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use converger_core::web::{EXPORT_COLUMNS, csv_safe};

/// Rows one export step reads (the store's largest page).
const EXPORT_PAGE: usize = 1000;

/// Records as CSV text (quoted where needed, CRLF line ends), each cell first made safe to
/// open in a spreadsheet (`csv_safe`).
fn csv_text(records: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    for r in records {
        if let Err(e) = w.write_record(r.iter().map(|c| csv_safe(c))) {
            tracing::warn!(error = %e, "CSV record not written");
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// The CSV export: the rows the filters select (newest first by default), at most
/// `export_limit`, streamed page by page; no payloads.
pub(super) async fn export(
    State(state): State<AppState>,
    v: Viewer,
    Query(f): Query<Filters>,
) -> Response {
    if let Err(e) = f.queries(&state, &v, 1).await {
        return page_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Invalid filter: {e}"),
        );
    }
    let limit = state.web.export_limit;
    let header_line = csv_text([EXPORT_COLUMNS.map(str::to_owned).to_vec()]);
    let stream = futures::stream::unfold((Some(f), 0usize, false), move |(f, sent, done)| {
        let state = state.clone();
        let v_realm = v.realm;
        let user = v.user.clone();
        let session = v.session.clone();
        async move {
            let f = f?;
            if done || sent >= limit {
                return None;
            }
            let v = Viewer {
                realm: v_realm,
                user,
                session,
            };
            let (rows, next) = match f.page(&state, &v, EXPORT_PAGE.min(limit - sent)).await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "export stopped");
                    return None;
                }
            };
            let names = channel_names(&state, &rows).await;
            let chunk = csv_text(rows.iter().map(|d| {
                vec![
                    d.id.to_string(),
                    d.tenant_id.to_string(),
                    d.channel_id.to_string(),
                    names.get(&d.channel_id).cloned().unwrap_or_default(),
                    d.activity_id.to_string(),
                    d.status.to_string(),
                    d.attempts.to_string(),
                    d.last_error.clone().unwrap_or_default(),
                    d.retry_count.to_string(),
                    d.retried_by.clone().unwrap_or_default(),
                    d.retried_at.clone().unwrap_or_default(),
                    d.created_at.clone(),
                    d.updated_at.clone(),
                ]
            }));
            let n = rows.len();
            let last = next.is_none();
            let next_f = next.map(|after| Filters {
                after: Some(after),
                ..f
            });
            Some((Ok::<_, std::io::Error>(chunk), (next_f, sent + n, last)))
        }
    });
    let body =
        futures::stream::once(async move { Ok::<_, std::io::Error>(header_line) }).chain(stream);
    use futures::StreamExt;
    Response::builder()
        .header(header::CONTENT_TYPE, "text/csv; charset=utf-8")
        .header(
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"deliveries.csv\"",
        )
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| page_error(StatusCode::INTERNAL_SERVER_ERROR, "export failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_quoted_and_made_safe() {
        let text = csv_text([
            vec!["id".into(), "name".into()],
            vec!["=HYPERLINK(\"x\")".into(), "a,b".into()],
            vec!["@sum".into(), "plain".into()],
        ]);
        assert_eq!(
            text,
            "id,name\r\n\"'=HYPERLINK(\"\"x\"\")\",\"a,b\"\r\n'@sum,plain\r\n"
        );
    }
}
