-- 0004: compute-mode projection queries read one tenant's facts of some
-- types within a time range (ScanFacts).
CREATE INDEX facts_scan ON facts (tenant_id, type, timestamp);
