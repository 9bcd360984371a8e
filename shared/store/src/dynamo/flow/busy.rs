//! A tenant's busy channels (`core::flow::tenant_window_bound`): one item per tenant in the
//! flow table, one attribute per channel (`c_<channel>`, a map of when it was written and the
//! window it reported), so that a channel's write never touches another's entry.

use super::super::*;
use converger_core::flow::BusyEntry;
use std::collections::BTreeMap;

const PREFIX: &str = "c_";

impl DynamoStore {
    pub(super) async fn busy_read(
        &self,
        tenant: &TenantId,
    ) -> StoreResult<BTreeMap<ChannelId, BusyEntry>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.flow)
            .key("key", s(tenant_busy_key(tenant)))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out.item.map(|item| entries(&item)).unwrap_or_default())
    }

    pub(super) async fn busy_write(
        &self,
        tenant: &TenantId,
        channel: &ChannelId,
        entry: Option<BusyEntry>,
    ) -> StoreResult<()> {
        let attr = format!("{PREFIX}{channel}");
        let u = match entry {
            Some(e) => Update::new().set(
                &attr,
                AttributeValue::M(HashMap::from([
                    ("at".to_owned(), n(e.at)),
                    ("w".to_owned(), n(e.window)),
                ])),
            ),
            None => Update::new().remove(&attr),
        };
        u.apply(
            self.client
                .update_item()
                .table_name(&self.res.flow)
                .key("key", s(tenant_busy_key(tenant))),
        )
        .send()
        .await
        .map_err(sdk_err)?;
        Ok(())
    }
}

/// The entries of a busy item; an entry that does not parse is left out (it stops counting,
/// as an expired one does).
fn entries(item: &Item) -> BTreeMap<ChannelId, BusyEntry> {
    item.iter()
        .filter_map(|(k, v)| {
            let channel = ChannelId::parse(k.strip_prefix(PREFIX)?).ok()?;
            let m = v.as_m().ok()?;
            let num = |f: &str| m.get(f)?.as_n().ok()?.parse::<i64>().ok();
            let entry = BusyEntry {
                at: num("at")?,
                window: u32::try_from(num("w")?).ok()?,
            };
            Some((channel, entry))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_reads_as_its_channels_entries_and_skips_what_does_not_parse() {
        let ch = ChannelId::generate();
        let entry = |at: i64, w: i64| {
            AttributeValue::M(HashMap::from([
                ("at".to_owned(), n(at)),
                ("w".to_owned(), n(w)),
            ]))
        };
        let item: Item = HashMap::from([
            ("key".to_owned(), s("busy#t")),
            (format!("c_{ch}"), entry(5, 12)),
            ("c_not-a-channel".to_owned(), entry(5, 12)),
            (format!("c_{}", ChannelId::generate()), entry(5, -1)),
        ]);
        let got = entries(&item);
        assert_eq!(got.len(), 1);
        assert_eq!(got[&ch], BusyEntry { at: 5, window: 12 });
    }
}
