//! Every integration test, in one binary (one link, one process per test under nextest).
//! The use-case scenarios run on the in-process backend; the tests of AWS code paths
//! (the store conformance suite's DynamoDB half, the queues, the bus, the template, IAM and
//! one scenario of each use case) run on the template deployed on the emulator. The list is
//! in `docs/architecture/local.md` ("Tests").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapters;
mod api;
mod api_client;
mod aws_channels;
mod aws_destinations;
mod batch;
mod bench;
mod browser;
mod bulk;
mod channels;
mod charts;
mod checks;
mod clients;
mod clock;
mod deploy_checks;
mod e2e;
mod egress;
mod email;
mod event_types;
mod events;
mod filters;
mod flow;
mod health;
mod idempotency;
mod infra;
mod lanes;
mod limits;
mod logs;
mod metrics;
mod middleware;
mod mtls;
mod oauth2;
mod payloads;
mod queue;
mod rabbitmq;
mod replay;
mod retries;
mod share;
mod slack;
mod slots;
mod store;
mod stream;
mod trace;
mod usage_fold;
mod web;
mod window;
