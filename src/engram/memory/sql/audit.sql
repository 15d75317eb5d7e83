-- SQL of the audit aggregate (engram.librarian_audit, engram.audit_chain_heads).

-- fragment: audit_columns
seq, decision_id, request_id, occurred_at, action, decision, outcome, decision_type, reason,
agent_id, caller::text AS caller, record_id, version_id, input_snapshot::text AS input_snapshot,
layer1_checks::text AS layer1_checks, layer2_decision::text AS layer2_decision,
decision_source, duration_ms, lane, prev_hash, row_hash

-- name: append_entry
-- Lock the lane's head, chain the row to it and move the head, in one round trip. The row
-- hash is sha256(previous hash || $19), $19 being the entry's length-prefixed fields
-- (AuditEntry.payload); verification recomputes it in Python.
WITH head AS (
    SELECT lane, last_hash FROM audit_chain_heads WHERE lane = $18 FOR UPDATE
), entry AS (
    INSERT INTO librarian_audit (
        decision_id, request_id, occurred_at, action, decision, outcome, decision_type,
        reason, agent_id, caller, record_id, version_id, input_snapshot, layer1_checks,
        layer2_decision, decision_source, duration_ms, lane, prev_hash, row_hash
    )
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12, $13::json, $14::json,
           $15::json, $16, $17, head.lane, head.last_hash, sha256(head.last_hash || $19::bytea)
    FROM head
    RETURNING seq, lane, row_hash
)
UPDATE audit_chain_heads AS h
SET last_seq = entry.seq, last_hash = entry.row_hash
FROM entry
WHERE h.lane = entry.lane
RETURNING entry.seq

-- name: by_request
SELECT {{audit_columns}} FROM librarian_audit WHERE request_id = $1

-- name: by_decision
SELECT {{audit_columns}} FROM librarian_audit WHERE decision_id = $1

-- name: page_after
SELECT {{audit_columns}} FROM librarian_audit WHERE seq > $1 ORDER BY seq LIMIT $2

-- name: lane_heads
SELECT lane, last_seq, last_hash FROM audit_chain_heads ORDER BY lane

-- name: count_entries
SELECT count(*) FROM librarian_audit

-- name: search
-- Admin listing: $1 after seq, $2 since, $3 until, $4 agent, $5 decision, $6 action, $7 limit.
SELECT {{audit_columns}} FROM librarian_audit
WHERE seq > $1
  AND ($2::timestamptz IS NULL OR occurred_at >= $2)
  AND ($3::timestamptz IS NULL OR occurred_at < $3)
  AND ($4::text IS NULL OR agent_id = $4)
  AND ($5::text IS NULL OR decision = $5)
  AND ($6::text IS NULL OR action = $6)
ORDER BY seq
LIMIT $7

-- name: count_window
-- Rows with $1 <= occurred_at < $2 (either bound may be NULL).
SELECT count(*) FROM librarian_audit
WHERE ($1::timestamptz IS NULL OR occurred_at >= $1)
  AND ($2::timestamptz IS NULL OR occurred_at < $2)

-- name: liveness_page
-- Audit state: rows after seq $1 that made a record live or ended it, up to instant $2.
SELECT seq, decision_id, occurred_at, action, outcome, decision_type, record_id, version_id,
       input_snapshot->'record'->>'namespace' AS namespace,
       input_snapshot->'record'->>'type' AS type
FROM librarian_audit
WHERE seq > $1 AND occurred_at <= $2 AND outcome IN ('created', 'updated', 'forgotten')
ORDER BY seq
LIMIT $3
