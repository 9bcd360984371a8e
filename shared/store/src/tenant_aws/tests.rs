#![allow(clippy::unwrap_used)]
use super::*;
use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use converger_core::aws::{Destination, channel_config};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the operations a client starts.
#[derive(Debug, Default, Clone)]
struct Started(Arc<AtomicUsize>);

impl Intercept for Started {
    fn name(&self) -> &'static str {
        "started"
    }
    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A platform whose STS is at `endpoint`.
fn platform(started: &Started, endpoint: &str) -> StsTenantAws {
    let config = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("eu-west-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sts::config::SharedCredentialsProvider::new(
            aws_sdk_sts::config::Credentials::for_tests(),
        ))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(5))
                .build(),
        )
        .sleep_impl(aws_smithy_async::rt::sleep::default_async_sleep().unwrap())
        .build();
    StsTenantAws::new(&config, &[SharedInterceptor::new(started.clone())], &[])
}

fn destination() -> Destination {
    channel_config(
        Service::Sqs,
        serde_json::json!({
            "queue_url": "https://sqs.eu-west-1.amazonaws.com/222233334444/q",
            "role_arn": "arn:aws:iam::222233334444:role/r",
        })
        .as_object()
        .unwrap(),
    )
    .unwrap()
    .destination
}

/// The message every test sends.
fn message(d: &Destination) -> AwsMessage<'_> {
    AwsMessage {
        destination: d,
        body: "{}",
        attributes: &[],
        detail_type: "t",
        group_id: "g",
        deduplication_id: "x",
        trace_header: None,
    }
}

/// Tenant `ext-a`'s role.
const ROLE: AssumedRole<'static> = AssumedRole {
    role_arn: "arn:aws:iam::222233334444:role/r",
    external_id: "ext-a",
    session_name: "cvg",
};

#[tokio::test]
async fn a_refused_assume_role_is_answered_from_memory_for_a_while() {
    let started = Started::default();
    // An STS whose role admits only an id no test gives: every assumption refused.
    let p = platform(&started, &judging_sts(Some("ext-none")).await);
    let d = destination();
    let m = message(&d);
    let role = ROLE;
    let first = p.send(role, &m).await.unwrap_err();
    let second = p.send(role, &m).await.unwrap_err();
    assert_eq!(
        (first.stage, first.code.as_deref()),
        (Stage::AssumeRole, Some("AccessDenied"))
    );
    assert_eq!(first, second);
    assert_eq!(
        started.0.load(Ordering::SeqCst),
        2,
        "the wrong external id tried, then the tenant's, once for both sends"
    );
    // Another tenant's role is its own.
    let other = AssumedRole {
        external_id: "ext-b",
        ..role
    };
    let _ = p.send(other, &m).await.unwrap_err();
    assert_eq!(started.0.load(Ordering::SeqCst), 4);
}

/// An STS that judges `AssumeRole` by its external id as a trust policy would: admits
/// `required`, or any when `None` (a role without the `sts:ExternalId` condition). Any
/// other request (the send) is answered 400. Its address.
async fn judging_sts(required: Option<&'static str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            // The whole request: its head, then as much body as it says.
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = sock.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&req).to_string();
            let (status, body) = if text.contains("Action=AssumeRole") {
                let given = text
                    .split(['&', '\n'])
                    .find_map(|p| p.trim().strip_prefix("ExternalId="))
                    .unwrap_or_default()
                    .to_owned();
                if required.is_none_or(|r| r == given) {
                    (
                        "200 OK",
                        "<AssumeRoleResponse><AssumeRoleResult><Credentials>\
                        <AccessKeyId>AKIATEST</AccessKeyId><SecretAccessKey>s</SecretAccessKey>\
                        <SessionToken>t</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>\
                        </Credentials></AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId>\
                        </ResponseMetadata></AssumeRoleResponse>",
                    )
                } else {
                    (
                        "403 Forbidden",
                        "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
                        <Message>not authorized to perform sts:AssumeRole</Message></Error>\
                        <RequestId>r</RequestId></ErrorResponse>",
                    )
                }
            } else {
                (
                    "400 Bad Request",
                    "{\"__type\":\"com.amazonaws.sqs#InvalidAddress\",\"message\":\"not here\"}",
                )
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        }
    });
    format!("http://{addr}")
}

/// A role whose trust policy admits the platform with any external id is not sent as:
/// the wrong id tried first is admitted, the refusal says why and is remembered. A role
/// that requires the tenant's id refuses the wrong one and is sent as.
#[tokio::test]
async fn a_role_that_admits_a_wrong_external_id_is_refused() {
    let d = destination();
    let m = message(&d);
    let role = ROLE;
    let started = Started::default();
    let lax = platform(&started, &judging_sts(None).await);
    let e = lax.send(role, &m).await.unwrap_err();
    assert_eq!(
        (e.stage, e.code.as_deref()),
        (
            Stage::AssumeRole,
            Some(converger_core::aws::EXTERNAL_ID_NOT_REQUIRED)
        )
    );
    let c = converger_core::aws::classify(
        Service::Sqs,
        e.stage,
        e.code.as_deref(),
        &e.message,
        e.status,
    );
    assert!(!c.retryable && c.reason.contains("sts:ExternalId"), "{c:?}");
    assert_eq!(lax.send(role, &m).await.unwrap_err(), e);
    assert_eq!(started.0.load(Ordering::SeqCst), 1, "remembered");

    let started = Started::default();
    let strict = platform(&started, &judging_sts(Some("ext-a")).await);
    let e = strict.send(role, &m).await.unwrap_err();
    assert_eq!(e.stage, Stage::Send, "assumed, then sent: {e:?}");
    assert_eq!(
        started.0.load(Ordering::SeqCst),
        2,
        "the probe, then the tenant's"
    );
    // Without the check (an emulator that does not judge trust policies): one call.
    let started = Started::default();
    let unchecked = platform(&started, &judging_sts(None).await).with_external_id_check(false);
    assert_eq!(
        unchecked.send(role, &m).await.unwrap_err().stage,
        Stage::Send
    );
    assert_eq!(started.0.load(Ordering::SeqCst), 1);
}

/// An STS that does not answer is not a refusal: every send asks again.
#[tokio::test]
async fn an_sts_that_does_not_answer_is_asked_again() {
    let started = Started::default();
    // Nothing listens on this port: the connection is refused.
    let p = platform(&started, "http://127.0.0.1:9");
    let d = destination();
    let m = message(&d);
    let role = ROLE;
    for _ in 0..2 {
        assert_eq!(p.send(role, &m).await.unwrap_err().stage, Stage::AssumeRole);
    }
    assert_eq!(started.0.load(Ordering::SeqCst), 2);
}

#[test]
fn a_tenants_many_roles_push_out_only_its_own() {
    let started = Started::default();
    let p = platform(&started, "http://127.0.0.1:9");
    let role = |arn: &str, ext: &str| {
        let arn = arn.to_owned();
        let ext = ext.to_owned();
        move |p: &StsTenantAws| {
            p.slot(&AssumedRole {
                role_arn: &arn,
                external_id: &ext,
                session_name: "cvg",
            })
        }
    };
    let quiet = role("arn:aws:iam::1:role/quiet", "ext-quiet")(&p);
    for i in 0..(MAX_ROLES_PER_TENANT + 50) {
        let _ = role(&format!("arn:aws:iam::2:role/r{i}"), "ext-busy")(&p);
    }
    let map = p.sessions.lock().unwrap();
    let busy = map.keys().filter(|(_, e)| e == "ext-busy").count();
    assert_eq!(busy, MAX_ROLES_PER_TENANT);
    let kept = map
        .get(&(
            "arn:aws:iam::1:role/quiet".to_owned(),
            "ext-quiet".to_owned(),
        ))
        .unwrap();
    assert!(
        Arc::ptr_eq(&kept.slot, &quiet),
        "the quiet tenant's session stays"
    );
}

/// A tenant naming role after role takes at most `core::aws::ASSUME_RATE`'s burst of new sessions at
/// once: the next is throttled without a call to STS (and retried by its delivery), and
/// another tenant's budget is its own.
#[tokio::test]
async fn a_tenants_new_sessions_are_held_to_its_rate() {
    let started = Started::default();
    // Every role refused: each send is a new assumption (two calls with the wrong-id check).
    let p = platform(&started, &judging_sts(Some("ext-none")).await);
    let d = destination();
    let m = message(&d);
    let burst = converger_core::aws::ASSUME_RATE.count as usize;
    let arns: Vec<String> = (0..=burst)
        .map(|i| format!("arn:aws:iam::222233334444:role/r{i}"))
        .collect();
    fn as_role<'a>(arn: &'a str, ext: &'static str) -> AssumedRole<'a> {
        AssumedRole {
            role_arn: arn,
            external_id: ext,
            session_name: "cvg",
        }
    }
    for arn in &arns[..burst] {
        let e = p.send(as_role(arn, "ext-a"), &m).await.unwrap_err();
        assert_eq!(e.code.as_deref(), Some("AccessDenied"), "{e:?}");
    }
    let calls = started.0.load(Ordering::SeqCst);
    assert_eq!(calls, 2 * burst);
    let throttled = p
        .send(as_role(&arns[burst], "ext-a"), &m)
        .await
        .unwrap_err();
    assert_eq!(
        (throttled.stage, throttled.code.as_deref()),
        (Stage::AssumeRole, Some("Throttling")),
        "{throttled:?}"
    );
    assert!(sts_failed(&throttled), "a throttled assumption is retried");
    assert_eq!(started.0.load(Ordering::SeqCst), calls, "STS was not asked");
    let other = p
        .send(as_role(&arns[burst], "ext-b"), &m)
        .await
        .unwrap_err();
    assert_eq!(other.code.as_deref(), Some("AccessDenied"), "{other:?}");
}
