-- SQL of the admin queue of escalations (engram.escalations), run by engram.notifications.

-- name: queue
INSERT INTO escalations (kind, record_id, dedupe_key, payload)
VALUES ($1, $2, $3, $4)
ON CONFLICT (dedupe_key) DO NOTHING

-- name: open
SELECT id, kind, record_id, payload, created_at FROM escalations
WHERE acknowledged_at IS NULL ORDER BY created_at, id LIMIT $1

-- name: acknowledge
UPDATE escalations SET acknowledged_at = now(), acknowledged_by = $2
WHERE id = $1 AND acknowledged_at IS NULL RETURNING id
