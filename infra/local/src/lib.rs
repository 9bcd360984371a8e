//! The local stack: the emulator, the template deployed on it, the functions and the APIs on
//! one machine, plus the project's test command.

pub mod bench;
pub mod bus_tap;
pub mod capacity;
pub mod cfn;
pub mod chaos;
pub mod clients;
pub mod demo;
pub mod emulator;
pub mod fuzz;
pub mod gateway;
pub mod iam;
pub mod inprocess;
pub mod pki;
pub mod rabbitmq;
pub mod receiver;
pub mod release;
pub mod schedule;
pub mod seed;
pub mod stack;
pub mod tables;
pub mod throttle;

pub use stack::{Backend, Every, QueueSettings, Stack, StackOptions};

/// The emulator's account (moto's default): the local stack's own, as `PLATFORM_ACCOUNT_ID`
/// (the template's `AWS::AccountId`) says on AWS.
pub const LOCAL_ACCOUNT: &str = "123456789012";
