-- SQL of the consolidation watch (engram.memory.consolidation.watch): the counts the event
-- and pressure triggers and the backlog health check look at. Reads only.

-- name: fast_path_count
SELECT count(*) FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'

-- name: backlog
-- Active fast-path heads whose relevance has decayed below $1: what consolidation owes.
SELECT count(*) FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
  AND decay_score < $1

-- name: fresh_relations
-- Active fast-path heads ingested after $1 (the newest $2 of them), each paired with every
-- record a relates_to edge links it to (either direction) whose head is an active fast-path
-- record too. A fresh record without such a link pairs with itself.
WITH fresh AS (
    SELECT id, record_id FROM memories
    WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
      AND ingestion_time > $1
    ORDER BY ingestion_time DESC
    LIMIT $2
), linked AS (
    SELECT f.record_id AS a, e.target_id AS other
    FROM fresh f JOIN memory_edges e ON e.source_id = f.id AND e.kind = 'relates_to'
    UNION ALL
    SELECT f.record_id, e.source_id
    FROM fresh f JOIN memory_edges e ON e.target_id = f.id AND e.kind = 'relates_to'
)
SELECT l.a, h.record_id AS b
FROM linked l
JOIN memories v ON v.id = l.other
JOIN memories h ON h.record_id = v.record_id AND h.superseded_by IS NULL
WHERE h.status = 'active' AND h.consolidation_path = 'fast'
UNION
SELECT record_id, record_id FROM fresh

-- name: routed_since
-- Records Layer 2 flagged for consolidation (route_to_consolidation) in agents' decisions
-- after $1 that are still active fast-path heads. The kernel's own writes (conflict
-- resolutions, self-healing, consolidation) restate records and do not count.
SELECT count(DISTINCT a.record_id)
FROM librarian_audit a
JOIN memories h ON h.record_id = a.record_id AND h.superseded_by IS NULL
WHERE a.occurred_at > $1 AND a.decision = 'approved' AND a.decision_type = 'external'
  AND (a.layer2_decision::jsonb ->> 'route_to_consolidation')::boolean
  AND h.status = 'active' AND h.consolidation_path = 'fast'
