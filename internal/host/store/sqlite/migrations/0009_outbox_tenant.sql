-- 0009: deliveries are listed by tenant in delivery id order; without this
-- index that listing walks the primary key through every tenant's rows.
CREATE INDEX webhook_outbox_tenant ON webhook_outbox (tenant_id, delivery_id);
