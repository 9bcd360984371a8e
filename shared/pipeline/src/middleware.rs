//! A channel's middleware over one delivery's copy of the payload, for an attempt and for a
//! websocket replay alike: the steps (`converger_core::middleware`) on a blocking thread, a
//! few at a time per process.

use converger_core::middleware::{self, Halted};
use converger_ports::{Activity, Channel};

/// The channel's middleware applied to this attempt's copy of the activity's payload:
/// `None` when the channel has no steps (the stored payload goes as it is), `Err` with the
/// reason when a step halts or fails. The steps run on a blocking thread, up to their time
/// bound each, which would otherwise hold up the runtime (and the lease renewals of the other
/// attempts on it). Attempts and websocket replays alike go through here.
pub async fn transform(
    channel: &Channel,
    activity: &Activity,
    attempt: u32,
) -> Result<Option<serde_json::Value>, Halted> {
    if channel.middleware.is_empty() {
        return Ok(None);
    }
    // At most this many steps run at once in the process: each may hold up to
    // `middleware::MAX_STEP_ALLOC_BYTES` (twice that at its peak), so a batch of hostile
    // scripts stays far inside the function's memory. The others wait their turn (each
    // step ends within its time bound).
    static RUNNING: tokio::sync::Semaphore =
        tokio::sync::Semaphore::const_new(middleware::MAX_STEPS_AT_ONCE);
    let _turn = RUNNING
        .acquire()
        .await
        .map_err(|e| Halted(format!("the middleware could not run: {e}")))?;
    // The delivery's copy of the payload (the one copy made), and what the steps may read,
    // for the blocking thread.
    let (ch, copy) = (channel.clone(), activity.payload.clone());
    let (id, conversation, created) = (
        activity.id.clone(),
        activity.conversation_id.clone(),
        activity.created_at.clone(),
    );
    let (seq, event_type, tenant) = (
        activity.seq,
        activity.event_type.clone(),
        activity.tenant_id.clone(),
    );
    let applied = tokio::task::spawn_blocking(move || {
        let meta = middleware::Meta {
            id: id.as_str(),
            conversation_id: &conversation,
            seq,
            event_type: event_type.as_deref(),
            created_at: &created,
            tenant_id: tenant.as_str(),
            channel_id: ch.id.as_str(),
            channel_type: ch.kind.as_str(),
            attempt,
        };
        middleware::apply(&ch.middleware, copy, &meta)
    })
    .await;
    match applied {
        Ok(Ok(v)) => Ok(Some(v)),
        Ok(Err(halted)) => Err(halted),
        Err(e) => Err(Halted(format!("the middleware stopped unexpectedly: {e}"))),
    }
}
