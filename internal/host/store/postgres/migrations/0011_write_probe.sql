-- 0011: /health checks that the database takes and confirms a write
-- (writeprobe.go). A commit waits for a synchronous standby only when its
-- transaction wrote WAL, so the probe updates a row: this table's one
-- row, shared by every process, at most once a second each.
CREATE TABLE write_probe (
    id integer PRIMARY KEY CHECK (id = 1),
    probed_at timestamptz NOT NULL
);
INSERT INTO write_probe (id, probed_at) VALUES (1, now());
