-- 0007: domain manifests installed through the admin API, layered over the
-- built-in one by every process sharing the database.
CREATE TABLE domain_layers (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    source     bytea  NOT NULL,
    sha256     text   NOT NULL,
    updated_at bigint NOT NULL
);
