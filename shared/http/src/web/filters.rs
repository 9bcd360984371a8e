//! The deliveries page's filters: parsed from the URL, turned into store queries, paged.

use super::layout::{nonempty, urlencode};
use super::page::PageFail;
use super::scope::tenants_in_scope;
use super::session::Viewer;
use crate::AppState;
use converger_core::query::{KeyBounds, Search};
use converger_core::{ChannelId, DeliveryStatus};
use converger_ports::{Delivery, DeliveryQuery};
use serde::Deserialize;

/// The deliveries page's filters, kept in the URL.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pub(super) tenant: Option<String>,
    #[serde(default)]
    pub(super) channel: Option<String>,
    /// Default `failed`; `any` for every status.
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) from: Option<String>,
    #[serde(default)]
    pub(super) to: Option<String>,
    #[serde(default)]
    pub(super) q: Option<String>,
    /// Only deliveries of activities of this event type.
    #[serde(default)]
    pub(super) event_type: Option<String>,
    /// `newest` (default) or `oldest`.
    #[serde(default)]
    pub(super) sort: Option<String>,
    /// The sort key to continue after (Load more).
    #[serde(default)]
    pub(super) after: Option<String>,
}

/// The status filter's value for every status.
const ANY_STATUS: &str = "any";

/// The status filter's default: dead letters, what an operator comes to the page for.
const DEFAULT_STATUS: DeliveryStatus = DeliveryStatus::Failed;

/// The status filter's choices: the default first, then every other status in the machine's
/// order, then every status at once.
pub(super) fn status_choices() -> impl Iterator<Item = &'static str> {
    std::iter::once(DEFAULT_STATUS)
        .chain(
            DeliveryStatus::ALL
                .into_iter()
                .filter(|s| *s != DEFAULT_STATUS),
        )
        .map(DeliveryStatus::as_str)
        .chain([ANY_STATUS])
}

impl Filters {
    /// The status chosen, as the filter's choices name it (the default when none is).
    pub(super) fn status_choice(&self) -> &str {
        nonempty(&self.status).unwrap_or(DEFAULT_STATUS.as_str())
    }

    /// Whether the page shows dead letters only (where retrying them all applies).
    pub(super) fn dead_letters_only(&self) -> bool {
        self.status_choice() == DeliveryStatus::Failed.as_str()
    }

    fn status(&self) -> Result<Option<DeliveryStatus>, PageFail> {
        match nonempty(&self.status) {
            None => Ok(Some(DEFAULT_STATUS)),
            Some(ANY_STATUS) => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e: converger_core::status::UnknownStatus| PageFail::invalid(e)),
        }
    }

    /// The order (`queries` refuses a sort that is neither newest nor oldest).
    pub(super) fn newest_first(&self) -> bool {
        converger_core::query::newest_first(self.sort.as_deref()).unwrap_or(true)
    }

    /// The query string of these filters (without `after` unless asked).
    pub(super) fn query(&self, with_after: Option<&str>) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for (k, v) in [
            ("tenant", &self.tenant),
            ("channel", &self.channel),
            ("status", &self.status),
            ("from", &self.from),
            ("to", &self.to),
            ("q", &self.q),
            ("event_type", &self.event_type),
            ("sort", &self.sort),
        ] {
            if let Some(v) = nonempty(v) {
                pairs.push((k, v));
            }
        }
        if let Some(a) = with_after {
            pairs.push(("after", a));
        }
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// The store queries these filters select, one per tenant in scope.
    pub(super) async fn queries(
        &self,
        state: &AppState,
        v: &Viewer,
        limit: usize,
    ) -> Result<Vec<DeliveryQuery>, PageFail> {
        converger_core::query::newest_first(self.sort.as_deref())
            .map_err(|e| PageFail::Invalid(e.into()))?;
        let tenants = tenants_in_scope(state, v, nonempty(&self.tenant)).await?;
        let channel = nonempty(&self.channel)
            .map(ChannelId::parse)
            .transpose()
            .map_err(PageFail::invalid)?;
        let Search {
            activity,
            error_contains,
        } = Search::parse(self.q.as_deref());
        let KeyBounds {
            from: mut from_key,
            to: mut to_key,
        } = KeyBounds::days(nonempty(&self.from), nonempty(&self.to))
            .map_err(|e| PageFail::Invalid(e.into()))?;
        // Load more: the bound moves past the last row shown (keys are unique).
        if let Some(after) = nonempty(&self.after) {
            if self.newest_first() {
                to_key = Some(to_key.map_or(after.to_owned(), |t| t.min(after.to_owned())));
            } else {
                from_key = Some(from_key.map_or(after.to_owned(), |f| f.max(after.to_owned())));
            }
        }
        let status = self.status()?;
        let event_type = nonempty(&self.event_type)
            .map(|t| {
                converger_core::channel::check_event_type(t)
                    .map(|()| t.to_owned())
                    .map_err(|e| PageFail::Invalid(e.to_string()))
            })
            .transpose()?;
        Ok(tenants
            .into_iter()
            .map(|tenant| DeliveryQuery {
                tenant,
                status,
                channel: channel.clone(),
                from_key: from_key.clone(),
                to_key: to_key.clone(),
                error_contains: error_contains.clone(),
                event_type: event_type.clone(),
                activity: activity.clone(),
                newest_first: self.newest_first(),
                limit,
                after: None,
            })
            .collect())
    }

    /// One page (at most `limit` rows) over every tenant in scope, and the sort key the next
    /// page continues after (`None`: nothing follows). A tenant's query may stop early (its
    /// read budget spent on rows a filter dropped); rows past the point where the least-read
    /// tenant stopped wait for the next page, so no tenant's rows are skipped. A page can
    /// therefore be empty and still have a next one.
    pub(super) async fn page(
        &self,
        state: &AppState,
        v: &Viewer,
        limit: usize,
    ) -> Result<(Vec<Delivery>, Option<String>), PageFail> {
        let queries = self.queries(state, v, limit + 1).await?;
        let after = nonempty(&self.after).map(str::to_owned);
        let newest = self.newest_first();
        let pages = futures::future::join_all(
            queries
                .iter()
                .map(|q| state.pipeline.reads().list_deliveries(q)),
        )
        .await;
        let mut rows = Vec::new();
        let mut bound: Option<String> = None;
        for p in pages {
            let p = p?;
            if let Some(c) = p.next {
                bound = Some(match bound {
                    None => c.sort_key,
                    Some(b) if newest => b.max(c.sort_key),
                    Some(b) => b.min(c.sort_key),
                });
            }
            rows.extend(p.items.into_iter().filter(|d| match &after {
                Some(a) if newest => d.sort_key() < *a,
                Some(a) => d.sort_key() > *a,
                None => true,
            }));
        }
        if let Some(b) = &bound {
            rows.retain(|d| {
                if newest {
                    d.sort_key() >= *b
                } else {
                    d.sort_key() <= *b
                }
            });
        }
        rows.sort_by_key(Delivery::sort_key);
        if newest {
            rows.reverse();
        }
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(Delivery::sort_key)
        } else {
            bound
        };
        Ok((rows, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_filter_offers_every_status_dead_letters_first_then_any() {
        assert_eq!(
            status_choices().collect::<Vec<_>>(),
            [
                "failed",
                "pending",
                "paused",
                "sent",
                "delivered",
                "read",
                "filtered",
                "any"
            ]
        );
        let f = Filters::default();
        assert_eq!(f.status_choice(), "failed");
        assert!(f.dead_letters_only());
        assert_eq!(f.status().ok(), Some(Some(DeliveryStatus::Failed)));
    }

    #[test]
    fn filters_round_trip_through_the_url() {
        let f = Filters {
            q: Some("a b&c=d".into()),
            status: Some("any".into()),
            ..Filters::default()
        };
        assert_eq!(f.query(Some("k#1")), "status=any&q=a+b%26c%3Dd&after=k%231");
    }
}
