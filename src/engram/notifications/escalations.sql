-- SQL of the admin queue of escalations (engram.escalations), run by engram.notifications.

-- name: queue
-- $5: a webhook is configured, so the row is due to be sent at once (migration 0021). A row
-- queued again (the outbox delivers at least once) keeps its state, unless it was never
-- tried: queued before 0021, or while no webhook was configured.
INSERT INTO escalations (kind, record_id, dedupe_key, payload, webhook_due_at)
VALUES ($1, $2, $3, $4, CASE WHEN $5::boolean THEN now() END)
ON CONFLICT (dedupe_key) DO UPDATE SET webhook_due_at = now()
WHERE $5::boolean
  AND escalations.webhook_due_at IS NULL
  AND escalations.webhook_sent_at IS NULL
  AND escalations.webhook_attempts = 0

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

-- name: webhook_claim
-- Take the row due for the webhook longest, and hold it for a lease of $1 seconds: another
-- relay skips it meanwhile, and a relay killed mid-send leaves it due when the lease ends.
-- The lease's end (``lease``) names this claim: a relay records a failure or hands the row
-- back only while the row still carries it, so a relay whose lease ran out mid-send (and
-- whose row another relay took since) leaves the other relay's state alone.
UPDATE escalations AS e
SET webhook_due_at = clock_timestamp() + make_interval(secs => $1)
FROM (
    SELECT id FROM escalations
    WHERE webhook_due_at <= clock_timestamp()
    ORDER BY webhook_due_at, id LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS due
WHERE e.id = due.id
RETURNING e.id, e.kind, e.record_id, e.payload, e.webhook_attempts, e.webhook_due_at AS lease

-- name: webhook_sent
-- The receiver accepted the body: true whoever holds the row now, so not bound to the lease
-- (a relay holding it since finds its own failure or release no longer applies).
UPDATE escalations SET webhook_due_at = NULL, webhook_sent_at = clock_timestamp()
WHERE id = $1

-- name: webhook_failed
-- One more failed send: due again after $2 * 2^attempts seconds (at most $3), or, with $4,
-- given up (due NULL, the attempts kept); only while the row carries the claim's lease $5
-- (no row returned: another relay took it since, or it was sent).
UPDATE escalations
SET webhook_attempts = webhook_attempts + 1,
    webhook_due_at = CASE WHEN $4::boolean THEN NULL
        ELSE clock_timestamp() + make_interval(secs => least($2 * power(2, webhook_attempts), $3))
    END
WHERE id = $1 AND webhook_due_at = $5
RETURNING webhook_attempts

-- name: webhook_release
-- A row taken and not sent (the relay stopped mid-send): due again at once, its attempts
-- unchanged; only while it carries the claim's lease $2.
UPDATE escalations SET webhook_due_at = clock_timestamp()
WHERE id = $1 AND webhook_due_at = $2 AND webhook_sent_at IS NULL

-- name: webhook_next
-- Seconds until the next row is due for the webhook (NULL: none is waiting).
SELECT extract(epoch FROM min(webhook_due_at) - clock_timestamp())::float8 FROM escalations
WHERE webhook_due_at IS NOT NULL
