//! The use cases over the in-process backend alone: no stack, no receiver, no emulator. Each
//! test builds a pipeline on fresh in-memory tables and queues and drives one use case
//! through its type, reading the outcome from the store and the queues.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chain;
mod channels;
mod clock;
mod common;
mod events;
mod fold;
mod health;
mod intake;
mod lanes;
mod middleware;
mod payloads;
mod shards;
mod stream;
mod usage;
