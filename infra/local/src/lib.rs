//! The local stack: the emulator, the resources, the functions and the APIs on one machine,
//! plus the project's test command.

pub mod bench;
pub mod demo;
pub mod emulator;
pub mod gateway;
pub mod inprocess;
pub mod receiver;
pub mod seed;
pub mod stack;

pub use stack::{Stack, StackOptions};
