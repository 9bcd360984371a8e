//! Items as they are stored. Index attributes (`tl_pk`, `cl_pk`, `upd_sk`) are derived from
//! the fields they index and written by the store only.

use converger_core::query::{Actor, Cursor};
use converger_core::{
    ActivityId, ChannelId, ChannelType, DeliveryId, DeliveryStatus, TenantId, Tier, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod activities;
pub mod capacity;
mod deliveries;
mod jobs;
mod listings;
mod replays;
mod tenants;

pub use activities::*;
pub use deliveries::*;
pub use jobs::*;
pub use listings::*;
pub use replays::*;
pub use tenants::*;
