-- 0008: operator console sessions, seen by every process sharing the
-- database. id is the SHA-256 of the cookie's token; key is the API key the
-- session acts with, sealed with the secret key.
CREATE TABLE console_sessions (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    tenant_id  text   NOT NULL,
    mode       text   NOT NULL,
    key_id     text   NOT NULL,
    key        bytea  NOT NULL,
    csrf       text   NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
