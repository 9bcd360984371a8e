//! The DynamoDB backend of [`AccountStore`]: users, key items and sign-in counts in the
//! tenants table.

use super::*;
use aws_sdk_dynamodb::types::{Delete, Update};
use converger_core::web::{Realm, SignInState};

#[async_trait]
impl AccountStore for DynamoStore {
    async fn create_user(&self, user: &User) -> StoreResult<()> {
        let mut item = to_item(user)?;
        item.insert("pk".into(), s(user_key(user.realm, &user.email)));
        self.put_new(&self.res.tenants, "pk", item).await
    }

    async fn get_user(&self, realm: Realm, email: &str) -> StoreResult<Option<User>> {
        self.get(&self.res.tenants, "pk", &user_key(realm, email))
            .await
    }

    async fn set_password(&self, realm: Realm, email: &str, hash: &str) -> StoreResult<bool> {
        self.update_user(
            realm,
            email,
            super::Update::new()
                .set("password_hash", s(hash))
                .set("sessions_after", n(now_ms() / 1000)),
        )
        .await
    }

    async fn end_sessions(&self, realm: Realm, email: &str, at_s: i64) -> StoreResult<bool> {
        self.update_user(
            realm,
            email,
            super::Update::new().set("sessions_after", n(at_s)),
        )
        .await
    }

    async fn sign_in_count(&self, key: &str) -> StoreResult<(SignInState, u64)> {
        #[derive(serde::Deserialize)]
        struct Count {
            #[serde(default)]
            failures: u32,
            since: Option<i64>,
            locked_until: Option<i64>,
            rev: u64,
        }
        let c: Option<Count> = self.get(&self.res.tenants, "pk", key).await?;
        Ok(c.map_or((SignInState::default(), 0), |c| {
            let state = SignInState {
                failures: c.failures,
                since: c.since,
                locked_until: c.locked_until,
            };
            (state, c.rev)
        }))
    }

    async fn put_sign_in_count(
        &self,
        key: &str,
        rev: u64,
        state: &SignInState,
        expires_s: i64,
    ) -> StoreResult<bool> {
        let mut item = to_item(state)?;
        item.insert("pk".into(), s(key));
        item.insert("rev".into(), n(rev + 1));
        item.insert("expires_at".into(), n(expires_s));
        let put = self
            .client
            .put_item()
            .table_name(&self.res.tenants)
            .set_item(Some(item));
        let put = if rev == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("rev = :rev")
                .expression_attribute_values(":rev", n(rev))
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn clear_sign_in_count(&self, key: &str) -> StoreResult<()> {
        self.client
            .delete_item()
            .table_name(&self.res.tenants)
            .key("pk", s(key))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn list_tenants(&self) -> StoreResult<Vec<Tenant>> {
        let pages = self
            .client
            .scan()
            .table_name(&self.res.tenants)
            // Tenant items only, not their key or user items.
            .filter_expression("attribute_exists(tier) AND attribute_exists(#n)")
            .expression_attribute_names("#n", "name")
            .into_paginator()
            .items()
            .send();
        let mut out: Vec<Tenant> = first_items(pages).await?;
        out.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    async fn rotate_api_key(&self, tenant: &TenantId, new_hash: &str) -> StoreResult<bool> {
        let out = self
            .client
            .get_item()
            .table_name(&self.res.tenants)
            .key("pk", s(tenant.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        let Some(item) = out.item else {
            return Ok(false);
        };
        let old = item
            .get("api_key_hash")
            .and_then(|v| v.as_s().ok())
            .cloned();
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::unreadable(e);
        let put_key = Put::builder()
            .table_name(&self.res.tenants)
            .item("pk", s(api_key_key(new_hash)))
            .item("tenant_id", s(tenant.as_str()))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build)?;
        let u = super::Update::new().set("api_key_hash", s(new_hash));
        let u = match &old {
            Some(h) => u.when_eq("api_key_hash", s(h.as_str())),
            None => u.when_exists("pk").when_absent("api_key_hash"),
        };
        let update = u.apply_to_transaction(
            Update::builder()
                .table_name(&self.res.tenants)
                .key("pk", s(tenant.as_str())),
        );
        let mut tx = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_key).build())
            .transact_items(
                TransactWriteItem::builder()
                    .update(update.build().map_err(build)?)
                    .build(),
            );
        if let Some(h) = &old {
            tx = tx.transact_items(
                TransactWriteItem::builder()
                    .delete(
                        Delete::builder()
                            .table_name(&self.res.tenants)
                            .key("pk", s(api_key_key(h)))
                            .build()
                            .map_err(build)?,
                    )
                    .build(),
            );
        }
        let _serial = self.tx_guard().await;
        tx.send().await.map_err(sdk_err)?;
        Ok(true)
    }

    async fn list_channels(&self, tenant: &TenantId) -> StoreResult<Vec<Channel>> {
        let pages = self
            .client
            .query()
            .table_name(&self.res.channels)
            .index_name("by_tenant")
            .key_condition_expression("tenant_id = :t")
            .filter_expression("attribute_not_exists(deleted_at)")
            .expression_attribute_values(":t", s(tenant.as_str()))
            .into_paginator()
            .items()
            .send();
        let mut out: Vec<Channel> = first_items(pages).await?;
        out.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        Ok(out)
    }
}

/// The first [`LIST_MAX`] items of a paginated scan or query, decoded.
async fn first_items<T, E, R>(
    mut pages: aws_smithy_async::future::pagination_stream::PaginationStream<
        Result<Item, SdkError<E, R>>,
    >,
) -> StoreResult<Vec<T>>
where
    T: DeserializeOwned,
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let mut out = Vec::new();
    while out.len() < LIST_MAX
        && let Some(item) = pages.try_next().await.map_err(sdk_err)?
    {
        out.push(from_item(item)?);
    }
    Ok(out)
}

impl DynamoStore {
    /// Updates an existing user item; `false` if there is no such user.
    async fn update_user(&self, realm: Realm, email: &str, u: super::Update) -> StoreResult<bool> {
        let req = u.when_exists("pk").apply(
            self.client
                .update_item()
                .table_name(&self.res.tenants)
                .key("pk", s(user_key(realm, email))),
        );
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => Ok(false),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
