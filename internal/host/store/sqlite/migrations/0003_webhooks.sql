-- 0003: webhook delivery: the outbox (one row per delivery, inserted with its
-- webhook.triggered fact), paused configs and encrypted signing secrets.
-- Times are milliseconds since the epoch except sig_timestamp (Unix
-- seconds, as signed).
CREATE TABLE webhook_outbox (
    delivery_id        TEXT    PRIMARY KEY,
    tenant_id          TEXT    NOT NULL,
    triggered_fact_id  TEXT    NOT NULL,
    config_id          TEXT    NOT NULL,
    config_version     INTEGER NOT NULL,
    campaign_id        TEXT,
    endpoint           TEXT    NOT NULL,
    status             TEXT    NOT NULL CHECK (status IN ('pending', 'sent', 'dead')),
    attempt            INTEGER NOT NULL CHECK (attempt >= 1),
    max_attempts       INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout_seconds    INTEGER NOT NULL CHECK (timeout_seconds >= 1),
    sig_timestamp      INTEGER NOT NULL,
    payload            TEXT    NOT NULL,
    message            TEXT    NOT NULL DEFAULT '{}',
    next_attempt_at    INTEGER NOT NULL,
    claimed_until      INTEGER NOT NULL DEFAULT 0,
    claim_token        TEXT,
    attempt_started_at INTEGER NOT NULL DEFAULT 0,
    first_attempt_at   INTEGER NOT NULL DEFAULT 0,
    last_attempt_at    INTEGER NOT NULL DEFAULT 0,
    last_status_code   INTEGER NOT NULL DEFAULT 0,
    dead_letter        TEXT,
    dlq_message_id     TEXT,
    dead_at            INTEGER NOT NULL DEFAULT 0,
    replays            INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);

CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, delivery_id) WHERE status = 'pending';
CREATE INDEX webhook_outbox_dead ON webhook_outbox (tenant_id, delivery_id) WHERE status = 'dead';

CREATE TABLE webhook_paused (
    tenant_id   TEXT    NOT NULL,
    config_id   TEXT    NOT NULL,
    delivery_id TEXT,
    reason      TEXT    NOT NULL DEFAULT '',
    paused_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, config_id)
);

CREATE TABLE webhook_secrets (
    tenant_id  TEXT    NOT NULL,
    ref        TEXT    NOT NULL,
    ciphertext BLOB    NOT NULL,
    key_id     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (tenant_id, ref)
);
