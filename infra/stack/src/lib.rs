//! The local stack: the emulator, the template deployed on it (with the IAM check and the
//! capacity proxy), the in-process backend, the functions and the APIs on one machine, and
//! the receivers tests and benchmarks send to. The runner, the test command and the
//! benchmarks are `converger-local`'s.

pub mod bus_tap;
pub mod capacity;
pub mod cfn;
pub mod emulator;
pub mod gateway;
pub mod iam;
pub mod inprocess;
pub mod pki;
pub mod rabbitmq;
pub mod receiver;
pub mod schedule;
pub mod stack;
pub mod tables;
pub mod throttle;

pub use stack::{Backend, Every, QueueSettings, Stack, StackOptions};

/// The emulator's account (moto's default): the local stack's own, as `PLATFORM_ACCOUNT_ID`
/// (the template's `AWS::AccountId`) says on AWS.
pub const LOCAL_ACCOUNT: &str = "123456789012";

/// A benchmark stack's watch delay (`PipelineConfig::watch_delay_s`): first tries' watch
/// copies come a second later, and a benchmark's case waits for them.
pub const BENCH_WATCH_DELAY_S: u32 = 1;
