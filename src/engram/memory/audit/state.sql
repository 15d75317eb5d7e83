-- Audit state (engram.memory.audit.state): the live set rebuilt from the log.

-- name: namespaces_as_of
SELECT DISTINCT namespace FROM memories WHERE ingestion_time <= $1 ORDER BY namespace

-- name: liveness_page
-- Audit state: rows after seq $1 that made a record live or ended it, up to instant $2.
SELECT seq, decision_id, occurred_at, action, outcome, decision_type, record_id, version_id,
       input_snapshot->'record'->>'namespace' AS namespace,
       input_snapshot->'record'->>'type' AS type
FROM librarian_audit
WHERE seq > $1 AND occurred_at <= $2 AND outcome IN ('created', 'updated', 'forgotten')
ORDER BY seq
LIMIT $3
