-- 0006: GET /v1/facts lists one tenant's facts in position order, filtered
-- by type (and subtype), source_id, entity_id or a time range (ListFacts).
-- entity_id is served by the (tenant_id, entity_id, seq) unique index.
CREATE INDEX facts_tenant_position ON facts (tenant_id, position);
CREATE INDEX facts_tenant_type ON facts (tenant_id, type, subtype, position);
CREATE INDEX facts_tenant_source ON facts (tenant_id, source_id, position) WHERE source_id IS NOT NULL;
CREATE INDEX facts_tenant_time ON facts (tenant_id, timestamp);
