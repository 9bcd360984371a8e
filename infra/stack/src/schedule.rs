//! The local stand-in for EventBridge schedules: a task that runs a function at a period.

use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Runs `f` every `period` (the first time one period after the start) until `stop`.
pub fn every<F, Fut>(period: Duration, stop: watch::Receiver<bool>, f: F) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    every_after(period, period, stop, f)
}

/// Runs `f` after `first`, then every `period`, until `stop`.
pub fn every_after<F, Fut>(
    first: Duration,
    period: Duration,
    mut stop: watch::Receiver<bool>,
    f: F,
) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    // A run in progress (the sweeper watches for most of its minute) ends
                    // with the stack.
                    tokio::select! {
                        () = f() => {}
                        _ = stop.changed() => break,
                    }
                }
                _ = stop.changed() => break,
            }
        }
    })
}
