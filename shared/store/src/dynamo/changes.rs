//! The DynamoDB backend of [`StreamCounters`]: a counter write of the change stream's
//! consumer is the same `ADD` as the counter's own method, conditional on the counter's mark
//! for the record's shard (`mk_<shard>`, the last record it added) and setting it.

use super::*;
use converger_ports::{CounterAdd, Marked, StreamCounters, StreamMark};

impl DynamoStore {
    /// A counter write without a mark (the counters' own methods).
    pub(super) async fn add_counter(&self, add: &CounterAdd) -> StoreResult<()> {
        let (table, key, u) = self.counter_update(add);
        u.apply(
            self.client
                .update_item()
                .table_name(table)
                .set_key(Some(key)),
        )
        .send()
        .await
        .map_err(sdk_err)?;
        Ok(())
    }

    /// The table, key and update of a counter write (the counters' own methods send the same).
    pub(super) fn counter_update(&self, add: &CounterAdd) -> (&str, Item, Update) {
        match add {
            CounterAdd::Usage { key, part, counts } => {
                let mut u = Update::new().set("expires_at", n(key.grain.expires_at(key.bucket)));
                for (k, v) in counts.fields() {
                    u = u.add(&k, n(v));
                }
                (
                    &self.res.usage,
                    HashMap::from([("key".to_owned(), s(key.part_key(*part)))]),
                    u,
                )
            }
            CounterAdd::Health {
                channel,
                minute,
                created,
                failed,
            } => {
                let mut u =
                    Update::new().set("expires_at", n(minute * 60 + super::health::COUNTER_TTL_S));
                if *created != 0 {
                    u = u.add("created", n(created));
                }
                if *failed != 0 {
                    u = u.add("failed", n(failed));
                }
                (
                    &self.res.flow,
                    HashMap::from([("key".to_owned(), s(health_counter_key(channel, *minute)))]),
                    u,
                )
            }
            CounterAdd::DeadLetters {
                channel,
                day,
                delta,
                expires_at,
            } => (
                &self.res.health,
                HashMap::from([
                    ("channel_id".to_owned(), s(channel.as_str())),
                    ("checked_sk".to_owned(), s(keys::dead_letter_day_key(*day))),
                ]),
                Update::new()
                    .add("dead_letters", n(delta))
                    .set("expires_at", n(expires_at)),
            ),
        }
    }
}

#[async_trait]
impl StreamCounters for DynamoStore {
    async fn add_marked(&self, add: &CounterAdd, mark: &StreamMark) -> StoreResult<Marked> {
        let (table, key, u) = self.counter_update(add);
        let attr = mark.attribute();
        let u = u
            .set(&attr, s(&mark.last))
            .when_cmp(&attr, Cmp::Lt, s(&mark.first), true);
        let req = u.apply(
            self.client
                .update_item()
                .table_name(table)
                .set_key(Some(key.clone()))
                .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew),
        );
        // The counter as it is, when the emulator does not return it with the refusal.
        let reread = async {
            let out = self
                .client
                .get_item()
                .table_name(table)
                .set_key(Some(key))
                .consistent_read(true)
                .send()
                .await
                .map_err(sdk_err)?;
            out.item.map(from_item).transpose()
        };
        Ok(
            match self.update_or_old::<serde_json::Value>(req, reread).await? {
                Conditional::Applied(new) => Marked::Applied {
                    created: new.as_ref().and_then(|i| super::num_opt(i, "created")),
                },
                Conditional::Refused(old) => Marked::Behind {
                    // A counter without this shard's mark cannot refuse: read as all added.
                    to: old
                        .as_ref()
                        .and_then(|o| o[attr.as_str()].as_str())
                        .map_or_else(|| mark.last.clone(), str::to_owned),
                },
            },
        )
    }
}
