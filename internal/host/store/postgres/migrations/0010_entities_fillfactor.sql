-- 0010: every fact append rewrites its entity's row (version, fact_seq,
-- the state snapshot) but no indexed column. Room left on each page lets
-- the new row version stay on its page: a HOT update that touches none of
-- the entities' 17 indexes. Pages written from now on keep the room; rows
-- already stored move to such pages as they are next updated.
ALTER TABLE entities SET (fillfactor = 70);
