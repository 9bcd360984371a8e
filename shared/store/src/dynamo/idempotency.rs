//! Idempotency keys: one item per tenant and key (`pk` `<tenant>#<key>`), expiring by TTL.

use super::*;
use converger_core::Timestamp;

#[async_trait]
impl IdempotencyStore for DynamoStore {
    async fn take_key(
        &self,
        tenant: &TenantId,
        key: &str,
        record: &KeyRecord,
        now: Timestamp,
    ) -> StoreResult<Option<KeyRecord>> {
        let pk = idempotency_key(tenant, key);
        let mut item = to_item(record)?;
        item.insert("pk".into(), s(pk.as_str()));
        // A free key, an expired record DynamoDB has not deleted yet, or a holder that ended
        // without an answer past its lock.
        for _ in 0..3 {
            let put = self
                .client
                .put_item()
                .table_name(&self.res.idempotency)
                .set_item(Some(item.clone()))
                .condition_expression(
                    "attribute_not_exists(pk) OR expires_at <= :now_s \
                     OR (attribute_not_exists(#status) AND locked_until < :now)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":now_s", n(now.ms() / 1000))
                .expression_attribute_values(":now", n(now.ms()))
                .send()
                .await;
            match put {
                Ok(_) => return Ok(None),
                Err(e) if is_conditional(&e) => {}
                Err(e) => return Err(sdk_err(e)),
            }
            // Held: by whom. Freed in between, it is tried again.
            if let Some(held) = self.get_key(tenant, key).await? {
                return Ok(Some(held));
            }
        }
        Err(StoreError::Conflict(
            "the idempotency key kept changing hands".into(),
        ))
    }

    async fn get_key(&self, tenant: &TenantId, key: &str) -> StoreResult<Option<KeyRecord>> {
        let Some(mut item) = self
            .get_raw(&self.res.idempotency, "pk", &idempotency_key(tenant, key))
            .await?
        else {
            return Ok(None);
        };
        item.remove("pk");
        let r: KeyRecord = from_item(item)?;
        Ok((!converger_ports::expired(Some(r.expires_at), now_ms())).then_some(r))
    }

    async fn answer_key(
        &self,
        tenant: &TenantId,
        key: &str,
        fingerprint: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        let r = Update::new()
            .set("status", n(status))
            .set("body", s(body))
            .when_eq("fingerprint", s(fingerprint))
            .apply(
                self.client
                    .update_item()
                    .table_name(&self.res.idempotency)
                    .key("pk", s(idempotency_key(tenant, key))),
            )
            .send()
            .await;
        match r {
            Ok(_) => Ok(()),
            // Taken over by another request after this one's lock ended: its answer counts.
            Err(e) if is_update_conditional(&e) => Ok(()),
            Err(e) => Err(sdk_err(e)),
        }
    }

    async fn free_key(&self, tenant: &TenantId, key: &str, fingerprint: &str) -> StoreResult<()> {
        let r = self
            .client
            .delete_item()
            .table_name(&self.res.idempotency)
            .key("pk", s(idempotency_key(tenant, key)))
            .condition_expression("fingerprint = :f AND attribute_not_exists(#status)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":f", s(fingerprint))
            .send()
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Ok(()),
            Err(e) => Err(sdk_err(e)),
        }
    }
}
