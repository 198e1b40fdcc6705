-- 0001: initial schema. Times are milliseconds since the epoch (bigint); JSON
-- columns are jsonb. Empty optional strings are stored as NULL and read back
-- as "". Identifiers use the "C" collation so that ORDER BY id is byte order,
-- whatever the database's locale (and the same order as SQLite and Go).

-- Entities: the stored entity row of the domain manifest. Slots hold indexed
-- copies of entity fields; each slot has an index that also serves the
-- keyset order by id. fact_seq is the seq of the entity's last fact (the
-- length of its ledger), so appends need not look at the facts table.
CREATE TABLE entities (
    tenant_id  text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    type       text             NOT NULL,
    version    bigint           NOT NULL CHECK (version >= 1),
    fact_seq   bigint           NOT NULL DEFAULT 0 CHECK (fact_seq >= 0),
    data       jsonb            NOT NULL DEFAULT '{}',
    metadata   jsonb,
    state      jsonb,
    ix_s_1     text,
    ix_s_2     text,
    ix_s_3     text,
    ix_s_4     text,
    ix_s_5     text,
    ix_s_6     text,
    ix_s_7     text,
    ix_s_8     text,
    ix_s_9     text,
    ix_s_10    text,
    ix_n_1     double precision,
    ix_n_2     double precision,
    ix_n_3     double precision,
    ix_n_4     double precision,
    ix_n_5     double precision,
    created_at bigint           NOT NULL,
    updated_at bigint           NOT NULL,
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

-- Facts: the append-only log, never updated or deleted. position is the
-- gapless global position taken from fact_head. Entity-less facts have a
-- NULL entity_id (so the UNIQUE constraint does not apply to them) and seq 0.
-- There is deliberately no foreign key to entities: AppendFacts locks and
-- reads every entity it appends to in the same transaction, entities are
-- never deleted, and the per-row check would double the cost of the INSERT
-- that runs while the global fact_head lock is held.
CREATE TABLE facts (
    position    bigint           PRIMARY KEY CHECK (position >= 1),
    id          text COLLATE "C" NOT NULL UNIQUE,
    tenant_id   text COLLATE "C" NOT NULL,
    entity_id   text COLLATE "C",
    entity_type text,
    seq         bigint           NOT NULL,
    type        text             NOT NULL,
    subtype     text,
    source_id   text,
    trace_id    text,
    timestamp   bigint           NOT NULL,
    data        jsonb            NOT NULL DEFAULT '{}',
    created_at  bigint           NOT NULL,
    UNIQUE (tenant_id, entity_id, seq),
    CHECK ((entity_id IS NULL AND seq = 0) OR (entity_id IS NOT NULL AND seq >= 1))
);

-- The single-row counter behind facts.position: the last position handed
-- out. Every AppendFacts transaction locks this row first and moves it by
-- the number of facts it writes; the row lock is held until commit, so
-- appends are serialised, positions are gapless, and commit order is
-- position order across every process sharing the database.
CREATE TABLE fact_head (
    id       boolean PRIMARY KEY DEFAULT true CHECK (id),
    position bigint  NOT NULL CHECK (position >= 0)
);
INSERT INTO fact_head (id, position) VALUES (true, 0);

-- Configs: one row per immutable version. The latest version of a config is
-- the one whose superseded_at is NULL; version 1 always exists and its row
-- is the lock that serialises writers of the config.
CREATE TABLE configs (
    tenant_id     text COLLATE "C" NOT NULL,
    id            text COLLATE "C" NOT NULL,
    version       bigint           NOT NULL CHECK (version >= 1),
    type          text             NOT NULL,
    name          text,
    scope_type    text,
    scope_id      text,
    settings      jsonb            NOT NULL DEFAULT '{}',
    status        text             NOT NULL CHECK (status IN ('active', 'archived')),
    superseded_at bigint,
    effective_at  bigint           NOT NULL,
    created_at    bigint           NOT NULL,
    PRIMARY KEY (tenant_id, id, version)
);

CREATE UNIQUE INDEX configs_latest ON configs (tenant_id, id) WHERE superseded_at IS NULL;
CREATE INDEX configs_latest_type ON configs (type, status, tenant_id, id) WHERE superseded_at IS NULL;

-- API keys: only the SHA-256 of a key is stored.
CREATE TABLE api_keys (
    id         text COLLATE "C" PRIMARY KEY,
    tenant_id  text COLLATE "C" NOT NULL,
    mode       text             NOT NULL,
    name       text,
    prefix     text,
    hash       text             NOT NULL UNIQUE,
    created_at bigint           NOT NULL,
    revoked_at bigint
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);

-- Idempotency-Key records. A record is live while now < expires_at; an
-- in-flight record is abandoned once now >= locked_until.
CREATE TABLE idempotency (
    tenant_id    text   NOT NULL,
    scope        text   NOT NULL,
    key          text   NOT NULL,
    request_hash text,
    state        text   NOT NULL CHECK (state IN ('in_flight', 'done')),
    status_code  int    NOT NULL DEFAULT 0,
    body         bytea,
    headers      jsonb,
    locked_until bigint NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);

CREATE INDEX idempotency_expires ON idempotency (expires_at);

-- Positions of named stream consumers.
CREATE TABLE checkpoints (
    consumer   text   PRIMARY KEY,
    position   bigint NOT NULL,
    updated_at bigint NOT NULL
);
