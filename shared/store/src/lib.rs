//! Every AWS call Converger makes lives in this crate: the DynamoDB backend of the ports
//! (`dynamo`, one module per table group, one helper for conditional writes), the SQS queues
//! (`sqs`), the EventBridge bus (`events`), websocket pushes through the management API
//! (`sockets`), email through SES v2 (`mail`), sends into tenants' own accounts as their roles
//! (`tenant_aws`), the payload bucket on S3 (`payloads`), Secrets Manager (`secrets`), and the names the template gives them
//! (`resources`). The use cases see them only through the ports in `converger-ports`.

pub mod aws;
pub mod counter;
pub mod dynamo;
pub mod events;
pub mod mail;
pub mod payloads;
pub mod resources;
pub mod secrets;
pub mod sockets;
pub mod spans;
pub mod sqs;
pub mod tenant_aws;

pub use mail::SesMailer;
pub use payloads::S3Payloads;
pub use resources::{EMAIL_CONFIGURATION_SET_ENV, MANAGEMENT_URL_ENV, Resources};
pub use sockets::ApiGatewaySockets;
pub use spans::OtlpSpans;
pub use tenant_aws::StsTenantAws;
