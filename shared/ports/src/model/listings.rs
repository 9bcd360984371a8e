//! Pages of items and the deliveries query.

use super::*;

/// One page of a query, with the key to continue from.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque continuation; `None` when the query is exhausted.
    pub next: Option<String>,
}

/// A filtered, keyset-paginated list of one tenant's deliveries. The store picks the index.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryQuery {
    pub tenant: TenantId,
    pub status: Option<DeliveryStatus>,
    pub channel: Option<ChannelId>,
    /// Inclusive bounds on `<updated_at>#<id>`.
    pub from_key: Option<String>,
    pub to_key: Option<String>,
    /// A part of `last_error`.
    pub error_contains: Option<String>,
    /// Only this activity's deliveries.
    pub activity: Option<ActivityId>,
    /// Most recently changed first.
    pub newest_first: bool,
    pub limit: usize,
    pub after: Option<Cursor>,
}

impl DeliveryQuery {
    /// Whether `d` passes every filter of the query, the cursor included.
    pub fn matches(&self, d: &Delivery) -> bool {
        let key = d.sort_key();
        d.tenant_id == self.tenant
            && self.status.is_none_or(|st| d.status == st)
            && self.channel.as_ref().is_none_or(|c| &d.channel_id == c)
            && self.activity.as_ref().is_none_or(|a| &d.activity_id == a)
            && self.error_contains.as_ref().is_none_or(|t| {
                d.last_error
                    .as_deref()
                    .is_some_and(|e| e.contains(t.as_str()))
            })
            && self.from_key.as_ref().is_none_or(|lo| key >= *lo)
            && self.to_key.as_ref().is_none_or(|hi| key <= *hi)
            && self.after.as_ref().is_none_or(|c| {
                if self.newest_first {
                    key < c.sort_key
                } else {
                    key > c.sort_key
                }
            })
    }

    /// One page of `rows` read by key rather than through an index: filtered, ordered,
    /// limited, with the cursor of the next page when more remain.
    pub fn page<'a>(&self, rows: impl IntoIterator<Item = &'a Delivery>) -> Listed<Delivery> {
        let mut rows: Vec<(String, &Delivery)> = rows
            .into_iter()
            .filter(|d| self.matches(d))
            .map(|d| (d.sort_key(), d))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        if self.newest_first {
            rows.reverse();
        }
        let limit = self.limit.clamp(1, 1000);
        let more = rows.len() > limit;
        rows.truncate(limit);
        let items: Vec<Delivery> = rows.into_iter().map(|(_, d)| d.clone()).collect();
        let next = if more {
            items.last().map(Delivery::cursor)
        } else {
            None
        };
        Listed { items, next }
    }
}

/// A page of a list, with the cursor of the next page.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub next: Option<Cursor>,
}
