-- SQL of the version aggregate (engram.memories, engram.memory_edges).

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
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1 AND superseded_by IS NULL
FOR UPDATE

-- name: exact_duplicate
SELECT {{record_columns}}, 1.0::float8 AS similarity
FROM memories
WHERE namespace = $1 AND type = $2 AND content_hash = $3
  AND superseded_by IS NULL AND status = 'active'
ORDER BY ingestion_time
LIMIT 1

-- name: candidates
-- The exact duplicate (same normalised content) and the nearest active heads, in one trip.
(SELECT {{record_columns}}, true AS exact,
        coalesce((1 - (embedding <=> $1))::float8, 1.0) AS similarity
 FROM memories
 WHERE namespace = $2 AND type = $3 AND content_hash = $4
   AND superseded_by IS NULL AND status = 'active'
 ORDER BY ingestion_time
 LIMIT 1)
UNION ALL
(SELECT {{record_columns}}, false AS exact, (1 - (embedding <=> $1))::float8 AS similarity
 FROM memories
 WHERE namespace = $2 AND type = $3 AND superseded_by IS NULL AND status = 'active'
   AND embedding IS NOT NULL
 ORDER BY embedding <=> $1
 LIMIT $5)

-- name: resolve_evidence
SELECT DISTINCT ON (ref) ref, m.id AS version_id
FROM unnest($1::uuid[]) AS ref
JOIN memories m ON m.id = ref OR (m.record_id = ref AND m.superseded_by IS NULL)
ORDER BY ref, (m.id = ref) DESC

-- name: insert_version
INSERT INTO memories (
    id, record_id, version, type, content, metadata, source_agent, source_confidence,
    evidence_links, event_time, ingestion_time, access_level, classification,
    gate_decision_id, gate_decision_type, expected_version, namespace, status,
    consolidation_path, importance, content_hash, embedding, embedding_model,
    created_at, updated_at
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()),
    greatest(now(), coalesce($11, now())), $12, $13, $14, $15, $16, $17, 'active',
    $18, $19, $20, $21, $22, now(), now()
)
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
SELECT {{record_columns}}
FROM memories
WHERE embedding IS NULL AND superseded_by IS NULL AND status = 'active'
ORDER BY ingestion_time
LIMIT $1

-- name: insert_edge
INSERT INTO memory_edges (source_id, target_id, kind, weight, provenance, decision_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (source_id, target_id, kind) DO NOTHING

-- name: count_heads
SELECT type, consolidation_path, count(*)::bigint AS n
FROM memories
WHERE superseded_by IS NULL AND status <> 'forgotten'
GROUP BY type, consolidation_path

-- name: version_by_id
SELECT {{record_columns}}
FROM memories
WHERE id = $1

-- name: version_chain
SELECT {{record_columns}}
FROM memories
WHERE record_id = $1
ORDER BY version
