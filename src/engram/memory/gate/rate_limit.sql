-- SQL of the shared rate limiter (engram.rate_buckets), run by engram.memory.gate.rate_limit.

-- name: take_token
-- $1 agent, $2 rate per minute, $3 burst, both doubles (read as an integer, a burst of 1.4
-- was 1). Refill the bucket by the time elapsed since it was last drawn
-- (statement_timestamp() is one instant for the whole statement), then take one token if
-- there is one. A new bucket starts full. The row lock of ON CONFLICT serialises writers of
-- one agent, on whichever kernel they run.
INSERT INTO rate_buckets AS b (agent_id, tokens, updated_at, allowed)
VALUES ($1, $3::float8 - 1, statement_timestamp(), true)
ON CONFLICT (agent_id) DO UPDATE SET
    tokens = CASE
        WHEN least($3::float8, b.tokens + greatest(0, extract(epoch FROM statement_timestamp() - b.updated_at)) * $2::float8 / 60) >= 1
        THEN least($3::float8, b.tokens + greatest(0, extract(epoch FROM statement_timestamp() - b.updated_at)) * $2::float8 / 60) - 1
        ELSE least($3::float8, b.tokens + greatest(0, extract(epoch FROM statement_timestamp() - b.updated_at)) * $2::float8 / 60)
    END,
    allowed = least($3::float8, b.tokens + greatest(0, extract(epoch FROM statement_timestamp() - b.updated_at)) * $2::float8 / 60) >= 1,
    updated_at = greatest(b.updated_at, statement_timestamp())
RETURNING tokens, allowed
