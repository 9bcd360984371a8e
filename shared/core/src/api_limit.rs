//! The tenant API's rate limits: per API key, one schedule shared by every API instance (a
//! GCRA like a channel's outbound limit), taken in small batches so that a limit costs far
//! less than one request per call: an instance takes a tenth of a second's worth of the
//! rate at once and spends it locally for up to [`LEASE_MS`].

use crate::Invalid;

use crate::channel::Tier;
use crate::flow::RateLimit;

/// How long an instance may spend a batch it took.
pub const LEASE_MS: i64 = 10_000;

/// Each tier's default limit (`API_RATE_LIMITS`; a tenant's `api_rate_limit` overrides it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub high: RateLimit,
    pub default: RateLimit,
    pub bulk: RateLimit,
}

impl Default for Defaults {
    /// `high=500/s,default=100/s,bulk=50/s`.
    fn default() -> Self {
        let per_s = |count| RateLimit {
            count,
            per_ms: 1_000,
        };
        Self {
            high: per_s(500),
            default: per_s(100),
            bulk: per_s(50),
        }
    }
}

impl Defaults {
    /// The same limit for every tier.
    pub fn uniform(limit: RateLimit) -> Self {
        Self {
            high: limit,
            default: limit,
            bulk: limit,
        }
    }

    pub fn for_tier(&self, tier: Tier) -> RateLimit {
        match tier {
            Tier::High => self.high,
            Tier::Default => self.default,
            Tier::Bulk => self.bulk,
        }
    }

    /// Reads `high=500/s,default=100/s,bulk=50/s` (any of the three; the others keep
    /// their default).
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let mut d = Self::default();
        for (tier, limit) in Tier::per_tier(text)? {
            let limit: RateLimit = limit.parse()?;
            match tier {
                Tier::High => d.high = limit,
                Tier::Default => d.default = limit,
                Tier::Bulk => d.bulk = limit,
            }
        }
        Ok(d)
    }

    /// A tenant's limit: its override when it has a valid one, else its tier's.
    pub fn effective(&self, overridden: Option<&str>, tier: Tier) -> RateLimit {
        overridden
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| self.for_tier(tier))
    }
}

/// The shared schedule of `key` (an API key's id, `receipt#<channel>`, a source) under
/// `limit`. The limit is part of it, so a changed limit starts a schedule of its own: a throttled
/// tenant whose limit an operator raises is served at the new rate as soon as its instances see
/// the change, instead of waiting out what it spent at the old one (a lowered limit starts
/// with its burst, once).
pub fn schedule_key(key: &str, limit: &RateLimit) -> String {
    format!("api#{key}#{limit}")
}

/// The key of a source's refused requests ([`REFUSALS_PER_SOURCE`]).
pub fn refusals_key(source: &str) -> String {
    format!("refused#{source}")
}

/// The key of a channel's verified receipts ([`RECEIPTS_PER_CHANNEL`]).
pub fn receipts_key(channel: &str) -> String {
    format!("receipt#{channel}")
}

/// How many requests an instance takes from the shared schedule at once: a tenth of a
/// second's worth of the rate, at least one, at most the burst.
pub fn batch(limit: &RateLimit) -> u32 {
    let per_100ms = u64::from(limit.count) * 100 / limit.per_ms.max(1);
    u32::try_from(per_100ms)
        .unwrap_or(u32::MAX)
        .clamp(1, limit.count.max(1))
}

/// What an instance holds of a key's schedule: requests taken and not yet spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub limit: RateLimit,
    pub tokens: u32,
    pub until_ms: i64,
}

impl Lease {
    /// A batch of `tokens` taken at `now_ms` for `limit`.
    pub fn taken(limit: RateLimit, tokens: u32, now_ms: i64) -> Self {
        Self {
            limit,
            tokens,
            until_ms: now_ms + LEASE_MS,
        }
    }

    /// Spends one request of the lease if it still holds one for `limit` at `now_ms`.
    pub fn spend(&mut self, limit: &RateLimit, now_ms: i64) -> bool {
        if self.limit != *limit || now_ms >= self.until_ms || self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// Refused requests one source address (`net::client_source`) may cause, every API instance
/// together, before its requests are answered 429 `source_throttled` unread.
pub const REFUSALS_PER_SOURCE: RateLimit = RateLimit {
    count: 60,
    per_ms: 60_000,
};

/// Receipts one channel takes, every API instance together (`RECEIPT_RATE_LIMIT`): a
/// provider's verified receipts past it are answered 429 `receipts_throttled` with
/// `Retry-After` (providers retry them), so no channel's receipts, even with a leaked
/// secret, write faster than this. Three receipts (sent, delivered, read) for each of
/// 1,000 messages a second, WhatsApp's top throughput for one number.
pub const RECEIPTS_PER_CHANNEL: RateLimit = RateLimit {
    count: 3_000,
    per_ms: 1_000,
};

/// Whether an answer (its HTTP status) refused a request nobody vouched for: a missing or bad
/// API key (401), or a receipt with a bad signature or token, or for no such channel (401,
/// 403, 404). A keyed call's 404 is an ordinary answer, not a refusal, and so is a verified
/// receipt's (its messages unknown): the caller says which answers its check vouched for.
pub fn refused(status: u16, receipt: bool) -> bool {
    status == 401 || (receipt && matches!(status, 403 | 404))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_limit_has_a_schedule_of_its_own() {
        let (a, b) = (
            "10/m".parse::<RateLimit>().unwrap(),
            "100/s".parse::<RateLimit>().unwrap(),
        );
        assert_eq!(schedule_key("key_1", &a), "api#key_1#10/m");
        assert_ne!(schedule_key("key_1", &a), schedule_key("key_1", &b));
        assert_ne!(schedule_key("key_1", &a), schedule_key("key_2", &a));
    }

    #[test]
    fn refusals_are_missing_keys_and_failed_receipts() {
        assert!(refused(401, false));
        assert!(!refused(404, false));
        assert!(refused(404, true));
        assert!(refused(403, true));
        assert!(!refused(200, true));
        assert!(!refused(422, true));
    }

    #[test]
    fn tiers_have_defaults_and_a_valid_override_wins() {
        let d = Defaults::default();
        assert_eq!(d.for_tier(Tier::Default).to_string(), "100/s");
        assert_eq!(d.effective(Some("5/s"), Tier::High).to_string(), "5/s");
        assert_eq!(d.effective(Some("nonsense"), Tier::Bulk), d.bulk);
        assert_eq!(d.effective(None, Tier::High), d.high);
        let p = Defaults::parse("bulk=10/s, high=1000/m").unwrap();
        assert_eq!(p.bulk.to_string(), "10/s");
        assert_eq!(p.high.to_string(), "1000/m");
        assert_eq!(p.default, d.default);
        for bad in ["bulk", "gold=1/s", "bulk=fast"] {
            assert!(Defaults::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_batch_is_a_tenth_of_a_second_of_the_rate_within_the_burst() {
        let r = |s: &str| s.parse::<RateLimit>().unwrap();
        assert_eq!(batch(&r("100/s")), 10);
        assert_eq!(batch(&r("5/s")), 1);
        assert_eq!(batch(&r("600/m")), 1);
        assert_eq!(batch(&r("1000000/s")), 100_000);
    }

    #[test]
    fn a_lease_spends_what_it_took_for_its_limit_until_it_ends() {
        let limit: RateLimit = "100/s".parse().unwrap();
        let mut lease = Lease::taken(limit, 2, 0);
        assert!(lease.spend(&limit, 1));
        assert!(lease.spend(&limit, 2));
        assert!(!lease.spend(&limit, 3), "spent");
        let mut lease = Lease::taken(limit, 2, 0);
        assert!(!lease.spend(&limit, LEASE_MS), "ended");
        let other: RateLimit = "5/s".parse().unwrap();
        assert!(!lease.spend(&other, 1), "the limit changed");
    }

    #[test]
    fn a_batch_is_allowed_while_its_last_request_is_within_the_burst() {
        let limit: RateLimit = "10/s".parse().unwrap();
        // Idle: the whole burst at once, not one more.
        let tat = limit.decide_n(None, 0, 10).unwrap();
        assert_eq!(tat, 1_000_000);
        assert!(limit.decide_n(Some(tat), 0, 1).is_err());
        // Half a second later, five more.
        assert!(limit.decide_n(Some(tat), 500_000, 5).is_ok());
        assert!(limit.decide_n(Some(tat), 500_000, 6).is_err());
        assert_eq!(limit.decide_n(Some(5), 0, 1), limit.decide(Some(5), 0));
    }
}
