-- Plugin binaries and the version of each plugin every process runs.
CREATE TABLE plugin_versions (
    name       text COLLATE "C" NOT NULL,
    sha256     text   NOT NULL,
    version    text   NOT NULL,
    wasm       bytea  NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (name, sha256)
);

CREATE TABLE plugin_active (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    sha256     text   NOT NULL,
    previous   text   NOT NULL DEFAULT '',
    updated_at bigint NOT NULL,
    FOREIGN KEY (name, sha256) REFERENCES plugin_versions (name, sha256)
);
