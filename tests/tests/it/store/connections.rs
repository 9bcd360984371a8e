//! Websocket connections: found by channel, deleted, and one replay per channel and interval.

use super::*;

pub(super) async fn connections_are_found_by_channel(b: Backend) {
    let f = fixture(b).await;
    let conn = |id: &str, ch: &converger_core::ChannelId| Connection {
        connection_id: id.into(),
        channel_id: ch.clone(),
        tenant_id: f.tenant.id.clone(),
        connected_at: converger_core::Timestamp::now(),
        expires_at: time::now_ms() / 1000 + 3600,
        token_fp: None,
    };
    let other = converger_core::ChannelId::generate();
    for c in [
        conn("A1=", &f.channel.id),
        conn("B2=", &f.channel.id),
        conn("C3=", &other),
    ] {
        f.store.put_connection(&c).await.unwrap();
    }
    let mut ids: Vec<String> = f
        .store
        .channel_connections(&f.channel.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.connection_id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["A1=", "B2="]);
    assert_eq!(
        f.store
            .get_connection("C3=")
            .await
            .unwrap()
            .unwrap()
            .channel_id,
        other
    );
    // One replay at a time on a channel, whichever connection asks, and one per interval: a
    // replay holds the turn while it runs (however long past the interval), the next begins
    // an interval after it ended. Another channel has a turn of its own.
    use converger_core::policy::{SOCKET_REPLAY_INTERVAL_MS, SOCKET_REPLAY_RUN_MS};
    let ch = &f.channel.id;
    let t0 = time::now_ms();
    assert_eq!(f.store.begin_replay(ch, t0).await.unwrap(), None);
    assert_eq!(
        f.store.begin_replay(ch, t0 + 1).await.unwrap(),
        Some(t0 + SOCKET_REPLAY_RUN_MS)
    );
    assert_eq!(f.store.begin_replay(&other, t0 + 1).await.unwrap(), None);
    let running = t0 + 3 * SOCKET_REPLAY_INTERVAL_MS;
    assert!(
        f.store.begin_replay(ch, running).await.unwrap().is_some(),
        "a replay still running holds the turn"
    );
    f.store.end_replay(ch, running).await.unwrap();
    assert!(
        f.store
            .begin_replay(ch, running + 1)
            .await
            .unwrap()
            .is_some()
    );
    let later = running + SOCKET_REPLAY_INTERVAL_MS;
    assert_eq!(f.store.begin_replay(ch, later).await.unwrap(), None);
    f.store.end_replay(ch, later).await.unwrap();
    assert_eq!(f.store.begin_replay(ch, later).await.unwrap(), Some(later));
    // The turn is no connection of the channel's.
    assert_eq!(
        f.store.channel_connections(ch).await.unwrap().len(),
        2,
        "A1= and B2="
    );
    let gone = f.store.delete_connection("A1=").await.unwrap();
    assert_eq!(gone.map(|c| c.connection_id).as_deref(), Some("A1="));
    assert_eq!(f.store.delete_connection("A1=").await.unwrap(), None);
    assert_eq!(
        f.store
            .channel_connections(&f.channel.id)
            .await
            .unwrap()
            .len(),
        1
    );
}
