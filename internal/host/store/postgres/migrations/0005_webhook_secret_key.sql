-- 0005: the one key that encrypts the database's webhook secrets, recorded
-- by the first secret written, so a process started with another key can
-- be refused (host/webhook). A database with secrets already takes the key
-- of its oldest one.
CREATE TABLE webhook_secret_key (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    key_id      text   NOT NULL,
    recorded_at bigint NOT NULL
);
INSERT INTO webhook_secret_key (key_id, recorded_at)
SELECT key_id, created_at FROM webhook_secrets ORDER BY created_at, tenant_id, ref LIMIT 1;
