-- SQL of the consolidation watch (engram.memory.consolidation.watch): the counts the event
-- and pressure triggers and the backlog health check look at, per access level. Reads only.

-- name: fast_path_count
SELECT access_level, count(*) AS n FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
GROUP BY access_level

-- name: backlog
-- Active fast-path heads whose relevance has decayed below $1: what consolidation owes.
SELECT count(*) FROM memories
WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
  AND decay_score < $1

-- name: fresh_relations
-- For each access level $1[i]: its active fast-path heads ingested after $2[i] (the newest
-- $3 of them), each paired with every record of the same level a relates_to edge links it to
-- (either direction) whose head is an active fast-path record too. A fresh record without
-- such a link pairs with itself. Levels never mix: an edge to a record of another level
-- does not join a group.
WITH fresh AS (
    SELECT f.id, f.record_id, f.access_level
    FROM unnest($1::text[], $2::timestamptz[]) AS m(level, since)
    CROSS JOIN LATERAL (
        SELECT id, record_id, access_level FROM memories
        WHERE superseded_by IS NULL AND status = 'active' AND consolidation_path = 'fast'
          AND access_level = m.level AND ingestion_time > m.since
        ORDER BY ingestion_time DESC
        LIMIT $3
    ) f
), linked AS (
    SELECT f.record_id AS a, f.access_level, e.target_id AS other
    FROM fresh f JOIN memory_edges e ON e.source_id = f.id AND e.kind = 'relates_to'
    UNION ALL
    SELECT f.record_id, f.access_level, e.source_id
    FROM fresh f JOIN memory_edges e ON e.target_id = f.id AND e.kind = 'relates_to'
)
SELECT l.a, h.record_id AS b, l.access_level
FROM linked l
JOIN memories v ON v.id = l.other
JOIN memories h ON h.record_id = v.record_id AND h.superseded_by IS NULL
WHERE h.status = 'active' AND h.consolidation_path = 'fast' AND h.access_level = l.access_level
UNION
SELECT record_id, record_id, access_level FROM fresh

-- name: routed_since
-- Per access level $1[i]: records Layer 2 flagged for consolidation (route_to_consolidation)
-- in agents' decisions after $2[i] that are still active fast-path heads of that level. The
-- kernel's own writes (conflict resolutions, self-healing, consolidation) restate records
-- and do not count. Levels without one are left out.
SELECT h.access_level, count(DISTINCT a.record_id) AS n
FROM librarian_audit a
JOIN memories h ON h.record_id = a.record_id AND h.superseded_by IS NULL
JOIN unnest($1::text[], $2::timestamptz[]) AS m(level, since) ON m.level = h.access_level
WHERE a.occurred_at > (SELECT min(s) FROM unnest($2::timestamptz[]) AS s)
  AND a.occurred_at > m.since
  AND a.decision = 'approved' AND a.decision_type = 'external'
  AND (a.layer2_decision::jsonb ->> 'route_to_consolidation')::boolean
  AND h.status = 'active' AND h.consolidation_path = 'fast'
GROUP BY h.access_level

-- name: horizon
-- The latest instant a pass starting now may take as looked at: the database's own clock, or,
-- if earlier, the start of the oldest transaction still open (a record it writes carries that
-- instant as its ingestion time but shows only when it commits, maybe after the pass read),
-- less a microsecond (the fresh records are those ingested strictly after a mark). Only the
-- sessions of this role write records: another role's long transaction (a backup, a vacuum)
-- does not hold the marks back.
SELECT least(statement_timestamp(), min(xact_start)) - interval '1 microsecond'
FROM pg_stat_activity
WHERE datname = current_database() AND usename = current_user
  AND backend_type = 'client backend' AND xact_start IS NOT NULL

-- name: event_marks
-- The instant up to which each access level's event-driven passes have looked.
SELECT access_level, passed_at FROM consolidation_marks

-- name: set_event_marks
-- The event-driven passes of each level $1[i] looked up to $2[i] (never moved back).
INSERT INTO consolidation_marks (access_level, passed_at)
SELECT * FROM unnest($1::text[], $2::timestamptz[])
ON CONFLICT (access_level) DO UPDATE
SET passed_at = greatest(consolidation_marks.passed_at, excluded.passed_at)
