-- The quarantine desk (engram.memory.admin.quarantine).

-- name: quarantined
-- Heads held at ``sensitive`` by the PII check, oldest first, after sequence cursor $1.
SELECT {{record_columns}}
FROM memories
WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'
  AND status <> 'forgotten' AND ingestion_time > $1
ORDER BY ingestion_time
LIMIT $2

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
