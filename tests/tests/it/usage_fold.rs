//! The usage log on the emulator (ADR 0089): with `UsageFold`, the changes function logs a
//! batch's counts through its own grants, nothing is counted until the retry scheduler folds
//! the minute (through its grants), and the fold counts each delivery once.

use converger_local::stack::Backend;
use converger_tests::views::UsageView;
use converger_tests::{Answer, Receiver, TestStack};
use serde_json::json;

#[tokio::test]
async fn the_schedulers_fold_counts_logged_usage_once_on_the_emulator() {
    let t = TestStack::with(|o| {
        o.backend = Backend::Emulator;
        o.config.usage_fold = true;
    })
    .await;
    let ok = Receiver::always(200).await.unwrap();
    let (_, key) = t.tenant("default").await;
    let ch = t
        .webhook(&key, &ok.url, json!({}))
        .await
        .id
        .as_str()
        .to_owned();
    for n in 0..3 {
        let d = t.deliver_settled(&key, &ch, json!({"n": n})).await;
        assert_eq!(d.status, "sent", "{d:?}");
    }
    assert!(t.stack.changes_settled().await);
    let usage = |a: &Answer| a.typed::<UsageView>(200).unwrap();
    let before = t.api("GET", "/api/v1/usage", &key, None).await;
    assert_eq!(before.status, 200, "{:?}", before.body);
    assert_eq!(
        usage(&before).total.deliveries,
        0,
        "logged, not yet counted"
    );
    // The scheduler's fold, run to this minute as a stack at rest may be.
    let period = converger_core::usage::fold::period_of(converger_core::time::now_ms());
    let fold = t.stack.functions.retry_scheduler.usage_fold();
    let folded = fold.run_to(period).await.unwrap();
    assert!(folded.rows >= 1 && folded.counter_writes >= 6, "{folded:?}");
    let after = usage(&t.api("GET", "/api/v1/usage", &key, None).await);
    assert_eq!(after.total.deliveries, 3, "{after:?}");
    assert_eq!(after.total.attempts, 3);
    // Run again: nothing more.
    let again = fold.run_to(period).await.unwrap();
    assert_eq!((again.periods, again.counter_writes), (0, 0));
    let same = usage(&t.api("GET", "/api/v1/usage", &key, None).await);
    assert_eq!(same.total.deliveries, 3, "{same:?}");
}
