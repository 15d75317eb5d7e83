-- SQL of the transactional outbox (engram.outbox), run by engram.infra.outbox.

-- name: insert_event
INSERT INTO outbox (event_type, aggregate_id, payload, decision_id)
VALUES ($1, $2, $3, $4)

-- name: pending_events
-- Marking events delivered needs no fsync: if a crash loses the mark, the events are delivered
-- again (at least once), and the changes they describe were already safe. set_config(..., true)
-- in FROM turns synchronous commit off for this transaction without a round trip of its own.
SELECT o.id, o.event_type, o.aggregate_id, o.payload::text AS payload, o.attempts
FROM outbox AS o, set_config('synchronous_commit', 'off', true) AS relaxed
WHERE o.dispatched_at IS NULL AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= now())
ORDER BY o.id LIMIT $1
FOR UPDATE OF o SKIP LOCKED

-- name: mark_delivered
-- Mark the delivered events and notify listeners of them in one statement.
WITH done AS (
    UPDATE outbox SET dispatched_at = now(), attempts = attempts + 1 WHERE id = ANY($1)
)
SELECT pg_notify($2, notice) FROM unnest($3::text[]) AS notice

-- name: count_attempt
-- A deferred event is due again after $2 * 2^attempts seconds, at most $3 (0016).
-- clock_timestamp(), not now(): deliveries inside this transaction may have taken long.
UPDATE outbox
SET attempts = attempts + 1,
    next_attempt_at = clock_timestamp() + make_interval(secs => least($2 * power(2, attempts), $3))
WHERE id = ANY($1)
RETURNING next_attempt_at - clock_timestamp() AS wait

-- name: next_retry
-- How long until the earliest deferred event is due (NULL: none is waiting).
SELECT min(next_attempt_at) - clock_timestamp() FROM outbox
WHERE dispatched_at IS NULL AND next_attempt_at > clock_timestamp()
