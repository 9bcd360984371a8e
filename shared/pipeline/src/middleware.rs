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
    // A tenant's own turn first: no tenant holds more than its share of them, so one
    // tenant's hostile batch leaves the others theirs.
    static TENANTS: std::sync::LazyLock<TenantTurns> =
        std::sync::LazyLock::new(TenantTurns::default);
    let _own = TENANTS
        .turn(activity.tenant_id.as_str())
        .await
        .map_err(|e| Halted(format!("the middleware could not run: {e}")))?;
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
        activity.created_at,
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
            created_at: &created.rfc3339(),
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

/// Middleware turns a tenant may hold at once in a process (a core rule).
pub const TURNS_PER_TENANT: usize = middleware::MAX_STEPS_AT_ONCE_PER_TENANT;

/// Tenants past which those holding no turn are forgotten (bounds the map).
const KEPT_TENANTS: usize = 1_000;

/// Each tenant's middleware turns (at most [`TURNS_PER_TENANT`] at once); once more than
/// [`KEPT_TENANTS`] are known, the entries of those holding none are dropped.
#[derive(Default)]
pub struct TenantTurns {
    by_tenant:
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>>,
}

impl TenantTurns {
    /// Waits for one of `tenant`'s turns.
    pub async fn turn(
        &self,
        tenant: &str,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError> {
        let sem = match self.by_tenant.lock() {
            Ok(mut m) => {
                if m.len() > KEPT_TENANTS {
                    // Tenants holding no turn have nothing to keep.
                    m.retain(|_, s| s.available_permits() < TURNS_PER_TENANT);
                }
                m.entry(tenant.to_owned())
                    .or_insert_with(|| {
                        std::sync::Arc::new(tokio::sync::Semaphore::new(TURNS_PER_TENANT))
                    })
                    .clone()
            }
            Err(_) => std::sync::Arc::new(tokio::sync::Semaphore::new(TURNS_PER_TENANT)),
        };
        sem.acquire_owned().await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A tenant holding its share of turns waits for its own; another tenant does not.
    #[tokio::test]
    async fn a_tenant_holds_at_most_its_share_of_turns() {
        let turns = TenantTurns::default();
        let mut held = Vec::new();
        for _ in 0..TURNS_PER_TENANT {
            held.push(turns.turn("ten_busy").await.unwrap());
        }
        let more =
            tokio::time::timeout(std::time::Duration::from_millis(50), turns.turn("ten_busy"))
                .await;
        assert!(more.is_err(), "a turn past the share waits");
        let other = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            turns.turn("ten_quiet"),
        )
        .await;
        assert!(other.is_ok(), "another tenant's turn does not wait");
        held.pop();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), turns.turn("ten_busy"))
                .await
                .is_ok(),
            "a turn given back is taken"
        );
    }
}
