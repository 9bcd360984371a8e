//! What the API shows of stored items (never a secret unless asked for on creation).

use converger_ports::{Activity, Channel, Delivery, ReplayJob, Tenant};
use serde_json::{Value, json};

pub fn tenant(t: &Tenant) -> Value {
    json!({
        "id": t.id, "name": t.name, "tier": t.tier, "created_at": t.created_at,
        "alert_webhook_url": t.alert_webhook_url, "alert_channel_id": t.alert_channel_id,
    })
}

pub fn channel(c: &Channel) -> Value {
    json!({
        "id": c.id,
        "tenant_id": c.tenant_id,
        "type": c.kind,
        "name": c.name,
        // Secrets in the config (tokens, keys, app secrets, an Authorization header) are
        // shown as `[REDACTED]`, by the same rule as payload previews.
        "config": converger_core::web::redact(&Value::Object(c.config.clone())),
        "active": c.active,
        "retry_policy": c.retry_policy,
        "circuit_breaker": converger_core::BreakerConfig::effective(&c.circuit_breaker).to_json(),
        "rate_limit": c.rate_limit,
        "auto_disable": converger_core::health::AutoDisable::effective(&c.auto_disable).to_json(),
        "disabled_at": c.disabled_at,
        "disabled_reason": c.disabled_reason,
        "managed": c.managed,
        "event_types": c.event_types,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    })
}

/// A channel's signing secrets: the current one, and those a rotation is retiring with the
/// time each stops signing.
pub fn secrets(c: &Channel) -> Value {
    let now = converger_core::time::now_ms();
    let retiring: Vec<Value> = c
        .retiring_secrets
        .iter()
        .filter(|r| r.until_ms > now)
        .map(|r| {
            json!({
                "signing_secret": r.secret,
                "signs_until": converger_core::time::ms_to_rfc3339(r.until_ms),
            })
        })
        .collect();
    json!({"signing_secret": c.signing_secret, "retiring": retiring})
}

/// An activity as its producer sent it, with where it went when `deliveries` are given.
pub fn activity(a: &Activity, deliveries: Option<&[Delivery]>) -> Value {
    let mut v = json!({
        "id": a.id,
        "conversation_id": a.conversation_id,
        "seq": a.seq,
        "event_type": a.event_type,
        "channel_ids": a.channel_ids,
        "payload": a.payload,
        "created_at": a.created_at,
    });
    if let Some(ds) = deliveries {
        v["deliveries"] = ds
            .iter()
            .map(|d| json!({"id": d.id, "channel_id": d.channel_id, "status": d.status}))
            .collect();
    }
    v
}

pub fn delivery(d: &Delivery) -> Value {
    // Reads ignore expired entries (their retention ran out).
    let now_s = converger_core::time::now_ms() / 1000;
    let log: Vec<_> = d
        .attempt_log
        .iter()
        .rev()
        .filter(|e| e.expires_at.is_none_or(|x| x > now_s))
        .collect();
    json!({
        "id": d.id,
        "tenant_id": d.tenant_id,
        "channel_id": d.channel_id,
        "activity_id": d.activity_id,
        "conversation_id": d.conversation_id,
        "status": d.status,
        "tier": d.tier,
        "waiting_for_slot": d.in_backlog,
        "awaiting_ack": d.handed_off,
        "attempts": d.attempts,
        "last_error": d.last_error,
        "next_attempt_at": d.status.is_waiting().then(|| converger_core::time::ms_to_rfc3339(d.next_attempt_at)),
        "sent_at": d.sent_at,
        "provider_message_id": d.provider_message_id,
        "response_status": d.response_status,
        "retry_count": d.retry_count,
        "retried_by": d.retried_by,
        "retried_at": d.retried_at,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "attempt_log": log,
    })
}

/// A delivery in a list: everything but the attempt log.
pub fn delivery_row(d: &Delivery) -> Value {
    let mut v = delivery(d);
    if let Some(m) = v.as_object_mut() {
        m.remove("attempt_log");
    }
    v
}

pub fn replay_job(j: &ReplayJob) -> Value {
    json!({
        "id": j.id,
        "channel_id": j.channel_id,
        "status": j.status,
        "retried": j.retried,
        "has_more": j.has_more,
        "limit": j.limit,
        "activity_id": j.activity_id,
        "error": j.error,
        "created_at": j.created_at,
        "updated_at": j.updated_at,
    })
}
