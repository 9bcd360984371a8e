//! Every error code the HTTP surface answers, declared once: the answers take their code from
//! here, the OpenAPI document lists them as the `code` field's values, and the table in
//! `docs/api.md` is generated from [`ErrorCode::markdown`] (a test checks it is current).
//! A code is a promise to programs: add one here, never rename one.

use axum::http::StatusCode;

macro_rules! error_codes {
    ($( $variant:ident = $code:literal, $status:literal $(| $also:literal)*, $meaning:literal; )*) => {
        /// A stable error code, for programs (the message is for people).
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $( #[doc = $meaning] $variant, )*
        }

        impl ErrorCode {
            /// Every code, in the order the docs list them.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as it is sent.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// The status it is answered with (where it names another, the meaning says
            /// when).
            pub fn status(self) -> StatusCode {
                StatusCode::from_u16(self.statuses()[0])
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }

            /// Every status it is answered with, its usual one first.
            pub const fn statuses(self) -> &'static [u16] {
                match self { $(ErrorCode::$variant => &[$status $(, $also)*],)* }
            }

            /// When it is answered, for the docs.
            pub const fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $meaning,)* }
            }
        }
    };
}

error_codes! {
    // Who may call.
    Unauthorized = "unauthorized", 401, "No credentials, or credentials this API does not accept.";
    AdminDisabled = "admin_disabled", 403, "The admin API has no token configured.";
    IpNotAllowed = "ip_not_allowed", 403, "The caller's address is not in the admin API's IP allowlist.";
    RateLimited = "rate_limited", 429, "The API key's request rate is over its limit; `retry-after` says when to try again.";
    TooManyConnections = "too_many_connections", 429, "The tenant has as many live stream connections open as it may; close one first.";
    // What was asked for.
    NotFound = "not_found", 404, "No such resource for this caller (another tenant's ids answer this too).";
    NoRoute = "no_route", 404, "No such path.";
    MethodNotAllowed = "method_not_allowed", 405, "The path does not take this method.";
    // The request's form.
    MalformedJson = "malformed_json", 400, "The body is not JSON.";
    UnsupportedMediaType = "unsupported_media_type", 415, "The body is not sent as `application/json`.";
    BodyTooLarge = "body_too_large", 413, "The body is over the size limit.";
    InvalidBody = "invalid_body", 422 | 400, "The body is JSON of the wrong shape (400 when it cannot be read at all).";
    InvalidRequest = "invalid_request", 422, "A required parameter is missing.";
    InvalidQuery = "invalid_query", 422, "A query parameter is not valid.";
    InvalidCursor = "invalid_cursor", 422, "A `cursor` that is not one this listing answered.";
    // Channels.
    InvalidName = "invalid_name", 422, "A channel's name is empty or too long.";
    InvalidConfig = "invalid_config", 422, "A channel's `config` does not fit its type.";
    InvalidRetryPolicy = "invalid_retry_policy", 422, "A channel's `retry_policy` is not valid.";
    InvalidCircuitBreaker = "invalid_circuit_breaker", 422, "A channel's `circuit_breaker` is not valid.";
    InvalidRateLimit = "invalid_rate_limit", 422, "A channel's `rate_limit` is not `<n>/s`, `/m` or `/h`.";
    InvalidAutoDisable = "invalid_auto_disable", 422, "A channel's `auto_disable` is not valid.";
    InvalidMiddleware = "invalid_middleware", 422, "A channel's `middleware` is not valid.";
    InvalidFilter = "invalid_filter", 422, "A channel's `filter` is not valid.";
    PayloadDoesNotMatchSchema = "payload_does_not_match_schema", 422, "An activity's payload does not fit its event type's schema.";
    InvalidEventType = "invalid_event_type", 422, "An event type's name, description or schema is not valid.";
    EventTypeExists = "event_type_exists", 409, "The tenant has an event type of that name.";
    InvalidEventTypes = "invalid_event_types", 422, "A channel's `event_types` are not valid.";
    InvalidOrdering = "invalid_ordering", 422, "A channel's `ordering` is not `{\"by\": \"conversation\"}` with an optional `on_dead_letter` of `hold` or `skip`.";
    UnsupportedChannelType = "unsupported_channel_type", 422, "No adapter delivers this channel type.";
    RoleInPlatformAccount = "role_in_platform_account", 422, "An AWS channel's `role_arn` is in the platform's own account: name a role in the tenant's account.";
    AwsIdentityUnavailable = "aws_identity_unavailable", 503, "The deployment does not know its own AWS account (`PLATFORM_ACCOUNT_ID`), so no role can be made to trust it.";
    EmailSenderNotAllowed = "email_sender_not_allowed", 403, "An email channel's `from` is not one of its tenant's sender identities.";
    TooManyChannels = "too_many_channels", 409, "The tenant has as many channels as it may keep (1,000): delete one first.";
    ManagedChannel = "managed_channel", 403, "The tenant's alert channel: an operator changes it, through the tenant's `alert_webhook_url`, and only the platform's alerts are posted to it.";
    // Activities and deliveries.
    InvalidActivity = "invalid_activity", 422, "The activity is not valid.";
    PayloadTooLarge = "payload_too_large", 413, "The payload is over the deployment's limit (10 MiB with a payload bucket, 256 KiB without).";
    NoPayloadBucket = "no_payload_bucket", 501, "The deployment keeps no payload bucket, so it takes no uploads.";
    InvalidBatch = "invalid_batch", 422, "A batch of activities is empty or holds more than 100.";
    InvalidPayload = "invalid_payload", 422, "The payload is not valid for a target channel.";
    UnknownChannel = "unknown_channel", 422, "A target channel does not exist (or is another tenant's).";
    ChannelInactive = "channel_inactive", 422 | 400, "A target channel is inactive (400 on replays).";
    NotFailed = "not_failed", 409, "Only a failed or filtered delivery can be retried this way.";
    StillFiltered = "still_filtered", 409, "A filtered delivery's channel filter still does not want it.";
    StreamDisabled = "stream_disabled", 403, "This stack has no live stream (its `LiveStream` parameter is `disabled`).";
    LaneNotHeld = "lane_not_held", 409, "The lane is not held by a dead letter: nothing to release.";
    NotAwaitingAck = "not_awaiting_ack", 409, "The delivery does not wait for an acknowledgement.";
    Conflict = "conflict", 409, "The resource changed meanwhile, or already exists.";
    // Idempotency.
    InvalidIdempotencyKey = "invalid_idempotency_key", 422, "The `idempotency-key` header is not valid.";
    IdempotencyKeyReused = "idempotency_key_reused", 422, "The `idempotency-key` was used with another request.";
    IdempotencyKeyInUse = "idempotency_key_in_use", 409, "A request with this `idempotency-key` is still running.";
    // Tenants and users (admin API).
    InvalidTier = "invalid_tier", 422, "Not a tier.";
    InvalidAlertWebhookUrl = "invalid_alert_webhook_url", 422, "The tenant's `alert_webhook_url` is not a URL the platform may call.";
    InvalidApiRateLimit = "invalid_api_rate_limit", 422, "The tenant's `api_rate_limit` is not `<n>/s`, `/m` or `/h`.";
    InvalidDeliveryShards = "invalid_delivery_shards", 422, "The tenant's `delivery_shards` is out of range or fewer than it has.";
    InvalidEmailSenders = "invalid_email_senders", 422, "The tenant's `email_senders` are not addresses or domains, or too many.";
    InvalidSesTenant = "invalid_ses_tenant", 422, "The tenant's `ses_tenant` is not a valid name.";
    UnknownTenant = "unknown_tenant", 422, "The named tenant does not exist.";
    InvalidUser = "invalid_user", 422, "A web user is not valid (409 `conflict` when the email is taken).";
    InvalidRole = "invalid_role", 422, "Not a role of the realm.";
    // Receipts (provider callbacks).
    InvalidSignature = "invalid_signature", 401, "A callback's signature does not verify.";
    InvalidToken = "invalid_token", 401, "A callback's token is wrong.";
    ReceiptsNotConfigured = "receipts_not_configured", 401 | 403, "The channel has no secret to check callbacks with (403 on Meta's verification request).";
    InvalidVerifyToken = "invalid_verify_token", 403, "Meta's verification request has the wrong `hub.verify_token`.";
    UnknownMessage = "unknown_message", 404, "No delivery of the channel has these provider message ids.";
    SourceThrottled = "source_throttled", 429, "Too many failed callbacks from this address.";
    ReceiptsThrottled = "receipts_throttled", 429, "Too many callbacks for this channel.";
    // The service.
    Unavailable = "unavailable", 503, "Storage or a queue failed; nothing was lost and it is safe to retry.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ErrorCode {
    /// The codes answered with `status`.
    pub fn answered_with(status: u16) -> impl Iterator<Item = ErrorCode> {
        Self::ALL
            .iter()
            .copied()
            .filter(move |c| c.statuses().contains(&status))
    }

    /// The table of every code for `docs/api.md`.
    pub fn markdown() -> String {
        let mut out = String::from("| code | status | when |\n|---|---|---|\n");
        for c in Self::ALL {
            let statuses: Vec<String> = c.statuses().iter().map(u16::to_string).collect();
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                c.as_str(),
                statuses.join(", "),
                c.meaning()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- generated from http::ErrorCode: begin -->\n";
    const END: &str = "<!-- generated from http::ErrorCode: end -->";

    #[test]
    fn every_code_is_sent_as_it_is_declared_and_once() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str(), "{c:?}");
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert!(c.status().is_client_error() || c.status().is_server_error());
        }
    }

    /// `docs/api.md`'s list of codes is [`ErrorCode::markdown`]; `UPDATE_DOCS=1` rewrites it.
    #[test]
    fn the_documented_error_codes_are_the_declared_ones() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("docs/api.md has no generated error table");
        };
        let now = format!("{}{BEGIN}{}{}", &doc[..b], ErrorCode::markdown(), &doc[e..]);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == now,
            "docs/api.md's error codes are not ErrorCode's; run \
             `UPDATE_DOCS=1 cargo test -p converger-http error_codes` and commit it"
        );
    }
}
