-- Ratings of retrieved records (engram.memory_feedback), one row per request.

-- name: insert_feedback
-- $1 record, $2 the version rated (the head the caller read), $3 agent, $4 useful, $5 signal,
-- $6 the request's key. A key the agent has used already stores nothing; the statement then
-- returns the row stored under it (replayed), as a retry of a statement whose commit was
-- acknowledged to nobody finds its own row. A row committed by a concurrent statement after
-- this one's snapshot is not seen here: the caller looks it up (rating_of_request).
WITH inserted AS (
    INSERT INTO memory_feedback (record_id, version_id, agent_id, useful, signal, request_key)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (agent_id, request_key) DO NOTHING
    RETURNING record_id, version_id, useful, signal, created_at
)
SELECT record_id, version_id, useful, signal, created_at, false AS replayed FROM inserted
UNION ALL
SELECT record_id, version_id, useful, signal, created_at, true AS replayed
FROM memory_feedback
WHERE agent_id = $3 AND request_key = $6 AND NOT EXISTS (SELECT 1 FROM inserted)

-- name: rating_of_request
-- The rating $1 (agent) stored under its request key $2, if any.
SELECT record_id, version_id, useful, signal, created_at, true AS replayed
FROM memory_feedback
WHERE agent_id = $1 AND request_key = $2
