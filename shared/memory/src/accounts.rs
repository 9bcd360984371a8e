//! The in-process backend of [`AccountStore`].

use super::*;
use converger_core::web::{Realm, SignInState};

#[async_trait]
impl AccountStore for MemStore {
    async fn create_user(&self, user: &User) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let key = user_key(user.realm, &user.email);
            if s.users.contains_key(&key) {
                return Err(StoreError::Conflict("user exists".into()));
            }
            s.users.insert(key, user.clone());
            Ok(())
        })?
    }

    async fn get_user(&self, realm: Realm, email: &str) -> StoreResult<Option<User>> {
        wait(&self.latency, |m| m.get).await;
        self.with(|s| s.users.get(&user_key(realm, email)).cloned())
    }

    async fn set_password(&self, realm: Realm, email: &str, hash: &str) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with_user(realm, email, |u| {
            u.password_hash = hash.to_owned();
            u.sessions_after = Some(converger_core::time::now_ms() / 1000);
        })
    }

    async fn end_sessions(&self, realm: Realm, email: &str, at_s: i64) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with_user(realm, email, |u| u.sessions_after = Some(at_s))
    }

    async fn sign_in_count(&self, key: &str) -> StoreResult<(SignInState, u64)> {
        wait(&self.latency, |m| m.get).await;
        let now_s = converger_core::time::now_ms() / 1000;
        self.with(|s| match s.sign_in_counts.get(key) {
            // Expired: forgotten, as DynamoDB's TTL would (eventually) forget it.
            Some((state, rev, expires)) if *expires >= now_s => (*state, *rev),
            Some((_, rev, _)) => (SignInState::default(), *rev),
            None => (SignInState::default(), 0),
        })
    }

    async fn put_sign_in_count(
        &self,
        key: &str,
        rev: u64,
        state: &SignInState,
        expires_s: i64,
    ) -> StoreResult<bool> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| {
            let current = s.sign_in_counts.get(key).map_or(0, |c| c.1);
            if current != rev {
                return false;
            }
            s.sign_in_counts
                .insert(key.to_owned(), (*state, rev + 1, expires_s));
            true
        })
    }

    async fn clear_sign_in_count(&self, key: &str) -> StoreResult<()> {
        wait(&self.latency, |m| m.write).await;
        self.with(|s| s.sign_in_counts.remove(key))?;
        Ok(())
    }

    async fn list_tenants(&self) -> StoreResult<Vec<Tenant>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let mut v: Vec<Tenant> = s.tenants.values().cloned().collect();
            v.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
            v.truncate(LIST_MAX);
            v
        })
    }

    async fn rotate_api_key(&self, tenant: &TenantId, new_hash: &str) -> StoreResult<bool> {
        wait(&self.latency, |m| m.transact).await;
        self.with(|s| {
            if !s.tenants.contains_key(tenant) {
                return Ok(false);
            }
            if s.keys.contains_key(new_hash) {
                return Err(StoreError::Conflict("key exists".into()));
            }
            if let Some(old) = s.tenant_keys.insert(tenant.clone(), new_hash.to_owned()) {
                s.keys.remove(&old);
            }
            s.keys.insert(new_hash.to_owned(), tenant.clone());
            Ok(true)
        })?
    }

    async fn list_channels(&self, tenant: &TenantId) -> StoreResult<Vec<Channel>> {
        wait(&self.latency, |m| m.query).await;
        self.with(|s| {
            let mut v: Vec<Channel> = s
                .channels
                .values()
                .filter(|c| &c.tenant_id == tenant && c.deleted_at.is_none())
                .cloned()
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
            v.truncate(LIST_MAX);
            v
        })
    }
}

impl MemStore {
    /// Changes an existing user; `false` if there is no such user.
    fn with_user(&self, realm: Realm, email: &str, f: impl FnOnce(&mut User)) -> StoreResult<bool> {
        self.with(|s| match s.users.get_mut(&user_key(realm, email)) {
            Some(u) => {
                f(u);
                true
            }
            None => false,
        })
    }
}
