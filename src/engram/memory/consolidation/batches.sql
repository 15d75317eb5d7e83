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

-- name: batches_with_item
-- Batches not rolled back with an item that contains $1 (JSON containment, served by the
-- items index): one that consumed a record ([{"sources": [id]}]) or made it
-- ([{"record_id": id}]).
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

-- name: unreleased_sources
-- The sweep (BatchDesk.sweep): sources an agent forgot or changed after a batch not rolled
-- back consumed them, while a summary the batch made of them still stands and no agent has
-- written a version of it (pass AE leaves such a summary): releases their events did not
-- finish (the outbox gave up after ENGRAM_OUTBOX_MAX_ATTEMPTS, or the release failed). One
-- row per source and the version its change made (the release's changed_in): the first
-- version an agent wrote after the batch's own, else the forgotten head (a forget is in
-- place). A source whose head is still the batch's consolidated version is passed over at
-- its head's look-up; one with an event the outbox still holds is left to that event.
-- The batches are read whole; OFFSET 0 keeps each look-up a probe of the item's own head
-- (memories_one_head_idx) and of its versions (memories_record_version_key), and the sources
-- are read only of a summary that stands: the cost grows with the live summaries, not with
-- the store. $1: at most this many rows, drawn at random among those found, so that releases
-- failing at every sweep do not keep the others out.
SELECT found.source_id, found.changed_in FROM (
    SELECT DISTINCT x.source_id, change.changed_in
    FROM consolidation_batches AS b
    CROSS JOIN LATERAL jsonb_array_elements(b.items) AS item
    CROSS JOIN LATERAL (
        SELECT item -> 'sources' AS sources
        FROM memories AS s
        WHERE s.record_id = (item ->> 'record_id')::uuid
          AND s.superseded_by IS NULL
          AND s.status <> 'forgotten'
          AND NOT EXISTS (
              SELECT 1 FROM memories AS a
              WHERE a.record_id = s.record_id AND a.gate_decision_type = 'external')
        OFFSET 0
    ) AS summary
    CROSS JOIN LATERAL jsonb_array_elements_text(summary.sources) AS source (id)
    CROSS JOIN LATERAL (
        SELECT h.record_id AS source_id, h.status, h.version, h.gate_decision_id
        FROM memories AS h
        WHERE h.record_id = source.id::uuid AND h.superseded_by IS NULL
        OFFSET 0
    ) AS x
    CROSS JOIN LATERAL (
        SELECT coalesce(
            (SELECT min(m.version) FROM memories AS m
             WHERE m.record_id = x.source_id
               AND m.gate_decision_type = 'external'
               AND m.version > (SELECT max(own.version) FROM memories AS own
                                WHERE own.record_id = x.source_id
                                  AND own.gate_decision_id = ANY (b.decision_ids))),
            CASE WHEN x.status = 'forgotten' THEN x.version END
        ) AS changed_in
        OFFSET 0
    ) AS change
    WHERE b.rolled_back_at IS NULL
      AND NOT (x.status = 'consolidated' AND x.gate_decision_id = ANY (b.decision_ids))
      AND change.changed_in IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM outbox AS o
          WHERE o.dispatched_at IS NULL AND o.aggregate_id = x.source_id
            AND o.event_type IN ('memory.forgotten', 'memory.updated'))
) AS found
ORDER BY random()
LIMIT $1

-- name: summaries_above_their_sources
-- The sweep's second look (BatchDesk.sweep): consolidated records of batches not rolled back
-- whose head an agent raised above a source the batch consumed that is still consolidated,
-- so that the source's readers find its fact nowhere; the give-back (restore_below) their
-- event did not finish. One row per record; $1: at most this many, drawn at random.
SELECT found.record_id FROM (
    SELECT DISTINCT summary.record_id
    FROM consolidation_batches AS b
    CROSS JOIN LATERAL jsonb_array_elements(b.items) AS item
    CROSS JOIN LATERAL (
        SELECT s.record_id, s.access_level
        FROM memories AS s
        WHERE s.record_id = (item ->> 'record_id')::uuid
          AND s.superseded_by IS NULL
          AND s.status <> 'forgotten'
        OFFSET 0
    ) AS summary
    CROSS JOIN LATERAL jsonb_array_elements_text(item -> 'sources') AS source (id)
    CROSS JOIN LATERAL (
        SELECT h.access_level
        FROM memories AS h
        WHERE h.record_id = source.id::uuid AND h.superseded_by IS NULL
          AND h.status = 'consolidated'
          -- consumed by this batch, not by a later one (given back, then consolidated again)
          AND (SELECT m.gate_decision_id FROM memories AS m
               WHERE m.record_id = h.record_id AND m.gate_decision_type = 'consolidation'
               ORDER BY m.version DESC LIMIT 1) = ANY(b.decision_ids)
        OFFSET 0
    ) AS x
    WHERE b.rolled_back_at IS NULL
      AND array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'], x.access_level::text)
          < array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'], summary.access_level::text)
) AS found
ORDER BY random()
LIMIT $1
