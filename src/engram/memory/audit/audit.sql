-- SQL of the audit aggregate (engram.librarian_audit, engram.audit_chain_heads,
-- engram.audit_checkpoints).
-- fragment: audit_columns
seq, decision_id, request_id, occurred_at, action, decision, outcome, decision_type, reason,
agent_id, caller::text AS caller, record_id, version_id, input_snapshot::text AS input_snapshot,
layer1_checks::text AS layer1_checks, layer2_decision::text AS layer2_decision,
decision_source, duration_ms, lane, prev_hash, row_hash, hash_version

-- fragment: checkpoint_columns
id, sealed_at, through_seq, rows_sealed, lane_seqs, lane_hashes, order_digest, prev_hash,
checkpoint_hash

-- name: append_entry
-- Lock the lane's head, draw the row's seq, chain the row to the head and move the head, in
-- one round trip. seq is drawn only once the lane is held (so within a lane seq order is chain
-- order) and before hashing, so the hash covers it: row_hash = sha256(previous hash ||
-- int8(seq) || $19), $19 being the entry's length-prefixed fields in format 2
-- (AuditEntry.payload); verification recomputes it in Python.
WITH head AS (
    SELECT lane, last_hash FROM audit_chain_heads WHERE lane = $18 FOR UPDATE
), numbered AS (
    SELECT lane, last_hash, nextval('librarian_audit_seq_seq') AS seq FROM head
), entry AS (
    INSERT INTO librarian_audit (
        seq, decision_id, request_id, occurred_at, action, decision, outcome, decision_type,
        reason, agent_id, caller, record_id, version_id, input_snapshot, layer1_checks,
        layer2_decision, decision_source, duration_ms, lane, prev_hash, row_hash, hash_version
    )
    OVERRIDING SYSTEM VALUE
    SELECT n.seq, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12, $13::json,
           $14::json, $15::json, $16, $17, n.lane, n.last_hash,
           sha256(n.last_hash || int8send(n.seq) || $19::bytea), 2
    FROM numbered AS n
    RETURNING seq, lane, row_hash
)
UPDATE audit_chain_heads AS h
SET last_seq = entry.seq, last_hash = entry.row_hash
FROM entry
WHERE h.lane = entry.lane
RETURNING entry.seq

-- name: by_request
-- A request id is its agent's own ($1 agent, $2 request id; librarian_audit_agent_request_key).
SELECT {{audit_columns}} FROM librarian_audit WHERE agent_id = $1 AND request_id = $2

-- name: by_decision
SELECT {{audit_columns}} FROM librarian_audit WHERE decision_id = $1

-- name: page_after
SELECT {{audit_columns}} FROM librarian_audit WHERE seq > $1 ORDER BY seq LIMIT $2

-- name: one_snapshot
-- Verification: the first statement of its transaction, so the checkpoints, every page of
-- rows and the lane heads are read as of one instant (appends committing meanwhile are not
-- seen at all, rather than seen in part).
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: lane_heads
SELECT lane, last_seq, last_hash FROM audit_chain_heads ORDER BY lane

-- name: count_entries
SELECT count(*) FROM librarian_audit

-- name: count_window
-- Entries with $1 <= occurred_at < $2 (either bound may be NULL).
SELECT count(*) FROM librarian_audit
WHERE ($1::timestamptz IS NULL OR occurred_at >= $1)
  AND ($2::timestamptz IS NULL OR occurred_at < $2)

-- name: search
-- Admin listing: $1 after seq, $2 since, $3 until, $4 decision, $5 action, $6 limit, $7 the
-- last settled seq (AuditLog.settled_seq): a page never passes a row still committing.
SELECT {{audit_columns}} FROM librarian_audit
WHERE seq > $1 AND seq <= $7
  AND ($2::timestamptz IS NULL OR occurred_at >= $2)
  AND ($3::timestamptz IS NULL OR occurred_at < $3)
  AND ($4::text IS NULL OR decision = $4)
  AND ($5::text IS NULL OR action = $5)
ORDER BY seq
LIMIT $6

-- name: search_agent
-- The same for one agent, $8, matched whatever its case as the registry's names are (migration
-- 0022), through librarian_audit_agent_folded_idx (migration 0024): the agent's own entries in
-- seq order, however few of the log's they are.
SELECT {{audit_columns}} FROM librarian_audit
WHERE lower(agent_id COLLATE "C") = lower($8 COLLATE "C")
  AND seq > $1 AND seq <= $7
  AND ($2::timestamptz IS NULL OR occurred_at >= $2)
  AND ($3::timestamptz IS NULL OR occurred_at < $3)
  AND ($4::text IS NULL OR decision = $4)
  AND ($5::text IS NULL OR action = $5)
ORDER BY lower(agent_id COLLATE "C"), seq
LIMIT $6

-- name: hold_lane_heads
-- Sealing: wait until no append holds a lane (each holds its lane's head until it commits),
-- then read every head. With all sixteen held, every seq drawn so far belongs to a committed
-- row or to none, so the heads cover every row up to the largest of them. The batch lane $1
-- is taken first and alone: waiting for a long batch, the seal holds no other lane, so the
-- agents' appends are not queued behind it.
SELECT lane, last_seq, last_hash FROM audit_chain_heads ORDER BY lane = $1 DESC, lane FOR SHARE

-- name: order_page
-- Sealing and anchors: (seq, row_hash) of the rows with $1 < seq <= $2, in seq order.
SELECT seq, row_hash FROM librarian_audit WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3

-- name: latest_checkpoint
SELECT {{checkpoint_columns}} FROM audit_checkpoints ORDER BY id DESC LIMIT 1

-- name: checkpoints
SELECT {{checkpoint_columns}} FROM audit_checkpoints ORDER BY id

-- name: insert_checkpoint
-- The primary key is the checkpoint's number: a second sealer of the same number fails.
INSERT INTO audit_checkpoints (
    id, sealed_at, through_seq, rows_sealed, lane_seqs, lane_hashes, order_digest, prev_hash,
    checkpoint_hash
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)

-- name: audited
-- Whether decision $1 is in the log (a transaction retried after a lost acknowledgement).
SELECT 1 FROM librarian_audit WHERE decision_id = $1
