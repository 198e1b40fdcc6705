-- 0003: webhook delivery. The outbox holds one row per delivery, inserted in
-- the transaction of its webhook.triggered fact; workers lease due rows with
-- FOR UPDATE SKIP LOCKED and record each attempt's outcome (and its
-- webhook.sent fact) in one transaction. Times are milliseconds since the
-- epoch except sig_timestamp (Unix seconds, as signed).
CREATE TABLE webhook_outbox (
    delivery_id        text COLLATE "C" PRIMARY KEY,
    tenant_id          text COLLATE "C" NOT NULL,
    -- Unique through its webhook.triggered fact, inserted in the same
    -- transaction (facts.id is unique); no index of its own.
    triggered_fact_id  text COLLATE "C" NOT NULL,
    config_id          text COLLATE "C" NOT NULL,
    config_version     bigint           NOT NULL,
    campaign_id        text,
    endpoint           text             NOT NULL,
    status             text             NOT NULL CHECK (status IN ('pending', 'sent', 'dead')),
    attempt            int              NOT NULL CHECK (attempt >= 1),
    max_attempts       int              NOT NULL CHECK (max_attempts >= 1),
    timeout_seconds    int              NOT NULL CHECK (timeout_seconds >= 1),
    sig_timestamp      bigint           NOT NULL,
    -- The exact signed body: text, not jsonb, so no byte changes.
    payload            text             NOT NULL,
    message            jsonb            NOT NULL DEFAULT '{}',
    next_attempt_at    bigint           NOT NULL,
    claimed_until      bigint           NOT NULL DEFAULT 0,
    claim_token        text,
    attempt_started_at bigint           NOT NULL DEFAULT 0,
    first_attempt_at   bigint           NOT NULL DEFAULT 0,
    last_attempt_at    bigint           NOT NULL DEFAULT 0,
    last_status_code   int              NOT NULL DEFAULT 0,
    dead_letter        jsonb,
    dlq_message_id     text,
    dead_at            bigint           NOT NULL DEFAULT 0,
    replays            int              NOT NULL DEFAULT 0,
    created_at         bigint           NOT NULL,
    updated_at         bigint           NOT NULL
) WITH (fillfactor = 70, toast_tuple_target = 128);
-- A delivery's row changes several times (claim, outcome, retries) but its
-- payload never does. toast_tuple_target and EXTERNAL storage keep the
-- payload, settings and dead letter out of line, so each change rewrites
-- (and logs) a row of about 200 bytes, not the whole body; fillfactor
-- leaves room on each page, so a claim (which changes no indexed column)
-- is a HOT update that touches no index.
ALTER TABLE webhook_outbox ALTER COLUMN payload SET STORAGE EXTERNAL,
    ALTER COLUMN message SET STORAGE EXTERNAL,
    ALTER COLUMN dead_letter SET STORAGE EXTERNAL;

-- Due work: only pending rows are indexed, so the index stays as small as
-- the queue.
-- Every index costs each delivery's outcome an insert (the status changes,
-- so that update is never HOT): besides the key there are two, both
-- partial. The dead-letter listing and depth use the second.
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, delivery_id) WHERE status = 'pending';
CREATE INDEX webhook_outbox_dead ON webhook_outbox (tenant_id, delivery_id) WHERE status = 'dead';

-- Configs whose deliveries are paused (a 410 Gone) until an operator
-- resumes them.
CREATE TABLE webhook_paused (
    tenant_id   text COLLATE "C" NOT NULL,
    config_id   text COLLATE "C" NOT NULL,
    delivery_id text,
    reason      text   NOT NULL DEFAULT '',
    paused_at   bigint NOT NULL,
    PRIMARY KEY (tenant_id, config_id)
);

-- Signing secrets, encrypted (AES-GCM) by host/webhook; key_id names the
-- key that encrypted them.
CREATE TABLE webhook_secrets (
    tenant_id  text COLLATE "C" NOT NULL,
    ref        text COLLATE "C" NOT NULL,
    ciphertext bytea  NOT NULL,
    key_id     text   NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint,
    PRIMARY KEY (tenant_id, ref)
);
