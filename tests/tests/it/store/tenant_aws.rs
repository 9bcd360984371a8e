//! Sending into a tenant's account (`TenantAws`): the STS backend against a second account of
//! the emulator, the in-process model beside it. Both send, drop a FIFO message whose
//! deduplication id they have seen, and answer a missing target with a code the error table
//! calls permanent. (The emulator does not check trust policies, so a wrong external id is
//! the model's alone: `aws_channels` tests it.) And the tenant's external id: kept once
//! made, replaced by a rotation.

use super::*;
use converger_core::aws::{self, AssumedRole, AwsMessage, Destination, Service, Stage};
use converger_memory::MemTenantAws;
use converger_ports::TenantAws;

const ACCOUNT: &str = "222233334444";
const ROLE: &str = "arn:aws:iam::222233334444:role/converger-delivery";

fn queue_url(name: &str) -> String {
    format!("https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/{name}")
}

fn destination(name: &str) -> Destination {
    aws::channel_config(
        Service::Sqs,
        json!({"queue_url": queue_url(name), "role_arn": ROLE})
            .as_object()
            .unwrap(),
    )
    .unwrap()
    .destination
}

/// The port, and what a queue of the tenant's received (body, group).
struct Account {
    t: Option<TestTables>,
    port: Arc<dyn TenantAws>,
    memory: Option<Arc<MemTenantAws>>,
    sqs: Option<aws_sdk_sqs::Client>,
}

impl Account {
    async fn new(b: Backend, queues: &[&str]) -> Self {
        match b {
            Backend::Dynamo => {
                let t = TestTables::on_emulator().await;
                let sqs = aws_sdk_sqs::Client::new(&t.account(ACCOUNT, "eu-west-1").await);
                for q in queues {
                    crate::aws_channels::emulator::queue(&sqs, q).await;
                }
                // The emulator admits any external id: the wrong one's check is the store's
                // own test (an STS that judges the id).
                let port = Arc::new(
                    converger_store::StsTenantAws::new(&t.config, &[], &[])
                        .with_external_id_check(false),
                );
                Self {
                    t: Some(t),
                    port,
                    memory: None,
                    sqs: Some(sqs),
                }
            }
            Backend::Memory => {
                let m = Arc::new(MemTenantAws::new());
                m.add_role(ROLE, "cvg-conformance");
                for q in queues {
                    m.add_target(&queue_url(q));
                }
                Self {
                    t: None,
                    port: m.clone(),
                    memory: Some(m),
                    sqs: None,
                }
            }
        }
    }

    async fn received(&self, name: &str) -> Vec<(String, Option<String>)> {
        if let Some(m) = &self.memory {
            return m
                .received(&queue_url(name))
                .into_iter()
                .map(|r| (r.body, r.group_id))
                .collect();
        }
        let sqs = self.sqs.as_ref().unwrap();
        let url = sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        crate::aws_channels::emulator::messages(sqs, &url)
            .await
            .into_iter()
            .map(|m| {
                let group = m
                    .attributes()
                    .and_then(|a| {
                        a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId)
                    })
                    .cloned();
                (m.body().unwrap_or_default().to_owned(), group)
            })
            .collect()
    }
}

fn message<'a>(d: &'a Destination, body: &'a str, dedup: &'a str) -> AwsMessage<'a> {
    AwsMessage {
        destination: d,
        body,
        attributes: &[],
        detail_type: "activity",
        group_id: "conv-1",
        deduplication_id: dedup,
        trace_header: None,
    }
}

const ROLE_AS: AssumedRole<'static> = AssumedRole {
    role_arn: ROLE,
    external_id: "cvg-conformance",
    session_name: "converger-conformance",
};

pub(super) async fn a_tenant_queue_takes_a_message_once_and_a_missing_one_is_named(b: Backend) {
    // Names of this test's own: the emulator's second account outlives one test.
    let run = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let (plain_name, fifo_name) = (format!("plain-{run}"), format!("ordered-{run}.fifo"));
    let a = Account::new(b, &[&plain_name, &fifo_name]).await;
    let plain = destination(&plain_name);
    let receipt = a
        .port
        .send(ROLE_AS, &message(&plain, "{\"n\":1}", "d-1"))
        .await
        .unwrap();
    assert!(receipt.message_id.is_some());
    assert_eq!(
        a.received(&plain_name).await,
        vec![("{\"n\":1}".to_owned(), None)]
    );

    // A FIFO queue: the group is kept, and a repeated deduplication id is dropped.
    let fifo = destination(&fifo_name);
    for _ in 0..2 {
        let r = a
            .port
            .send(ROLE_AS, &message(&fifo, "{\"n\":2}", "d-2"))
            .await
            .unwrap();
        assert!(r.sequence_number.is_some());
    }
    assert_eq!(
        a.received(&fifo_name).await,
        vec![("{\"n\":2}".to_owned(), Some("conv-1".to_owned()))]
    );

    let missing = destination("missing");
    let e = a
        .port
        .send(ROLE_AS, &message(&missing, "{}", "d-3"))
        .await
        .unwrap_err();
    assert_eq!(e.stage, Stage::Send);
    let c = aws::classify(
        Service::Sqs,
        e.stage,
        e.code.as_deref(),
        &e.message,
        e.status,
    );
    assert!(!c.retryable, "{e:?}");
    assert!(
        c.reason.contains("the target does not exist"),
        "{}",
        c.reason
    );
    drop(a.t);
}

pub(super) async fn a_tenants_external_id_is_kept_once_made_and_replaced_by_a_rotation(b: Backend) {
    let f = fixture(b).await;
    let id = &f.tenant.id;
    let first = f
        .store
        .ensure_tenant_external_id(id, "cvg-first")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.aws_external_id.as_deref(), Some("cvg-first"));
    // A second caller's candidate does not replace it.
    let again = f
        .store
        .ensure_tenant_external_id(id, "cvg-second")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.aws_external_id.as_deref(), Some("cvg-first"));
    let rotated = f
        .store
        .set_tenant_external_id(id, "cvg-rotated")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.aws_external_id.as_deref(), Some("cvg-rotated"));
    assert_eq!(
        f.store
            .get_tenant(id)
            .await
            .unwrap()
            .unwrap()
            .aws_external_id
            .as_deref(),
        Some("cvg-rotated")
    );
    // No such tenant: nothing written.
    assert_eq!(
        f.store
            .ensure_tenant_external_id(&TenantId::generate(), "cvg-x")
            .await
            .unwrap(),
        None
    );
}
