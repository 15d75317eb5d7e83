-- SQL of the retention job (engram.autonomy.catalogue): what may be deleted once it is old.

-- name: prune_outbox
-- Delivered events older than $1, at most $2 per statement.
DELETE FROM outbox WHERE id IN (
    SELECT id FROM outbox WHERE dispatched_at IS NOT NULL AND dispatched_at < $1
    ORDER BY id LIMIT $2
)

-- name: prune_escalations
-- Escalations a person closed before $1.
DELETE FROM escalations WHERE acknowledged_at IS NOT NULL AND acknowledged_at < $1
