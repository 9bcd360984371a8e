//! How a send into a tenant's account failed: the call, the error table (each AWS error
//! code, whether a retry can heal it, what the tenant should do), and the classification
//! of one failure by it.

use super::{AwsSendError, Service};

/// Which call a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `sts:AssumeRole` on the tenant's role.
    AssumeRole,
    /// The send itself, with the role's credentials.
    Send,
}

/// The code of the platform's own refusal of a role that does not require the tenant's
/// external id (no AWS service answers it: the platform finds it out, see
/// [`PROBE_EXTERNAL_ID`]).
pub const EXTERNAL_ID_NOT_REQUIRED: &str = "ExternalIdNotRequired";

/// The external id the platform tries a role with before it takes a session of it: no
/// tenant's (tenants' ids are `cvg-` and 48 hex digits). A role that admits it trusts the
/// platform's account without the `sts:ExternalId` condition, so any tenant that named it
/// could send as it: refused with [`EXTERNAL_ID_NOT_REQUIRED`].
pub const PROBE_EXTERNAL_ID: &str = "cvg-probe-not-a-tenant";

/// The refusal of a role that admitted [`PROBE_EXTERNAL_ID`].
pub fn external_id_not_required(role_arn: &str) -> AwsSendError {
    AwsSendError {
        stage: Stage::AssumeRole,
        code: Some(EXTERNAL_ID_NOT_REQUIRED.into()),
        message: format!("{role_arn} admitted the platform with an external id that is not yours"),
        status: None,
    }
}

/// New role sessions one tenant (its external id) may take per instance: 20 a minute, all at
/// once at most (a session lasts an hour, so a tenant's hundred roles need about two a
/// minute). Past it, a send that needs one is throttled (retried), STS not asked: the
/// platform's STS rate is no tenant's to spend.
pub const ASSUME_RATE: crate::RateLimit = crate::RateLimit {
    count: 20,
    per_ms: 60_000,
};

/// A send refused because its tenant spent [`ASSUME_RATE`]; the next session may be taken at
/// `at_us` (a throttling the error table retries).
pub fn assume_rate_spent(at_us: i64, now_us: i64) -> AwsSendError {
    AwsSendError {
        stage: Stage::AssumeRole,
        code: Some("Throttling".into()),
        message: format!(
            "this tenant took {} new role sessions in a minute on this instance; the next in {} ms",
            ASSUME_RATE.count,
            (at_us - now_us).max(0) / 1000
        ),
        status: None,
    }
}

/// One row of the error table: an AWS error code, whether a retry can heal it, and what
/// the tenant should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorRule {
    pub codes: &'static [&'static str],
    pub retryable: bool,
    pub advice: &'static str,
}

/// The error table (`docs/channels/aws.md` shows it; a test keeps the two equal). Codes not
/// listed are classified by their HTTP status: 429 and 5xx retry, other 4xx do not; a
/// failure with no answer at all (the network, a timeout) retries.
pub const ERRORS: &[ErrorRule] = &[
    ErrorRule {
        codes: &[EXTERNAL_ID_NOT_REQUIRED],
        retryable: false,
        advice: "the role's trust policy admits the platform's account without your external id, so another tenant naming the role could send as it: add the condition sts:ExternalId with your external id (GET /api/v1/aws-identity gives a template with it); nothing is sent until then",
    },
    ErrorRule {
        codes: &[
            "ThrottlingException",
            "Throttling",
            "RequestThrottled",
            "ThrottledException",
            "Throttled",
            "ProvisionedThroughputExceededException",
            "LimitExceededException",
            "TooManyRequestsException",
            "ExecutionLimitExceeded",
            "SlowDown",
        ],
        retryable: true,
        advice: "the service throttled the send; it is retried with backoff (raise the target's throughput or lower the channel's rate_limit)",
    },
    ErrorRule {
        codes: &[
            "KMSThrottlingException",
            "KmsThrottled",
            "KMSThrottling",
            "KMSUnavailableException",
            "KmsUnavailable",
        ],
        retryable: true,
        advice: "the target's KMS key was throttled or unavailable; it is retried with backoff",
    },
    ErrorRule {
        codes: &[
            "ServiceUnavailable",
            "ServiceUnavailableException",
            "InternalError",
            "InternalFailure",
            "InternalErrorException",
            "InternalException",
            "InternalServerError",
        ],
        retryable: true,
        advice: "the service failed; it is retried with backoff",
    },
    ErrorRule {
        codes: &["ExpiredToken", "ExpiredTokenException", "RequestExpired"],
        retryable: true,
        advice: "the role's session expired; new credentials are taken and the send retried",
    },
    ErrorRule {
        codes: &[
            "AccessDenied",
            "AccessDeniedException",
            "AuthorizationError",
            "AuthorizationErrorException",
            "NotAuthorized",
            "KMSAccessDeniedException",
            "KmsAccessDenied",
            "UnrecognizedClientException",
            "InvalidClientTokenId",
        ],
        retryable: false,
        advice: "the role may not send to the target: allow the channel type's one action on it in the role's policy (and kms:GenerateDataKey and kms:Decrypt on an encrypted target's key)",
    },
    ErrorRule {
        codes: &[
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "ResourceNotFoundException",
            "NotFound",
            "NotFoundException",
            "KMSNotFoundException",
            "KmsNotFound",
            "StateMachineDoesNotExist",
            "StateMachineDeleting",
            "NoSuchBucket",
        ],
        retryable: false,
        advice: "the target does not exist: check its name, its account and its region (the region is taken from the URL or ARN, or an S3 channel's `region`)",
    },
    ErrorRule {
        codes: &[
            "PermanentRedirect",
            "AuthorizationHeaderMalformed",
            "IllegalLocationConstraintException",
        ],
        retryable: false,
        advice: "the bucket is in another region than the channel's `region`: set the bucket's own region",
    },
    ErrorRule {
        codes: &[
            "InvalidParameterValue",
            "InvalidParameterException",
            "InvalidParameterValueException",
            "InvalidParameterCombination",
            "InvalidArgumentException",
            "InvalidMessageContents",
            "InvalidArgument",
            "MalformedDetail",
            "ValidationException",
            "MissingParameter",
            "KMSDisabledException",
            "KmsDisabled",
            "KMSInvalidStateException",
            "KmsInvalidState",
            "InvalidKMSResourceException",
            "InvalidExecutionInput",
            "InvalidName",
            "InvalidArn",
            "InvalidDefinition",
        ],
        retryable: false,
        advice: "the target refused the message: check that the target is of the kind its name says (FIFO or standard) and that its key, if any, is enabled",
    },
];

/// The error table as `docs/channels/aws.md` shows it (a test checks the page has it).
pub fn errors_markdown() -> String {
    let mut out = String::from("| AWS error codes | retried | what to do |\n|---|---|---|\n");
    for r in ERRORS {
        let codes: Vec<String> = r.codes.iter().map(|c| format!("`{c}`")).collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            codes.join(", "),
            if r.retryable { "yes" } else { "no" },
            r.advice
        ));
    }
    out
}

/// What to tell a tenant whose role could not be assumed.
pub const ASSUME_ROLE_ADVICE: &str = "the platform could not assume role_arn: its trust policy must allow sts:AssumeRole to the platform's account with your external id (GET /api/v1/aws-identity gives both, and a template that creates the role)";

/// A failure, classified: whether it is retried, and the text the delivery's log keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub retryable: bool,
    pub reason: String,
}

/// Classifies one failed call by its error code (and HTTP status where there was an
/// answer). A refused `AssumeRole` is permanent unless the service itself failed.
pub fn classify(
    service: Service,
    stage: Stage,
    code: Option<&str>,
    message: &str,
    status: Option<u16>,
) -> Classified {
    let rule = code.and_then(|c| ERRORS.iter().find(|r| r.codes.contains(&c)));
    let retryable = match rule {
        Some(r) => r.retryable,
        None => status.is_none_or(crate::error::is_retryable_status),
    };
    let what = match stage {
        Stage::AssumeRole => "sts:AssumeRole".to_owned(),
        Stage::Send => service.label().to_owned(),
    };
    let own = rule.is_some_and(|r| r.codes.contains(&EXTERNAL_ID_NOT_REQUIRED));
    let advice = match (stage, retryable, rule) {
        (Stage::AssumeRole, false, _) if !own => Some(ASSUME_ROLE_ADVICE),
        (_, _, Some(r)) => Some(r.advice),
        _ => None,
    };
    let code = code.unwrap_or("error");
    let message: String = message.chars().take(300).collect();
    let mut reason = format!("{what}: {code}");
    if !message.is_empty() {
        reason.push_str(": ");
        reason.push_str(&message);
    }
    if let Some(a) = advice {
        reason.push_str(" — ");
        reason.push_str(a);
    }
    Classified { retryable, reason }
}
