-- 0008: operator console sessions, seen by every process sharing the
-- database. id is the SHA-256 of the cookie's token; key is the API key the
-- session acts with, sealed with the secret key.
CREATE TABLE console_sessions (
    id         TEXT    NOT NULL PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    mode       TEXT    NOT NULL,
    key_id     TEXT    NOT NULL,
    key        BLOB    NOT NULL,
    csrf       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
