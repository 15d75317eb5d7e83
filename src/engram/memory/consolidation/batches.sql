-- SQL of the consolidation engine (engram.memory.consolidation.engine): the batches it
-- records and rolls back. Every write to a memory goes through the Gate, never through here.

-- name: insert_batch
INSERT INTO consolidation_batches (id, run_id, trigger, items, skipped, decision_ids)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING created_at

-- name: batch
SELECT id, run_id, trigger, created_at, items, skipped, decision_ids, rolled_back_at,
       rollback_decision_ids
FROM consolidation_batches
WHERE id = $1

-- name: batches
SELECT id, run_id, trigger, created_at, items, skipped, decision_ids, rolled_back_at,
       rollback_decision_ids
FROM consolidation_batches
ORDER BY created_at DESC, id
LIMIT $1

-- name: mark_rolled_back
-- $3: the instant the rollback chose, once. A retry after a COMMIT whose acknowledgement was
-- lost finds the batch marked at that instant with the same decisions $2: its own mark.
UPDATE consolidation_batches
SET rolled_back_at = $3, rollback_decision_ids = $2
WHERE id = $1
  AND (rolled_back_at IS NULL
       OR (rolled_back_at = $3 AND rollback_decision_ids = $2::uuid[]))
RETURNING rolled_back_at

-- name: batches_with_source
-- Batches not rolled back with an item that consumed the record in $1 (JSON containment,
-- served by the items index).
SELECT id, run_id, trigger, created_at, items, skipped, decision_ids, rolled_back_at,
       rollback_decision_ids
FROM consolidation_batches
WHERE rolled_back_at IS NULL AND items @> $1::jsonb

-- name: batch_version_of
-- The newest version of record $1 written by one of the decisions in $2 (a batch's own): the
-- version the batch made when it consumed the record.
SELECT max(version) FROM memories WHERE record_id = $1 AND gate_decision_id = ANY($2::uuid[])

-- name: last_consolidation_decision
-- The decision of the newest version of record $1 that consolidation wrote. For a record
-- consolidated now, the batch that consumed it last (a release's or a rollback's restore
-- to active comes before any later consumption; internal restatements since, such as a PII
-- rescan's raise, are self-healing).
SELECT gate_decision_id FROM memories
WHERE record_id = $1 AND gate_decision_type = 'consolidation'
ORDER BY version DESC
LIMIT 1

-- name: written_by_an_agent
-- Whether an agent wrote a version of record $1 (a consolidated record an agent corrected).
SELECT EXISTS (SELECT 1 FROM memories WHERE record_id = $1 AND gate_decision_type = 'external')
