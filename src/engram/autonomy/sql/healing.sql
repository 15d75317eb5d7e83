-- SQL of the self-healing jobs (engram.autonomy.healing). Reads and bookkeeping only: every
-- repair of a record is a write through the Gate.

-- name: unscreened_heads
-- Live heads not read by detector version $1 (NULL: screened before versions were recorded,
-- a restatement the Gate did not screen, or a self-healing change its run has not confirmed),
-- at most $2, in no particular order: each batch
-- is marked read, so the next one finds the rest without sorting them all. The OR of ranges
-- lets the partial index answer it.
SELECT {{record_columns}}
FROM memories
WHERE superseded_by IS NULL AND status <> 'forgotten'
  AND (screened_with IS NULL OR screened_with < $1 OR screened_with > $1)
LIMIT $2

-- name: released_records
-- The records of $1 an admin released from quarantine (an audited RELEASE).
SELECT DISTINCT record_id FROM librarian_audit
WHERE action = 'RELEASE' AND record_id = ANY($1::uuid[])

-- name: mark_screened
UPDATE memories SET screened_with = $2 WHERE id = ANY($1::uuid[])

-- name: derived_heads
-- The live heads of every record derived (derived_from, transitively) from the versions $2 of
-- record $1 (NULL: any of its versions): consolidated summaries of it, and records citing it
-- as evidence. Past the first step every version of a derived record counts.
WITH RECURSIVE derived(rid) AS (
    SELECT s.record_id
    FROM memories v
    JOIN memory_edges e ON e.target_id = v.id AND e.kind = 'derived_from'
    JOIN memories s ON s.id = e.source_id
    WHERE v.record_id = $1 AND ($2::uuid[] IS NULL OR v.id = ANY($2::uuid[]))
    UNION
    SELECT s.record_id
    FROM derived d
    JOIN memories v ON v.record_id = d.rid
    JOIN memory_edges e ON e.target_id = v.id AND e.kind = 'derived_from'
    JOIN memories s ON s.id = e.source_id
)
SELECT {{record_columns}}
FROM memories h
JOIN derived d ON d.rid = h.record_id
WHERE h.superseded_by IS NULL AND h.status <> 'forgotten' AND h.record_id <> $1
ORDER BY h.record_id
