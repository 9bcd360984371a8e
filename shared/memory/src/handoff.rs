//! The in-process backend of [`HandoffStore`].

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl HandoffStore for MemStore {
    async fn acknowledge(&self, d: &Delivery, now: Timestamp) -> StoreResult<Ack> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let Some(mut row) = s.deliveries.get_mut(&d.id) else {
                return Ack::Missing;
            };
            if row.status.is_accepted() {
                return Ack::Already(row.clone());
            }
            if !(row.status == DeliveryStatus::Pending && row.handed_off) {
                return Ack::NotAwaiting(row.clone());
            }
            row.status = DeliveryStatus::Sent;
            row.handed_off = false;
            row.sent_at = Some(now);
            row.updated_at = now;
            row.unlisted = false;
            Ack::Acked(row.clone())
        })
    }

    async fn apply_receipt(
        &self,
        channel: &ChannelId,
        provider_message_id: &str,
        receipt: DeliveryStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<Receipted> {
        wait(&self.latency, |m| m.query).await;
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let key = (channel.clone(), provider_message_id.to_owned());
            let Some(id) = s.providers.get(&key).cloned() else {
                return Receipted::Unknown;
            };
            let Some(mut row) = s.deliveries.get_mut(&id) else {
                return Receipted::Unknown;
            };
            let from = row.status;
            let Some(to) = from.apply_receipt(receipt) else {
                return Receipted::Ignored(row.clone());
            };
            row.status = to;
            row.updated_at = now;
            row.unlisted = false;
            if to != DeliveryStatus::Pending {
                row.watched = false;
            }
            if to == DeliveryStatus::Failed {
                row.last_error = error.map(str::to_owned);
                row.handed_off = false;
                row.slot = false;
                row.slot_item = 0;
                row.in_backlog = false;
                row.lease_token = None;
                row.lease_until = None;
            }
            let out = row.clone();
            drop(row);
            s.reindex(&id);
            Receipted::Applied { from, row: out }
        })
    }

    async fn put_connection(&self, c: &Connection) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.connections.insert(c.connection_id.clone(), c.clone());
        })
    }

    async fn delete_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| s.connections.remove(connection_id))
    }

    async fn get_connection(&self, connection_id: &str) -> StoreResult<Option<Connection>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.connections.get(connection_id).cloned())
    }

    async fn begin_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<Option<i64>> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let at = s.replay_turns.get(channel).copied();
            if converger_core::policy::socket_replay_wait_ms(at, now_ms).is_none() {
                s.replay_turns.insert(
                    channel.clone(),
                    now_ms + converger_core::policy::SOCKET_REPLAY_RUN_MS,
                );
                None
            } else {
                at
            }
        })
    }

    async fn end_replay(&self, channel: &ChannelId, now_ms: i64) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            s.replay_turns.insert(channel.clone(), now_ms);
        })
    }

    async fn channel_connections(&self, channel: &ChannelId) -> StoreResult<Vec<Connection>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let now_s = converger_core::time::now_ms() / 1000;
            // As DynamoDB's reader passes over records TTL has not removed yet.
            let mut v: Vec<Connection> = s
                .connections
                .values()
                .filter(|c| &c.channel_id == channel && c.expires_at > now_s)
                .cloned()
                .collect();
            v.sort_by(|a, b| a.connection_id.cmp(&b.connection_id));
            v.truncate(100);
            v
        })
    }
}
