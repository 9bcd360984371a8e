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

/// The most an export sends: a Lambda function's answer through API Gateway is at most 6 MB,
/// and the headers need room. An export that would be larger stops at the last whole row
/// that fits (the newest rows first, so it is the most recent part of the selection).
pub const EXPORT_MAX_BYTES: usize = 5_500_000;

/// The rows of `lines` (CSV text, one record each) that fit in `budget` bytes after `used`;
/// `true` when one did not fit (the export ends there).
fn within_budget(lines: Vec<String>, used: usize, budget: usize) -> (String, usize, bool) {
    let mut out = String::new();
    let mut used = used;
    for line in lines {
        if used + line.len() > budget {
            return (out, used, true);
        }
        used += line.len();
        out.push_str(&line);
    }
    (out, used, false)
}

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
/// `export_limit` and [`EXPORT_MAX_BYTES`]; no payloads. The file is built whole before it is
/// answered (API Gateway buffers a Lambda function's answer anyway): a read that fails on any
/// page answers 503, never a 200 with a file cut short.
pub(super) async fn export(
    State(state): State<AppState>,
    v: Viewer,
    Query(f): Query<Filters>,
) -> Response {
    let limit = state.web.export_limit;
    let mut out = csv_text([EXPORT_COLUMNS.map(str::to_owned).to_vec()]);
    let mut bytes = out.len();
    let mut sent = 0usize;
    let mut f = f;
    while sent < limit {
        let (rows, next) = match f.page(&state, &v, EXPORT_PAGE.min(limit - sent)).await {
            Ok(x) => x,
            Err(e) => return e.page(),
        };
        let names = channel_names(&state, &rows).await;
        let lines = rows
            .iter()
            .map(|d| {
                csv_text([vec![
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
                    d.retried_at.map(|t| t.rfc3339()).unwrap_or_default(),
                    d.created_at.rfc3339(),
                    d.updated_at.rfc3339(),
                ]])
            })
            .collect();
        let (chunk, used, full) = within_budget(lines, bytes, EXPORT_MAX_BYTES);
        out.push_str(&chunk);
        bytes = used;
        sent += rows.len();
        if full {
            tracing::warn!(rows = sent, bytes, "export stopped at its size limit");
            break;
        }
        match next {
            Some(after) => {
                f = Filters {
                    after: Some(after),
                    ..f
                }
            }
            None => break,
        }
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/csv; charset=utf-8")
        .header(
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"deliveries.csv\"",
        )
        .body(Body::from(out))
        .unwrap_or_else(|_| page_error(StatusCode::INTERNAL_SERVER_ERROR, "export failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_keeps_whole_rows_within_its_byte_budget() {
        let lines = vec!["aaaa\r\n".to_owned(), "bbbb\r\n".into(), "cccc\r\n".into()];
        assert_eq!(
            within_budget(lines.clone(), 0, 100),
            ("aaaa\r\nbbbb\r\ncccc\r\n".into(), 18, false)
        );
        // 6 used by the header: two rows fit in 18, the third would cross it.
        assert_eq!(
            within_budget(lines.clone(), 6, 18),
            ("aaaa\r\nbbbb\r\n".into(), 18, true)
        );
        assert_eq!(within_budget(lines, 17, 18), (String::new(), 17, true));
        // Ten thousand rows with the longest errors the attempt log keeps would cross the
        // Lambda answer limit; the budget holds the export under it.
        let row = csv_text([vec!["x".repeat(600)]]);
        let (text, used, full) = within_budget(vec![row; 10_000], 0, EXPORT_MAX_BYTES);
        assert!(full && used <= EXPORT_MAX_BYTES && text.len() == used);
    }

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
