-- The quarantine desk (engram.memory.admin.quarantine).

-- name: quarantined
-- Heads held at ``sensitive`` by the PII check, in the order of the decisions that wrote them
-- (each version's audit ``seq``, drawn inside its write's transaction), after the cursor $1
-- and at or below the settled seq $3 (AuditLog.settled_seq: no write still committing has a
-- seq at or below it, so a later page skips none): the first $2 of them, and any other that
-- shares the last one's seq; ``more`` says whether others follow.
WITH held AS (
    SELECT {{record_columns}},
           (SELECT a.seq FROM librarian_audit a WHERE a.decision_id = m.gate_decision_id)
               AS decided_seq
    FROM memories m
    WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'
      AND status <> 'forgotten'
), after_cursor AS (
    SELECT * FROM held WHERE decided_seq > $1 AND decided_seq <= $3
), page_end AS (
    SELECT max(page.decided_seq) AS last_seq
    FROM (SELECT decided_seq FROM after_cursor ORDER BY decided_seq LIMIT $2) AS page
)
SELECT after_cursor.*,
       EXISTS (SELECT 1 FROM after_cursor WHERE decided_seq > page_end.last_seq) AS more
FROM after_cursor, page_end
WHERE after_cursor.decided_seq <= page_end.last_seq
ORDER BY after_cursor.decided_seq, after_cursor.id

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
