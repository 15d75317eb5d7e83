-- SQL of the admin queue of escalations (engram.escalations), run by engram.notifications.

-- name: queue
INSERT INTO escalations (kind, record_id, dedupe_key, payload)
VALUES ($1, $2, $3, $4)
ON CONFLICT (dedupe_key) DO NOTHING

-- name: open
SELECT id, kind, record_id, payload, created_at FROM escalations
WHERE acknowledged_at IS NULL ORDER BY created_at, id LIMIT $1

-- name: acknowledge
-- $3 is the instant of this acknowledgement, chosen once by the caller: a retry after a
-- commit whose acknowledgement was lost finds the row closed at that instant by that admin.
UPDATE escalations SET acknowledged_at = $3, acknowledged_by = $2
WHERE id = $1
  AND (acknowledged_at IS NULL OR (acknowledged_at = $3 AND acknowledged_by = $2))
RETURNING id
