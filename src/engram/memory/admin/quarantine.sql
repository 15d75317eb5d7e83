-- The quarantine desk (engram.memory.admin.quarantine).

-- name: quarantined
-- Heads held at ``sensitive`` by the PII check, in the order of the decisions that wrote them
-- (each version's audit ``seq``, drawn inside its write's transaction), after the cursor $1
-- and at or below the settled seq $3 (AuditLog.settled_seq: no write still committing has a
-- seq at or below it, so a later page skips none): the first $2 of them, and any other that
-- shares the last one's seq; ``more`` says whether others follow.
WITH held AS (
    -- narrow: only the page's rows are read whole, at the end
    SELECT m.id AS held_id,
           (SELECT a.seq FROM librarian_audit a WHERE a.decision_id = m.gate_decision_id)
               AS decided_seq
    FROM memories m
    WHERE m.superseded_by IS NULL AND m.access_level = 'sensitive' AND m.metadata ? 'pii'
      AND m.status <> 'forgotten'
), after_cursor AS (
    SELECT held_id, decided_seq FROM held WHERE decided_seq > $1 AND decided_seq <= $3
), page_end AS (
    SELECT max(page.decided_seq) AS last_seq
    FROM (SELECT decided_seq FROM after_cursor ORDER BY decided_seq LIMIT $2) AS page
), beyond AS (
    SELECT EXISTS (
        SELECT 1 FROM after_cursor, page_end WHERE after_cursor.decided_seq > page_end.last_seq
    ) AS more
)
SELECT {{record_columns}}, page.decided_seq, beyond.more
FROM (
    SELECT held_id, decided_seq
    FROM after_cursor, page_end
    WHERE after_cursor.decided_seq <= page_end.last_seq
) AS page
JOIN memories ON memories.id = page.held_id
CROSS JOIN beyond
ORDER BY page.decided_seq, memories.id

-- name: release
UPDATE memories SET access_level = $2, updated_at = now()
WHERE id = $1
RETURNING {{record_columns}}

-- name: flagged
-- Every record with a PII finding in any of its versions (quarantined now or released since).
SELECT DISTINCT record_id FROM memories WHERE metadata ? 'pii'

-- name: is_flagged
-- Whether record $1 has a PII finding in any of its versions.
SELECT EXISTS (SELECT 1 FROM memories WHERE record_id = $1 AND metadata ? 'pii')
