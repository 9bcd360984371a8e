//! Every AWS call Converger makes lives in this crate: DynamoDB items and their conditional
//! transitions, SQS queues and the EventBridge bus, named by the environment the template
//! sets. The pipeline sees them only through the ports in [`ports`].

pub mod accounts;
pub mod aws;
pub mod counter;
pub mod dynamo;
pub mod events;
pub mod flow;
pub mod handoff;
pub mod health;
pub mod memory;
pub mod model;
pub mod ports;
pub mod resources;
pub mod secrets;
pub mod sqs;

pub use accounts::*;
pub use flow::*;
pub use handoff::*;
pub use health::*;
pub use model::*;
pub use ports::*;
pub use resources::Resources;
