//! Channel types and tenant tiers.

use crate::Invalid;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    Webhook,
    Echo,
    WhatsappMeta,
    WhatsappInfobip,
    Websocket,
    Slack,
    Email,
    AwsSqs,
    AwsEventbridge,
    AwsKinesis,
    AwsSns,
    AwsFirehose,
    AwsStepfunctions,
    AwsS3,
    Rabbitmq,
}

impl ChannelType {
    pub const ALL: [ChannelType; 15] = [
        Self::Webhook,
        Self::Echo,
        Self::WhatsappMeta,
        Self::WhatsappInfobip,
        Self::Websocket,
        Self::Slack,
        Self::Email,
        Self::AwsSqs,
        Self::AwsEventbridge,
        Self::AwsKinesis,
        Self::AwsSns,
        Self::AwsFirehose,
        Self::AwsStepfunctions,
        Self::AwsS3,
        Self::Rabbitmq,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Echo => "echo",
            Self::WhatsappMeta => "whatsapp_meta",
            Self::WhatsappInfobip => "whatsapp_infobip",
            Self::Websocket => "websocket",
            Self::Slack => "slack",
            Self::Email => "email",
            Self::AwsSqs => "aws_sqs",
            Self::AwsEventbridge => "aws_eventbridge",
            Self::AwsKinesis => "aws_kinesis",
            Self::AwsSns => "aws_sns",
            Self::AwsFirehose => "aws_firehose",
            Self::AwsStepfunctions => "aws_stepfunctions",
            Self::AwsS3 => "aws_s3",
            Self::Rabbitmq => "rabbitmq",
        }
    }
}

impl fmt::Display for ChannelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ChannelType {
    type Err = Invalid;
    fn from_str(s: &str) -> Result<Self, Invalid> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| Invalid(format!("unknown channel type `{s}`")))
    }
}

/// The rule for names of tenants and channels: 1 to 200 characters, not blank, and no
/// control characters (NUL, escape sequences that would rewrite an operator's terminal, line
/// breaks that would split a log line or a CSV row).
pub fn check_name(name: &str) -> Result<(), Invalid> {
    if name.trim().is_empty() || name.chars().count() > 200 {
        return Err(Invalid::new("name must be 1 to 200 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid::new("name must not contain control characters"));
    }
    Ok(())
}

/// Most event types one channel subscribes to.
pub const MAX_EVENT_TYPES: usize = 50;

/// The rule for event type names (`message.created`, `order:paid`): 1 to 100 letters, digits,
/// `.`, `_`, `-` or `:`. A channel may also subscribe to `*`, every type.
pub fn check_event_type(name: &str) -> Result<(), Invalid> {
    let ok = (1..=100).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "event type `{}` must be 1 to 100 letters, digits, `.`, `_`, `-` or `:`",
            name.chars().take(100).collect::<String>()
        )))
    }
}

/// Checks a channel's subscriptions: at most [`MAX_EVENT_TYPES`] names or `*`, no repeats.
pub fn check_event_types(types: &[String]) -> Result<(), Invalid> {
    if types.len() > MAX_EVENT_TYPES {
        return Err(Invalid(format!("at most {MAX_EVENT_TYPES} event types")));
    }
    for (i, t) in types.iter().enumerate() {
        if t != "*" {
            check_event_type(t)?;
        }
        if types[..i].contains(t) {
            return Err(Invalid(format!("event type `{t}` is listed twice")));
        }
    }
    Ok(())
}

/// Whether a channel subscribed to `types` receives an activity of `event_type`.
pub fn subscribes(types: &[String], event_type: &str) -> bool {
    types.iter().any(|t| t == "*" || t == event_type)
}

/// A tenant's tier selects the delivery queue its deliveries run on, so that classes of tenants
/// never wait for each other's workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    High,
    #[default]
    Default,
    Bulk,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Self::High, Self::Default, Self::Bulk];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Default => "default",
            Self::Bulk => "bulk",
        }
    }

    /// A per-tier setting's entries (`<tier>=<value>`, comma-separated, each tier at most
    /// once): each tier with its value's text, trimmed.
    pub fn per_tier(text: &str) -> Result<Vec<(Tier, &str)>, Invalid> {
        let mut out: Vec<(Tier, &str)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (tier, value) = part
                .split_once('=')
                .ok_or_else(|| Invalid(format!("`{part}` is not `<tier>=<value>`")))?;
            let tier: Tier = tier.trim().parse()?;
            if out.iter().any(|(t, _)| *t == tier) {
                return Err(Invalid(format!("{} is given twice", tier.as_str())));
            }
            out.push((tier, value.trim()));
        }
        Ok(out)
    }

    /// The tier's queue name (before the stack prefix).
    pub fn queue_name(self) -> &'static str {
        match self {
            Self::High => "deliveries-high",
            Self::Default => "deliveries",
            Self::Bulk => "deliveries-bulk",
        }
    }
}

/// Concurrent batches each tier's consumer runs at most: the deliver function's SQS mappings'
/// `MaximumConcurrency`, which the template's `DeliverConcurrency*` parameters set and give the
/// functions as `TIER_CONCURRENCY`. Channel windows are sized from it (`core::flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierConcurrency {
    pub high: usize,
    pub default: usize,
    pub bulk: usize,
}

impl Default for TierConcurrency {
    /// What the local stack runs and the tests measure (`high=10,default=20,bulk=5`).
    fn default() -> Self {
        Self {
            high: 10,
            default: 20,
            bulk: 5,
        }
    }
}

impl TierConcurrency {
    /// The fewest and most concurrent batches a mapping may run (Lambda's bounds).
    pub const RANGE: std::ops::RangeInclusive<usize> = 2..=1000;

    /// The concurrency of `tier`'s consumer.
    pub fn of(self, tier: Tier) -> usize {
        match tier {
            Tier::High => self.high,
            Tier::Default => self.default,
            Tier::Bulk => self.bulk,
        }
    }

    /// `high=<n>,default=<n>,bulk=<n>` (each tier at most once, any left out keeping its
    /// default; each 2 to 1,000).
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let mut out = Self::default();
        for (tier, n) in Tier::per_tier(s)? {
            let n: usize = n
                .parse()
                .ok()
                .filter(|n| Self::RANGE.contains(n))
                .ok_or_else(|| {
                    Invalid(format!(
                        "{}'s concurrency must be a number from 2 to 1000",
                        tier.as_str()
                    ))
                })?;
            match tier {
                Tier::High => out.high = n,
                Tier::Default => out.default = n,
                Tier::Bulk => out.bulk = n,
            }
        }
        Ok(out)
    }
}

impl FromStr for Tier {
    type Err = Invalid;
    fn from_str(s: &str) -> Result<Self, Invalid> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| Invalid(format!("unknown tier `{s}` (high, default, bulk)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_subscribes_to_named_types_or_to_every_type() {
        let types = vec!["message.created".to_owned(), "order:paid".to_owned()];
        assert!(check_event_types(&types).is_ok());
        assert!(subscribes(&types, "order:paid"));
        assert!(!subscribes(&types, "message.deleted"));
        assert!(subscribes(&["*".to_owned()], "anything"));
        assert!(!subscribes(&[], "anything"));
        for bad in ["", "has space", "semi;colon", &"x".repeat(101)] {
            assert!(check_event_types(&[bad.to_owned()]).is_err(), "{bad:?}");
        }
        assert!(check_event_types(&["a".to_owned(), "a".to_owned()]).is_err());
        let many: Vec<String> = (0..=MAX_EVENT_TYPES).map(|i| format!("t{i}")).collect();
        assert!(check_event_types(&many).is_err());
    }

    #[test]
    fn names_are_one_to_two_hundred_printable_characters() {
        assert!(check_name("Orders webhook").is_ok());
        assert!(
            check_name(&"é".repeat(200)).is_ok(),
            "characters, not bytes"
        );
        assert!(check_name(&"é".repeat(201)).is_err());
        assert!(check_name("   ").is_err());
        for bad in [
            "a\u{0}b",
            "x\u{1b}[2J",
            "two\nlines",
            "tab\there",
            "del\u{7f}",
        ] {
            assert_eq!(
                check_name(bad),
                Err(Invalid::new("name must not contain control characters")),
                "{bad:?}"
            );
        }
    }
}
