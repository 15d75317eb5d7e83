-- The quarantine desk (engram.memory.admin.quarantine).

-- name: quarantined
-- Heads held at ``sensitive`` by the PII check, oldest first, ingested after the cursor $1:
-- the first $2 of them, and every other one ingested at the same instant as the last of
-- those (the next page starts after that instant, so a head sharing it would be skipped).
SELECT {{record_columns}}
FROM memories
WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'
  AND status <> 'forgotten' AND ingestion_time > $1
  AND ingestion_time <= (
      SELECT max(page.ingestion_time)
      FROM (
          SELECT ingestion_time
          FROM memories
          WHERE superseded_by IS NULL AND access_level = 'sensitive' AND metadata ? 'pii'
            AND status <> 'forgotten' AND ingestion_time > $1
          ORDER BY ingestion_time
          LIMIT $2
      ) AS page
  )
ORDER BY ingestion_time, id

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
