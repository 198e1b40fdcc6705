-- 0005: the one key that encrypts the database's webhook secrets, recorded
-- by the first secret written, so a process started with another key can
-- be refused (host/webhook). A database with secrets already takes the key
-- of its oldest one.
CREATE TABLE webhook_secret_key (
    only_row    INTEGER PRIMARY KEY CHECK (only_row = 1),
    key_id      TEXT    NOT NULL,
    recorded_at INTEGER NOT NULL
);
INSERT INTO webhook_secret_key (only_row, key_id, recorded_at)
SELECT 1, key_id, created_at FROM webhook_secrets ORDER BY created_at, tenant_id, ref LIMIT 1;
