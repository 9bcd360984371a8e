//! People and keys: the web pages' users (operators and tenant users), listing tenants, and
//! rotating a tenant's API key. Users live in the tenants table (`pk = user#<realm>#<email>`),
//! beside the tenants, their key items and the sign-in counts (`pk = signin#...`, expiring).

use crate::error::StoreResult;
use crate::model::{Channel, Tenant};
use async_trait::async_trait;
use converger_core::web::{Realm, Role, SignInState};
use converger_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub realm: Realm,
    /// Lower-cased.
    pub email: String,
    pub role: Role,
    /// The tenant of a portal user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<TenantId>,
    /// argon2 PHC string.
    pub password_hash: String,
    pub created_at: Timestamp,
    /// Sessions issued before this instant (seconds since the epoch) are void: set when the
    /// user signs out (every session of the user ends) or the password changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_after: Option<i64>,
}

/// The item key of the sign-in count of an account from one source
/// (`core::net::client_source`): kept for any email asked about, known or not, so that a
/// failure costs the same for both.
pub fn sign_in_account_key(realm: Realm, email: &str, source: &str) -> String {
    format!(
        "signin#{}#{}#{source}",
        realm.as_str(),
        email.to_ascii_lowercase()
    )
}

/// The item key of the sign-in count of one source, at every account together.
pub fn sign_in_source_key(source: &str) -> String {
    format!("signin-source#{source}")
}

/// Most tenants, or channels of one tenant, a list returns.
pub const LIST_MAX: usize = 1000;

#[async_trait]
pub trait AccountStore: Send + Sync + 'static {
    /// Creates a user; `Conflict` if one with that email exists in the realm.
    async fn create_user(&self, user: &User) -> StoreResult<()>;
    async fn get_user(&self, realm: Realm, email: &str) -> StoreResult<Option<User>>;
    /// Replaces a user's password hash and ends the user's sessions; `false` if there is no
    /// such user.
    async fn set_password(&self, realm: Realm, email: &str, hash: &str) -> StoreResult<bool>;
    /// Ends every session of a user issued before `at_s` (seconds); `false` if there is no
    /// such user.
    async fn end_sessions(&self, realm: Realm, email: &str, at_s: i64) -> StoreResult<bool>;
    /// The sign-in count under `key` (`sign_in_account_key`, `sign_in_source_key`), read
    /// strongly consistent, with its revision (0 when there is none).
    async fn sign_in_count(&self, key: &str) -> StoreResult<(SignInState, u64)>;
    /// Writes the count under `key` if its revision is still `rev` (so that parallel attempts
    /// count one each), to be forgotten after `expires_s`; `false` if another write came first.
    async fn put_sign_in_count(
        &self,
        key: &str,
        rev: u64,
        state: &SignInState,
        expires_s: i64,
    ) -> StoreResult<bool>;
    /// Forgets the count under `key` (a success clears its account's count from its source).
    async fn clear_sign_in_count(&self, key: &str) -> StoreResult<()>;
    /// Every tenant (at most 1,000), by name.
    async fn list_tenants(&self) -> StoreResult<Vec<Tenant>>;
    /// Replaces a tenant's API key: the new key works at once and the old one stops within a
    /// second (the tenant API resolves a key again each second). `false` if no such tenant.
    async fn rotate_api_key(&self, tenant: &TenantId, new_hash: &str) -> StoreResult<bool>;
    /// A tenant's channels (at most 1,000), by name.
    async fn list_channels(&self, tenant: &TenantId) -> StoreResult<Vec<Channel>>;
}
