-- SQL of the version store (engram.memories, engram.memory_edges): the rows the Gate writes
-- and the lookups it makes. Other packages borrow the record_columns fragment only.

-- fragment: record_columns
id, record_id, version, type, content, metadata, superseded_by, source_agent,
source_confidence, evidence_links, event_time, event_time_end, ingestion_time,
ingestion_time_end, access_level, classification, gate_decision_id, gate_decision_type,
expected_version, namespace, status::text AS status, consolidation_path, decay_score,
created_at, updated_at, importance, repetitions

-- name: head
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1 AND superseded_by IS NULL

-- name: head_for_update
-- NO KEY UPDATE: writers of one head wait for each other, but a foreign-key check of an edge
-- that cites the row (FOR KEY SHARE) does not wait for them.
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1 AND superseded_by IS NULL
FOR NO KEY UPDATE

-- name: has_head
-- Whether record $1 has a head (a new statement: one committed since the last is seen).
SELECT 1 FROM memories WHERE record_id = $1 AND superseded_by IS NULL

-- name: exact_duplicate
-- $4 the access levels the writer may read: what it may not read is absent for it.
SELECT {{record_columns}}, 1.0::float8 AS similarity
FROM memories
WHERE namespace = $1 AND type = $2 AND content_hash = $3
  AND superseded_by IS NULL AND status = 'active' AND access_level = ANY($4::text[])
ORDER BY ingestion_time
LIMIT 1

-- name: candidates
-- The exact duplicate (same normalised content) at the levels $7 (those of $6 the proposal's
-- readers may read: one above them is no duplicate, and being older it would hide the one at
-- them) and the nearest active heads, in one trip, among the records the writer may read
-- ($6, its access levels): the $5 + 8 nearest. The
-- index finds a few more than $5 nearest; equal similarities (records of one content) are
-- then ordered by id, as audit replay orders them, so which of several equal records are the
-- neighbours does not depend on the index's traversal unless more than $5 + 8 records tie.
(SELECT {{record_columns}}, true AS exact,
        coalesce((1 - (embedding <=> $1))::float8, 1.0) AS similarity
 FROM memories
 WHERE namespace = $2 AND type = $3 AND content_hash = $4
   AND superseded_by IS NULL AND status = 'active' AND access_level = ANY($7::text[])
 ORDER BY ingestion_time
 LIMIT 1)
UNION ALL
(SELECT nearest.*
 FROM (SELECT {{record_columns}}, false AS exact, (1 - (embedding <=> $1))::float8 AS similarity
       FROM memories
       WHERE namespace = $2 AND type = $3 AND superseded_by IS NULL AND status = 'active'
         AND embedding IS NOT NULL AND access_level = ANY($6::text[])
       ORDER BY embedding <=> $1
       LIMIT $5 + 8) nearest
 ORDER BY nearest.similarity DESC, nearest.id)

-- name: own_candidates
-- The $4 nearest active heads at the access levels $5 alone (those a proposal's readers may
-- read), when records above them took the places of the candidates query. Separate, so that
-- its filtered walk of the index, slow when those levels are rare, is paid only then.
SELECT nearest.*
FROM (SELECT {{record_columns}}, (1 - (embedding <=> $1))::float8 AS similarity
      FROM memories
      WHERE namespace = $2 AND type = $3 AND superseded_by IS NULL AND status = 'active'
        AND embedding IS NOT NULL AND access_level = ANY($5::text[])
      ORDER BY embedding <=> $1
      LIMIT $4 + 8) nearest
ORDER BY nearest.similarity DESC, nearest.id
LIMIT $4

-- name: resolve_evidence
-- Each cited id of $1 names a record (its head: a record's first version shares its id) or
-- else one version. $2 the access levels the writer may read: a record whose head it may not
-- read is absent for it, whichever of its versions is cited.
SELECT r.ref, coalesce(h.id, v.id) AS version_id
FROM unnest($1::uuid[]) AS r(ref)
LEFT JOIN memories h ON h.record_id = r.ref AND h.superseded_by IS NULL
LEFT JOIN memories v ON h.id IS NULL AND v.id = r.ref
LEFT JOIN memories vh ON vh.record_id = v.record_id AND vh.superseded_by IS NULL
WHERE (h.id IS NOT NULL AND h.access_level = ANY($2::text[]))
   OR (h.id IS NULL AND v.access_level = ANY($2::text[]) AND vh.access_level = ANY($2::text[]))

-- fragment: insert_version_row
-- One version row from $1-$25 (versions.version_row gives them); the Gate's one-statement
-- writes (gate/write.sql) insert their version with the same fragment and parameters. The
-- values are a SELECT list, so that a statement may add a FROM clause: the one-statement
-- update inserts its version from the row that closed the head, which orders the two.
INSERT INTO memories (
    id, record_id, version, type, content, metadata, source_agent, source_confidence,
    evidence_links, event_time, ingestion_time, access_level, classification,
    gate_decision_id, gate_decision_type, expected_version, namespace, status,
    consolidation_path, importance, content_hash, embedding, embedding_model,
    created_at, updated_at, event_time_end, screened_with
) SELECT
    $1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()),
    greatest(now(), coalesce($11, now())), $12, $13, $14, $15, $16, $17, $23::engram.memory_status,
    $18, $19, $20, $21, $22, now(), now(), $24, $25

-- name: insert_version
{{insert_version_row}}
RETURNING {{record_columns}}

-- name: close_head
UPDATE memories
SET superseded_by = $2,
    ingestion_time_end = greatest(now(), ingestion_time),
    status = 'superseded',
    updated_at = now()
WHERE id = $1 AND superseded_by IS NULL
RETURNING ingestion_time_end

-- name: forget_head
UPDATE memories
SET ingestion_time_end = greatest(now(), ingestion_time),
    event_time_end = greatest(now(), event_time),
    status = 'forgotten',
    updated_at = now()
WHERE id = $1 AND superseded_by IS NULL AND status <> 'forgotten'
RETURNING ingestion_time_end

-- name: reinforce
UPDATE memories
SET repetitions = repetitions + 1,
    last_reinforced_at = now(),
    embedding = coalesce(embedding, $2),
    embedding_model = CASE WHEN embedding IS NULL THEN $3 ELSE embedding_model END
WHERE id = $1
RETURNING repetitions

-- name: fill_embedding
UPDATE memories
SET embedding = $2, embedding_model = $3
WHERE id = $1 AND embedding IS NULL
RETURNING id

-- name: unembedded_heads
-- The most open levels first, then oldest first: a record waits only for those at its level or
-- below, which its readers may read, never for records hidden from them (hostile pass AK).
-- The rows are few outside an outage; the partial index still finds them all.
SELECT {{record_columns}}
FROM memories
WHERE embedding IS NULL AND superseded_by IS NULL AND status = 'active'
ORDER BY array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'],
                        access_level::text),
         ingestion_time
LIMIT $1

-- name: insert_edge
INSERT INTO memory_edges (source_id, target_id, kind, weight, provenance, decision_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (source_id, target_id, kind) DO NOTHING

-- name: insert_edges
-- Edges from $1 in one statement: $2 targets, $3 kinds, $4 weights, $5 provenance (JSON
-- text), $6 the decision. An edge to itself is skipped.
INSERT INTO memory_edges (source_id, target_id, kind, weight, provenance, decision_id)
SELECT $1, e.target, e.kind, e.weight, e.provenance::jsonb, $6
FROM unnest($2::uuid[], $3::text[], $4::float8[], $5::text[])
    AS e(target, kind, weight, provenance)
WHERE e.target <> $1
ON CONFLICT (source_id, target_id, kind) DO NOTHING

-- fragment: content_changes
-- The versions of record $1 that every reader of its head may read (at or below the head's
-- level), those that changed the (normalised) content of the one before them among these, or
-- created the record. A version above the head's level is no part of the history its readers
-- are shown (ADR-009), so it lends no standing and gives no content (hostile pass AK).
SELECT s.id, s.version, s.gate_decision_type, s.gate_decision_id
FROM (
    SELECT v.id, v.version, v.content_hash, v.gate_decision_type, v.gate_decision_id,
           lag(v.id) OVER w AS prev_id, lag(v.content_hash) OVER w AS prev_hash
    FROM memories v
    WHERE v.record_id = $1
      AND array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'],
                         v.access_level::text)
          <= (SELECT array_position(ARRAY['public', 'agent', 'user', 'system', 'sensitive'],
                                    h.access_level::text)
              FROM memories h WHERE h.record_id = $1 AND h.superseded_by IS NULL)
    WINDOW w AS (ORDER BY v.version)
) AS s
WHERE s.prev_id IS NULL OR s.prev_hash IS DISTINCT FROM s.content_hash

-- name: record_standing
-- The tier of the agent whose write gave record $1 its current content: the writer of the
-- newest of its content changes (content_changes). A change of metadata or level alone lends
-- no standing. NULL when that version came from an internal origin (consolidation), which
-- stands as trusted.
SELECT CASE WHEN c.gate_decision_type = 'external' THEN a.caller->>'trust_level' END
           AS trust_level
FROM ({{content_changes}}) AS c
JOIN librarian_audit a ON a.decision_id = c.gate_decision_id
ORDER BY c.version DESC
LIMIT 1

-- name: content_version
-- The version that gave record $1 its current content: the newest of its content changes (as
-- record_standing).
SELECT {{record_columns}}
FROM memories
WHERE id = (SELECT c.id FROM ({{content_changes}}) AS c ORDER BY c.version DESC LIMIT 1)

-- name: count_heads
SELECT type, consolidation_path, count(*)::bigint AS n
FROM memories
WHERE superseded_by IS NULL AND status <> 'forgotten'
GROUP BY type, consolidation_path

-- name: summaries_of
-- The consolidated records made from any version of record $1 whose heads are not forgotten:
-- each head, the version consolidation made (it cites every source version it summarised,
-- derived_from; an agent's record citing $1 as evidence is no summary) and how many records
-- that version was made from.
SELECT DISTINCT ON (memories.record_id) {{record_columns}},
       made.made_id,
       (SELECT count(DISTINCT c.record_id) FROM memory_edges ce
        JOIN memories c ON c.id = ce.target_id
        WHERE ce.source_id = made.made_id AND ce.kind = 'derived_from')::int AS sources
FROM memories
JOIN (SELECT s.id AS made_id, s.record_id AS made_record, s.version AS made_version
      FROM memories t
      JOIN memory_edges e ON e.target_id = t.id AND e.kind = 'derived_from'
      JOIN memories s ON s.id = e.source_id AND s.gate_decision_type = 'consolidation'
      WHERE t.record_id = $1) made ON made.made_record = memories.record_id
WHERE memories.superseded_by IS NULL AND memories.status <> 'forgotten'
ORDER BY memories.record_id, made.made_version

-- name: version_by_id
SELECT {{record_columns}}
FROM memories
WHERE id = $1

-- name: version_chain
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1
ORDER BY version

-- name: stored_embedding
-- $2 the model in use: a vector of another model is not reused.
SELECT embedding FROM memories WHERE id = $1 AND embedding_model = $2
