-- 0001: initial schema. Times are milliseconds since the epoch; JSON is
-- stored as TEXT. Empty optional strings are stored as NULL.

-- Entities: the stored entity row of the domain manifest. Slots hold
-- indexed copies of entity fields; every slot has its own index that also
-- serves the keyset order by id.
CREATE TABLE entities (
    tenant_id  TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    data       TEXT    NOT NULL DEFAULT '{}',
    metadata   TEXT,
    state      TEXT,
    ix_s_1     TEXT,
    ix_s_2     TEXT,
    ix_s_3     TEXT,
    ix_s_4     TEXT,
    ix_s_5     TEXT,
    ix_s_6     TEXT,
    ix_s_7     TEXT,
    ix_s_8     TEXT,
    ix_s_9     TEXT,
    ix_s_10    TEXT,
    ix_n_1     REAL,
    ix_n_2     REAL,
    ix_n_3     REAL,
    ix_n_4     REAL,
    ix_n_5     REAL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX entities_type ON entities (tenant_id, type, id);
CREATE INDEX entities_ix_s_1 ON entities (tenant_id, type, ix_s_1, id);
CREATE INDEX entities_ix_s_2 ON entities (tenant_id, type, ix_s_2, id);
CREATE INDEX entities_ix_s_3 ON entities (tenant_id, type, ix_s_3, id);
CREATE INDEX entities_ix_s_4 ON entities (tenant_id, type, ix_s_4, id);
CREATE INDEX entities_ix_s_5 ON entities (tenant_id, type, ix_s_5, id);
CREATE INDEX entities_ix_s_6 ON entities (tenant_id, type, ix_s_6, id);
CREATE INDEX entities_ix_s_7 ON entities (tenant_id, type, ix_s_7, id);
CREATE INDEX entities_ix_s_8 ON entities (tenant_id, type, ix_s_8, id);
CREATE INDEX entities_ix_s_9 ON entities (tenant_id, type, ix_s_9, id);
CREATE INDEX entities_ix_s_10 ON entities (tenant_id, type, ix_s_10, id);
CREATE INDEX entities_ix_n_1 ON entities (tenant_id, type, ix_n_1, id);
CREATE INDEX entities_ix_n_2 ON entities (tenant_id, type, ix_n_2, id);
CREATE INDEX entities_ix_n_3 ON entities (tenant_id, type, ix_n_3, id);
CREATE INDEX entities_ix_n_4 ON entities (tenant_id, type, ix_n_4, id);
CREATE INDEX entities_ix_n_5 ON entities (tenant_id, type, ix_n_5, id);

-- Facts: the append-only log. position is the gapless global position
-- (the rowid), assigned from fact_position inside the write transaction.
-- Entity-less facts have a NULL entity_id and seq 0.
CREATE TABLE facts (
    position    INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    tenant_id   TEXT    NOT NULL,
    entity_id   TEXT,
    entity_type TEXT,
    seq         INTEGER NOT NULL,
    type        TEXT    NOT NULL,
    subtype     TEXT,
    source_id   TEXT,
    trace_id    TEXT,
    timestamp   INTEGER NOT NULL,
    data        TEXT    NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL,
    UNIQUE (tenant_id, entity_id, seq),
    FOREIGN KEY (tenant_id, entity_id) REFERENCES entities (tenant_id, id),
    CHECK ((entity_id IS NULL AND seq = 0) OR (entity_id IS NOT NULL AND seq >= 1))
);

-- The single-row counter behind facts.position. Incrementing it inside the
-- write transaction keeps positions gapless: a rolled back item or
-- transaction rolls the increment back too.
CREATE TABLE fact_position (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
);
INSERT INTO fact_position (id, last) VALUES (1, 0);

-- Configs: one row per immutable version. The latest version of a config
-- is the one whose superseded_at is NULL.
CREATE TABLE configs (
    tenant_id     TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    version       INTEGER NOT NULL CHECK (version >= 1),
    type          TEXT    NOT NULL,
    name          TEXT,
    scope_type    TEXT,
    scope_id      TEXT,
    settings      TEXT    NOT NULL DEFAULT '{}',
    status        TEXT    NOT NULL CHECK (status IN ('active', 'archived')),
    superseded_at INTEGER,
    effective_at  INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id, version)
);

CREATE UNIQUE INDEX configs_latest ON configs (tenant_id, id) WHERE superseded_at IS NULL;
CREATE INDEX configs_latest_type ON configs (type, status, tenant_id, id) WHERE superseded_at IS NULL;

-- API keys: only the SHA-256 of a key is stored.
CREATE TABLE api_keys (
    id         TEXT    PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    mode       TEXT    NOT NULL,
    name       TEXT,
    prefix     TEXT,
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);

-- Idempotency-Key records.
CREATE TABLE idempotency (
    tenant_id    TEXT    NOT NULL,
    scope        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT,
    state        TEXT    NOT NULL CHECK (state IN ('in_flight', 'done')),
    status_code  INTEGER NOT NULL DEFAULT 0,
    body         BLOB,
    headers      TEXT,
    locked_until INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);

CREATE INDEX idempotency_expires ON idempotency (expires_at);

-- Positions of named stream consumers.
CREATE TABLE checkpoints (
    consumer   TEXT    PRIMARY KEY,
    position   INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
