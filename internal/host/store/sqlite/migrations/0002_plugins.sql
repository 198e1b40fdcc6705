-- Plugin binaries and the version of each plugin every process runs.
CREATE TABLE plugin_versions (
    name       TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    wasm       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, sha256)
);

CREATE TABLE plugin_active (
    name       TEXT    NOT NULL PRIMARY KEY,
    sha256     TEXT    NOT NULL,
    previous   TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (name, sha256) REFERENCES plugin_versions (name, sha256)
);
