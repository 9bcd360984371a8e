//! The Lambda glue, in one place no use case imports: building a function's pipeline on the
//! AWS backend from its environment (`bootstrap`), the events each function takes
//! (`handlers`), the SQS partial-batch helper they share (`batch`), and what the HTTP
//! functions read from API Gateway (`http`). Every
//! `functions/*/src/main.rs` is a few lines over these.

pub mod batch;
pub mod bootstrap;
pub mod handlers;
pub mod http;
