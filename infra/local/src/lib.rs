//! The project's runner: the test command and its checks, the chaos suite, the API's fuzzing,
//! the release check, the demo and the clients' generation, over the local stack of
//! `converger-stack` (re-exported here by module, so both read as one). The benchmarks are
//! `converger-bench`; the runner's `bench` command starts them.

pub mod chaos;
pub mod clients;
pub mod demo;
pub mod fuzz;
pub mod release;

pub use converger_stack::{
    Backend, Every, LOCAL_ACCOUNT, QueueSettings, Stack, StackOptions, bus_tap, capacity, cfn,
    emulator, gateway, iam, inprocess, pki, rabbitmq, receiver, schedule, stack, tables, throttle,
};
