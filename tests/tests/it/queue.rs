//! The SQS backend of the queue port on the emulator: batched, concurrent sends reach each
//! tier's queue, every message once, with its delay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_core::{ActivityId, ChannelId, DeliveryId, Tier};
use converger_local::Backend;
use converger_ports::DeliveryMessage;
use converger_tests::TestStack;
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[tokio::test]
async fn send_many_reaches_every_tier_once() {
    let t = TestStack::with(|o| {
        o.backend = Backend::Emulator;
        o.run_functions = false;
    })
    .await;
    let msgs: Vec<DeliveryMessage> = (0..35)
        .map(|i| {
            let tier = Tier::ALL[i % 3];
            let id = DeliveryId::for_pair(&ActivityId::generate(), &ChannelId::generate());
            DeliveryMessage::new(id, tier, None)
        })
        .collect();
    t.stack.queue.send_many(&msgs).await.unwrap();
    let delayed = DeliveryMessage::new(
        DeliveryId::for_pair(&ActivityId::generate(), &ChannelId::generate()),
        Tier::High,
        None,
    );
    t.stack.queue.send(&delayed, 2).await.unwrap();
    let sent_at = Instant::now();

    let sqs = &t.aws().clients.sqs;
    let mut seen: HashSet<(Tier, String)> = HashSet::new();
    let mut delayed_seen_after = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (seen.len() < 36) && Instant::now() < deadline {
        for tier in Tier::ALL {
            let out = sqs
                .receive_message()
                .queue_url(t.aws().queue_url(tier).unwrap())
                .max_number_of_messages(10)
                .send()
                .await
                .unwrap();
            for m in out.messages.unwrap_or_default() {
                let msg: DeliveryMessage =
                    converger_ports::message::decode(m.body.as_deref().unwrap()).unwrap();
                assert_eq!(msg.tier, tier, "a message lands on its tier's queue");
                if msg.delivery_id == delayed.delivery_id {
                    delayed_seen_after = Some(sent_at.elapsed());
                }
                assert!(
                    seen.insert((tier, msg.delivery_id.to_string())),
                    "each message once"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.len(), 36);
    assert!(
        delayed_seen_after.unwrap() >= Duration::from_millis(1900),
        "the delay held"
    );
}

/// Both backends report each tier queue's depth, and its dead-letter queue's, in order.
async fn depths_count_visible_and_delayed(queue: &dyn converger_ports::Queue) {
    let msg = |tier| {
        DeliveryMessage::new(
            DeliveryId::for_pair(&ActivityId::generate(), &ChannelId::generate()),
            tier,
            None,
        )
    };
    for _ in 0..3 {
        queue.send(&msg(Tier::Default), 0).await.unwrap();
    }
    queue.send(&msg(Tier::High), 60).await.unwrap();
    let d = queue.depths().await.unwrap();
    let names: Vec<&str> = d.iter().map(|q| q.queue.as_str()).collect();
    let expected: Vec<String> = Tier::ALL
        .iter()
        .flat_map(|t| [t.queue_name().to_owned(), format!("{}-dlq", t.queue_name())])
        .collect();
    assert_eq!(names, expected);
    let of = |name: &str| d.iter().find(|q| q.queue == name).unwrap();
    let default = of(Tier::Default.queue_name());
    assert_eq!((default.visible, default.delayed), (3, 0), "{d:?}");
    let high = of(Tier::High.queue_name());
    assert_eq!((high.visible, high.delayed), (0, 1), "{d:?}");
    assert!(
        d.iter()
            .filter(|q| q.queue.ends_with("-dlq"))
            .all(|q| q.visible + q.delayed + q.in_flight == 0)
    );
}

#[tokio::test]
async fn depths_on_sqs() {
    let t = TestStack::with(|o| {
        o.backend = Backend::Emulator;
        o.run_functions = false;
    })
    .await;
    depths_count_visible_and_delayed(&*t.stack.queue).await;
}

#[tokio::test]
async fn depths_in_process() {
    depths_count_visible_and_delayed(&converger_memory::MemQueue::new()).await;
}
