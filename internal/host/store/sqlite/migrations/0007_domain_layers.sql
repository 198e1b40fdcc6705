-- 0007: domain manifests installed through the admin API, layered over the
-- built-in one by every process sharing the database.
CREATE TABLE domain_layers (
    name       TEXT    NOT NULL PRIMARY KEY,
    source     BLOB    NOT NULL,
    sha256     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
