-- SQL of the agent registry (engram.agents).

-- fragment: agent_columns
id, name, token_prefix, trust_level, permissions, created_at, revoked_at, last_seen_at

-- name: insert
INSERT INTO agents (id, name, token_hash, token_prefix, trust_level, permissions)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING {{agent_columns}}

-- name: by_name
-- Names are unique whatever their case (agents_name_folded_key, migration 0022): $1 in any
-- case names one agent, found through that index.
SELECT {{agent_columns}} FROM agents WHERE lower(name COLLATE "C") = lower($1 COLLATE "C")

-- name: by_token
SELECT {{agent_columns}} FROM agents WHERE token_hash = $1

-- name: listing
SELECT {{agent_columns}} FROM agents
WHERE $1 OR revoked_at IS NULL
ORDER BY created_at, name

-- name: count
SELECT count(*) FROM agents

-- name: revoke
UPDATE agents SET revoked_at = coalesce(revoked_at, now())
WHERE lower(name COLLATE "C") = lower($1 COLLATE "C")
RETURNING {{agent_columns}}

-- name: rotate
UPDATE agents SET token_hash = $2, token_prefix = $3
WHERE lower(name COLLATE "C") = lower($1 COLLATE "C") AND revoked_at IS NULL
RETURNING {{agent_columns}}

-- name: seen
UPDATE agents SET last_seen_at = now() WHERE id = $1
