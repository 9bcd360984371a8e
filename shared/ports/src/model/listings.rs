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
    /// Only deliveries of activities of this event type.
    pub event_type: Option<String>,
    /// Only this activity's deliveries.
    pub activity: Option<ActivityId>,
    /// Most recently changed first.
    pub newest_first: bool,
    pub limit: usize,
    pub after: Option<Cursor>,
}

impl DeliveryQuery {
    /// Every delivery of `tenant`, most recently changed first, `limit` a page: the query
    /// the filters narrow.
    pub fn of_tenant(tenant: TenantId, limit: usize) -> Self {
        Self {
            tenant,
            status: None,
            channel: None,
            from_key: None,
            to_key: None,
            error_contains: None,
            event_type: None,
            activity: None,
            newest_first: true,
            limit,
            after: None,
        }
    }

    /// The inclusive bounds of the sort keys (`<updated_at>#<id>`) the page may hold: the
    /// query's own, narrowed on one side by its cursor (whose own row is then dropped).
    pub fn key_range(&self) -> (Option<&str>, Option<&str>) {
        let (mut lo, mut hi) = (self.from_key.as_deref(), self.to_key.as_deref());
        if let Some(a) = self.after.as_ref().map(|c| c.sort_key.as_str()) {
            if self.newest_first {
                hi = Some(hi.map_or(a, |h| h.min(a)));
            } else {
                lo = Some(lo.map_or(a, |l| l.max(a)));
            }
        }
        (lo, hi)
    }

    /// Whether `d` passes every filter of the query, the cursor included.
    pub fn matches(&self, d: &Delivery) -> bool {
        let key = d.sort_key();
        d.tenant_id == self.tenant
            && self.status.is_none_or(|st| d.status == st)
            && self.channel.as_ref().is_none_or(|c| &d.channel_id == c)
            && self.activity.as_ref().is_none_or(|a| &d.activity_id == a)
            && self
                .event_type
                .as_ref()
                .is_none_or(|t| d.event_type.as_ref() == Some(t))
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

/// What one partition of a sharded (or per-status) listing gave: its rows in the listing's
/// order, each with its sort key (`<updated_at>#<id>`, unique), and — when it was cut short —
/// the sort key it was read up to (more of its rows may follow that key).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionPage<T> {
    pub rows: Vec<(String, T)>,
    pub read_up_to: Option<String>,
}

/// One page of a listing spread over several partitions, merged so that keyset paging stays
/// exact: no row twice, none skipped. Every partition is read from the same cursor; a row is
/// on this page only if every partition has been read past it (so nothing unread can come
/// before it), and the page holds at most `limit` rows. The next page starts after the last
/// row given, or, when a partition stopped short (a bounded read), after the key that
/// partition was read up to. Sort keys hold the row's id, so rows changed in the same
/// microsecond (ties in `updated_at`) are ordered by id and none is lost at a page boundary.
pub fn merge_pages<T>(
    parts: Vec<PartitionPage<T>>,
    limit: usize,
    newest_first: bool,
) -> (Vec<T>, Option<String>) {
    let before = |a: &str, b: &str| if newest_first { a > b } else { a < b };
    // The first key (in listing order) some partition has not been read past.
    let mut cut: Option<String> = None;
    let mut rows: Vec<(String, T)> = Vec::new();
    for p in parts {
        if let Some(k) = p.read_up_to
            && cut.as_deref().is_none_or(|c| before(&k, c))
        {
            cut = Some(k);
        }
        rows.extend(p.rows);
    }
    rows.sort_by(|a, b| {
        if newest_first {
            b.0.cmp(&a.0)
        } else {
            a.0.cmp(&b.0)
        }
    });
    if let Some(c) = &cut {
        rows.retain(|(k, _)| k == c || before(k, c));
    }
    let limit = limit.max(1);
    if rows.len() > limit {
        rows.truncate(limit);
        let next = rows.last().map(|(k, _)| k.clone());
        return (rows.into_iter().map(|(_, v)| v).collect(), next);
    }
    (rows.into_iter().map(|(_, v)| v).collect(), cut)
}

#[cfg(test)]
mod merge_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    /// Reads `shards` (each sorted ascending) as a store would: from after `cursor`, at most
    /// `per_part` rows per partition.
    fn read(
        shards: &[Vec<String>],
        cursor: Option<&str>,
        per_part: usize,
        newest_first: bool,
    ) -> Vec<PartitionPage<String>> {
        shards
            .iter()
            .map(|s| {
                let mut keys: Vec<String> = s
                    .iter()
                    .filter(|k| {
                        cursor.is_none_or(|c| {
                            if newest_first {
                                k.as_str() < c
                            } else {
                                k.as_str() > c
                            }
                        })
                    })
                    .cloned()
                    .collect();
                keys.sort();
                if newest_first {
                    keys.reverse();
                }
                let more = keys.len() > per_part;
                keys.truncate(per_part);
                PartitionPage {
                    read_up_to: if more { keys.last().cloned() } else { None },
                    rows: keys.into_iter().map(|k| (k.clone(), k)).collect(),
                }
            })
            .collect()
    }

    proptest! {
        /// Paging through any spread of rows over partitions gives every row once, in order,
        /// whatever the page size, the partitions' read bound and the direction.
        #[test]
        fn paging_a_merged_listing_gives_every_row_once_in_order(
            rows in proptest::collection::vec((0u8..6, 0u8..4, 0u32..1000), 0..80),
            limit in 1usize..12,
            per_part in 1usize..12,
            newest_first in any::<bool>(),
        ) {
            // Few distinct times: many ties in updated_at, broken by the id.
            let mut shards = vec![Vec::new(); 4];
            let mut all = std::collections::BTreeSet::new();
            for (t, shard, id) in rows {
                let key = format!("2026-12-01T00:00:0{t}.000000Z#dlv_{id:04}");
                if all.insert(key.clone()) {
                    shards[shard as usize].push(key);
                }
            }
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..1000 {
                let parts = read(&shards, cursor.as_deref(), per_part, newest_first);
                let (page, next) = merge_pages(parts, limit, newest_first);
                prop_assert!(page.len() <= limit);
                seen.extend(page);
                match next {
                    Some(n) => cursor = Some(n),
                    None => break,
                }
            }
            let mut want: Vec<String> = all.into_iter().collect();
            if newest_first {
                want.reverse();
            }
            prop_assert_eq!(seen, want);
        }
    }

    #[test]
    fn a_partition_read_short_holds_the_page_back_to_where_it_stopped() {
        let parts = vec![
            PartitionPage {
                rows: vec![("a".to_owned(), 1), ("d".to_owned(), 4)],
                read_up_to: None,
            },
            PartitionPage {
                rows: vec![("b".to_owned(), 2)],
                read_up_to: Some("c".to_owned()),
            },
        ];
        // `d` waits: the second partition may hold rows between `c` and `d`.
        assert_eq!(
            merge_pages(parts, 10, false),
            (vec![1, 2], Some("c".to_owned()))
        );
    }
}
