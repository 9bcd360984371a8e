//! A channel's middleware shares the process with every other tenant's: one tenant's hostile
//! steps hold at most its share of the turns.

use crate::common::*;
use converger_core::middleware::Step;

/// A batch that hands out one tenant's six deliveries with slow middleware (ten steps that
/// spin just inside their operation bound) before another tenant's delivery, whose channel
/// has middleware too: the other tenant's takes a turn the first cannot hold, so its request
/// reaches the receiver before any of the first tenant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_tenants_batch_leaves_another_tenant_its_middleware_turn() {
    let f = fixture_on(Arc::new(ManualClock::starting_now()));
    let rx = Responder::start(200).await;
    let noisy = tenant(&f).await;
    let (quiet, _) = f
        .pipeline
        .tenants()
        .create_tenant("quiet", Tier::Default)
        .await
        .unwrap();
    let channel = |t: &Tenant, steps: Vec<Step>| {
        let mut c = Channel::new(
            t.id.clone(),
            ChannelType::Webhook,
            "hook",
            json!({"url": rx.url}).as_object().cloned().unwrap(),
            f.pipeline.clock().now(),
        );
        c.middleware = steps;
        c
    };
    let spin: Vec<Step> = (0..10)
        .map(|_| Step::Transform {
            script: "let n = 0; while n < 8000 { n += 1; } payload.text = \"noisy\";".into(),
        })
        .collect();
    let mut hostile = Vec::new();
    for _ in 0..6 {
        let c = channel(&noisy, spin.clone());
        f.pipeline.channels().create_channel(&c).await.unwrap();
        hostile.push(c);
    }
    let calm = channel(
        &quiet,
        vec![Step::Transform {
            script: "payload.text = \"quiet\";".into(),
        }],
    );
    f.pipeline.channels().create_channel(&calm).await.unwrap();
    let refs: Vec<&Channel> = hostile.iter().collect();
    let n = f
        .pipeline
        .intake()
        .ingest(&noisy, activity(None, &refs))
        .await
        .unwrap();
    let q = f
        .pipeline
        .intake()
        .ingest(&quiet, activity(None, &[&calm]))
        .await
        .unwrap();
    let now = f.pipeline.clock().now_ms();
    let mut batch: Vec<_> = f
        .queue
        .take_due(now)
        .into_iter()
        .filter(|m| !m.watch)
        .collect();
    assert_eq!(batch.len(), 7);
    // The noisy tenant's records first, as a batch may hand them out.
    batch.sort_by_key(|m| m.delivery_id == q.deliveries[0].id);
    let attempts = f.pipeline.attempts();
    let done = futures::future::join_all(batch.into_iter().map(|m| attempts.deliver(m))).await;
    assert!(done.iter().all(Result::is_ok));
    let texts = rx.texts();
    let first = f
        .store
        .get_delivery(&n.deliveries[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(texts.len(), 7, "{texts:?} {:?}", first.last_error);
    assert_eq!(texts[0], "quiet", "{texts:?}");
}
